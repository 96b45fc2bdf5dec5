#include "base/turn.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

namespace moqd {
namespace {

// Work that records its runs into a shared log and may do more when it runs.
struct Recorder final : TurnWork {
  Recorder(int id, std::vector<int>& log) : id(id), log(log) {}
  void run_turn_work() override {
    log.push_back(id);
    if (then) {
      then();
    }
  }
  int id;
  std::vector<int>& log;
  std::function<void()> then;
};

TEST(TurnQueueTest, RunsInQueueOrderOncePerRequest) {
  std::vector<int> log;
  Recorder a(1, log), b(2, log), c(3, log);
  TurnQueue q;
  q.push(b);
  q.push(a);
  q.push(b);  // already queued: coalesced
  q.push(c);
  EXPECT_TRUE(b.is_queued());
  EXPECT_EQ(q.run(), 3u);
  EXPECT_EQ(log, (std::vector<int>{2, 1, 3}));
  EXPECT_FALSE(b.is_queued());
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.run(), 0u);
}

TEST(TurnQueueTest, WorkQueuedByWorkRunsInTheSameRunWithinTheBudget) {
  std::vector<int> log;
  Recorder a(1, log), b(2, log);
  TurnQueue q;
  a.then = [&] { q.push(b); q.push(a); };  // a re-queues itself behind b
  q.push(a);
  EXPECT_EQ(q.run(3), 3u);
  EXPECT_EQ(log, (std::vector<int>{1, 2, 1}));
  EXPECT_FALSE(q.empty());  // a queued itself again; the budget ran out
  a.then = nullptr;
  EXPECT_EQ(q.run(), 2u);
}

TEST(TurnQueueTest, DestroyingQueuedWorkUnqueuesIt) {
  std::vector<int> log;
  auto doomed = std::make_unique<Recorder>(1, log);
  Recorder keeper(2, log);
  TurnQueue q;
  q.push(*doomed);
  q.push(keeper);
  doomed.reset();
  EXPECT_EQ(q.run(), 1u);
  EXPECT_EQ(log, (std::vector<int>{2}));
}

TEST(TurnQueueTest, WorkMayDestroyOtherQueuedWork) {
  std::vector<int> log;
  auto victim = std::make_unique<Recorder>(2, log);
  Recorder killer(1, log);
  killer.then = [&] { victim.reset(); };
  TurnQueue q;
  q.push(killer);
  q.push(*victim);
  EXPECT_EQ(q.run(), 1u);
  EXPECT_EQ(log, (std::vector<int>{1}));
}

TEST(TurnQueueTest, AQueueDestroyedFirstLeavesItsWorkUnqueued) {
  std::vector<int> log;
  Recorder a(1, log);
  {
    TurnQueue q;
    q.push(a);
  }
  EXPECT_FALSE(a.is_queued());
  TurnQueue other;
  other.push(a);
  EXPECT_EQ(other.run(), 1u);
}

TEST(TurnQueueTest, PopFrontTakesTheOldest) {
  std::vector<int> log;
  Recorder a(1, log), b(2, log);
  TurnQueue q;
  EXPECT_EQ(q.pop_front(), nullptr);
  q.push(a);
  q.push(b);
  EXPECT_EQ(q.pop_front(), &a);
  EXPECT_FALSE(a.is_queued());
  EXPECT_EQ(q.pop_front(), &b);
  EXPECT_TRUE(q.empty());
}

TEST(TurnQueueTest, AppendMovesTheOtherQueueToTheBackInOrder) {
  std::vector<int> log;
  Recorder a(1, log), b(2, log), c(3, log), d(4, log);
  TurnQueue q, other;
  q.append(other);  // both empty
  EXPECT_TRUE(q.empty());
  q.push(a);
  other.push(b);
  other.push(c);
  q.append(other);
  EXPECT_TRUE(other.empty());
  other.push(d);  // the emptied queue is usable again
  q.append(other);
  q.append(q);  // itself: a no-op
  EXPECT_TRUE(b.is_queued());
  EXPECT_EQ(q.run(), 4u);
  EXPECT_EQ(log, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(q.empty());
  EXPECT_TRUE(other.empty());
}

}  // namespace
}  // namespace moqd
