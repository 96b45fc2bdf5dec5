// Malformed and hostile input to the moq-lite decoders: every case must come back as an error
// with the right code (never a crash, never a large allocation), and nothing here may be mistaken
// for "need more bytes".
#include "wire/lite.h"

#include <gtest/gtest.h>

namespace moqd::wire {
namespace {

template <class R>
::testing::AssertionResult fails_with(const R& r, ErrorCode code) {
  if (r.has_value()) {
    return ::testing::AssertionFailure() << (r->has_value() ? "decoded" : "needs more bytes");
  }
  if (r.error().code != code) {
    return ::testing::AssertionFailure()
           << "code " << error_code_name(r.error().code) << ": " << r.error().detail;
  }
  return ::testing::AssertionSuccess();
}

// Runs `decode(version, bytes, limits)` on hex input.
template <class Fn>
auto run(Fn decode, Version v, std::string_view hex, const DecodeLimits& l = {}) {
  auto bytes = from_hex(hex);
  return decode(v, std::span<const uint8_t>(bytes), l);
}

template <class Fn>
auto run(Fn decode, std::string_view hex, const DecodeLimits& l = {}) {
  auto bytes = from_hex(hex);
  return decode(std::span<const uint8_t>(bytes), l);
}

constexpr Version kLite01 = Version::kLite01;
constexpr Version kLite02 = Version::kLite02;
constexpr Version kLite03 = Version::kLite03;
constexpr Version kLite04 = Version::kLite04;

TEST(LiteDecodeErrorTest, TrailingBytesInsideSizeAreDecodeErrors) {
  EXPECT_TRUE(fails_with(run(decode_group_header, kLite02, "03 00 01 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_subscribe_response, kLite02, "01 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_subscribe_response, kLite01, "02 07 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_announce_please, kLite03, "02 00 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_probe, kLite03, "02 01 01"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_server_setup, "21 00 03 01 00 00"), ErrorCode::kDecode));
}

TEST(LiteDecodeErrorTest, BodyShorterThanItsFieldsIsDecodeError) {
  EXPECT_TRUE(fails_with(run(decode_group_header, kLite02, "01 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_subscribe, kLite03, "05 00 00 00 07 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_announce, kLite02, "02 01 05"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_client_setup, "20 00 01 02"), ErrorCode::kDecode));
}

TEST(LiteDecodeErrorTest, SizeAboveLimitFailsBeforeBodyIsBuffered) {
  // 131072 > the 64 KiB default, with none of the body present.
  EXPECT_TRUE(fails_with(run(decode_subscribe, kLite02, "80 02 00 00"),
                         ErrorCode::kBoundsExceeded));
  DecodeLimits small{.max_message_size = 4};
  EXPECT_TRUE(fails_with(run(decode_group_header, kLite03, "05", small),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_subscribe_response, kLite03, "00 05", small),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_client_setup, "20 00 05", small),
                         ErrorCode::kBoundsExceeded));
}

TEST(LiteDecodeErrorTest, SizeAtLimitWaitsForBody) {
  DecodeLimits small{.max_message_size = 4};
  auto r = run(decode_group_header, kLite03, "04 00", small);
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->has_value());
  // 65535 is under the 64 KiB default: wait for the body.
  auto s = run(decode_server_setup, "21 ff ff");
  ASSERT_TRUE(s.has_value());
  EXPECT_FALSE(s->has_value());
}

TEST(LiteDecodeErrorTest, InvalidBoolIsDecodeError) {
  EXPECT_TRUE(fails_with(run(decode_announce, kLite02, "02 02 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_announce, kLite03, "03 ff 00 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_subscribe, kLite03, "08 00 00 00 07 02 00 00 00"),
                         ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_subscribe_response, kLite04, "00 05 07 02 00 00 00"),
                         ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_subscribe_update, kLite03, "05 07 80 00 00 00"),
                         ErrorCode::kDecode));
}

TEST(LiteDecodeErrorTest, OversizeCountsAreBoundsExceeded) {
  // Counts of 2^32 with a tiny body: must fail on the count, not try to reserve or fill.
  const char* huge = "c0 00 00 01 00 00 00 00";
  EXPECT_TRUE(fails_with(run(decode_announce_init, kLite01, std::string("08 ") + huge),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_announce, kLite03, std::string("0a 01 00 ") + huge),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_announce, kLite04, std::string("0a 01 00 ") + huge),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_client_setup, std::string("20 00 08 ") + huge),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_server_setup, std::string("21 00 09 01 ") + huge),
                         ErrorCode::kBoundsExceeded));
}

TEST(LiteDecodeErrorTest, CountsJustAboveConfiguredLimitsAreBoundsExceeded) {
  DecodeLimits l{.max_versions = 1, .max_parameters = 1, .max_announce_entries = 1, .max_hops = 1};
  EXPECT_TRUE(fails_with(run(decode_announce_init, kLite02, "05 02 01 61 01 62", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_announce, kLite03, "04 01 01 61 02", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_announce, kLite04, "06 01 01 61 02 01 02", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_client_setup, "20 00 04 02 01 02 00", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_server_setup, "21 00 06 01 02 02 00 04 00", l),
                         ErrorCode::kBoundsExceeded));
  // At the limit they decode.
  auto ok = run(decode_announce, kLite04, "05 01 01 61 01 09", l);
  ASSERT_TRUE(ok && *ok);
  EXPECT_EQ((*ok)->value.hops, std::vector<uint64_t>{9});
}

TEST(LiteDecodeErrorTest, OversizeStringsAreBoundsExceeded) {
  DecodeLimits l{.max_path_size = 2, .max_track_name_size = 1, .max_parameter_size = 1};
  EXPECT_TRUE(fails_with(run(decode_announce_please, kLite02, "04 03 61 62 63", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_subscribe, kLite02, "07 00 01 62 02 74 74 05", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_fetch, kLite03, "07 03 61 62 63 00 00 00", l),
                         ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(fails_with(run(decode_client_setup, "20 00 06 00 01 07 02 61 62", l),
                         ErrorCode::kBoundsExceeded));
  // A string length larger than the whole body, but under its limit, is malformed.
  EXPECT_TRUE(fails_with(run(decode_announce_please, kLite02, "01 02"), ErrorCode::kDecode));
}

TEST(LiteDecodeErrorTest, NonMinimalVarintsAreAccepted) {
  auto r = run(decode_group_header, kLite02, "40 0c 80 00 00 02 c0 00 00 00 00 00 00 01");
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->value, (GroupHeader{2, 1}));
  EXPECT_EQ((*r)->consumed, 14u);
  auto s = run(decode_server_setup, "40 21 00 09 c0 00 00 00 ff 0d ad 02 00");
  ASSERT_TRUE(s && *s);
  EXPECT_EQ((*s)->value.version, 0xff0dad02u);
  EXPECT_EQ((*s)->consumed, 13u);
}

TEST(LiteDecodeErrorTest, DuplicateSetupParameterIsRejected) {
  EXPECT_TRUE(fails_with(run(decode_client_setup, "20 00 06 00 02 02 01 02 02"),
                         ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_server_setup, "21 00 08 01 02 07 01 61 07 01 62"),
                         ErrorCode::kDecode));
}

TEST(LiteDecodeErrorTest, WrongSetupTypeIsRejected) {
  EXPECT_TRUE(fails_with(run(decode_client_setup, "21 00 00"), ErrorCode::kDecode));
  EXPECT_TRUE(fails_with(run(decode_server_setup, "20"), ErrorCode::kDecode));
}

TEST(LiteDecodeErrorTest, UnknownSubscribeResponseTypeIsRejected) {
  EXPECT_TRUE(fails_with(run(decode_subscribe_response, kLite03, "02"), ErrorCode::kDecode));
  // A non-minimal type 1 is still SUBSCRIBE_DROP.
  auto drop = run(decode_subscribe_response, kLite04, "40 01 03 01 02 03");
  ASSERT_TRUE(drop && *drop);
  EXPECT_EQ((*drop)->value, SubscribeResponse(SubscribeDrop{1, 2, 3}));
}

TEST(LiteDecodeErrorTest, MessagesMissingFromADraftAreVersionErrors) {
  EXPECT_TRUE(fails_with(run(decode_announce_init, kLite03, ""), ErrorCode::kVersion));
  EXPECT_TRUE(fails_with(run(decode_session_info, kLite04, "01 00"), ErrorCode::kVersion));
  EXPECT_TRUE(fails_with(run(decode_fetch, kLite02, "00"), ErrorCode::kVersion));
  EXPECT_TRUE(fails_with(run(decode_probe, kLite01, "00"), ErrorCode::kVersion));
  EXPECT_TRUE(fails_with(run(decode_goaway, kLite03, "00"), ErrorCode::kVersion));
  EXPECT_TRUE(fails_with(run(decode_subscribe, Version::kTransport16, "00"),
                         ErrorCode::kVersion));
}

TEST(LiteDecodeErrorTest, EncodersWriteNothingForMissingMessages) {
  std::vector<uint8_t> out;
  encode(kLite01, SubscribeDrop{1, 2, 3}, out);
  encode(kLite03, AnnounceInit{{"a"}}, out);
  encode(kLite04, SessionInfo{5}, out);
  encode(kLite02, Fetch{}, out);
  encode(kLite03, Goaway{"x"}, out);
  encode(kLite02, Probe{}, out);
  encode(Version::kTransport14, GroupHeader{}, out);
  EXPECT_TRUE(out.empty());
}

TEST(LiteDecodeErrorTest, SetupBodyOverU16WritesNothing) {
  ServerSetup m{.version = 1, .parameters = {{.key = 1, .bytes = std::string(70000, 'x')}}};
  std::vector<uint8_t> out = {0xaa};
  encode(m, out);
  EXPECT_EQ(out, std::vector<uint8_t>{0xaa});
}

TEST(LiteDecodeErrorTest, DecodingStopsAtMessageEnd) {
  // Two messages back to back: the first decode takes only the first.
  auto r = run(decode_group_header, kLite02, "02 00 01 02 00 02");
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->consumed, 3u);
}

}  // namespace
}  // namespace moqd::wire
