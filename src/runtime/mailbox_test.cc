#include "runtime/mailbox.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

namespace moqd::runtime {
namespace {

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

TEST(MailboxTest, TryPushFailsWhenFullAndLeavesTheTask) {
  Waker consumer;
  Mailbox box(4, consumer);
  EXPECT_EQ(box.capacity(), 4u);
  int ran = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(box.try_push([&] { ++ran; }));
  }
  Task extra = [&] { ran += 100; };
  EXPECT_FALSE(box.try_push(std::move(extra)));
  ASSERT_TRUE(extra);  // untouched: the caller still owns it
  EXPECT_EQ(box.drain(), 4u);
  EXPECT_EQ(ran, 4);
  EXPECT_TRUE(box.try_push(std::move(extra)));
  EXPECT_EQ(box.drain(), 1u);
  EXPECT_EQ(ran, 104);
}

TEST(MailboxTest, CapacityRoundsUpToPowerOfTwo) {
  Waker consumer;
  Mailbox box(5, consumer);
  EXPECT_EQ(box.capacity(), 8u);
}

TEST(MailboxTest, PopsInPushOrderAndDrainHonoursMax) {
  Waker consumer;
  Mailbox box(16, consumer);
  std::vector<int> got;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(box.try_push([&, i] { got.push_back(i); }));
  }
  EXPECT_EQ(box.drain(3), 3u);
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2}));
  Task t;
  ASSERT_TRUE(box.try_pop(t));
  t();
  EXPECT_EQ(box.drain(), 6u);
  EXPECT_TRUE(box.empty());
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(MailboxTest, WakesTheConsumerOnlyWhenItMaySleep) {
  Waker consumer;
  Mailbox box(8, consumer);
  ASSERT_TRUE(box.try_push([] {}));
  EXPECT_FALSE(readable(consumer.fd())) << "awake consumer was signalled";
  consumer.prepare_sleep();
  ASSERT_TRUE(box.try_push([] {}));
  EXPECT_TRUE(readable(consumer.fd()));
  consumer.awake();
  consumer.drain();
  EXPECT_FALSE(readable(consumer.fd()));
}

// One eventfd write per sleep episode, however many pushes it takes: the write is still pending
// for the consumer's epoll_wait. A new episode (the consumer blocked again) is woken again.
TEST(MailboxTest, WakesOncePerSleepEpisode) {
  Waker consumer;
  Mailbox box(16, consumer);
  consumer.prepare_sleep();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(box.try_push([] {}));
  }
  EXPECT_EQ(box.wakes(), 1u);
  uint64_t writes = 0;
  ASSERT_EQ(::read(consumer.fd(), &writes, sizeof writes), static_cast<ssize_t>(sizeof writes));
  EXPECT_EQ(writes, 1u) << "the eventfd counter sums the writes";
  consumer.awake();
  ASSERT_TRUE(box.try_push([] {}));
  EXPECT_EQ(box.wakes(), 1u) << "an awake consumer was signalled";
  consumer.prepare_sleep();
  ASSERT_TRUE(box.try_push([] {}));
  ASSERT_TRUE(box.try_push([] {}));
  EXPECT_EQ(box.wakes(), 2u);
  EXPECT_TRUE(readable(consumer.fd()));
  EXPECT_EQ(box.drain(), 8u);
}

// A deferred push leaves the wake-up owed: nothing is written until flush_wake(), which writes
// one for all of them; a push that wakes at once in the same episode pays the debt, and a debt
// to a consumer that woke meanwhile is dropped.
TEST(MailboxTest, DeferredPushesWakeOnceAtFlush) {
  Waker consumer;
  Mailbox box(16, consumer);
  consumer.prepare_sleep();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(box.try_push([] {}, /*defer_wake=*/true));
  }
  EXPECT_EQ(box.wakes(), 0u) << "a deferred push woke the consumer";
  EXPECT_FALSE(readable(consumer.fd()));
  EXPECT_TRUE(box.wake_owed());
  box.flush_wake();
  EXPECT_EQ(box.wakes(), 1u);
  EXPECT_TRUE(readable(consumer.fd()));
  EXPECT_FALSE(box.wake_owed());
  box.flush_wake();
  EXPECT_EQ(box.wakes(), 1u) << "a flush with nothing owed wrote";
  consumer.awake();
  consumer.drain();
  consumer.prepare_sleep();
  ASSERT_TRUE(box.try_push([] {}, true));
  ASSERT_TRUE(box.try_push([] {}));
  EXPECT_EQ(box.wakes(), 2u);
  box.flush_wake();
  EXPECT_EQ(box.wakes(), 2u) << "the episode was already woken";
  consumer.awake();
  ASSERT_TRUE(box.try_push([] {}, true));
  box.flush_wake();
  EXPECT_EQ(box.wakes(), 2u) << "an awake consumer was signalled";
  EXPECT_EQ(box.drain(), 8u);
}

TEST(MailboxTest, DrainWakesAProducerWaitingForSpace) {
  Waker consumer;
  Waker producer;
  Mailbox box(2, consumer, &producer);
  ASSERT_TRUE(box.try_push([] {}));
  ASSERT_TRUE(box.try_push([] {}));
  ASSERT_FALSE(box.has_space());
  box.wait_for_space();
  EXPECT_FALSE(readable(producer.fd()));
  box.drain(1);
  EXPECT_TRUE(readable(producer.fd()));
  EXPECT_TRUE(box.has_space());
}

TEST(MailboxTest, CrossThreadTasksArriveInOrder) {
  Waker consumer;
  Mailbox box(64, consumer);
  constexpr int kTasks = 200'000;
  std::vector<int> got;
  got.reserve(kTasks);
  // Set when the consumer gives up at its deadline: the producer, spinning on a full box that
  // nobody drains any more, stops too, so the test fails on the count instead of hanging in join.
  std::atomic<bool> gave_up{false};
  std::thread producer([&] {
    for (int i = 0; i < kTasks; ++i) {
      Task t = [&got, i] { got.push_back(i); };
      while (!box.try_push(std::move(t))) {
        if (gave_up.load(std::memory_order_relaxed)) {
          return;
        }
        std::this_thread::yield();
      }
    }
  });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (got.size() < kTasks && std::chrono::steady_clock::now() < deadline) {
    if (box.drain() == 0) {
      std::this_thread::yield();
    }
  }
  gave_up.store(true, std::memory_order_relaxed);
  producer.join();
  box.drain();
  ASSERT_EQ(got.size(), static_cast<size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_EQ(got[i], i);
  }
}

}  // namespace
}  // namespace moqd::runtime
