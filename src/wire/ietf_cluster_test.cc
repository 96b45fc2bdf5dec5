// The cluster extension's advertisement parameters (wire/ietf_cluster.h) and the extended
// NAMESPACE. "JS" fixtures are the bytes @moq/net 0.3.4's own encoders write:
// PublishNamespace / SubscribeNamespaceEntry.encode (ietf/publish_namespace.js,
// ietf/subscribe_namespace.js) with Cluster.intoParams (ietf/cluster.js) and varint.js
// encodeLeadingOnes, run in node on tests/interop's node_modules.
#include "wire/ietf_cluster.h"

#include <gtest/gtest.h>

#include "testing/ietf_wire.h"

namespace moqd::wire::ietf::cluster_test {

using test::expect_round_trip;
namespace {

constexpr Version k16 = Version::kTransport16;
constexpr Version k17 = Version::kTransport17;
constexpr Version k18 = Version::kTransport18;
constexpr Version k20 = Version::kTransport20;

std::string str(std::string_view hex) {
  auto b = from_hex(hex);
  return std::string(b.begin(), b.end());
}

ParseResult<ControlMessage> decode_hex(Version v, std::string_view hex) {
  auto bytes = from_hex(hex);
  return decode_control(v, std::span<const uint8_t>(bytes), Limits{});
}

Parameters advert_params(const Advert& a) {
  Parameters p;
  EXPECT_TRUE(append_advert(a, p));
  return p;
}

TEST(IetfCluster, JsPublishNamespaceWithHopPathAndRouteCost) {
  // JS: new PublishNamespace({requestId: 2, trackNamespace: "room/cam",
  //   cluster: {hops: [0x1234, 5], cost: 3}}), d17 (with the request id delta) and d18/20.
  PublishNamespace m;
  m.request_id = 2;
  m.ns = {"room", "cam"};
  m.params = advert_params(Advert{{0x1234, 5}, 3});
  expect_round_trip(k17, "06 0016 02 00 02 04726f6f6d 0363616d 02 c40b57 03 9234 05 01 03", m);
  expect_round_trip(k18, "06 0015 02 02 04726f6f6d 0363616d 02 c40b57 03 9234 05 01 03", m);
  expect_round_trip(k20, "06 0015 02 02 04726f6f6d 0363616d 02 c40b57 03 9234 05 01 03", m);
  auto a = read_advert(k18, m.params);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (Advert{{0x1234, 5}, 3}));
}

TEST(IetfCluster, JsExtendedNamespaceZeroCostSendsNoRouteCost) {
  // JS: new SubscribeNamespaceEntry({suffix: "cam", cluster: {hops: [0x0a5a2adb5a87d4], cost: 0}})
  // on 17, 18 and 20 (the same bytes): the 8-byte leading-ones hop, no ROUTE_COST.
  Namespace n;
  n.suffix = {"cam"};
  n.extended = true;
  n.params = advert_params(Advert{{0x0a5a2adb5a87d4}, 0});
  for (Version v : {k17, k18, k20}) {
    expect_round_trip(v, "08 0012 01 0363616d 01 c40b57 08 fe0a5a2adb5a87d4", n);
  }
}

TEST(IetfCluster, JsHopInTheSevenByteRangeIsWrittenInEightBytesAndZerosMayRepeat) {
  // JS: SubscribeNamespaceEntry({suffix: "a", cluster: {hops: [2^45, 0, 0, 127], cost: 300}}),
  // d18. @moq/net writes 2^42..2^49 in 8 bytes (never d18's 7-byte 1111110x form); so does moqd.
  Namespace n;
  n.suffix = {"a"};
  n.extended = true;
  n.params = advert_params(Advert{{uint64_t{1} << 45, 0, 0, 127}, 300});
  expect_round_trip(k18, "08 0016 01 0161 02 c40b57 0b fe00200000000000 00 00 7f 01 812c", n);
  // d18 also reads the 7-byte form of the same hop.
  auto hops = decode_hop_path(k18, str("fc200000000000"));
  ASSERT_TRUE(hops.has_value());
  EXPECT_EQ(*hops, std::vector<uint64_t>{uint64_t{1} << 45});
  // d17 does not (1111110x is invalid there).
  EXPECT_FALSE(decode_hop_path(k17, str("fc200000000000")).has_value());
}

TEST(IetfCluster, BaseNamespaceStaysBaseAndDoneIsNeverExtended) {
  Namespace n;
  n.suffix = {"cam"};
  expect_round_trip(k18, "08 0005 01 0363616d", n);
  Namespace done;
  done.done = true;
  done.suffix = {"cam"};
  done.extended = true;
  std::vector<uint8_t> out;
  EXPECT_FALSE(encode(k18, done, out));
  // d16 NAMESPACE has no extended form: bytes after the suffix do not fill the message.
  EXPECT_FALSE(decode_hex(k16, "08 0008 01 0363616d 01 00 00 00").has_value());
}

TEST(IetfCluster, MalformedHopPathsAreProtocolViolations) {
  struct Case {
    const char* hex;
    const char* why;
  };
  const Case cases[] = {
      {"", "empty"},
      {"05 06 05", "non-zero hop twice"},
      {"92", "entry cut short by the length"},
      {"0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f2021", "33 hops"},
  };
  for (const auto& c : cases) {
    auto r = decode_hop_path(k18, str(c.hex));
    ASSERT_FALSE(r.has_value()) << c.why;
    EXPECT_EQ(r.error().code, ErrorCode::kProtocolViolation) << c.why;
    EXPECT_EQ(termination_code(r.error().code), TerminationCode::kProtocolViolation) << c.why;
  }
  // 32 hops, and repeated zeros, are fine.
  auto ok = decode_hop_path(
      k18, str("0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"));
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->size(), 32u);
  EXPECT_TRUE(decode_hop_path(k17, str("00 00 07")).has_value());
  // Not before d17.
  EXPECT_EQ(decode_hop_path(k16, str("05")).error().code, ErrorCode::kVersion);
}

TEST(IetfCluster, ReadAdvertWantsHopPath) {
  Parameters none;
  none.push_back(Parameter{kParamRouteCost, 4, {}});
  auto r = read_advert(k18, none);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kProtocolViolation);
  Parameters bad;
  bad.push_back(Parameter{kParamHopPath, 0, str("07 07")});
  EXPECT_FALSE(read_advert(k18, bad).has_value());
}

TEST(IetfCluster, AppendAdvertRefusesAPathNoReceiverAccepts) {
  Parameters p;
  EXPECT_FALSE(append_advert(Advert{{}, 0}, p));
  EXPECT_FALSE(append_advert(Advert{{3, 4, 3}, 0}, p));
  EXPECT_FALSE(append_advert(Advert{std::vector<uint64_t>(33, 0), 0}, p));
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(append_advert(Advert{std::vector<uint64_t>(32, 0), 0}, p));
}

TEST(IetfCluster, ExtendedNamespaceRejectsMalformedParametersAsTheDraftDoes) {
  // A parameter NAMESPACE may not carry (AUTHORIZATION_TOKEN 0x03) on d17+: unknown there.
  auto r = decode_hex(k18, "08 0009 01 0363616d 01 03 01 00");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(termination_code(r.error().code), TerminationCode::kProtocolViolation);
  // HOP_PATH twice.
  r = decode_hex(k18, "08 000e 01 0363616d 02 c40b57 01 05 00 01 06");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(termination_code(r.error().code), TerminationCode::kProtocolViolation);
}

}  // namespace
}  // namespace moqd::wire::ietf::cluster_test
