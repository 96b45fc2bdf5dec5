// The session-side rules of the IETF cluster extension (session/ietf_cluster.h).
#include "session/ietf_cluster.h"

#include "base/codec.h"

#include <gtest/gtest.h>

namespace moqd::session::ietf_cluster {
namespace {

namespace wi = wire::ietf;
constexpr wire::Version k16 = wire::Version::kTransport16;
constexpr wire::Version k17 = wire::Version::kTransport17;
constexpr wire::Version k19 = wire::Version::kTransport19;
constexpr uint64_t kSelf = 0x0a5a2adb5a87d4;

TEST(IetfClusterSession, SetupDeclaresTheHopIdOnlyOnAClusterNodeFrom17) {
  wi::Parameters options;
  add_setup_options(k19, kSelf, options);
  ASSERT_EQ(options.size(), 1u);
  EXPECT_EQ(options[0].type, wi::kSetupRelayHops);
  // @moq/net's bytes for the same origin (NET-0.3.md §4.1): fe 0a5a2adb5a87d4.
  const std::vector<uint8_t> value(options[0].bytes.begin(), options[0].bytes.end());
  EXPECT_EQ(to_hex(value), "fe 0a 5a 2a db 5a 87 d4");
  EXPECT_EQ(wi::relay_hops_origin(k19, options), kSelf);
  wi::Parameters none;
  add_setup_options(k19, 0, none);
  add_setup_options(k16, kSelf, none);
  EXPECT_TRUE(none.empty());
}

TEST(IetfClusterSession, NegotiatedNeedsBothSides) {
  EXPECT_TRUE(negotiated(k17, kSelf, uint64_t{0}));
  EXPECT_TRUE(negotiated(k19, kSelf, uint64_t{42}));
  EXPECT_FALSE(negotiated(k17, kSelf, std::nullopt));
  EXPECT_FALSE(negotiated(k17, 0, uint64_t{42}));
  EXPECT_FALSE(negotiated(k16, kSelf, uint64_t{42}));
}

TEST(IetfClusterSession, AdvertAppendsSelfAndWithholdsPathsThroughThePeer) {
  auto a = advert_for({7, 8}, kSelf, 99);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->hops, (std::vector<uint64_t>{7, 8, kSelf}));
  EXPECT_EQ(a->cost, 2u);
  auto local = advert_for({}, kSelf, 99);
  ASSERT_TRUE(local.has_value());
  EXPECT_EQ(local->hops, std::vector<uint64_t>{kSelf});
  EXPECT_EQ(local->cost, 0u);
  EXPECT_FALSE(advert_for({99, 8}, kSelf, 99).has_value());
  // A peer that declared 0 excludes nothing.
  EXPECT_TRUE(advert_for({0, 8}, kSelf, 0).has_value());
  // 31 upstream hops fit, 32 do not (HOP_PATH holds at most 32 with moqd's own).
  model::Hops hops;
  for (uint64_t i = 1; i <= 31; ++i) {
    hops.push_back(i);
  }
  EXPECT_TRUE(advert_for(hops, kSelf, 0).has_value());
  hops.push_back(32);
  EXPECT_FALSE(advert_for(hops, kSelf, 0).has_value());
  // A route that already crossed moqd is not advertised (it would repeat moqd's id).
  EXPECT_FALSE(advert_for({kSelf, 3}, kSelf, 0).has_value());
}

TEST(IetfClusterSession, InboundLoopsAndViolations) {
  wi::Parameters p;
  ASSERT_TRUE(wi::append_advert(wi::Advert{{5, kSelf}, 4}, p));
  auto in = read_inbound(k17, p, kSelf);
  ASSERT_TRUE(in.has_value());
  EXPECT_TRUE(in->loop);
  EXPECT_EQ(in->cost, 4u);
  in = read_inbound(k17, p, 1234);
  ASSERT_TRUE(in.has_value());
  EXPECT_FALSE(in->loop);
  EXPECT_EQ(in->hops, (model::Hops{5, kSelf}));
  // moqd without a hop id detects no loops.
  in = read_inbound(k17, p, 0);
  ASSERT_TRUE(in.has_value());
  EXPECT_FALSE(in->loop);
  auto missing = read_inbound(k17, {}, kSelf);
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(wi::termination_code(missing.error().code), wi::TerminationCode::kProtocolViolation);
}

}  // namespace
}  // namespace moqd::session::ietf_cluster
