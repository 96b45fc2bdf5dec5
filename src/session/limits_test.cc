// Per-publisher limits: ingress rate and cached bytes.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "testing/session_fixture.h"

namespace moqd::testing {
namespace limits_test {

// `n` broadcasts, "b0" to "b<n-1>", announced in `origin` until they are destroyed.
std::vector<std::unique_ptr<TestBroadcast>> announce_paths(model::Origin& origin, int n) {
  std::vector<std::unique_ptr<TestBroadcast>> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(std::make_unique<TestBroadcast>(origin, "b" + std::to_string(i)));
  }
  return out;
}

}  // namespace limits_test
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

// max_announced_paths bounds what one publisher may announce. A client discovering a prefix
// receives everyone's broadcasts, so it has its own, larger bound (max_received_announced_paths):
// a publisher announcing one path more than the publisher limit must not close every discovery
// client of its prefix.
TEST(SessionLimitsTest, ClientReceivesMoreAnnouncementsThanOnePublisherMayMake) {
  SessionPairOptions o = lite02();
  o.server.limits.max_announced_paths = 100;
  o.client.limits.max_announced_paths = 100;
  o.client.limits.max_received_announced_paths = 1000;
  SessionPair p(std::move(o));
  p.start();
  auto broadcasts = limits_test::announce_paths(p.server_origin(), 150);
  p.pump();
  EXPECT_FALSE(p.client_handler().is_closed());
  EXPECT_EQ(p.client_handler().announces.size(), 150u);
  broadcasts.resize(50);
  p.pump();
  EXPECT_FALSE(p.client_handler().is_closed());
  EXPECT_EQ(p.client_handler().announces.size(), 250u);
  EXPECT_FALSE(p.client_handler().announces.back().active);
}

TEST(SessionLimitsTest, ClientReceiveBoundClosesPastIt) {
  SessionPairOptions o = lite02();
  o.client.limits.max_received_announced_paths = 120;
  SessionPair p(std::move(o));
  p.start();
  auto broadcasts = limits_test::announce_paths(p.server_origin(), 121);
  p.pump();
  ASSERT_TRUE(p.client_handler().is_closed());
  EXPECT_EQ(p.client_handler().closed_reason->code, ErrorCode::kBoundsExceeded);
}

// The server side still applies the publisher bound to what its peer announces.
TEST(SessionLimitsTest, ServerClosesAPublisherPastMaxAnnouncedPaths) {
  SessionPairOptions o = lite02();
  o.server.limits.max_announced_paths = 10;
  SessionPair p(std::move(o));
  p.start();
  auto broadcasts = limits_test::announce_paths(p.client_origin(), 11);
  p.pump();
  ASSERT_TRUE(p.server_handler().is_closed());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kBoundsExceeded);
}

// --idle-timeout: a session that announces nothing, subscribes to nothing, asks for no discovery
// and sends nothing is closed with timeout; one that does any of these is not.
TEST(SessionLimitsTest, SilentSessionIsClosedAfterIdleTimeout) {
  SessionPairOptions o = lite02();
  o.server.limits.idle_timeout = std::chrono::seconds(2);
  o.client.discover_prefix = std::nullopt;
  SessionPair p(std::move(o));
  p.start();
  ASSERT_TRUE(p.server().is_ready());
  p.advance(std::chrono::milliseconds(1500));
  EXPECT_FALSE(p.server_handler().is_closed());
  p.advance(std::chrono::seconds(2));
  ASSERT_TRUE(p.server_handler().is_closed());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kTimeout);
}

TEST(SessionLimitsTest, PublisherOrDiscoveringClientIsNotIdle) {
  for (bool publish : {true, false}) {
    SessionPairOptions o = lite02();
    o.server.limits.idle_timeout = std::chrono::seconds(2);
    if (publish) {
      o.client.discover_prefix = std::nullopt;
    }
    SessionPair p(std::move(o));
    p.start();
    std::optional<TestBroadcast> alice;
    if (publish) {
      alice.emplace(p.client_origin(), "alice");
    }
    p.advance(std::chrono::seconds(10));
    EXPECT_FALSE(p.server_handler().is_closed()) << (publish ? "publisher" : "discovery");
  }
}

// --max-announce-rate: a publisher flipping one path between active and ended faster than the
// rate (after the burst) is closed with bounds_exceeded; one within it is not.
TEST(SessionLimitsTest, AnnounceFlipFlopsOverTheRateCloseThePublisher) {
  SessionPairOptions o = lite02();
  o.server.limits.max_announce_rate = 100;
  o.server.limits.max_announced_paths = 100;  // burst: 200 changes
  SessionPair p(std::move(o));
  p.start();
  for (int i = 0; i < 300 && !p.server_handler().is_closed(); ++i) {
    TestBroadcast flip(p.client_origin(), "flip");
    p.pump();
  }
  ASSERT_TRUE(p.server_handler().is_closed());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kBoundsExceeded);
}

TEST(SessionLimitsTest, AnnounceChangesWithinTheRateAreKept) {
  SessionPairOptions o = lite02();
  o.server.limits.max_announce_rate = 100;
  o.server.limits.max_announced_paths = 100;
  SessionPair p(std::move(o));
  p.start();
  for (int i = 0; i < 400; ++i) {  // 80 changes per second for 5 s: 400 in all, twice the burst
    TestBroadcast flip(p.client_origin(), "flip");
    p.pump();
    p.advance(std::chrono::milliseconds(25));
  }
  EXPECT_FALSE(p.server_handler().is_closed());
}

// --max-announce-buffer: a discovery listener that stops reading while announcements pile up has
// its stream reset with bounds_exceeded instead of having them queued without bound; the session
// goes on.
TEST(SessionLimitsTest, DiscoveryListenerThatStopsReadingIsClosed) {
  SessionPairOptions o = lite02();
  o.server.limits.max_announce_buffer = 16 * 1024;
  SessionPair p(std::move(o));
  p.start();
  p.hold_wire(true);
  std::vector<std::unique_ptr<TestBroadcast>> broadcasts;
  const std::string long_path(900, 'x');
  auto announce_resets = [&] {
    size_t n = 0;
    for (const auto& f : p.sent_frames(p.server_channel(), transport::websocket::FrameKind::kResetStream)) {
      n += f.code == static_cast<uint64_t>(ErrorCode::kBoundsExceeded) ? 1 : 0;
    }
    return n;
  };
  for (int i = 0; i < 4000; ++i) {
    broadcasts.push_back(
        std::make_unique<TestBroadcast>(p.server_origin(), long_path + "/" + std::to_string(i)));
    p.advance(std::chrono::milliseconds(1));
  }
  p.hold_wire(false);
  p.pump();
  EXPECT_EQ(announce_resets(), 1u);
  EXPECT_FALSE(p.server_handler().is_closed());
  EXPECT_FALSE(p.client_handler().is_closed());
}

}  // namespace
}  // namespace moqd::testing
