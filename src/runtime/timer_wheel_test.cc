#include "runtime/timer_wheel.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace moqd::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class TimerWheelTest : public ::testing::Test {
 protected:
  Instant start_{Duration{1'000'000'000}};
  Instant now_ = start_;
  TimerWheel wheel_{start_};

  TimerId at(Duration delay, std::function<void()> fn) {
    return wheel_.schedule(now_, delay, std::move(fn));
  }
  size_t advance(Duration d) {
    now_ += d;
    return wheel_.advance(now_);
  }
};

TEST_F(TimerWheelTest, FiresInDeadlineOrderThenScheduleOrder) {
  std::vector<int> order;
  at(milliseconds(30), [&] { order.push_back(30); });
  at(milliseconds(10), [&] { order.push_back(10); });
  at(milliseconds(20), [&] { order.push_back(20); });
  at(milliseconds(10), [&] { order.push_back(11); });
  EXPECT_EQ(advance(milliseconds(50)), 4u);
  EXPECT_EQ(order, (std::vector<int>{10, 11, 20, 30}));
  EXPECT_EQ(wheel_.size(), 0u);
}

TEST_F(TimerWheelTest, NeverFiresEarly) {
  bool fired = false;
  at(Duration(5'500), [&] { fired = true; });
  advance(milliseconds(5));
  EXPECT_FALSE(fired);
  advance(milliseconds(1));
  EXPECT_TRUE(fired);
}

TEST_F(TimerWheelTest, CancelPreventsFiring) {
  bool fired = false;
  TimerId id = at(milliseconds(5), [&] { fired = true; });
  wheel_.cancel(id);
  EXPECT_EQ(wheel_.size(), 0u);
  advance(milliseconds(10));
  EXPECT_FALSE(fired);
}

TEST_F(TimerWheelTest, CancelOfFiredUnknownOrReusedIdIsNoop) {
  int fired = 0;
  TimerId first = at(milliseconds(1), [&] { ++fired; });
  advance(milliseconds(2));
  ASSERT_EQ(fired, 1);
  // The freed node is reused; the stale id must not cancel the new timer.
  TimerId second = at(milliseconds(1), [&] { ++fired; });
  EXPECT_NE(first, second);
  wheel_.cancel(first);
  wheel_.cancel(0);
  wheel_.cancel(0xdeadbeef12345678ull);
  advance(milliseconds(2));
  EXPECT_EQ(fired, 2);
  wheel_.cancel(second);
}

TEST_F(TimerWheelTest, DelayLongerThanOneTurnWaitsForItsTurn) {
  bool fired = false;
  at(seconds(10), [&] { fired = true; });  // the wheel turns every ~4.1 s
  for (int i = 0; i < 99; ++i) {
    advance(milliseconds(100));
    ASSERT_FALSE(fired) << "fired early at step " << i;
  }
  advance(milliseconds(100));
  EXPECT_TRUE(fired);
}

TEST_F(TimerWheelTest, LongJumpFiresEverythingInOrder) {
  std::vector<int> order;
  at(seconds(9), [&] { order.push_back(3); });
  at(milliseconds(1), [&] { order.push_back(1); });
  at(seconds(5), [&] { order.push_back(2); });
  advance(seconds(20));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST_F(TimerWheelTest, ManyTimersFireOnceInDeadlineOrder) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> delay_us(0, 12'000'000);
  constexpr int kTimers = 50'000;
  std::vector<Instant> deadlines;
  std::vector<Instant> fired_at(kTimers);
  std::vector<int> fired_count(kTimers, 0);
  Instant last_deadline = start_;
  bool in_order = true;
  std::vector<TimerId> ids;
  for (int i = 0; i < kTimers; ++i) {
    Duration d(delay_us(rng) + 1);
    deadlines.push_back(now_ + d);
    ids.push_back(at(d, [&, i] {
      ++fired_count[i];
      fired_at[i] = now_;
      // Within one tick, order is by schedule, not by exact microsecond.
      if (deadlines[i] + TimerWheel::kTick < last_deadline) {
        in_order = false;
      }
      last_deadline = std::max(last_deadline, deadlines[i]);
    }));
  }
  for (int i = 0; i < kTimers; i += 10) {
    wheel_.cancel(ids[i]);
  }
  std::uniform_int_distribution<int64_t> step_us(1, 300'000);
  while (wheel_.size() > 0) {
    advance(Duration(step_us(rng)));
  }
  EXPECT_TRUE(in_order);
  for (int i = 0; i < kTimers; ++i) {
    ASSERT_EQ(fired_count[i], i % 10 == 0 ? 0 : 1) << i;
    if (i % 10 != 0) {
      ASSERT_GE(fired_at[i], deadlines[i]) << i;
    }
  }
}

TEST_F(TimerWheelTest, CallbacksMayScheduleAndCancel) {
  std::vector<int> order;
  TimerId victim = 0;
  at(milliseconds(1), [&] {
    order.push_back(1);
    wheel_.cancel(victim);
    at(milliseconds(1), [&] { order.push_back(3); });
  });
  victim = at(milliseconds(1), [&] { order.push_back(2); });
  advance(milliseconds(1));
  EXPECT_EQ(order, (std::vector<int>{1}));
  advance(milliseconds(1));
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
}

TEST_F(TimerWheelTest, ZeroDelayRunsOnNextAdvanceAndCanBeCancelled) {
  int fired = 0;
  at(Duration::zero(), [&] { ++fired; });
  TimerId cancelled = at(Duration::zero(), [&] { fired += 100; });
  EXPECT_EQ(wheel_.time_to_next(now_), Duration::zero());
  wheel_.cancel(cancelled);
  wheel_.advance(now_);
  EXPECT_EQ(fired, 1);
}

TEST_F(TimerWheelTest, TimeToNextIsALowerBound) {
  EXPECT_FALSE(wheel_.time_to_next(now_).has_value());
  at(milliseconds(250), [] {});
  auto next = wheel_.time_to_next(now_);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next, milliseconds(250));
  EXPECT_GE(*next, milliseconds(249));
  at(seconds(60), [] {});
  advance(milliseconds(300));
  next = wheel_.time_to_next(now_);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next, seconds(60));
}

}  // namespace
}  // namespace moqd::runtime
