#include "relay/cluster_dns.h"

#include <gtest/gtest.h>

namespace moqd::relay {
namespace {

TEST(ClusterDnsTest, UrlNamesTheHostAndKeepsTheRest) {
  auto d = parse_cluster_dns("http://moqd.media.svc:4443/room?a=1&cost=3");
  ASSERT_TRUE(d);
  EXPECT_EQ(d->name, "moqd.media.svc");
  EXPECT_EQ(d->cost, 3u);
  auto v4 = d->peer_at("10.0.0.7");
  EXPECT_EQ(v4.url, "http://10.0.0.7:4443/room?a=1");
  EXPECT_EQ(v4.cost, 3u);
  EXPECT_EQ(d->peer_at("fd00::7").url, "http://[fd00::7]:4443/room?a=1");
}

TEST(ClusterDnsTest, BadUrlsAreRefused) {
  EXPECT_FALSE(parse_cluster_dns("moqd:4443"));
  EXPECT_FALSE(parse_cluster_dns("http://:4443/"));
  EXPECT_FALSE(parse_cluster_dns("http://moqd:4443/?cost=x"));
}

TEST(ClusterDnsTest, OwnAddressesAreRecognised) {
  SelfAddresses self;
  self.bound = {{"127.0.0.5", 4443}, {"::", 5000}};
  self.interfaces = {"127.0.0.1", "10.1.2.3", "fd00::9"};
  EXPECT_TRUE(self.is_self("127.0.0.5", 4443));
  EXPECT_FALSE(self.is_self("127.0.0.5", 4444));  // another port: another relay
  EXPECT_FALSE(self.is_self("127.0.0.6", 4443));
  EXPECT_FALSE(self.is_self("10.1.2.3", 4443));  // 4443 is bound on 127.0.0.5 only
  EXPECT_TRUE(self.is_self("10.1.2.3", 5000));   // the wildcard's port, an interface address
  EXPECT_TRUE(self.is_self("fd00::9", 5000));
  EXPECT_FALSE(self.is_self("10.9.9.9", 5000));  // not an interface of ours
}

}  // namespace
}  // namespace moqd::relay
