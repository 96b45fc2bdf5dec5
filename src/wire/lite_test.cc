// Byte-exact fixtures for every moq-lite message in every draft that has it. Captured bytes from
// protocol/README.md are used wherever they exist; each fixture is checked in both directions and
// at every truncated length.
#include "wire/lite.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "testing/wire_decode.h"

namespace moqd::wire {

// Test names and failure messages show "moq-lite-02" rather than raw bytes.
void PrintTo(Version v, std::ostream* os) { *os << version_name(v); }

namespace {

using test::canonical;
using test::expect_decodes;

template <class T>
std::string encoded(Version v, const T& m) {
  std::vector<uint8_t> out;
  encode(v, m, out);
  return to_hex(out);
}

template <class T>
std::string encoded(const T& m) {
  std::vector<uint8_t> out;
  encode(m, out);
  return to_hex(out);
}

template <class Fn>
auto with_version(Version v, Fn fn) {
  return [v, fn](std::span<const uint8_t> in) { return fn(v, in, DecodeLimits{}); };
}

// A message the draft lacks: nothing is written and decoding is a version error.
template <class T, class Fn>
void expect_absent(Version v, const T& m, Fn decode) {
  EXPECT_EQ(encoded(v, m), "");
  auto bytes = from_hex("02 00 00");
  auto r = decode(v, std::span<const uint8_t>(bytes), DecodeLimits{});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kVersion);
}

// Expected wire bytes per draft; null = the draft has no such message.
struct ByVersion {
  const char* lite01;
  const char* lite02;
  const char* lite03;
  const char* lite04;

  const char* get(Version v) const {
    switch (v) {
      case Version::kLite01:
        return lite01;
      case Version::kLite02:
        return lite02;
      case Version::kLite03:
        return lite03;
      default:
        return lite04;
    }
  }
};

template <class T, class Fn>
void expect_wire(Version v, const T& m, const ByVersion& wire, Fn decode) {
  const char* hex = wire.get(v);
  if (hex == nullptr) {
    expect_absent(v, m, decode);
    return;
  }
  EXPECT_EQ(encoded(v, m), canonical(hex));
  expect_decodes(hex, with_version(v, decode), m);
}

// Subscribe responses decode to a variant.
template <class T>
void expect_response(Version v, const T& m, const char* hex) {
  if (hex == nullptr) {
    expect_absent(v, m, decode_subscribe_response);
    return;
  }
  EXPECT_EQ(encoded(v, m), canonical(hex));
  expect_decodes(hex, with_version(v, decode_subscribe_response), SubscribeResponse(m));
}

// --- SETUP (README §2.4).

constexpr const char* kCapturedClientSetup =
    "20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e"
    "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";

ClientSetup js_client_setup() {
  ClientSetup m;
  m.versions = {0xff0dad02, 0xff0dad01, 0xff00000e};
  m.parameters = {{.key = 0x02, .value = 42069}, {.key = 0x07, .bytes = "moq-lite-js"}};
  return m;
}

auto client_setup_decoder() {
  return [](std::span<const uint8_t> in) { return decode_client_setup(in, DecodeLimits{}); };
}
auto server_setup_decoder() {
  return [](std::span<const uint8_t> in) { return decode_server_setup(in, DecodeLimits{}); };
}

TEST(LiteSetupTest, EncodesCapturedClientSetup) {
  EXPECT_EQ(encoded(js_client_setup()), canonical(kCapturedClientSetup));
}

TEST(LiteSetupTest, DecodesCapturedClientSetup) {
  expect_decodes(kCapturedClientSetup, client_setup_decoder(), js_client_setup());
}

TEST(LiteSetupTest, ServerSetupSelectingLite02MatchesCapture) {
  ServerSetup m{.version = 0xff0dad02};
  const char* hex = "21 00 09 c0 00 00 00 ff 0d ad 02 00";
  EXPECT_EQ(encoded(m), canonical(hex));
  expect_decodes(hex, server_setup_decoder(), m);
}

TEST(LiteSetupTest, ServerSetupWithParametersRoundTrips) {
  ServerSetup m{.version = 0xff0dad01,
                .parameters = {{.key = 0x02, .value = 100}, {.key = 0x05, .bytes = "ab"}}};
  const char* hex = "21 00 10 c0 00 00 00 ff 0d ad 01 02 02 40 64 05 02 61 62";
  EXPECT_EQ(encoded(m), canonical(hex));
  expect_decodes(hex, server_setup_decoder(), m);
}

TEST(LiteSetupTest, EmptyClientSetupIsTwoCounts) {
  const char* hex = "20 00 02 00 00";
  EXPECT_EQ(encoded(ClientSetup{}), canonical(hex));
  expect_decodes(hex, client_setup_decoder(), ClientSetup{});
}

// --- Messages present in several drafts: one TEST_P over the four lite versions.

class LiteMessageTest : public ::testing::TestWithParam<Version> {};

INSTANTIATE_TEST_SUITE_P(AllLite, LiteMessageTest,
                         ::testing::Values(Version::kLite01, Version::kLite02, Version::kLite03,
                                           Version::kLite04),
                         [](const auto& info) {
                           std::string name = version_name(info.param);
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST_P(LiteMessageTest, SessionInfo) {
  expect_wire(GetParam(), SessionInfo{.bitrate = 100}, {"02 40 64", "02 40 64", nullptr, nullptr},
              decode_session_info);
}

TEST_P(LiteMessageTest, AnnouncePleaseEverything) {
  // lite-02 capture (§3.5.1): 01 00.
  expect_wire(GetParam(), AnnouncePlease{}, {"01 00", "01 00", "01 00", "02 00 00"},
              decode_announce_please);
}

TEST_P(LiteMessageTest, AnnouncePleaseRoom) {
  // lite-03 capture (§3.5.2); lite-04 adds exclude_hop 00.
  const char* room = "05 04 72 6f 6f 6d";
  expect_wire(GetParam(), AnnouncePlease{.prefix = "room"},
              {room, room, room, "06 04 72 6f 6f 6d 00"}, decode_announce_please);
}

TEST_P(LiteMessageTest, AnnounceInit) {
  // lite-02 capture (§3.5.1).
  const char* bob = "05 01 03 62 6f 62";
  expect_wire(GetParam(), AnnounceInit{.suffixes = {"bob"}}, {bob, bob, nullptr, nullptr},
              decode_announce_init);
}

TEST_P(LiteMessageTest, AnnounceInitEmpty) {
  expect_wire(GetParam(), AnnounceInit{}, {"01 00", "01 00", nullptr, nullptr},
              decode_announce_init);
}

TEST_P(LiteMessageTest, AnnounceActive) {
  // lite-03 capture (§3.5.2).
  const char* old = "07 01 05 61 6c 69 63 65";
  const char* hops = "08 01 05 61 6c 69 63 65 00";
  expect_wire(GetParam(), Announce{.active = true, .suffix = "alice"}, {old, old, hops, hops},
              decode_announce);
}

TEST_P(LiteMessageTest, AnnounceEnded) {
  const char* old = "07 00 05 61 6c 69 63 65";
  const char* hops = "08 00 05 61 6c 69 63 65 00";
  expect_wire(GetParam(), Announce{.active = false, .suffix = "alice"}, {old, old, hops, hops},
              decode_announce);
}

TEST_P(LiteMessageTest, SubscribeWithDefaults) {
  // lite-03 capture (§3.5.2); lite-01/02 stop after the priority.
  const char* old = "13 00 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f 07";
  const char* lite03 = "17 00 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f 07 00 00 00 00";
  Subscribe m{.id = 0, .broadcast = "room/alice", .track = "video", .priority = 7};
  expect_wire(GetParam(), m, {old, old, lite03, lite03}, decode_subscribe);
}

TEST_P(LiteMessageTest, SubscribeCapturedLite02) {
  // lite-02 capture (§3.5.1): SUBSCRIBE id=0 "bob" "t" prio 5.
  const char* old = "08 00 03 62 6f 62 01 74 05";
  const char* lite03 = "0c 00 03 62 6f 62 01 74 05 00 00 00 00";
  Subscribe m{.id = 0, .broadcast = "bob", .track = "t", .priority = 5};
  expect_wire(GetParam(), m, {old, old, lite03, lite03}, decode_subscribe);
}

TEST_P(LiteMessageTest, SubscribeUpdate) {
  const char* lite03 = "05 09 00 00 00 00";
  expect_wire(GetParam(), SubscribeUpdate{.priority = 9}, {"01 09", "01 09", lite03, lite03},
              decode_subscribe_update);
}

TEST_P(LiteMessageTest, GroupHeader) {
  // lite-02 capture (§3.5.1): GROUP{0, 1} after the 00 stream type.
  expect_wire(GetParam(), GroupHeader{.subscribe_id = 0, .sequence = 1},
              {"02 00 01", "02 00 01", "02 00 01", "02 00 01"}, decode_group_header);
}

TEST_P(LiteMessageTest, GroupHeaderLargeValues) {
  const char* hex = "0a 7f ff c0 00 00 01 00 00 00 00";
  expect_wire(GetParam(), GroupHeader{.subscribe_id = 16383, .sequence = uint64_t{1} << 32},
              {hex, hex, hex, hex}, decode_group_header);
}

TEST_P(LiteMessageTest, Fetch) {
  const char* hex = "08 03 62 6f 62 01 74 02 0a";
  expect_wire(GetParam(), Fetch{.broadcast = "bob", .track = "t", .priority = 2, .group = 10},
              {nullptr, nullptr, hex, hex}, decode_fetch);
}

TEST_P(LiteMessageTest, Goaway) {
  expect_wire(GetParam(), Goaway{.uri = "moq"}, {nullptr, nullptr, nullptr, "04 03 6d 6f 71"},
              decode_goaway);
}

TEST_P(LiteMessageTest, Probe) {
  expect_wire(GetParam(), Probe{.bitrate = 1000}, {nullptr, nullptr, "02 43 e8", "03 43 e8 00"},
              decode_probe);
}

TEST_P(LiteMessageTest, SubscribeOk) {
  Version v = GetParam();
  // lite-01 `01 <prio>`, lite-02 `00`, lite-03 capture (§3.5.2): type 0 + {7, ordered, 0, 0, 0}.
  const char* lite03 = "00 05 07 01 00 00 00";
  SubscribeOk m{.priority = 7, .ordered = true};
  if (v == Version::kLite01) {
    expect_response(v, SubscribeOk{.priority = 7}, "01 07");
  } else if (v == Version::kLite02) {
    expect_response(v, SubscribeOk{}, "00");
  } else {
    expect_response(v, m, lite03);
  }
}

TEST_P(LiteMessageTest, SubscribeDrop) {
  SubscribeDrop m{.start = 3, .end = 5, .error_code = 24};
  if (!is_lite03_plus(GetParam())) {
    // lite-01/02 responses have no type, so the decoder cannot tell a DROP apart: only the
    // encoder is checked.
    EXPECT_EQ(encoded(GetParam(), m), "");
    return;
  }
  expect_response(GetParam(), m, "01 03 03 05 18");
}

TEST(LiteVersionTest, NonLiteVersionsHaveNoLiteMessages) {
  Version v = Version::kTransport14;
  expect_absent(v, GroupHeader{}, decode_group_header);
  expect_absent(v, Subscribe{}, decode_subscribe);
  expect_absent(v, AnnouncePlease{}, decode_announce_please);
  expect_absent(v, Announce{}, decode_announce);
  expect_absent(v, SubscribeOk{}, decode_subscribe_response);
  expect_absent(v, SubscribeUpdate{}, decode_subscribe_update);
}

// --- Fields only some drafts carry.

class Lite03PlusTest : public ::testing::TestWithParam<Version> {};

INSTANTIATE_TEST_SUITE_P(Lite03Plus, Lite03PlusTest,
                         ::testing::Values(Version::kLite03, Version::kLite04));

TEST_P(Lite03PlusTest, SubscribeStartEndUsePlusOneEncoding) {
  Subscribe m{.id = 1,
              .broadcast = "b",
              .track = "t",
              .priority = 1,
              .ordered = true,
              .max_latency_ms = 100,
              .start_group = 0,
              .end_group = 9};
  const char* hex = "0b 01 01 62 01 74 01 01 40 64 01 0a";
  EXPECT_EQ(encoded(GetParam(), m), canonical(hex));
  expect_decodes(hex, with_version(GetParam(), decode_subscribe), m);
}

TEST_P(Lite03PlusTest, SubscribeOkWithGroups) {
  SubscribeOk m{.priority = 3, .max_latency_ms = 5, .start_group = 63, .end_group = std::nullopt};
  const char* hex = "00 06 03 00 05 40 40 00";
  EXPECT_EQ(encoded(GetParam(), m), canonical(hex));
  expect_decodes(hex, with_version(GetParam(), decode_subscribe_response), SubscribeResponse(m));
}

TEST_P(Lite03PlusTest, SubscribeUpdateWithAllFields) {
  SubscribeUpdate m{.priority = 1, .ordered = true, .max_latency_ms = 0, .start_group = 4,
                    .end_group = 0};
  const char* hex = "05 01 01 00 05 01";
  EXPECT_EQ(encoded(GetParam(), m), canonical(hex));
  expect_decodes(hex, with_version(GetParam(), decode_subscribe_update), m);
}

TEST(Lite03Test, AnnounceCarriesHopCountOnly) {
  Announce m{.active = true, .suffix = "a", .hops = {0, 0}};
  const char* hex = "04 01 01 61 02";
  EXPECT_EQ(encoded(Version::kLite03, Announce{.active = true, .suffix = "a", .hops = {7, 9}}),
            canonical(hex));
  expect_decodes(hex, with_version(Version::kLite03, decode_announce), m);
}

TEST(Lite04Test, AnnounceCarriesHopIds) {
  Announce m{.active = true, .suffix = "a", .hops = {7, 300}};
  const char* hex = "07 01 01 61 02 07 41 2c";
  EXPECT_EQ(encoded(Version::kLite04, m), canonical(hex));
  expect_decodes(hex, with_version(Version::kLite04, decode_announce), m);
}

TEST(Lite04Test, AnnouncePleaseCarriesExcludeHop) {
  AnnouncePlease m{.prefix = "", .exclude_hop = 5};
  EXPECT_EQ(encoded(Version::kLite04, m), "02 00 05");
  expect_decodes("02 00 05", with_version(Version::kLite04, decode_announce_please), m);
}

TEST(Lite04Test, ProbeCarriesRtt) {
  Probe m{.bitrate = 0, .rtt_ms = 20};
  EXPECT_EQ(encoded(Version::kLite04, m), "02 00 14");
  expect_decodes("02 00 14", with_version(Version::kLite04, decode_probe), m);
}

TEST(LiteOlderTest, FieldsTheDraftLacksAreNotWritten) {
  EXPECT_EQ(encoded(Version::kLite02, SubscribeOk{.priority = 7, .ordered = true}), "00");
  EXPECT_EQ(encoded(Version::kLite03, Probe{.bitrate = 1, .rtt_ms = 2}), "01 01");
  EXPECT_EQ(encoded(Version::kLite03, AnnouncePlease{.prefix = "", .exclude_hop = 2}), "01 00");
  EXPECT_EQ(encoded(Version::kLite01, Announce{.active = true, .suffix = "", .hops = {1}}),
            "02 01 00");
}

// --- Whole captured transcripts decode message by message (README §3.5.1, §3.5.2).

TEST(LiteTranscriptTest, Lite02PublisherCapture) {
  Version v = Version::kLite02;
  DecodeLimits l;
  auto announce = from_hex("01 01 00");
  auto type = decode_stream_type(announce);
  ASSERT_TRUE(type && *type);
  EXPECT_EQ((*type)->value, uint64_t(BidiType::kAnnounce));
  auto please = decode_announce_please(v, std::span(announce).subspan((*type)->consumed), l);
  ASSERT_TRUE(please && *please);
  EXPECT_EQ((*please)->value.prefix, "");

  auto group = from_hex("00 02 00 00 05 68 65 6c 6c 6f 03 01 02 03");
  auto header = decode_group_header(v, std::span(group).subspan(1), l);
  ASSERT_TRUE(header && *header);
  EXPECT_EQ((*header)->value, (GroupHeader{0, 0}));
  size_t pos = 1 + (*header)->consumed;
  std::vector<uint64_t> sizes;
  while (pos < group.size()) {
    auto frame = decode_frame_header(std::span(group).subspan(pos));
    ASSERT_TRUE(frame && *frame);
    sizes.push_back((*frame)->value);
    pos += (*frame)->consumed + (*frame)->value;
  }
  EXPECT_EQ(sizes, (std::vector<uint64_t>{5, 3}));
  EXPECT_EQ(pos, group.size());
}

TEST(LiteTranscriptTest, Lite03SubscriberCapture) {
  Version v = Version::kLite03;
  DecodeLimits l;
  auto ended = from_hex("08 00 05 61 6c 69 63 65 00");
  auto announce = decode_announce(v, ended, l);
  ASSERT_TRUE(announce && *announce);
  EXPECT_FALSE((*announce)->value.active);
  EXPECT_EQ((*announce)->value.suffix, "alice");
  EXPECT_TRUE((*announce)->value.hops.empty());
}

// --- Bare varints.

TEST(LiteVarintTest, FrameHeaderEncodesMinimalSize) {
  std::vector<uint8_t> out;
  encode_frame_header(0, out);
  encode_frame_header(16360, out);
  EXPECT_EQ(to_hex(out), "00 7f e8");
}

TEST(LiteVarintTest, FrameHeaderAndStreamTypeDecode) {
  expect_decodes("7f e8", decode_frame_header, uint64_t{16360});
  expect_decodes("80 00 00 05", decode_frame_header, uint64_t{5});
  expect_decodes("20", decode_stream_type, uint64_t(BidiType::kClientSetup));
  expect_decodes("40 04", decode_stream_type, uint64_t(BidiType::kProbe));
}

}  // namespace
}  // namespace moqd::wire
