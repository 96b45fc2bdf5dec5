// Byte-exact fixtures for PUBLISH, PUBLISH_OK (d18+: the REQUEST_OK answering a PUBLISH) and
// PUBLISH_DONE in drafts 17 to 20, transcribed from the draft texts: d17 §9.11 PUBLISH, §9.12
// PUBLISH_OK, §9.13 PUBLISH_DONE, §9.3 parameters; d18 and d19 §10.10 PUBLISH, §10.11 PUBLISH_DONE,
// §10.5 REQUEST_OK, §10.2 parameters; d20 (the editor's copy after draft-19, commit e1ae858d)
// §10.11 PUBLISH with the subscription parameters of #1834, §10.12 PUBLISH_DONE. @moq/net 0.3.4
// decodes PUBLISH but never sends one, so there is no JS fixture. Every fixture is decoded whole,
// at every truncated length (must ask for more), and encoded back to the same bytes.
#include <gtest/gtest.h>

#include "testing/ietf_wire.h"
#include "wire/ietf.h"

namespace moqd::wire::ietf::publish_d17_test {

using test::expect_round_trip;

constexpr Version kD16 = Version::kTransport16;
constexpr Version kD17 = Version::kTransport17;
constexpr Version kD18 = Version::kTransport18;
constexpr Version kD19 = Version::kTransport19;
constexpr Version kD20 = Version::kTransport20;
// Namespace ("room", "alice") and track "video": the same bytes in every varint form here.
const std::string kNsTrack = "02 04 726f6f6d 05 616c696365 05 766964656f";

std::string encoded(Version v, const ControlMessage& m) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(encode(v, m, out));
  return to_hex(out);
}

// alias 5, LARGEST_OBJECT {3, 1}, FORWARD 1, Track Properties DEFAULT PUBLISHER GROUP ORDER (0x22)
// = 2.
Publish video_publish() {
  Publish p;
  p.ns = {"room", "alice"};
  p.track = "video";
  p.track_alias = 5;
  p.largest = Location{3, 1};
  p.forward = true;
  p.track_extensions = std::string("\x22\x02", 2);
  return p;
}

TEST(IetfPublishD17, PublishPerDraft) {
  // d17 §9.11: Request ID 0, Required Request ID Delta 0, the name, Track Alias 5, 2 parameters
  // sorted and delta-coded (§9.3): LARGEST_OBJECT 0x09 as a Location with no length {3, 1}, then
  // +0x07 = FORWARD 0x10 as a uint8 1; then Track Properties to the end: 0x22 = 2.
  expect_round_trip(kD17, "1d 001d 00 00 " + kNsTrack + " 05 02 09 03 01 07 01 22 02", video_publish());
  // d17 with a non-zero delta, kept as it came.
  Publish delta = video_publish();
  delta.request_id = 4;
  delta.request_id_delta = 1;
  expect_round_trip(kD17, "1d 001d 04 01 " + kNsTrack + " 05 02 09 03 01 07 01 22 02", delta);
  // d18 and d19 §10.10: no Required Request ID Delta (#1615); otherwise the same.
  expect_round_trip(kD18, "1d 001c 00 " + kNsTrack + " 05 02 09 03 01 07 01 22 02", video_publish());
  expect_round_trip(kD19, "1d 001c 00 " + kNsTrack + " 05 02 09 03 01 07 01 22 02", video_publish());
}

TEST(IetfPublishD17, PublishD20SubscriptionParameters) {
  // d20 §10.11 (#1834): PUBLISH may carry the subscription's initial parameters. LARGEST_OBJECT
  // 0x09 {3, 1}, +07 FORWARD 1, +10 = SUBSCRIBER_PRIORITY 0x20 as a uint8 0x80, +01 =
  // LOCATION_FILTER 0x21 length 1 "relative 1" (§5.1.2), +01 = GROUP_ORDER 0x22 = 2; no Track
  // Properties. GROUP_ORDER is taken out into group_order; the others stay in params.
  Publish p = video_publish();
  p.track_extensions.clear();
  p.group_order = 2;
  p.params.push_back(Parameter{kParamSubscriberPriority, 0x80, {}});
  p.params.push_back(Parameter{kParamSubscriptionFilter, 0, std::string("\x01", 1)});
  expect_round_trip(kD20, "1d 0021 00 " + kNsTrack + " 05 05 09 03 01 07 01 10 80 01 01 01 01 02", p);
  // The same GROUP_ORDER in a d18 / d19 PUBLISH is not a PUBLISH parameter there (§10.2.x lists
  // SUBSCRIBE, PUBLISH_OK, FETCH; d19 #1777 SUBSCRIBE_TRACKS): a violation, and not written.
  EXPECT_EQ(test::control_decode_error(kD18, "1d 001a 00 " + kNsTrack + " 05 02 09 03 01 19 02"),
            ErrorCode::kProtocolViolation);
  EXPECT_EQ(test::control_decode_error(kD19, "1d 001a 00 " + kNsTrack + " 05 02 09 03 01 19 02"),
            ErrorCode::kProtocolViolation);
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(kD18, p, out));
  // SUBSCRIBER_PRIORITY in a d17..19 PUBLISH: only PUBLISH_OK takes it (d17 §9.3, d18 §10.2).
  EXPECT_EQ(test::control_decode_error(kD17, "1d 0018 00 00 " + kNsTrack + " 05 01 20 80"),
            ErrorCode::kProtocolViolation);
  EXPECT_EQ(test::control_decode_error(kD19, "1d 0017 00 " + kNsTrack + " 05 01 20 80"),
            ErrorCode::kProtocolViolation);
}

TEST(IetfPublishD17, BadPublish) {
  // An unknown parameter (0x3e) cannot be skipped (d17 §9.3).
  EXPECT_EQ(test::control_decode_error(kD17, "1d 0018 00 00 " + kNsTrack + " 05 01 3e 00"),
            ErrorCode::kProtocolViolation);
  // Track Properties that are not well-formed Key-Value-Pairs: an odd type whose length runs past
  // the message.
  EXPECT_EQ(test::control_decode_error(kD18, "1d 0017 00 " + kNsTrack + " 05 00 23 05"), ErrorCode::kDecode);
  // FORWARD 2 (d18 §10.2: 0 or 1).
  EXPECT_EQ(test::control_decode_error(kD18, "1d 0017 00 " + kNsTrack + " 05 01 10 02"),
            ErrorCode::kProtocolViolation);
  // An empty namespace names no track (§2.4.1).
  EXPECT_EQ(test::control_decode_error(kD20, "1d 000a 00 00 05 766964656f 05 00"), ErrorCode::kBoundsExceeded);
}

TEST(IetfPublishD17, PublishOkD17) {
  // d17 §9.12: 0x1E, no Request ID, parameters: FORWARD 0x10 = 1, +10 = SUBSCRIBER_PRIORITY 0x20 as a
  // uint8 0x80, +01 = SUBSCRIPTION_FILTER 0x21 length 1, Next Group Start (tag 1).
  PublishOk ok;
  ok.forward = true;
  ok.subscriber_priority = 128;
  ok.filter = Filter{FilterType::kNextGroupStart, {}, 0, 0, std::nullopt};
  expect_round_trip(kD17, "1e 0008 03 10 01 10 80 01 01 01", ok);
  // d16's PUBLISH_OK has the Request ID first (and QUIC varints): the same value differs.
  ok.request_id = 6;
  EXPECT_EQ(encoded(kD16, ok), to_hex(from_hex("1e 000a 06 03 10 01 10 4080 01 01 01")));
}

TEST(IetfPublishD17, PublishOkIsRequestOkFrom18) {
  // d18 §10.5 (#1611): PUBLISH_OK is a REQUEST_OK (0x07): the parameters d18 §10.2 allows in
  // PUBLISH_OK, then Track Properties, which are empty in PUBLISH_OK.
  PublishOk ok;
  ok.forward = true;
  ok.subscriber_priority = 128;
  ok.filter = Filter{FilterType::kNextGroupStart, {}, 0, 0, std::nullopt};
  const std::string hex = "07 0008 03 10 01 10 80 01 01 01";
  RequestOk as_request_ok;
  as_request_ok.params = {Parameter{kParamForward, 1, {}},
                          Parameter{kParamSubscriberPriority, 0x80, {}},
                          Parameter{kParamSubscriptionFilter, 0, std::string("\x01", 1)}};
  for (Version v : {kD18, kD19}) {
    EXPECT_EQ(encoded(v, ok), to_hex(from_hex(hex)));
    expect_round_trip(v, hex, as_request_ok);
    // 0x1E: "RESERVED (PUBLISH_OK in <= 17)" (d19 §10 table): an unknown message.
    EXPECT_EQ(test::control_decode_error(v, "1e 0008 03 10 01 10 80 01 01 01"), ErrorCode::kUnexpectedMessage);
  }
  // d18 only: GROUP_ORDER in PUBLISH_OK (§10.2); d19 moved it to SUBSCRIBE_TRACKS (#1777).
  ok.group_order = 2;
  EXPECT_EQ(encoded(kD18, ok), to_hex(from_hex("07 000a 04 10 01 10 80 01 01 01 01 02")));
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(kD19, ok, out));
  EXPECT_EQ(test::control_decode_error(kD19, "07 000a 04 10 01 10 80 01 01 01 01 02"),
            ErrorCode::kProtocolViolation);
}

TEST(IetfPublishD17, PublishOkD20CarriesNoSubscriptionParameters) {
  // d20 (#1834): FORWARD, SUBSCRIBER_PRIORITY and LOCATION_FILTER moved from PUBLISH_OK into
  // PUBLISH (§10.2.x lists no PUBLISH_OK for them): an acceptance with the publisher's settings is
  // an empty REQUEST_OK.
  PublishOk ok;
  expect_round_trip(kD20, "07 0001 00", RequestOk{});
  EXPECT_EQ(encoded(kD20, ok), to_hex(from_hex("07 0001 00")));
  // EXPIRES (0x08) is still a PUBLISH_OK parameter.
  ok.params.push_back(Parameter{kParamExpires, 300, {}});
  EXPECT_EQ(encoded(kD20, ok), to_hex(from_hex("07 0004 01 08 812c")));
  // What d20 cannot carry is not written, never dropped.
  std::vector<uint8_t> out;
  PublishOk filtered;
  filtered.filter = Filter{FilterType::kNextGroupStart, {}, 0, 0, std::nullopt};
  EXPECT_FALSE(encode(kD20, filtered, out));
  PublishOk paused;
  paused.forward = false;
  EXPECT_FALSE(encode(kD20, paused, out));
  // And a d20 REQUEST_OK with FORWARD is a violation (§10.2 "FORWARD": not in PUBLISH_OK).
  EXPECT_EQ(test::control_decode_error(kD20, "07 0003 01 10 01"), ErrorCode::kProtocolViolation);
}

TEST(IetfPublishD17, RequestUpdateOfAPublishD20) {
  // d20 §10.9 REQUEST_UPDATE: Type 0x2, Length (16), Request ID (vi64), Number of Parameters,
  // Parameters. "A subscriber can also send REQUEST_UPDATE to modify parameters of a subscription
  // established with PUBLISH", on the PUBLISH's stream; it consumes a Request ID of its sender
  // (§10.1: a server's are odd). FORWARD (§10.2, 0x10) is a uint8 allowed in REQUEST_UPDATE: the
  // relay's FORWARD 1 with id 1, then FORWARD 0 with id 3. existing_request_id (the PUBLISH) is
  // not on the wire from 17 on: it only routes the message to its stream.
  SubscribeUpdate start;
  start.request_id = 1;
  start.params = {Parameter{kParamForward, 1, {}}};
  expect_round_trip(kD20, "02 0004 01 01 10 01", start);
  start.existing_request_id = 7;
  EXPECT_EQ(encoded(kD20, start), to_hex(from_hex("02 0004 01 01 10 01")));
  SubscribeUpdate pause;
  pause.request_id = 3;
  pause.params = {Parameter{kParamForward, 0, {}}};
  expect_round_trip(kD20, "02 0004 03 01 10 00", pause);
  // FORWARD outside 0..1 (§10.2 "FORWARD": PROTOCOL_VIOLATION), and a parameter REQUEST_UPDATE
  // does not take (EXPIRES 0x08, a PUBLISH / REQUEST_OK parameter).
  EXPECT_EQ(test::control_decode_error(kD20, "02 0004 01 01 10 02"), ErrorCode::kProtocolViolation);
  EXPECT_EQ(test::control_decode_error(kD20, "02 0004 01 01 08 05"), ErrorCode::kProtocolViolation);
}

TEST(IetfPublishD17, PublishDone) {
  // d17 §9.13, d18/19 §10.11, d20 §10.12: Status Code, Stream Count, Error Reason; no Request ID
  // (the request stream says it). TRACK_ENDED (0x2), 3 streams, "".
  for (Version v : {kD17, kD18, kD19, kD20}) {
    expect_round_trip(v, "0b 0003 02 03 00", PublishDone{0, 2, 3, ""});
  }
  // "unable to set Stream Count to the exact number": 2^62-1, the 9-byte leading-ones form.
  expect_round_trip(kD17, "0b 000b 02 ff3fffffffffffffff 00",
             PublishDone{0, 2, (uint64_t{1} << 62) - 1, ""});
  // d20 §10.12 (editor's copy with #1831): the same is 2^64-1 ("vi64"), read only there; 17..19
  // varints stop at 2^62-1, so there the bytes are malformed.
  expect_round_trip(kD20, "0b 000b 02 ffffffffffffffffff 00", PublishDone{0, 2, UINT64_MAX, ""});
  EXPECT_EQ(test::control_decode_error(kD19, "0b 000b 02 ffffffffffffffffff 00"), ErrorCode::kDecode);
  // A reason longer than its message.
  EXPECT_EQ(test::control_decode_error(kD18, "0b 0004 02 03 05 6e"), ErrorCode::kDecode);
}

}  // namespace moqd::wire::ietf::publish_d17_test
