// What a subscription counts as delivered (TrafficCounters frames_out / bytes_out, the status page's
// and Prometheus's figures): every frame once, zero-size frames included, and payload bytes only.
// Subscription::write_group counts a FRAME header only when it completes a zero-size object.
#include <gtest/gtest.h>

#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::SessionPair;
using moqd::testing::TestBroadcast;
using moqd::testing::FrameCollector;
using moqd::testing::VersionCase;

class TrafficCountersTest : public ::testing::TestWithParam<VersionCase> {};

INSTANTIATE_TEST_SUITE_P(Versions, TrafficCountersTest,
                         ::testing::ValuesIn(moqd::testing::all_version_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_P(TrafficCountersTest, EveryDeliveredFrameCountsOnceWithItsPayloadBytes) {
  TrafficCounters server_traffic;
  auto o = moqd::testing::options_for(GetParam());
  o.server.traffic = &server_traffic;
  SessionPair p(std::move(o));
  p.start();
  TestBroadcast pub(p.server_origin(), "bob");
  p.pump();
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.client_origin(), "bob", "chat"));
  p.pump();
  ASSERT_EQ(pub.feed("chat").starts, 1);
  // Zero-size frames first, between and last; one frame split in chunks of 3 bytes.
  const std::vector<std::string> g0 = {"", "hi", "", "sixteen byte msg", ""};
  pub.write_group("chat", 0, g0, /*finish=*/true, /*chunk=*/3);
  p.pump();
  ASSERT_NE(sub.group(0), nullptr);
  ASSERT_EQ(sub.group(0)->frames, g0);
  EXPECT_EQ(server_traffic.frames_out.get(), 5u);
  EXPECT_EQ(server_traffic.bytes_out.get(), 18u);
}

}  // namespace
}  // namespace moqd::session
