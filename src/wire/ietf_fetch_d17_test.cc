// Byte-exact fixtures for FETCH, FETCH_OK, TRACK_STATUS and REQUEST_UPDATE and for FETCH streams in
// drafts 17 to 20 (request streams: no Request ID in responses; leading-ones varints; 17's Required
// Request ID Delta; 18's Group / Object ID Deltas on FETCH streams; 20's LOCATION_FILTER in FETCH),
// transcribed from the draft texts with the section cited. Every control fixture is decoded whole,
// at every truncated length (must ask for more), and encoded back to the same bytes.
#include <gtest/gtest.h>

#include "testing/ietf_wire.h"
#include "wire/ietf.h"

namespace moqd::wire::ietf {
namespace fetch_d17_test {

using test::expect_round_trip;

constexpr Version kD17 = Version::kTransport17;
constexpr Version kD18 = Version::kTransport18;
constexpr Version kD19 = Version::kTransport19;
constexpr Version kD20 = Version::kTransport20;
const TrackNamespace kNs = {"room", "alice"};
// Namespace ("room", "alice") and track "video": the same bytes in every varint form here.
constexpr const char* kNsTrack = "02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f";

std::string cat(const char* a, const char* b, const char* c = "") {
  return std::string(a) + " " + b + " " + c;
}

Fetch standalone(uint64_t id, Location start, Location end) {
  Fetch f;
  f.request_id = id;
  f.ns = kNs;
  f.track = "video";
  f.start = start;
  f.end = end;
  return f;
}

TEST(IetfFetchD17, StandaloneFetch) {
  // d17 §9.14.3: Type 0x16, Length, Request ID 2, Required Request ID Delta 0, Fetch Type 1,
  // Standalone {namespace, track, Start {1, 0}, End {3, 0}}, 1 parameter: SUBSCRIBER_PRIORITY
  // (0x20, a uint8 per §9.3) 128.
  expect_round_trip(kD17, cat("16 00 1c 02 00 01", kNsTrack, "01 00 03 00 01 20 80"),
             standalone(2, {1, 0}, {3, 0}));
  // d18 §10.12.3, d19 §10.12.3: no Required Request ID Delta.
  for (Version v : {kD18, kD19}) {
    expect_round_trip(v, cat("16 00 1b 02 01", kNsTrack, "01 00 03 00 01 20 80"),
               standalone(2, {1, 0}, {3, 0}));
  }
  // GROUP_ORDER (0x22) descending, delta-coded after 0x20 (d18 §10.2 GROUP ORDER: FETCH takes it).
  Fetch desc = standalone(2, {1, 0}, {3, 0});
  desc.group_order = 2;
  expect_round_trip(kD18, cat("16 00 1d 02 01", kNsTrack, "01 00 03 00 02 20 80 02 02"), desc);
}

TEST(IetfFetchD17, StandaloneFetchDraft20LocationFilter) {
  // d20 §10.13.1: no Start / End in the message; a LOCATION_FILTER (0x21, §5.1.2) with
  // StartGroup 1, StartObject 0, EndGroupDelta 2 (the whole End Group 3) follows
  // SUBSCRIBER_PRIORITY (delta 1).
  Fetch f;
  f.request_id = 2;
  f.ns = kNs;
  f.track = "video";
  f.filter = Filter{FilterType::kAbsoluteRange, {1, 0}, 2, 0, std::nullopt};
  expect_round_trip(kD20, cat("16 00 1c 02 01", kNsTrack, "02 20 80 01 03 01 00 02"), f);
  // No filter: the whole track.
  f.filter.reset();
  expect_round_trip(kD20, cat("16 00 17 02 01", kNsTrack, "01 20 80"), f);
  // Drafts before 20 have no LOCATION_FILTER in FETCH: not encodable, and a violation to receive
  // (d19 §10.2: a parameter the message does not take).
  f.filter = Filter{FilterType::kAbsoluteStart, {1, 0}, 0, 0, std::nullopt};
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(kD19, f, out));
  EXPECT_EQ(test::control_decode_error(kD19, cat("16 00 1b 02 01", kNsTrack, "02 20 80 01 02 01 00")),
            ErrorCode::kProtocolViolation);
}

TEST(IetfFetchD17, JoiningFetch) {
  // d17 §9.14.2: Relative Joining (2) of request 0, Joining Start 1.
  Fetch j;
  j.request_id = 4;
  j.type = FetchType::kRelativeJoining;
  j.joining_request_id = 0;
  j.joining_start = 1;
  expect_round_trip(kD17, "16 00 08 04 00 02 00 01 01 20 80", j);
  j.type = FetchType::kAbsoluteJoining;
  expect_round_trip(kD18, "16 00 07 04 03 00 01 01 20 80", j);
  // d20 §10.13.2: no Joining Start; StartGroup 2 as a one-field LOCATION_FILTER.
  j.type = FetchType::kRelativeJoining;
  j.joining_start = 0;
  j.filter = Filter{FilterType::kRelative, {}, 0, 2, std::nullopt};
  expect_round_trip(kD20, "16 00 09 04 02 00 02 20 80 01 01 02", j);
  // Fetch Type 4: "MUST close the session with a PROTOCOL_VIOLATION" (d18 §10.12).
  EXPECT_EQ(test::control_decode_error(kD18, "16 00 07 04 04 00 01 01 20 80"), ErrorCode::kProtocolViolation);
}

TEST(IetfFetchD17, FetchOkAndNoFetchCancel) {
  // d17 §9.15, d18 §10.13, d20 §10.14: no Request ID; End Of Track 0, End Location {3, 0}, no
  // parameters, no Track Properties.
  FetchOk ok;
  ok.end = {3, 0};
  for (Version v : {kD17, kD18, kD19, kD20}) {
    expect_round_trip(v, "18 00 04 00 03 00 00", ok);
  }
  // End Location {200, 1}: 200 is a two-byte leading-ones varint (80 c8).
  ok.end = {200, 1};
  ok.end_of_track = true;
  expect_round_trip(kD18, "18 00 05 01 80 c8 01 00", ok);
  // FETCH_CANCEL (0x17) is gone from 17 (§5.2: the request stream is reset instead).
  EXPECT_EQ(test::control_decode_error(kD17, "17 00 01 02"), ErrorCode::kUnexpectedMessage);
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(kD17, FetchCancel{2}, out));
}

TEST(IetfFetchD17, TrackStatus) {
  // d17 §9.16: SUBSCRIBE's layout (§9.8), type 0x0D: Request ID 6, Delta 0, namespace, track,
  // FORWARD (0x10) 1 and SUBSCRIBER_PRIORITY (0x20, delta 0x10) 128.
  TrackStatus t;
  t.request.request_id = 6;
  t.request.ns = kNs;
  t.request.track = "video";
  expect_round_trip(kD17, cat("0d 00 19 06 00", kNsTrack, "02 10 01 10 80"), t);
  // d18 §10.14, d20 §10.15: the same without the delta.
  for (Version v : {kD18, kD19, kD20}) {
    expect_round_trip(v, cat("0d 00 18 06", kNsTrack, "02 10 01 10 80"), t);
  }
}

TEST(IetfFetchD17, RequestUpdate) {
  // d17 §9.10: Request ID 8, Delta 0, FORWARD 0 and SUBSCRIPTION_FILTER (0x21, delta 0x11)
  // AbsoluteRange {5, 0} End Group Delta 2.
  SubscribeUpdate u;
  u.request_id = 8;
  u.params = {Parameter{kParamForward, 0, {}},
              Parameter{kParamSubscriptionFilter, 0, std::string("\x04\x05\x00\x02", 4)}};
  expect_round_trip(kD17, "02 00 0b 08 00 02 10 00 11 04 04 05 00 02", u);
  // d18 §10.9: no delta.
  expect_round_trip(kD18, "02 00 0a 08 02 10 00 11 04 04 05 00 02", u);
  // d20 §5.1.2: the filter as fields (StartGroup 5, StartObject 0, EndGroupDelta 2).
  u.params[1].bytes = std::string("\x05\x00\x02", 3);
  expect_round_trip(kD20, "02 00 09 08 02 10 00 11 03 05 00 02", u);
  // decode_filter reads the value in each draft's form.
  auto f = decode_filter(kD20, u.params[1].bytes);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, FilterType::kAbsoluteRange);
  EXPECT_EQ(f->start, (Location{5, 0}));
  EXPECT_EQ(f->end_group, 2u);
  f = decode_filter(kD18, std::string("\x04\x05\x00\x02", 4));
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->type, FilterType::kAbsoluteRange);
  EXPECT_FALSE(decode_filter(kD18, std::string("\x09", 1)).has_value());  // no filter type 9
  EXPECT_FALSE(decode_filter(kD18, std::string("\x01\x00", 2)).has_value());  // trailing byte
}

// --- FETCH streams (d17 §10.4.4, d18 §11.4.4, d20 §11.4.4).

FetchObject object(uint64_t group, uint64_t id, uint64_t length) {
  FetchObject o;
  o.group = group;
  o.object = id;
  o.payload_length = length;
  return o;
}

// Encodes `objects` in order and checks the bytes, then decodes them back one by one.
void stream_round_trip(Version v, bool descending, const std::vector<FetchObject>& objects,
                       const std::string& hex) {
  SCOPED_TRACE(hex);
  std::vector<uint8_t> out;
  const FetchObject* prev = nullptr;
  for (const auto& o : objects) {
    encode_fetch_object(v, o, prev, descending, out);
    prev = &o;
  }
  EXPECT_EQ(to_hex(out), to_hex(from_hex(hex)));
  std::span<const uint8_t> in(out);
  std::optional<FetchObject> last;
  for (const auto& want : objects) {
    auto got = decode_fetch_object(v, last ? &*last : nullptr, descending, in, Limits{});
    ASSERT_TRUE(got.has_value()) << got.error().detail;
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->value, want);
    in = in.subspan((*got)->consumed);
    last = (*got)->value;
  }
  EXPECT_TRUE(in.empty());
}

TEST(IetfFetchD17, StreamObjectsPerDraft) {
  std::vector<uint8_t> out;
  encode_fetch_header(kD17, 2, out);
  EXPECT_EQ(to_hex(out), "05 02");
  auto id = decode_fetch_header(kD20, std::span<const uint8_t>(out));
  ASSERT_TRUE(id.has_value() && id->has_value());
  EXPECT_EQ((*id)->value, 2u);
  // d17: d16's layout (flags 0x1C, every field, no Object Status) in leading-ones varints.
  stream_round_trip(kD17, false, {object(3, 0, 4), object(3, 1, 4), object(200, 0, 0)},
                    "1c 03 00 80 04  1c 03 01 80 04  1c 80 c8 00 80 00");
  // d18: the first object's Group ID and Object ID are absolute; the same group leaves the Group
  // ID Delta out (flags 0x14) and writes the Object ID Delta; a new group writes Group ID Delta
  // (ascending: the previous + delta + 1) and the absolute Object ID.
  stream_round_trip(kD18, false, {object(3, 0, 4), object(3, 2, 4), object(5, 0, 4)},
                    "1c 03 00 80 04  14 02 80 04  1c 01 00 80 04");
  // Descending: the previous - (delta + 1).
  stream_round_trip(kD20, true, {object(5, 1, 4), object(3, 0, 4), object(0, 7, 0)},
                    "1c 05 01 80 04  1c 01 00 80 04  1c 02 07 80 00");
}

TEST(IetfFetchD17, StreamViolations) {
  // d18 §11.4.4: "If the computed Group ID would be less than 0 ... PROTOCOL_VIOLATION".
  const FetchObject g1 = object(1, 0, 0);
  auto bytes = from_hex("1c 01 00 80 00");
  auto o = decode_fetch_object(kD18, &g1, true, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, ErrorCode::kProtocolViolation);
  // ... or past the largest value (moqd's 2^62-1), ascending.
  const FetchObject top = object(kMaxVarint, 0, 0);
  bytes = from_hex("1c 00 00 80 00");
  o = decode_fetch_object(kD18, &top, false, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, ErrorCode::kProtocolViolation);
  // The first object must carry both fields (d18 §11.4.4).
  bytes = from_hex("14 00 80 00");
  o = decode_fetch_object(kD18, nullptr, false, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(o.has_value());
  // End of Timed-Out Range (0x20C) exists from 20 only: reserved in 17 (§10.4.4 "Any other value
  // is a PROTOCOL_VIOLATION").
  bytes = from_hex("82 0c 02 00");
  o = decode_fetch_object(kD17, &g1, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, ErrorCode::kProtocolViolation);
  o = decode_fetch_object(kD20, &g1, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(o.has_value() && o->has_value());
  EXPECT_EQ((*o)->value.end_of_range, 0x20cu);
  // d17 End of Non-Existent Range 0x8C (two bytes in leading-ones).
  bytes = from_hex("80 8c 02 00");
  o = decode_fetch_object(kD17, &g1, std::span<const uint8_t>(bytes), Limits{});
  ASSERT_TRUE(o.has_value() && o->has_value());
  EXPECT_EQ((*o)->value.end_of_range, 0x8cu);
}

}  // namespace fetch_d17_test
}  // namespace moqd::wire::ietf
