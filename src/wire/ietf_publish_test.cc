// Byte-exact fixtures for PUBLISH, PUBLISH_OK and PUBLISH_ERROR (drafts 14..16), transcribed from
// the draft text (d14 §9.13-9.15, d15 §9.13-9.14, d16 §9.13-9.14; parameters d15 §9.2.1, d16
// §9.2.2). @moq/net 0.3.4 decodes PUBLISH but never sends one, so there is no JS fixture. Every
// fixture is decoded whole, at every truncated length (must ask for more), and encoded back.
#include <gtest/gtest.h>

#include "testing/ietf_wire.h"
#include "wire/ietf.h"

// A named namespace: wire_tests may be a unity build, and ietf_test.cc has helpers of these names.
namespace moqd::wire::ietf::publish_test {

using test::expect_round_trip;

constexpr Version k14 = Version::kTransport14;
constexpr Version k15 = Version::kTransport15;
constexpr Version k16 = Version::kTransport16;

void decode_fails(Version v, std::string_view hex, ErrorCode code) {
  auto bytes = from_hex(hex);
  auto r = decode_control(v, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(r.has_value()) << "decoded " << hex;
  EXPECT_EQ(r.error().code, code) << r.error().detail;
}

const TrackNamespace kRoomAlice = {"room", "alice"};

Publish video_publish() {
  Publish p;
  p.request_id = 0;
  p.ns = kRoomAlice;
  p.track = "video";
  p.track_alias = 5;
  p.group_order = 2;
  p.largest = Location{3, 1};
  p.forward = true;
  return p;
}

TEST(IetfPublish, PublishD14Fields) {
  // d14 §9.13: id 0, ["room","alice"], "video", alias 5, Group Order 2, Content Exists 1,
  // Largest {3, 1}, Forward 1, no parameters.
  expect_round_trip(k14,
             "1d 00 1a 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 02 01 03 01 01 00",
             video_publish());
  // Content Exists 0: no Largest Location.
  Publish empty = video_publish();
  empty.largest.reset();
  expect_round_trip(k14, "1d 00 18 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 02 00 01 00", empty);
}

TEST(IetfPublish, PublishD15D16Parameters) {
  // d15 §9.13: GROUP_ORDER (0x22) 2, FORWARD (0x10) 1, LARGEST_OBJECT (0x09) {3, 1}, absolute
  // types in the order written.
  expect_round_trip(k15,
             "1d 00 1d 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 03 22 02 10 01 09 02 03 01",
             video_publish());
  // d16 §9.13: the same parameters sorted and delta-coded (09, +07 = 10, +12 = 22), then an empty
  // Track Extensions block.
  expect_round_trip(k16,
             "1d 00 1d 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 03 09 02 03 01 07 01 12 02",
             video_publish());
  // d16 with Track Extensions (DEFAULT PUBLISHER GROUP ORDER 0x22 = 1): kept raw.
  Publish ext = video_publish();
  ext.group_order = 0;
  ext.largest.reset();
  ext.forward = false;
  ext.track_extensions = std::string("\x22\x01", 2);
  expect_round_trip(k16, "1d 00 19 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 10 00 22 01", ext);
}

TEST(IetfPublish, PublishOkAndErrorPerDraft) {
  PublishOk ok;
  ok.request_id = 0;
  ok.forward = true;
  ok.subscriber_priority = 128;
  ok.group_order = 2;
  ok.filter = Filter{FilterType::kNextGroupStart, {}, 0, 0, std::nullopt};
  // d14 §9.14: Forward 1, Subscriber Priority 128, Group Order 2, Filter Type 1, no parameters.
  expect_round_trip(k14, "1e 00 06 00 01 80 02 01 00", ok);
  // d15: FORWARD, SUBSCRIBER_PRIORITY (even type: a varint, 0x80 is 40 80), GROUP_ORDER, then
  // SUBSCRIPTION_FILTER (0x21, bytes 01).
  expect_round_trip(k15, "1e 00 0c 00 04 10 01 20 4080 22 02 21 01 01", ok);
  // d16: sorted and delta-coded: 10, +10 = 20, +01 = 21, +01 = 22.
  expect_round_trip(k16, "1e 00 0c 00 04 10 01 10 4080 01 01 01 01 02", ok);
  // d14 §9.15 PUBLISH_ERROR: id 0, UNINTERESTED (4), "no". d15+ answer REQUEST_ERROR (0x05).
  expect_round_trip(k14, "1f 00 05 00 04 02 6e6f",
             RequestError{MessageType::kPublishError, 0, 4, 0, "no", std::nullopt});
  decode_fails(k15, "1f 00 05 00 04 02 6e6f", ErrorCode::kUnexpectedMessage);
}

TEST(IetfPublish, BadPublishIsRefused) {
  // d14: Content Exists 2, Forward 2 and Group Order 0 are protocol violations (§9.13).
  decode_fails(k14, "1d 00 18 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 02 02 01 00",
               ErrorCode::kProtocolViolation);
  decode_fails(k14, "1d 00 18 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 02 00 02 00",
               ErrorCode::kProtocolViolation);
  decode_fails(k14, "1d 00 18 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 00 00 01 00",
               ErrorCode::kProtocolViolation);
  // d16 §9.2.2: SUBSCRIBER_PRIORITY is not a PUBLISH parameter.
  decode_fails(k16, "1d 00 17 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 20 07",
               ErrorCode::kProtocolViolation);
  // d15: LARGEST_OBJECT that is not exactly one Location.
  decode_fails(k15, "1d 00 18 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 09 01 03",
               ErrorCode::kWrongSize);
  // An empty namespace names no track (§2.4.1).
  decode_fails(k16, "1d 00 0a 00 00 05 766964656f 05 00", ErrorCode::kBoundsExceeded);
  // Drafts 17+ (request streams): ietf_publish_d17_test.cc.
}

}  // namespace moqd::wire::ietf::publish_test
