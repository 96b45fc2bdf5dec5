#include "runtime/event_loop.h"

#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <future>
#include <memory>
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

// A fan-out burst: one publisher's turn work readies kViewers write passes. Slices of 8 items (no
// time bound, so the test counts work, not wall time).
class TurnSliceTest : public EventLoopTest {
 protected:
  static constexpr size_t kViewers = 200;
  static constexpr size_t kSlice = 8;
  void SetUp() override {
    loop_.set_turn_slice({kSlice, std::chrono::hours(1)});
    for (size_t i = 0; i < kViewers; ++i) {
      viewers_.push_back(std::make_unique<LoggedWork>("v" + std::to_string(i), log_));
      viewers_.back()->then = [this] { ++viewer_runs_; };
    }
    publisher_.then = [this] {
      for (auto& v : viewers_) {
        loop_.at_turn_end(*v);
      }
    };
  }
  size_t index_of(const std::string& name) const {
    return static_cast<size_t>(std::find(log_.begin(), log_.end(), name) - log_.begin());
  }

  std::vector<std::string> log_;
  LoggedWork publisher_{"publisher", log_};
  std::vector<std::unique_ptr<LoggedWork>> viewers_;
  size_t viewer_runs_ = 0;
};

TEST_F(TurnSliceTest, AnotherTracksPacketIsServedWhileTheBurstIsStillInProgress) {
  // The bystander track: its publisher's packet arrives (the fd turns readable) once the burst's
  // first write pass has run; its connection then readies its one viewer's write pass.
  LoggedWork bystander_viewer("bystander-viewer", log_);
  LoggedWork bystander("bystander", log_);
  bystander.then = [&] { loop_.at_turn_end(bystander_viewer); };
  size_t viewers_at_arrival = SIZE_MAX;
  size_t viewers_at_delivery = SIZE_MAX;
  bystander_viewer.then = [&] { viewers_at_delivery = viewer_runs_; };
  EventFdHandler packet(0);
  packet.on_call = [&] {
    uint64_t v;
    ASSERT_EQ(::read(packet.fd, &v, sizeof v), static_cast<ssize_t>(sizeof v));
    viewers_at_arrival = viewer_runs_;
    loop_.at_turn_end(bystander);
  };
  ASSERT_TRUE(loop_.add(packet.fd, EPOLLIN, &packet));
  viewers_[0]->then = [&] {
    ++viewer_runs_;
    uint64_t one = 1;
    ASSERT_EQ(::write(packet.fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  };
  loop_.at_turn_end(publisher_);
  size_t turns = 0;
  size_t turns_to_read = 0;
  while (viewer_runs_ < kViewers && turns < 1000) {
    loop_.run_once(seconds(1));  // never waits: the burst's backlog keeps it busy
    ++turns;
    if (viewers_at_arrival != SIZE_MAX && turns_to_read == 0) {
      turns_to_read = turns;
    }
  }
  ASSERT_EQ(viewer_runs_, kViewers);
  // The packet was read in the turn after the burst began, and its viewer served in that turn
  // after at most the slice the previous turn left: long before the burst's end.
  EXPECT_EQ(turns_to_read, 2u);
  ASSERT_NE(viewers_at_delivery, SIZE_MAX);
  EXPECT_LE(viewers_at_delivery, 2 * kSlice);
  EXPECT_EQ(viewers_at_delivery, viewers_at_arrival);
  EXPECT_LT(index_of("bystander-viewer"), index_of("v" + std::to_string(kViewers / 2)));
  // The burst itself kept its order, a slice of the backlog per turn.
  std::vector<std::string> burst;
  for (const auto& name : log_) {
    if (name[0] == 'v') {
      burst.push_back(name);
    }
  }
  for (size_t i = 0; i < kViewers; ++i) {
    ASSERT_EQ(burst[i], "v" + std::to_string(i));
  }
  EXPECT_GE(turns, kViewers / (2 * kSlice));
  EXPECT_GE(loop_.turn_slices_cut(), kViewers / (2 * kSlice));
  loop_.remove(packet.fd);
}

TEST_F(TurnSliceTest, NewWorkEveryTurnDoesNotStarveTheBacklog) {
  // A connection whose packets arrive in every turn (a level-triggered fd that stays readable)
  // and each time readies more work than a slice holds.
  std::vector<std::unique_ptr<LoggedWork>> chatty;
  for (size_t i = 0; i < 2 * kSlice; ++i) {
    chatty.push_back(std::make_unique<LoggedWork>("c", log_));
  }
  EventFdHandler busy(1);  // readable until removed
  busy.on_call = [&] {
    for (auto& c : chatty) {
      loop_.at_turn_end(*c);
    }
  };
  loop_.at_turn_end(publisher_);
  loop_.run_once(seconds(1));  // the burst starts: its first slice
  ASSERT_TRUE(loop_.add(busy.fd, EPOLLIN, &busy));
  size_t turns = 0;
  while (viewer_runs_ < kViewers && turns < 100) {
    loop_.run_once(seconds(1));
    ++turns;
  }
  loop_.remove(busy.fd);
  EXPECT_EQ(viewer_runs_, kViewers);
  // A slice of the backlog every turn: at most kViewers / kSlice turns (plus the turn the chatty
  // work's own leftovers go first in the backlog).
  EXPECT_LE(turns, 2 * kViewers / kSlice);
}

TEST_F(TurnSliceTest, ABacklogThatNeverDrainsStaysBoundedAndServesEveryItem) {
  // The relay behind for good: every viewer always has more to write (its pass queues it again),
  // and a busy connection's packets ready more work than a slice holds in every turn. The backlog
  // never drains during the run, yet it holds each item at most once (the queues are intrusive:
  // it is bounded by the connections, not by the work), and every item runs again within about
  // (the items queued) / kSlice turns: its wait is bounded, the turn's own work first or not.
  std::vector<std::unique_ptr<LoggedWork>> chatty;
  for (size_t i = 0; i < 2 * kSlice; ++i) {
    chatty.push_back(std::make_unique<LoggedWork>("c", log_));
  }
  size_t turn = 0;
  size_t max_wait = 0;  // turns between two runs of one viewer, the most seen
  std::vector<size_t> last_run(kViewers, 0);
  std::vector<size_t> runs(kViewers, 0);
  for (size_t i = 0; i < kViewers; ++i) {
    LoggedWork* v = viewers_[i].get();
    v->then = [this, v, i, &turn, &max_wait, &last_run, &runs] {
      max_wait = std::max(max_wait, turn - last_run[i]);
      last_run[i] = turn;
      ++runs[i];
      loop_.at_turn_end(*v);  // more to write: never done
    };
  }
  EventFdHandler busy(1);  // readable until removed
  busy.on_call = [&] {
    for (auto& c : chatty) {
      loop_.at_turn_end(*c);
    }
  };
  ASSERT_TRUE(loop_.add(busy.fd, EPOLLIN, &busy));
  loop_.at_turn_end(publisher_);
  constexpr size_t kTurns = 4 * kViewers / kSlice;
  const size_t most_queued = kViewers + chatty.size();
  for (turn = 1; turn <= kTurns; ++turn) {
    loop_.run_once(seconds(1));
    size_t queued = 0;
    for (auto& v : viewers_) {
      queued += v->is_queued() ? 1 : 0;
    }
    for (auto& c : chatty) {
      queued += c->is_queued() ? 1 : 0;
    }
    ASSERT_GT(queued, 2 * kSlice) << "turn " << turn;  // it never drained
    ASSERT_LE(queued, most_queued) << "turn " << turn;
    log_.clear();
  }
  loop_.remove(busy.fd);
  for (size_t i = 0; i < kViewers; ++i) {
    EXPECT_GE(runs[i], 3u) << "viewer " << i;
  }
  // A slice of the backlog's front every turn: an item waits at most for the items ahead of it.
  EXPECT_LE(max_wait, most_queued / kSlice + 2);
  EXPECT_GE(loop_.turn_slices_cut(), kTurns);
}

TEST_F(TurnSliceTest, ExpensiveEventsInEveryTurnStillLeaveTheBacklogAsMuchTime) {
  // A handshake storm that lasts: every turn's events cost ~1 ms (TLS work), and the slices are
  // 100 us. Over the run the backlog gets at least as much time as the events took (the backlog's
  // slice lasts as long as the rest of its turn), so finishing old work keeps pace with new.
  loop_.set_turn_slice({SIZE_MAX, std::chrono::microseconds(100)});
  using Clock = std::chrono::steady_clock;
  Clock::duration backlog_time{};
  Clock::duration events_time{};
  for (auto& v : viewers_) {
    LoggedWork* w = v.get();
    w->then = [this, w, &backlog_time] {
      ++viewer_runs_;
      auto start = Clock::now();
      while (Clock::now() - start < std::chrono::microseconds(20)) {
      }
      backlog_time += Clock::now() - start;
      loop_.at_turn_end(*w);  // never done: the backlog stays full
    };
  }
  loop_.at_turn_end(publisher_);
  loop_.run_once(seconds(1));  // the burst starts; most of it is now backlog
  backlog_time = {};
  EventFdHandler storm(1);  // readable until removed
  storm.on_call = [&] {
    auto start = Clock::now();
    while (Clock::now() - start < std::chrono::milliseconds(1)) {
    }
    events_time += Clock::now() - start;
  };
  ASSERT_TRUE(loop_.add(storm.fd, EPOLLIN, &storm));
  for (int turn = 0; turn < 10; ++turn) {
    loop_.run_once(seconds(1));
    log_.clear();
  }
  loop_.remove(storm.fd);
  ASSERT_GE(events_time, std::chrono::milliseconds(10));
  // The viewers' own time only (not the loop's between them), and the turn's own slice (the
  // viewers the backlog's slice queued again) counts too: a generous 0.8.
  EXPECT_GE(backlog_time, events_time * 8 / 10);
}

TEST_F(TurnSliceTest, TheClockIsReadEveryFewItemsNotAfterEach) {
  // No item bound and an hour's time bound: the slice runs all 200 cheap items, reading the clock
  // after items 1, 2, 4, ..., 64, then every 64 (the stride doubles up to kMaxClockStride).
  loop_.set_turn_slice({SIZE_MAX, std::chrono::hours(1)});
  loop_.at_turn_end(publisher_);
  loop_.run_once(seconds(1));
  EXPECT_EQ(viewer_runs_, kViewers);
  EXPECT_EQ(loop_.turn_slices_cut(), 0u);
  // 201 items (the publisher and its 200 viewers): reads after 1, 2, 4, 8, 16, 32, 64, 128, 192.
  EXPECT_EQ(loop_.turn_clock_reads(), 9u);
}

TEST_F(TurnSliceTest, ASliceEndsAfterItsTimeEvenWhenItemsRemain) {
  loop_.set_turn_slice({SIZE_MAX, std::chrono::microseconds(200)});
  for (auto& v : viewers_) {
    v->then = [this] {
      ++viewer_runs_;
      auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (std::chrono::steady_clock::now() < until) {
      }
    };
  }
  loop_.at_turn_end(publisher_);
  loop_.run_once(seconds(1));
  // Two slices (this turn's, then the backlog's, at least one item each) of at least 200 us, 50 us
  // per item: far fewer than all kViewers.
  EXPECT_GE(viewer_runs_, 1u);
  EXPECT_LT(viewer_runs_, kViewers);
  EXPECT_GE(loop_.turn_slices_cut(), 1u);
}

TEST_F(TurnSliceTest, TheBacklogGetsAsLongAsTheTurnsEventsTook) {
  // Expensive events (a storm of handshakes: each Initial read costs its TLS work) must not outrun
  // finishing the work already taken on: the backlog's slice lasts at least as long as they did.
  loop_.set_turn_slice({SIZE_MAX, std::chrono::microseconds(100)});
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> ran_at;
  for (auto& v : viewers_) {
    LoggedWork* w = v.get();
    w->then = [this, w, &ran_at] {
      ++viewer_runs_;
      auto until = Clock::now() + std::chrono::microseconds(20);
      while (Clock::now() < until) {
      }
      ran_at.push_back(Clock::now());
      // Never done: the backlog cannot run out before its slice's time is up, however long the
      // event took (a preempted test thread makes it take longer).
      loop_.at_turn_end(*w);
    };
  }
  loop_.at_turn_end(publisher_);
  loop_.run_once(seconds(1));  // the burst starts; most of it is now backlog
  ASSERT_LT(viewer_runs_, kViewers / 2);
  EventFdHandler expensive(1);
  Clock::duration event_took{};
  expensive.on_call = [&] {
    auto start = Clock::now();
    while (Clock::now() - start < std::chrono::milliseconds(2)) {
    }
    event_took = Clock::now() - start;
    loop_.remove(expensive.fd);
  };
  ASSERT_TRUE(loop_.add(expensive.fd, EPOLLIN, &expensive));
  size_t before = ran_at.size();
  Clock::time_point slice_start = Clock::now();
  loop_.run_once(seconds(1));
  ASSERT_GT(event_took, std::chrono::milliseconds(2) - std::chrono::microseconds(1));
  ASSERT_GT(ran_at.size(), before);
  // The slice ran until at least event_took had passed since it started (it starts after the
  // event; slice_start is before it, so this only understates the slice).
  EXPECT_GE(ran_at.back() - slice_start, 2 * event_took - std::chrono::microseconds(200));
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
