// Byte-exact fixtures for moq-lite-05 (NET-0.3.md §3). Where §3.2 and §3.8 have bytes captured
// from @moq/net 0.3.4 they are used verbatim; each fixture is checked in both directions and at
// every truncated length (a prefix must ask for more bytes).
#include <gtest/gtest.h>

#include "testing/wire_decode.h"
#include "wire/lite.h"

// Its own namespace: its helpers share names with lite_test.cc's, and the two may be compiled as
// one unit (MOQD_UNITY_TESTS).
namespace moqd::wire::lite05_test {
namespace {

constexpr Version k05 = Version::kLite05;

using test::canonical;
using test::expect_decodes;

template <class T>
std::string encoded(const T& m) {
  std::vector<uint8_t> out;
  encode(k05, m, out);
  return to_hex(out);
}

template <class Fn>
auto v05(Fn fn) {
  return [fn](std::span<const uint8_t> in) { return fn(k05, in, DecodeLimits{}); };
}

template <class T, class Fn>
void expect_wire(const T& m, std::string_view hex, Fn decode) {
  EXPECT_EQ(encoded(m), canonical(hex));
  expect_decodes(hex, v05(decode), m);
}

template <class Fn>
ErrorCode error_of(Fn decode, std::string_view hex, DecodeLimits l = {}) {
  auto bytes = from_hex(hex);
  auto r = decode(k05, std::span<const uint8_t>(bytes), l);
  if (r.has_value()) {
    ADD_FAILURE() << hex << " decoded";
    return ErrorCode::kCancel;
  }
  return r.error().code;
}

// --- SETUP on the uni setup stream (§3.2).

// The client's SETUP captured over qmux-02.moq-lite-05, after its 01 stream type: one
// parameter, Origin (5), an 8-byte varint.
constexpr const char* kCapturedClientSetup = "0b 01 05 08 c0 0f bf 09 86 f9 6e 88";

TEST(Lite05SetupTest, DecodesCapturedClientSetup) {
  LiteSetup m;
  m.parameters = {{LiteSetup::kOrigin, std::string("\xc0\x0f\xbf\x09\x86\xf9\x6e\x88", 8)}};
  expect_wire(m, kCapturedClientSetup, decode_lite_setup);
  EXPECT_EQ(m.varint(LiteSetup::kOrigin), uint64_t{0x0fbf0986f96e88});
  EXPECT_EQ(m.varint(LiteSetup::kProbe), std::nullopt);
}

TEST(Lite05SetupTest, OriginWrittenByAddVarintMatchesCapture) {
  LiteSetup m;
  m.add_varint(LiteSetup::kOrigin, 0x0fbf0986f96e88);
  EXPECT_EQ(encoded(m), canonical(kCapturedClientSetup));
}

TEST(Lite05SetupTest, EmptySetupIsTheMinimalRelaySetup) {
  // The relay SETUP the client accepted in §3.2: 01 (type) 01 00 (size 1, count 0).
  expect_wire(LiteSetup{}, "01 00", decode_lite_setup);
}

TEST(Lite05SetupTest, UnknownAndPathParametersAreKeptRaw) {
  LiteSetup m;
  m.parameters = {{LiteSetup::kPath, "room"}, {0x40, ""}};
  m.add_varint(LiteSetup::kProbe, 1);
  expect_wire(m, "0d 03 02 04 72 6f 6f 6d 40 40 00 01 01 01", decode_lite_setup);
  EXPECT_EQ(m.varint(LiteSetup::kProbe), 1u);
}

TEST(Lite05SetupTest, RefusesDuplicatesMalformedVarintsAndTooManyParameters) {
  EXPECT_EQ(error_of(decode_lite_setup, "07 02 05 01 01 05 01 02"), ErrorCode::kDecode);
  // Origin holding two varints, and an empty Role.
  EXPECT_EQ(error_of(decode_lite_setup, "04 01 05 02 01 02"), ErrorCode::kDecode);
  EXPECT_EQ(error_of(decode_lite_setup, "03 01 03 00"), ErrorCode::kDecode);
  DecodeLimits one;
  one.max_parameters = 1;
  EXPECT_EQ(error_of(decode_lite_setup, "07 02 05 01 01 06 01 02", one),
            ErrorCode::kBoundsExceeded);
  EXPECT_EQ(error_of(decode_lite_setup, "05 01 05 01 01 ff"), ErrorCode::kDecode);  // trailing
}

// --- Announce stream (§3.3).

TEST(Lite05AnnounceTest, AnnouncePleaseIsLite04Bytes) {
  expect_wire(AnnouncePlease{.prefix = "room", .exclude_hop = 5}, "06 04 72 6f 6f 6d 05",
              decode_announce_please);
}

TEST(Lite05AnnounceTest, AnnounceOk) {
  expect_wire(AnnounceOk{.hop_id = 300, .active_count = 2}, "03 41 2c 02", decode_announce_ok);
  expect_wire(AnnounceOk{}, "02 00 00", decode_announce_ok);
}

TEST(Lite05AnnounceTest, AnnounceCarriesHopIds) {
  expect_wire(Announce{.active = true, .suffix = "alice", .hops = {}},
              "08 01 05 61 6c 69 63 65 00", decode_announce);
  expect_wire(Announce{.active = true, .suffix = "a", .hops = {7, 300}}, "07 01 01 61 02 07 41 2c",
              decode_announce);
}

TEST(Lite05AnnounceTest, RestartStatusReadsAsActiveOtherStatusesFail) {
  auto bytes = from_hex("04 02 01 61 00");
  auto r = decode_announce(k05, bytes, DecodeLimits{});
  ASSERT_TRUE(r && *r);
  EXPECT_TRUE((*r)->value.active);
  EXPECT_EQ(error_of(decode_announce, "04 03 01 61 00"), ErrorCode::kDecode);
  // lite-04 knows no status 2.
  auto old = decode_announce(Version::kLite04, bytes, DecodeLimits{});
  EXPECT_FALSE(old.has_value());
}

// --- Track stream (§3.5), with the §3.8 capture.

TEST(Lite05TrackTest, CapturedTrackRequest) {
  expect_wire(TrackRequest{.broadcast = "room/alice", .track = "video"},
              "11 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f", decode_track_request);
}

TEST(Lite05TrackTest, CapturedTrackInfo) {
  expect_wire(TrackInfo{.priority = 0, .ordered = false, .max_latency_ms = 0, .timescale = 1000},
              "05 00 00 00 43 e8", decode_track_info);
  expect_wire(TrackInfo{.priority = 7, .ordered = true, .max_latency_ms = 100, .timescale = 90000},
              "08 07 01 40 64 80 01 5f 90", decode_track_info);
}

TEST(Lite05TrackTest, TimescaleZeroIsRefusedBothWays) {
  EXPECT_EQ(encoded(TrackInfo{}), "");
  EXPECT_EQ(error_of(decode_track_info, "04 00 00 00 00"), ErrorCode::kDecode);
  EXPECT_EQ(error_of(decode_track_info, "04 00 02 00 01"), ErrorCode::kDecode);  // bool 2
}

// --- Subscribe stream (§3.4).

TEST(Lite05SubscribeTest, CapturedSubscribeIsLite04Bytes) {
  expect_wire(Subscribe{.id = 0, .broadcast = "room/alice", .track = "video"},
              "17 00 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f 00 00 00 00 00",
              decode_subscribe);
}

TEST(Lite05SubscribeTest, SubscribeUpdateIsLite04Bytes) {
  expect_wire(SubscribeUpdate{.priority = 1, .ordered = true, .start_group = 4},
              "05 01 01 00 05 00", decode_subscribe_update);
}

template <class T>
void expect_response(const T& m, std::string_view hex) {
  EXPECT_EQ(encoded(m), canonical(hex));
  expect_decodes(hex, v05(decode_subscribe_response), SubscribeResponse(m));
}

TEST(Lite05SubscribeTest, Responses) {
  expect_response(SubscribeStart{0}, "00 01 00");  // the §3.8 capture
  expect_response(SubscribeStart{16383}, "00 02 7f ff");
  expect_response(SubscribeEnd{5}, "01 01 05");
  expect_response(SubscribeDrop{.start = 3, .end = 5, .error_code = 24}, "02 03 03 05 18");
  EXPECT_EQ(error_of(decode_subscribe_response, "03 01 00"), ErrorCode::kDecode);
}

TEST(Lite05SubscribeTest, NoSubscribeOkInLite05AndNoStartOrEndBefore) {
  EXPECT_EQ(encoded(SubscribeOk{.priority = 1}), "");
  std::vector<uint8_t> out;
  encode(Version::kLite04, SubscribeStart{1}, out);
  encode(Version::kLite04, SubscribeEnd{1}, out);
  EXPECT_TRUE(out.empty());
  // lite-04 reads type 1 as DROP, so the same bytes mean different things.
  auto drop = from_hex("01 03 03 05 18");
  auto r4 = decode_subscribe_response(Version::kLite04, drop, DecodeLimits{});
  ASSERT_TRUE(r4 && *r4);
  EXPECT_TRUE(std::holds_alternative<SubscribeDrop>((*r4)->value));
}

// --- Group stream and timestamped FRAMEs (§3.6), with the §3.8 capture.

TEST(Lite05FrameTest, Zigzag) {
  EXPECT_EQ(zigzag_encode(0), 0u);
  EXPECT_EQ(zigzag_encode(-1), 1u);
  EXPECT_EQ(zigzag_encode(1), 2u);
  EXPECT_EQ(zigzag_encode(10), 20u);
  EXPECT_EQ(zigzag_encode(-10), 19u);
  EXPECT_EQ(zigzag_encode(INT64_MIN), UINT64_MAX);
  for (int64_t d : {int64_t{0}, int64_t{-1}, int64_t{7}, INT64_MIN, INT64_MAX}) {
    EXPECT_EQ(zigzag_decode(zigzag_encode(d)), d);
  }
}

TEST(Lite05FrameTest, CapturedGroupStream) {
  // uni 7 in §3.8 after its 00 type: GROUP{0, 0}, "hi" at 0, "abc" at +10, FIN.
  auto bytes = from_hex("02 00 00 00 02 68 69 14 03 61 62 63");
  auto header = decode_group_header(k05, bytes, DecodeLimits{});
  ASSERT_TRUE(header && *header);
  EXPECT_EQ((*header)->value, (GroupHeader{0, 0}));
  size_t pos = (*header)->consumed;
  std::vector<TimedFrameHeader> frames;
  while (pos < bytes.size()) {
    auto f = decode_timed_frame_header(std::span(bytes).subspan(pos));
    ASSERT_TRUE(f && *f);
    frames.push_back((*f)->value);
    pos += (*f)->consumed + (*f)->value.size;
  }
  EXPECT_EQ(pos, bytes.size());
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0], (TimedFrameHeader{0, 2}));
  EXPECT_EQ(frames[1], (TimedFrameHeader{10, 3}));
}

TEST(Lite05FrameTest, HeaderBothWays) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(encode_timed_frame_header(TimedFrameHeader{10, 3}, out));
  ASSERT_TRUE(encode_timed_frame_header(TimedFrameHeader{-1, 16360}, out));
  EXPECT_EQ(to_hex(out), "14 03 01 7f e8");
  expect_decodes("14 03", decode_timed_frame_header, TimedFrameHeader{10, 3});
  expect_decodes("01 7f e8", decode_timed_frame_header, TimedFrameHeader{-1, 16360});
  // The largest representable deltas, and one past them.
  expect_decodes("ff ff ff ff ff ff ff ff 00", decode_timed_frame_header,
                 TimedFrameHeader{-(int64_t{1} << 61), 0});
  out.clear();
  EXPECT_FALSE(encode_timed_frame_header(TimedFrameHeader{int64_t{1} << 61, 0}, out));
  EXPECT_FALSE(encode_timed_frame_header(TimedFrameHeader{-(int64_t{1} << 61) - 1, 0}, out));
  EXPECT_TRUE(out.empty());
}

// --- FETCH, PROBE, GOAWAY: lite-04 bytes (§3.6, §3.7).

TEST(Lite05OtherTest, FetchProbeGoawayAreLite04Bytes) {
  expect_wire(Fetch{.broadcast = "bob", .track = "t", .priority = 2, .group = 10},
              "08 03 62 6f 62 01 74 02 0a", decode_fetch);
  expect_wire(Probe{.bitrate = 1000, .rtt_ms = 20}, "03 43 e8 14", decode_probe);
  expect_wire(Goaway{.uri = "moq"}, "04 03 6d 6f 71", decode_goaway);
}

TEST(Lite05OtherTest, Lite05MessagesAreAbsentFromOtherVersions) {
  for (Version v : {Version::kLite01, Version::kLite04, Version::kTransport14}) {
    std::vector<uint8_t> out;
    encode(v, LiteSetup{}, out);
    encode(v, AnnounceOk{}, out);
    encode(v, TrackRequest{}, out);
    encode(v, TrackInfo{.timescale = 1}, out);
    EXPECT_TRUE(out.empty()) << version_name(v);
    auto bytes = from_hex("02 00 00");
    EXPECT_EQ(decode_lite_setup(v, bytes, DecodeLimits{}).error().code, ErrorCode::kVersion);
    EXPECT_EQ(decode_announce_ok(v, bytes, DecodeLimits{}).error().code, ErrorCode::kVersion);
    EXPECT_EQ(decode_track_request(v, bytes, DecodeLimits{}).error().code, ErrorCode::kVersion);
    EXPECT_EQ(decode_track_info(v, bytes, DecodeLimits{}).error().code, ErrorCode::kVersion);
  }
}

TEST(Lite05OtherTest, TrackNamesAndPathsRespectLimits) {
  DecodeLimits l;
  l.max_path_size = 3;
  EXPECT_EQ(error_of(decode_track_request, "06 04 72 6f 6f 6d 00", l), ErrorCode::kBoundsExceeded);
  l = DecodeLimits{};
  l.max_message_size = 4;
  EXPECT_EQ(error_of(decode_track_request, "06 04 72 6f 6f 6d 00", l), ErrorCode::kBoundsExceeded);
}

}  // namespace
}  // namespace moqd::wire::lite05_test
