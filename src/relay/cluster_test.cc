#include "relay/cluster.h"

#include <gtest/gtest.h>

namespace moqd::relay {
namespace {

TEST(ClusterPeerTest, CostIsTakenOutOfTheUrl) {
  auto p = parse_cluster_peer("http://relay-b:4443/?cost=5");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->url, "http://relay-b:4443/");
  EXPECT_EQ(p->cost, 5u);

  p = parse_cluster_peer("https://[::1]:443/room?a=1&cost=2&b=2");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->url, "https://[::1]:443/room?a=1&b=2");
  EXPECT_EQ(p->cost, 2u);

  p = parse_cluster_peer("http://relay-c:4443/");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->url, "http://relay-c:4443/");
  EXPECT_EQ(p->cost, 0u);
}

TEST(ClusterPeerTest, BadUrlsAndCostsAreRefused) {
  EXPECT_FALSE(parse_cluster_peer("relay-b:4443"));
  EXPECT_FALSE(parse_cluster_peer("http://relay-b:4443/?cost=x"));
  EXPECT_FALSE(parse_cluster_peer("http://relay-b:4443/?cost=-1"));
  EXPECT_FALSE(parse_cluster_peer("http://relay-b:4443/?cost=2000000"));
}

TEST(ClusterPeerTest, PeersFileTakesOneUrlPerLineWithComments) {
  std::vector<std::string> errors;
  auto peers = parse_peers_text(
      "# the cluster\n"
      "http://a:4443/\n"
      "\n"
      "  https://b:443/?cost=3   # far away\r\n"
      "not a url\n"
      "http://c:4443/",
      errors);
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0].url, "http://a:4443/");
  EXPECT_EQ(peers[1].url, "https://b:443/");
  EXPECT_EQ(peers[1].cost, 3u);
  EXPECT_EQ(peers[2].url, "http://c:4443/");
  EXPECT_EQ(errors, std::vector<std::string>{"not a url"});
  errors.clear();
  EXPECT_TRUE(parse_peers_text("", errors).empty());
  EXPECT_TRUE(errors.empty());
}

TEST(ClusterPeerTest, HopIdIsStableNonZeroAndSafeForJavaScript) {
  EXPECT_EQ(hop_id_for_node("us-east-1a"), hop_id_for_node("us-east-1a"));
  EXPECT_NE(hop_id_for_node("us-east-1a"), hop_id_for_node("us-east-1b"));
  for (const char* n : {"", "a", "moqd-0", "moqd-1", "relay.example.com"}) {
    uint64_t id = hop_id_for_node(n);
    EXPECT_NE(id, 0u) << n;
    EXPECT_LT(id, uint64_t{1} << 53) << n;  // @moq/lite reads hop ids as u53
    EXPECT_FALSE(model::is_warm_hop(id)) << n;  // the warm bit stays free
  }
}

}  // namespace
}  // namespace moqd::relay
