// Byte-exact fixtures for FETCH, FETCH_OK, FETCH_CANCEL, FETCH_ERROR, TRACK_STATUS and its d14
// answers, and FETCH streams (drafts 14 to 16), transcribed from the draft texts with the section
// cited. Every control fixture is decoded whole, at every truncated length (must ask for more),
// and encoded back to the same bytes.
#include <gtest/gtest.h>

#include "testing/ietf_wire.h"
#include "wire/ietf.h"

namespace moqd::wire::ietf {
namespace fetch_test {

using test::expect_round_trip;

constexpr Version kD14 = Version::kTransport14;
constexpr Version kD15 = Version::kTransport15;
constexpr Version kD16 = Version::kTransport16;
const TrackNamespace kNs = {"room", "alice"};

Fetch standalone(uint64_t id, Location start, Location end) {
  Fetch f;
  f.request_id = id;
  f.ns = kNs;
  f.track = "video";
  f.start = start;
  f.end = end;
  return f;
}

Fetch joining(uint64_t id, FetchType type, uint64_t joined, uint64_t start) {
  Fetch f;
  f.request_id = id;
  f.type = type;
  f.joining_request_id = joined;
  f.joining_start = start;
  return f;
}

TEST(IetfFetch, StandaloneDraft) {
  // d14 §9.16 (Fetch Handling, Standalone Fetch): id 2, priority 128, group order 1, type 1,
  // ["room","alice"] "video", Start {1, 0}, End {3, 0} (all of group 3), no parameters.
  Fetch f = standalone(2, {1, 0}, {3, 0});
  f.group_order = 1;
  expect_round_trip(kD14, "16 00 1b 02 80 01 01 02 04726f6f6d 05616c696365 05766964656f 01 00 03 00 00", f);
  // d16 §9.16: no priority / order fields; SUBSCRIBER_PRIORITY (0x20) and GROUP_ORDER (0x22,
  // delta 2) as parameters (§9.2.2).
  f.group_order = 2;
  expect_round_trip(kD16,
             "16 00 1e 02 01 02 04726f6f6d 05616c696365 05766964656f 01 00 03 00 02 20 4080 02 02",
             f);
}

TEST(IetfFetch, JoiningDraft) {
  // d14 §9.16 (Joining Fetches): relative, id 4, priority 128, order 0 (the publisher's),
  // joining request 0, Joining Start 2 groups back.
  expect_round_trip(kD14, "16 00 07 04 80 00 02 00 02 00", joining(4, FetchType::kRelativeJoining, 0, 2));
  // d15 §9.16: relative with GROUP_ORDER descending; absolute parameter types.
  Fetch j = joining(4, FetchType::kRelativeJoining, 0, 1);
  j.group_order = 2;
  expect_round_trip(kD15, "16 00 0a 04 02 00 01 02 20 4080 22 02", j);
  // d16 §9.16: absolute, Joining Start group 5, priority 7.
  Fetch a = joining(6, FetchType::kAbsoluteJoining, 0, 5);
  a.subscriber_priority = 7;
  expect_round_trip(kD16, "16 00 07 06 03 00 05 01 20 07", a);
}

TEST(IetfFetch, ResponsesDraft) {
  // FETCH_OK: d14 §9.17 Group Order, End Of Track, End Location {3, 0}; d15 without Group Order;
  // d16 §9.17 ends with (empty) Track Extensions.
  expect_round_trip(kD14, "18 00 06 02 01 00 03 00 00", FetchOk{2, 1, false, {3, 0}, {}, {}});
  expect_round_trip(kD15, "18 00 05 02 01 03 00 00", FetchOk{2, 1, true, {3, 0}, {}, {}});
  expect_round_trip(kD16, "18 00 05 02 00 03 02 00", FetchOk{2, 1, false, {3, 2}, {}, {}});
  // FETCH_CANCEL (d14 §9.18, d16 §9.18).
  expect_round_trip(kD14, "17 00 01 02", FetchCancel{2});
  expect_round_trip(kD16, "17 00 01 02", FetchCancel{2});
  // d14 §9.18 FETCH_ERROR: INVALID_RANGE (0x5), "bad range". d15+ answer REQUEST_ERROR instead.
  expect_round_trip(kD14, "19 00 0c 02 05 09 6261642072616e6765",
             RequestError{MessageType::kFetchError, 2, 0x5, 0, "bad range", std::nullopt});
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(kD16, RequestError{MessageType::kFetchError, 2, 0x5, 0, "x", std::nullopt}, out));
  EXPECT_EQ(test::control_decode_error(kD16, "19 00 03 02 05 00"), ErrorCode::kUnexpectedMessage);
}

TEST(IetfFetch, BadFetchIsAViolation) {
  // §9.16: a Fetch Type other than 1..3.
  EXPECT_EQ(test::control_decode_error(kD16, "16 00 03 02 04 00"), ErrorCode::kProtocolViolation);
  // d16 §9.2.2: FORWARD is not a FETCH parameter.
  EXPECT_EQ(test::control_decode_error(kD16, "16 00 07 06 03 00 05 01 10 01"), ErrorCode::kProtocolViolation);
  // d14 Group Order 3.
  EXPECT_EQ(test::control_decode_error(kD14, "16 00 07 04 80 03 02 00 02 00"), ErrorCode::kProtocolViolation);
}

TEST(IetfTrackStatus, RequestAndAnswersDraft) {
  // d14 §9.17 TRACK_STATUS: the layout of SUBSCRIBE (priority 128, order 0, forward 1, filter
  // Largest Object).
  Subscribe s{0, 0, kNs, "video", 128, 0, true, Filter{FilterType::kLargestObject, {}, 0, 0, std::nullopt}, {}};
  expect_round_trip(kD14, "0d 00 18 00 02 04726f6f6d 05616c696365 05766964656f 80 00 01 02 00",
             TrackStatus{s});
  // d16 §9.19: as SUBSCRIBE's d16 bytes (FORWARD 1, SUBSCRIBER_PRIORITY 7, filter 2, order 2).
  s.subscriber_priority = 7;
  s.group_order = 2;
  expect_round_trip(kD16,
             "0d 00 1d 00 02 04726f6f6d 05616c696365 05766964656f 04 10 01 10 07 01 01 02 01 02",
             TrackStatus{s});
  // d14 §9.18 TRACK_STATUS_OK: SUBSCRIBE_OK's layout, alias 0, Content Exists with Largest {3, 1}.
  SubscribeOk ok;
  ok.group_order = 1;
  ok.largest = Location{3, 1};
  expect_round_trip(kD14, "0e 00 08 00 00 00 01 01 03 01 00", TrackStatusOk{ok});
  // d14 §9.19 TRACK_STATUS_ERROR: SUBSCRIBE_ERROR's layout, TRACK_DOES_NOT_EXIST (0x4).
  expect_round_trip(kD14, "0f 00 04 00 04 01 78",
             RequestError{MessageType::kTrackStatusError, 0, 0x4, 0, "x", std::nullopt});
  // d15+: 0x0E is NAMESPACE_DONE and TRACK_STATUS_OK does not exist.
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(kD16, TrackStatusOk{ok}, out));
}

// --- FETCH streams (d14 §10.4.4, d15 and d16 §10.4.4).

FetchObject object(uint64_t group, uint64_t id, uint64_t length) {
  FetchObject o;
  o.group = group;
  o.object = id;
  o.payload_length = length;
  return o;
}

TEST(IetfFetchStream, HeaderAndObjectsPerDraft) {
  std::vector<uint8_t> out;
  encode_fetch_header(kD16, 2, out);
  EXPECT_EQ(to_hex(out), "05 02");
  auto id = decode_fetch_header(kD16, std::span<const uint8_t>(out));
  ASSERT_TRUE(id.has_value() && id->has_value());
  EXPECT_EQ((*id)->value, 2u);
  // Group 3, object 0, priority 128, 4 payload bytes: d14 every field (Extension Headers Length
  // 0); d15 Serialization Flags (8) 0x1C (group, object, priority present, subgroup 0); d16 the
  // same flags as a varint.
  const std::pair<Version, const char*> cases[] = {
      {kD14, "03 00 00 80 00 04"}, {kD15, "1c 03 00 80 04"}, {kD16, "1c 03 00 80 04"}};
  for (const auto& [v, hex] : cases) {
    out.clear();
    encode_fetch_object(v, object(3, 0, 4), out);
    EXPECT_EQ(to_hex(out), to_hex(from_hex(hex)));
    auto o = decode_fetch_object(v, nullptr, std::span<const uint8_t>(out), Limits{});
    ASSERT_TRUE(o.has_value() && o->has_value());
    EXPECT_EQ((*o)->value, object(3, 0, 4));
    for (size_t n = 0; n < out.size(); ++n) {
      auto part = decode_fetch_object(v, nullptr, std::span<const uint8_t>(out.data(), n), Limits{});
      ASSERT_TRUE(part.has_value());
      EXPECT_FALSE(part->has_value()) << n;
    }
  }
  // d14 and d15 write Object Status after a zero length; d16 does not.
  out.clear();
  encode_fetch_object(kD15, object(3, 1, 0), out);
  EXPECT_EQ(to_hex(out), to_hex(from_hex("1c 03 01 80 00 00")));
  out.clear();
  encode_fetch_object(kD16, object(3, 1, 0), out);
  EXPECT_EQ(to_hex(out), to_hex(from_hex("1c 03 01 80 00")));
}

TEST(IetfFetchStream, FlagsReferToThePreviousObjectDraft) {
  // d16 §10.4.4: flags 0x00 = subgroup 0, the previous object's id + 1, group and priority.
  const FetchObject first = object(3, 0, 4);
  auto bytes = from_hex("00 03");
  auto o = decode_fetch_object(kD16, &first, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(o.has_value() && o->has_value());
  EXPECT_EQ((*o)->value, object(3, 1, 3));
  // ... which the first object of a stream may not use.
  o = decode_fetch_object(kD16, nullptr, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, ErrorCode::kProtocolViolation);
  // d16 End of Non-Existent Range (0x8C as a varint), up to {2, 0}.
  bytes = from_hex("408c 02 00");
  o = decode_fetch_object(kD16, &first, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(o.has_value() && o->has_value());
  EXPECT_EQ((*o)->value.end_of_range, 0x8cu);
  std::vector<uint8_t> out;
  encode_fetch_object(kD16, (*o)->value, out);
  EXPECT_EQ(to_hex(out), to_hex(bytes));
  // d15: 0x40 and 0x80 are violations; d16: a value over 127 other than the two End of Range.
  bytes = from_hex("5c 03 00 80 00 00");
  EXPECT_FALSE(decode_fetch_object(kD15, nullptr, std::span<const uint8_t>(bytes), Limits{}).has_value());
  bytes = from_hex("4090 03 00 80 00");
  EXPECT_FALSE(decode_fetch_object(kD16, nullptr, std::span<const uint8_t>(bytes), Limits{}).has_value());
  // ietf_fuzzer crash 5da5d0d3: the object after id 2^62-1 would be 2^62, which no varint carries.
  const FetchObject last = object(3, kMaxVarint, 0);
  bytes = from_hex("00 00");
  o = decode_fetch_object(kD15, &last, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, ErrorCode::kProtocolViolation);
  // Not a FETCH_HEADER.
  bytes = from_hex("04 02");
  EXPECT_FALSE(decode_fetch_header(kD16, std::span<const uint8_t>(bytes)).has_value());
}

}  // namespace fetch_test
}  // namespace moqd::wire::ietf
