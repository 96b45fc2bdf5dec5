#pragma once
// One worker's event loop: epoll for fds, a timer wheel for timers, a deferred-task queue, and a
// Waker whose eventfd other threads write to reach it. Everything but stop(), inject() and
// waker().wake*() runs on the loop's own thread. now() is cached per iteration.
#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "base/clock.h"
#include "base/counter.h"
#include "base/error.h"
#include "base/mutex.h"
#include "runtime/mailbox.h"
#include "runtime/timer_wheel.h"

namespace moqd::runtime {

// Receives epoll events for one fd. Called from the loop only, never for an fd already removed.
class IoHandler {
 public:
  virtual ~IoHandler() = default;
  virtual void on_io(uint32_t epoll_events) = 0;
};

// Extra work the loop polls every iteration (Workers' mailboxes). Before the loop blocks, is_ready()
// is checked again after Waker::prepare_sleep(), so a producer that publishes and then reads the
// Waker's sleep_episode() is never missed.
class PollSource {
 public:
  virtual ~PollSource() = default;
  virtual bool is_ready() = 0;
  virtual void poll() = 0;
  // Called at the start of every iteration, before the loop looks for work and may block: what
  // the source held back from other threads goes out now (Workers: deferred wake-ups).
  virtual void before_wait() {}
};

class EventLoop final : public Clock, public Timers {
 public:
  EventLoop();
  ~EventLoop() override;
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT, ...; level-triggered unless EPOLLET is given).
  // `h` must stay valid until remove(fd).
  Status add(int fd, uint32_t events, IoHandler* h);
  Status modify(int fd, uint32_t events, IoHandler* h);
  // Stops watching `fd`; its handler is not called again, not even for an event already
  // returned in the current batch. Does not close the fd. Unknown fds are ignored.
  void remove(int fd);

  // Runs `fn` on this loop after the current callback returns (never from inside defer()).
  void defer(std::function<void()> fn);
  // Runs `fn` on this loop; callable from any thread (mutex-protected: control traffic only).
  void inject(std::function<void()> fn);

  TimerId schedule(Duration delay, std::function<void()> fn) override;
  void cancel(TimerId id) override;
  // Turn work runs after the turn's events, timers, deferred and injected tasks and mailboxes, in
  // the order queued; what it queues runs in the same turn, within the turn's slice.
  //
  // Slices: one turn runs at most one slice (TurnSlice) of the work this turn queued, then one
  // slice of the backlog (work earlier turns left over, oldest first); what this turn's slice
  // leaves joins the backlog, and the next turn polls its fds without waiting. So a burst (a
  // frame fanned out to 1,000 connections: tens of ms of write passes) is served a slice at a
  // time, and a connection readied meanwhile by another track's packet runs within about two
  // slices, before the rest of the burst; the backlog still gets a slice every turn, however
  // much new work keeps arriving.
  void at_turn_end(TurnWork& w) override { turn_work_.push(w); }
  // Like at_turn_end(), but runs after all turn work: for writes to the kernel (a UDP socket's
  // batch), so that one send carries what every connection wrote in the turn. Flushes may queue
  // more turn work (a socket that drained wakes the writers it held back); it runs before the
  // turn ends.
  void at_turn_flush(TurnWork& w) { turn_flush_.push(w); }
  // now() is read again at the start of each slice and, within a slice, every few items (as
  // often as ending the slice on time needs; at most kMaxClockStride items apart): packets written
  // late in a long turn carry about the time they were written (pacing, ACK delay), and the clock
  // (~50 ns a read here) is not read after every item, many of which cost a few hundred ns.
  Instant now() const override { return now_; }

  // The bounds of one slice of turn work: whichever comes first (at least one item always runs).
  struct TurnSlice {
    size_t max_items = 4096;
    Duration max_time = std::chrono::microseconds(500);
  };
  void set_turn_slice(TurnSlice s) { slice_ = s; }
  // Slices that ended with work left for a later turn (readable from any thread).
  uint64_t turn_slices_cut() const { return slices_cut_.get(); }
  // Items of turn work run, and the clock reads made inside slices to end them on time (readable
  // from any thread).
  uint64_t turn_items() const { return items_.get(); }
  uint64_t turn_clock_reads() const { return clock_reads_.get(); }

  // Runs until stop(). stop() is thread-safe; a stop() before run() makes run() return at once.
  void run();
  void stop();
  // Runs iterations until `pred` holds or `deadline` (wall time) passes; returns pred(). Tests.
  bool run_until(const std::function<bool()>& pred, Duration deadline);
  // One iteration, blocking at most `max_wait` for events.
  void run_once(Duration max_wait);

  Waker& waker() { return waker_; }
  // epoll_wait calls so far (readable from any thread), for the relay's syscall counts.
  uint64_t polls() const { return polls_.get(); }
  // Microseconds spent running callbacks rather than waiting in epoll_wait (readable from any
  // thread): one clock read per iteration before the wait, against now() after it.
  uint64_t busy_us() const { return busy_us_.get(); }
  // `s` must outlive the loop or be removed before it is destroyed.
  void add_poll_source(PollSource* s);
  void remove_poll_source(PollSource* s);

 private:
  struct Registration {
    IoHandler* handler = nullptr;
    uint32_t gen = 0;
  };
  static constexpr int kMaxEvents = 256;

  Status control(int op, int fd, uint32_t events, IoHandler* h);
  bool has_ready_work();
  int wait_timeout_ms(Duration max_wait);
  void dispatch(const epoll_event& ev);
  void run_deferred();
  void run_injected();
  void run_turn_end();
  // Runs `q` (and the flushes its work asks for) until it is empty or one slice is used; work
  // that `q`'s items queue runs in the same slice only when `q` is turn_work_. Returns true when
  // the slice ran out with work still queued in `q`.
  bool run_slice(TurnQueue& q);
  // How many items to run before the slice reads the clock again, after `items` took `took` and
  // `left` of the slice remains.
  static size_t clock_stride(size_t items, Duration took, Duration left);
  static constexpr size_t kMaxClockStride = 64;
  void refresh_now();

  int epfd_ = -1;
  Counter polls_;
  Counter busy_us_;
  Counter slices_cut_;
  Counter clock_reads_;
  Counter items_;
  Instant awake_since_;  // when the last epoll_wait returned, for busy_us_
  TurnSlice slice_;
  Waker waker_;
  Instant now_;
  TimerWheel timers_;
  uint32_t next_gen_ = 1;
  std::vector<Registration> regs_;  // indexed by fd
  std::vector<std::function<void()>> deferred_;
  std::vector<std::function<void()>> running_;
  std::vector<PollSource*> sources_;
  TurnQueue turn_work_;  // queued this turn
  TurnQueue backlog_;    // left over by earlier turns' slices, oldest first
  TurnQueue turn_flush_;
  std::atomic<bool> stop_{false};
  Mutex inject_mu_;
  std::vector<std::function<void()>> injected_;  // guarded by inject_mu_
  std::atomic<bool> injected_pending_{false};
};

}  // namespace moqd::runtime
