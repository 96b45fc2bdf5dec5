// Per-publisher limits: ingress rate and cached bytes.
#include <gtest/gtest.h>

#include "testing/session_fixture.h"

namespace moqd::testing {
namespace {

using std::chrono::milliseconds;

SessionPairOptions lite02() {
  SessionPairOptions o;
  o.protocol = "";
  return o;
}

TEST(SessionLimitsTest, PublisherFasterThanMaxPublisherRateIsClosedWithBoundsExceeded) {
  SessionPairOptions o = lite02();
  o.server.limits.max_publisher_rate = 100'000;  // bytes per second, one second of burst
  SessionPair p(std::move(o));
  p.start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  // Within the burst: accepted.
  alice.write_group("video", 0, {pattern_bytes(60'000)});
  p.pump();
  EXPECT_FALSE(p.server_handler().is_closed());
  // 40 kB are left; half a second adds 50 kB, so 95 kB is too much.
  p.advance(milliseconds(500));
  alice.write_group("video", 1, {pattern_bytes(95'000)});
  p.pump();
  ASSERT_TRUE(p.server_handler().is_closed());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kBoundsExceeded);
}

TEST(SessionLimitsTest, PublisherAtItsRateIsNotClosed) {
  SessionPairOptions o = lite02();
  o.server.limits.max_publisher_rate = 100'000;
  SessionPair p(std::move(o));
  p.start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  for (uint64_t i = 0; i < 20; ++i) {
    alice.write_group("video", i, {pattern_bytes(45'000)});  // 90 kB/s
    p.pump();
    p.advance(milliseconds(500));
  }
  EXPECT_FALSE(p.server_handler().is_closed());
  EXPECT_EQ(sub.finished_sequences().size(), 20u);
}

TEST(SessionLimitsTest, PublisherCacheIsBoundedByMaxPublisherCache) {
  SessionPairOptions o = lite02();
  o.server.limits.max_publisher_cache = 250'000;
  SessionPair p(std::move(o));
  p.start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  FrameCollector video;
  FrameCollector audio;
  ASSERT_TRUE(video.subscribe(p.server_origin(), "alice", "video"));
  ASSERT_TRUE(audio.subscribe(p.server_origin(), "alice", "audio"));
  p.pump();
  for (uint64_t i = 0; i < 4; ++i) {
    alice.write_group("video", i, {pattern_bytes(50'000)});
    alice.write_group("audio", i, {pattern_bytes(50'000)});
    p.pump();
  }
  const model::CacheBudget* budget = p.server().cache_budget();
  ASSERT_NE(budget, nullptr);
  EXPECT_LE(budget->used(), 250'000u);
  EXPECT_GT(budget->evictions(), 0u);
  // Subscribers still received every group: eviction only shortens what late joiners find.
  EXPECT_EQ(video.finished_sequences().size(), 4u);
  EXPECT_EQ(audio.finished_sequences().size(), 4u);
}

}  // namespace
}  // namespace moqd::testing
