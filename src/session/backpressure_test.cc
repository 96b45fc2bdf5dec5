// A subscriber that cannot keep up: skip-ahead (whole old groups dropped with RESET_STREAM kOld,
// by bytes and by age) and the stall timeout (kTimeout), over every moq-lite draft.
#include <gtest/gtest.h>
#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MOQD_TEST_SANITIZER_HEAP 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MOQD_TEST_SANITIZER_HEAP 1
#endif
#ifdef MOQD_TEST_SANITIZER_HEAP
#include <sanitizer/allocator_interface.h>
#endif

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "session/session.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::SessionPair;
using moqd::testing::SessionPairOptions;
using moqd::testing::TestBroadcast;
using moqd::testing::VersionCase;
using moqd::testing::pattern_bytes;
using transport::websocket::FrameKind;
using namespace std::chrono_literals;

// Heap bytes allocated and not yet freed, process-wide (the tests are single-threaded).
size_t heap_in_use() {
#ifdef MOQD_TEST_SANITIZER_HEAP
  return __sanitizer_get_current_allocated_bytes();
#else
  return mallinfo2().uordblks;
#endif
}

class BackpressureTest : public ::testing::TestWithParam<VersionCase> {
 protected:
  // The client publishes "alice"/"video"; the server subscribes. The client's transport keeps
  // little in flight (16 KiB per stream, 64 KiB in the channel) so backlog builds up in the
  // subscription once the wire is held.
  SessionPair& start(SessionLimits limits) {
    SessionPairOptions o = moqd::testing::options_for(GetParam());
    o.client.limits = limits;
    o.client.skips = &skips_;
    o.client_mux.stream_queue_target = 16 << 10;
    o.client_mux.channel_high_water = 64 << 10;
    pair_ = std::make_unique<SessionPair>(std::move(o));
    pair_->start();
    alice_ = std::make_unique<TestBroadcast>(pair_->client_origin(), "alice");
    pair_->pump();
    EXPECT_TRUE(sub_.subscribe(pair_->server_origin(), "alice", "video"));
    pair_->pump();
    EXPECT_EQ(alice_->feed("video").starts, 1);
    return *pair_;
  }
  // The wire is held; the client publishes groups 0 to 9, each one frame of 60,000 bytes of
  // pattern_bytes(60'000, sequence), pumping after each.
  void write_ten_groups_on_a_held_wire() {
    pair_->hold_wire(true);
    for (uint64_t seq = 0; seq < 10; ++seq) {
      alice_->write_group("video", seq, {pattern_bytes(60'000, static_cast<uint8_t>(seq))});
      pair_->pump();
    }
  }
  // The wire is held; group 0 (300,000 bytes) waits `held_for` (only timers run), then group 1
  // ("fresh") is written.
  void write_fresh_group_behind_a_held_one(Duration held_for) {
    pair_->hold_wire(true);
    alice_->write_group("video", 0, {pattern_bytes(300'000)});
    pair_->pump();
    pair_->advance(held_for);
    alice_->write_group("video", 1, {"fresh"});
    pair_->pump();
  }
  size_t old_resets() {
    size_t n = 0;
    for (const auto& f : pair_->sent_frames(pair_->client_channel(), FrameKind::kResetStream)) {
      n += f.code == static_cast<uint64_t>(ErrorCode::kOld) ? 1 : 0;
    }
    return n;
  }
  void expect_both_up() {
    EXPECT_FALSE(pair_->server_handler().is_closed());
    EXPECT_FALSE(pair_->client_handler().is_closed());
  }
  void TearDown() override {
    sub_.unsubscribe();
    alice_.reset();
  }

  SkipCounters skips_;  // outlives pair_
  std::unique_ptr<SessionPair> pair_;
  std::unique_ptr<TestBroadcast> alice_;
  FrameCollector sub_;
};

INSTANTIATE_TEST_SUITE_P(Versions, BackpressureTest,
                         ::testing::ValuesIn(moqd::testing::all_version_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

SessionLimits roomy_limits() {
  SessionLimits l;
  l.max_backlog_bytes = 64ull << 20;
  l.max_backlog_age = std::chrono::hours(1);
  l.stall_timeout = std::chrono::hours(1);
  return l;
}

TEST_P(BackpressureTest, BacklogOverByteLimitDropsOldestWholeGroups) {
  SessionLimits l = roomy_limits();
  l.max_backlog_bytes = 100'000;
  SessionPair& p = start(l);
  write_ten_groups_on_a_held_wire();
  EXPECT_GT(old_resets(), 0u);
  p.hold_wire(false);
  p.pump();
  // The newest group arrives whole; the dropped ones were reset, never delivered half as finished.
  const FrameCollector::Received* newest = sub_.group(9);
  ASSERT_NE(newest, nullptr);
  EXPECT_TRUE(newest->finished);
  EXPECT_EQ(newest->frames, std::vector<std::string>{pattern_bytes(60'000, 9)});
  std::vector<uint64_t> finished = sub_.finished_sequences();
  EXPECT_LT(finished.size(), 10u);
  for (uint64_t seq : finished) {
    EXPECT_EQ(sub_.group(seq)->frames,
              std::vector<std::string>{pattern_bytes(60'000, static_cast<uint8_t>(seq))});
  }
  // Whatever was dropped is older than whatever survived.
  std::vector<uint64_t> aborted = sub_.aborted_sequences();
  if (!aborted.empty() && !finished.empty()) {
    EXPECT_LT(*std::max_element(aborted.begin(), aborted.end()),
              *std::max_element(finished.begin(), finished.end()));
  }
  expect_both_up();
}

TEST_P(BackpressureTest, SkipAheadIsCounted) {
  SessionLimits l = roomy_limits();
  l.max_backlog_bytes = 100'000;
  SessionPair& p = start(l);
  write_ten_groups_on_a_held_wire();
  ASSERT_GT(old_resets(), 0u);
  EXPECT_GT(skips_.events.get(), 0u);
  EXPECT_LE(skips_.events.get(), skips_.groups.get());
  // Every reset group was skipped (groups still waiting for a stream are skipped unseen).
  EXPECT_GE(skips_.groups.get(), old_resets());
  EXPECT_LT(skips_.groups.get(), 10u);  // the newest is kept
  p.hold_wire(false);
  p.pump();
  EXPECT_EQ(sub_.finished_sequences().size() + skips_.groups.get(), 10u);
}

TEST_P(BackpressureTest, NothingDroppedCountsNoSkip) {
  SessionPair& p = start(roomy_limits());
  write_ten_groups_on_a_held_wire();
  p.hold_wire(false);
  p.pump();
  EXPECT_EQ(skips_.events.get(), 0u);
  EXPECT_EQ(skips_.groups.get(), 0u);
}

// A reader that stopped reading altogether: whatever the publisher sends, what the relay holds
// for it stays within the backlog bound (plus the track cache and the transport's buffers).
TEST_P(BackpressureTest, StoppedReaderMemoryStaysBounded) {
  SessionLimits l = roomy_limits();
  l.max_backlog_bytes = 256 << 10;
  SessionPair& p = start(l);
  p.hold_wire(true);
  const std::string frame = pattern_bytes(64 << 10, 7);
  uint64_t seq = 0;
  for (; seq < 20; ++seq) {  // warm up: cache full, transport buffers full
    alice_->write_group("video", seq, {frame});
    p.pump();
  }
  const size_t before = heap_in_use();
  for (; seq < 220; ++seq) {  // 12.5 MiB more
    alice_->write_group("video", seq, {frame});
    p.pump();
  }
  const size_t after = heap_in_use();
  EXPECT_LT(after > before ? after - before : 0, size_t{2} << 20)
      << "heap grew from " << before << " to " << after;
  EXPECT_GT(skips_.groups.get(), 150u);
  p.hold_wire(false);
  p.pump();
  ASSERT_NE(sub_.group(219), nullptr);
  EXPECT_TRUE(sub_.group(219)->finished);
  expect_both_up();
}

TEST_P(BackpressureTest, BacklogWithinLimitsDropsNothing) {
  SessionPair& p = start(roomy_limits());
  write_ten_groups_on_a_held_wire();
  p.hold_wire(false);
  p.pump();
  EXPECT_EQ(old_resets(), 0u);
  EXPECT_EQ(sub_.finished_sequences().size(), 10u);
}

TEST_P(BackpressureTest, BacklogOlderThanMaxAgeIsDropped) {
  SessionLimits l = roomy_limits();
  l.max_backlog_age = 1s;
  SessionPair& p = start(l);
  write_fresh_group_behind_a_held_one(1500ms);
  EXPECT_EQ(old_resets(), 1u);
  p.hold_wire(false);
  p.pump();
  ASSERT_NE(sub_.group(1), nullptr);
  EXPECT_TRUE(sub_.group(1)->finished);
  EXPECT_EQ(sub_.group(1)->frames, std::vector<std::string>{"fresh"});
  ASSERT_NE(sub_.group(0), nullptr);
  EXPECT_FALSE(sub_.group(0)->finished);
  expect_both_up();
}

TEST_P(BackpressureTest, BacklogYoungerThanMaxAgeIsKept) {
  SessionLimits l = roomy_limits();
  l.max_backlog_age = 1s;
  SessionPair& p = start(l);
  write_fresh_group_behind_a_held_one(500ms);
  p.hold_wire(false);
  p.pump();
  EXPECT_EQ(old_resets(), 0u);
  ASSERT_NE(sub_.group(0), nullptr);
  EXPECT_TRUE(sub_.group(0)->finished);
  EXPECT_EQ(sub_.group(0)->frames, std::vector<std::string>{pattern_bytes(300'000)});
}

TEST_P(BackpressureTest, ReaderWithoutProgressClosesTheSessionWithTimeout) {
  SessionLimits l = roomy_limits();
  l.stall_timeout = 2s;
  SessionPair& p = start(l);
  p.hold_wire(true);
  alice_->write_group("video", 0, {pattern_bytes(500'000)});
  p.pump();
  p.advance(1500ms);
  EXPECT_FALSE(p.client_handler().is_closed());
  p.advance(1500ms);
  p.hold_wire(false);
  p.pump();
  ASSERT_TRUE(p.client_handler().closed_reason.has_value());
  EXPECT_EQ(p.client_handler().closed_reason->code, ErrorCode::kTimeout);
  ASSERT_TRUE(p.server_handler().closed_reason.has_value());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kTimeout);
}

TEST_P(BackpressureTest, SlowButProgressingReaderIsNotClosed) {
  SessionLimits l = roomy_limits();
  l.stall_timeout = 2s;
  SessionPair& p = start(l);
  p.hold_wire(true);
  const std::string big = pattern_bytes(2 << 20, 3);
  alice_->write_group("video", 0, {big});
  p.pump();
  for (int i = 0; i < 20; ++i) {
    p.advance(1s);
    p.deliver_some(8);
  }
  EXPECT_FALSE(p.client_handler().is_closed());
  EXPECT_FALSE(p.server_handler().is_closed());
  ASSERT_NE(sub_.group(0), nullptr);
  EXPECT_FALSE(sub_.group(0)->finished);  // slow indeed
  p.hold_wire(false);
  p.pump();
  EXPECT_TRUE(sub_.group(0)->finished);
  EXPECT_TRUE(sub_.group(0)->frames == std::vector<std::string>{big});
  expect_both_up();
}

TEST_P(BackpressureTest, IdleTrackIsNeverStalled) {
  SessionLimits l = roomy_limits();
  l.stall_timeout = 2s;
  SessionPair& p = start(l);
  p.advance(20s);
  expect_both_up();
  // Everything delivered, then a long quiet time with the wire held: nothing is waiting.
  alice_->write_group("video", 0, {pattern_bytes(50'000)});
  p.pump();
  p.hold_wire(true);
  p.advance(20s);
  p.hold_wire(false);
  p.pump();
  expect_both_up();
  EXPECT_EQ(sub_.finished_sequences(), std::vector<uint64_t>{0});
}

TEST_P(BackpressureTest, StallTimeCountsFromWhenDataBecameAvailable) {
  SessionLimits l = roomy_limits();
  l.stall_timeout = 2s;
  SessionPair& p = start(l);
  p.advance(20s);  // idle: no data
  p.hold_wire(true);
  alice_->write_group("video", 0, {pattern_bytes(500'000)});
  p.pump();
  p.advance(1500ms);
  EXPECT_FALSE(p.client_handler().is_closed());
  p.hold_wire(false);
  p.pump();
  expect_both_up();
  EXPECT_EQ(sub_.finished_sequences(), std::vector<uint64_t>{0});
}

}  // namespace
}  // namespace moqd::session
