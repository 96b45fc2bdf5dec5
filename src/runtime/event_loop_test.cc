#include "runtime/event_loop.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace moqd::runtime {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class EventLoopTest : public ::testing::Test {
 protected:
  EventLoop loop_;
};

TEST_F(EventLoopTest, RunUntilReturnsOncePredicateHolds) {
  bool fired = false;
  loop_.schedule(milliseconds(5), [&] { fired = true; });
  EXPECT_TRUE(loop_.run_until([&] { return fired; }, seconds(5)));
}

TEST_F(EventLoopTest, RunUntilGivesUpAtDeadline) {
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(loop_.run_until([] { return false; }, milliseconds(30)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(30));
}

TEST_F(EventLoopTest, TimersFireInOrderAndCancelWorks) {
  std::vector<int> order;
  loop_.schedule(milliseconds(20), [&] { order.push_back(2); });
  TimerId gone = loop_.schedule(milliseconds(10), [&] { order.push_back(99); });
  loop_.schedule(milliseconds(5), [&] { order.push_back(1); });
  loop_.cancel(gone);
  loop_.cancel(gone);
  EXPECT_TRUE(loop_.run_until([&] { return order.size() == 2; }, seconds(5)));
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST_F(EventLoopTest, NowAdvancesAcrossIterations) {
  Instant before = loop_.now();
  bool fired = false;
  loop_.schedule(milliseconds(3), [&] { fired = true; });
  ASSERT_TRUE(loop_.run_until([&] { return fired; }, seconds(5)));
  EXPECT_GE(loop_.now() - before, milliseconds(3));
}

TEST_F(EventLoopTest, DeferRunsAfterTheCurrentCallbackInOrder) {
  std::vector<int> order;
  loop_.schedule(Duration::zero(), [&] {
    loop_.defer([&] {
      order.push_back(2);
      loop_.defer([&] { order.push_back(4); });
    });
    loop_.defer([&] { order.push_back(3); });
    order.push_back(1);
  });
  EXPECT_TRUE(loop_.run_until([&] { return order.size() == 4; }, seconds(5)));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
}

class EventFdHandler : public IoHandler {
 public:
  explicit EventFdHandler(unsigned initial = 1)
      : fd(::eventfd(initial, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~EventFdHandler() override { ::close(fd); }
  void on_io(uint32_t) override {
    ++calls;
    if (on_call) {
      on_call();
    }
  }
  int fd;
  int calls = 0;
  std::function<void()> on_call;
};

TEST_F(EventLoopTest, RemovedFdHandlerIsNotCalledEvenInTheSameBatch) {
  // Both fds are readable, so one epoll_wait returns both; whichever runs first removes the other.
  EventFdHandler a;
  EventFdHandler b;
  a.on_call = [&] { loop_.remove(b.fd); loop_.remove(a.fd); };
  b.on_call = [&] { loop_.remove(a.fd); loop_.remove(b.fd); };
  ASSERT_TRUE(loop_.add(a.fd, EPOLLIN, &a));
  ASSERT_TRUE(loop_.add(b.fd, EPOLLIN, &b));
  EXPECT_TRUE(loop_.run_until([&] { return a.calls + b.calls > 0; }, seconds(5)));
  loop_.run_until([] { return false; }, milliseconds(20));
  EXPECT_EQ(a.calls + b.calls, 1);
}

TEST_F(EventLoopTest, FdReaddedInTheSameBatchDropsTheStaleEvent) {
  EventFdHandler a;
  EventFdHandler b;
  EventFdHandler c(0);  // replaces b's registration under a new generation; never readable
  a.on_call = [&] {
    loop_.remove(a.fd);
    loop_.remove(b.fd);
    int dup = ::dup2(c.fd, b.fd);
    ASSERT_EQ(dup, b.fd);
    ASSERT_TRUE(loop_.add(b.fd, EPOLLIN, &c));
  };
  b.on_call = a.on_call;
  ASSERT_TRUE(loop_.add(a.fd, EPOLLIN, &a));
  ASSERT_TRUE(loop_.add(b.fd, EPOLLIN, &b));
  ASSERT_TRUE(loop_.run_until([&] { return a.calls + b.calls > 0; }, seconds(5)));
  loop_.run_until([] { return false; }, milliseconds(20));
  EXPECT_EQ(a.calls + b.calls, 1);
  EXPECT_EQ(c.calls, 0) << "the stale event of the old registration reached the new handler";
  loop_.remove(b.fd);
}

TEST_F(EventLoopTest, AddRejectsBadFdAndModifyRejectsUnknownFd) {
  EventFdHandler a;
  EXPECT_FALSE(loop_.add(-1, EPOLLIN, &a));
  EXPECT_FALSE(loop_.modify(a.fd, EPOLLIN, &a));
  loop_.remove(a.fd);  // unknown: ignored
}

TEST_F(EventLoopTest, InjectAndStopFromAnotherThread) {
  std::atomic<bool> ran{false};
  std::thread other([&] {
    loop_.inject([&] { ran.store(true); });
    loop_.inject([&] { loop_.stop(); });
  });
  loop_.run();
  other.join();
  EXPECT_TRUE(ran.load());
}

// The Waker's eventfd is watched edge-triggered and never read back: each wake-up must still wake
// a blocked loop, and an idle loop must block rather than find the eventfd readable forever.
TEST_F(EventLoopTest, EveryWakeUpWakesABlockedLoopAndAnIdleLoopBlocks) {
  constexpr int kWakes = 200;
  std::atomic<int> ran{0};
  std::thread runner([&] { loop_.run(); });
  auto wait = [](const std::function<bool()>& pred) {
    auto deadline = std::chrono::steady_clock::now() + seconds(10);
    while (!pred() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    return pred();
  };
  bool all = true;
  for (int i = 0; i < kWakes && all; ++i) {
    // The loop flagged a sleep episode: it found nothing to do and is (about to be) blocked.
    all = wait([&] { return loop_.waker().sleep_episode() != 0; });
    loop_.inject([&] { ran.fetch_add(1); });
    all = all && wait([&] { return ran.load() == i + 1; });
  }
  const uint64_t polls = loop_.polls();
  loop_.stop();
  runner.join();
  EXPECT_EQ(ran.load(), kWakes) << "a wake-up did not wake the blocked loop";
  EXPECT_LE(polls, static_cast<uint64_t>(4 * kWakes))
      << "the idle loop kept polling: its eventfd stayed readable";
}

TEST_F(EventLoopTest, StopBeforeRunReturnsAtOnce) {
  bool timer_ran = false;
  loop_.schedule(std::chrono::milliseconds(0), [&] { timer_ran = true; });
  loop_.stop();
  auto done = std::async(std::launch::async, [&] { loop_.run(); });
  bool returned = done.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  if (!returned) {
    loop_.stop();  // a stop() that run() honours only once running: end it, then fail
    done.wait();
  }
  EXPECT_TRUE(returned) << "run() after stop() did not return";
  EXPECT_FALSE(timer_ran) << "run() after stop() ran an iteration";
}


// Turn work that logs its runs and may do more when it runs.
struct LoggedWork final : TurnWork {
  LoggedWork(std::string name, std::vector<std::string>& log) : name(std::move(name)), log(log) {}
  void run_turn_work() override {
    log.push_back(name);
    if (then) {
      then();
    }
  }
  std::string name;
  std::vector<std::string>& log;
  std::function<void()> then;
};

TEST_F(EventLoopTest, TurnWorkRunsOnceAfterTheTurnsTimersAndFlushesLast) {
  std::vector<std::string> log;
  LoggedWork conn("conn", log), viewer("viewer", log), socket("socket", log);
  conn.then = [&] {
    loop_.at_turn_flush(socket);
    loop_.at_turn_end(viewer);  // queued by work: runs in the same turn, before the flush
  };
  viewer.then = [&] { loop_.at_turn_flush(socket); };
  loop_.schedule(Duration::zero(), [&] {
    log.push_back("timer1");
    loop_.at_turn_end(conn);
  });
  loop_.schedule(Duration::zero(), [&] {
    log.push_back("timer2");
    loop_.at_turn_end(conn);  // coalesced
  });
  loop_.run_once(milliseconds(100));
  EXPECT_EQ(log, (std::vector<std::string>{"timer1", "timer2", "conn", "viewer", "socket"}));
}

TEST_F(EventLoopTest, AFlushThatWakesWorkRunsItInTheSameTurn) {
  std::vector<std::string> log;
  LoggedWork writer("writer", log), socket("socket", log);
  socket.then = [&] {
    if (log.size() == 1) {
      loop_.at_turn_end(writer);  // the kernel took the batch: the parked writer goes again
    }
  };
  writer.then = [&] { loop_.at_turn_flush(socket); };
  loop_.at_turn_flush(socket);
  loop_.run_once(milliseconds(100));
  EXPECT_EQ(log, (std::vector<std::string>{"socket", "writer", "socket"}));
}

TEST_F(EventLoopTest, WorkThatRequeuesItselfRunsAgainWithoutWaitingForEvents) {
  std::vector<std::string> log;
  LoggedWork w("w", log);
  int runs = 0;
  w.then = [&] {
    if (++runs < 3) {
      loop_.at_turn_end(w);
    }
  };
  loop_.at_turn_end(w);
  auto start = std::chrono::steady_clock::now();
  loop_.run_once(seconds(5));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(1));  // did not wait for events
  EXPECT_EQ(runs, 3);
}

}  // namespace
}  // namespace moqd::runtime
