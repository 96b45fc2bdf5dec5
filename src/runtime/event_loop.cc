#include "runtime/event_loop.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "base/log.h"

namespace moqd::runtime {
namespace {

// epoll user data: the fd in the low half, the registration's generation in the high half.
constexpr uint64_t kWakeTag = UINT64_MAX;

uint64_t pack(int fd, uint32_t gen) {
  return (static_cast<uint64_t>(gen) << 32) | static_cast<uint32_t>(fd);
}

Instant system_now() {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

}  // namespace

EventLoop::EventLoop()
    : epfd_(::epoll_create1(EPOLL_CLOEXEC)),
      awake_since_(system_now()),
      now_(awake_since_),
      timers_(now_) {
  if (epfd_ < 0) {
    MOQD_LOG(kError, "epoll_create1 failed: errno %d", errno);
    log::flush();
    std::abort();  // out of descriptors at startup: nothing sensible to do
  }
  // Edge-triggered: every write to the eventfd is a new event for epoll_wait, so the loop never
  // reads it back (one syscall fewer per wake-up). Its counter only grows, one per write: it
  // would take 2^64 writes to saturate it.
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLET;
  ev.data.u64 = kWakeTag;
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, waker_.fd(), &ev) != 0) {
    std::abort();
  }
}

EventLoop::~EventLoop() { ::close(epfd_); }

Status EventLoop::control(int op, int fd, uint32_t events, IoHandler* h) {
  if (fd < 0 || h == nullptr) {
    return fail(ErrorCode::kTransport, "bad fd or handler");
  }
  auto idx = static_cast<size_t>(fd);
  if (idx >= regs_.size()) {
    regs_.resize(idx + 1);
  }
  Registration& r = regs_[idx];
  uint32_t gen = op == EPOLL_CTL_ADD ? next_gen_++ : r.gen;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = pack(fd, gen);
  if (::epoll_ctl(epfd_, op, fd, &ev) != 0) {
    return fail(ErrorCode::kTransport, "epoll_ctl failed");
  }
  r.handler = h;
  r.gen = gen;
  return {};
}

Status EventLoop::add(int fd, uint32_t events, IoHandler* h) {
  return control(EPOLL_CTL_ADD, fd, events, h);
}

Status EventLoop::modify(int fd, uint32_t events, IoHandler* h) {
  if (fd < 0 || static_cast<size_t>(fd) >= regs_.size() || regs_[fd].handler == nullptr) {
    return fail(ErrorCode::kTransport, "fd not registered");
  }
  return control(EPOLL_CTL_MOD, fd, events, h);
}

void EventLoop::remove(int fd) {
  if (fd < 0 || static_cast<size_t>(fd) >= regs_.size() || regs_[fd].handler == nullptr) {
    return;
  }
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
  regs_[fd].handler = nullptr;
  regs_[fd].gen = 0;  // events already fetched carry the old generation and are dropped
}

void EventLoop::defer(std::function<void()> fn) { deferred_.push_back(std::move(fn)); }

void EventLoop::inject(std::function<void()> fn) {
  {
    MutexLock lock(inject_mu_);
    injected_.push_back(std::move(fn));
    injected_pending_.store(true, std::memory_order_relaxed);
  }
  waker_.wake();
}

TimerId EventLoop::schedule(Duration delay, std::function<void()> fn) {
  return timers_.schedule(now_, delay, std::move(fn));
}

void EventLoop::cancel(TimerId id) { timers_.cancel(id); }

void EventLoop::stop() {
  stop_.store(true, std::memory_order_relaxed);
  waker_.wake();
}

void EventLoop::run() {
  while (!stop_.load(std::memory_order_relaxed)) {
    run_once(Duration::max());
  }
  stop_.store(false, std::memory_order_relaxed);
}

bool EventLoop::run_until(const std::function<bool()>& pred, Duration deadline) {
  Instant end = system_now() + deadline;
  while (!pred()) {
    Instant t = system_now();
    if (t >= end) {
      return pred();
    }
    run_once(std::min<Duration>(end - t, std::chrono::milliseconds(10)));
  }
  return true;
}

void EventLoop::add_poll_source(PollSource* s) { sources_.push_back(s); }

void EventLoop::remove_poll_source(PollSource* s) {
  sources_.erase(std::remove(sources_.begin(), sources_.end(), s), sources_.end());
}

bool EventLoop::has_ready_work() {
  if (!deferred_.empty() || !turn_work_.empty() || !backlog_.empty() || !turn_flush_.empty() ||
      stop_.load(std::memory_order_relaxed) || injected_pending_.load(std::memory_order_relaxed)) {
    return true;
  }
  for (PollSource* s : sources_) {
    if (s->is_ready()) {
      return true;
    }
  }
  return false;
}

int EventLoop::wait_timeout_ms(Duration max_wait) {
  Duration wait = max_wait;
  if (auto next = timers_.time_to_next(now_)) {
    wait = std::min(wait, *next);
  }
  if (wait == Duration::max()) {
    return -1;
  }
  // Round up: waking before a timer's tick only costs another iteration.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000));
}

void EventLoop::refresh_now() { now_ = std::max(now_, system_now()); }

void EventLoop::run_once(Duration max_wait) {
  for (PollSource* s : sources_) {
    s->before_wait();
  }
  // Producers see the loop as sleeping only from here, when it has nothing to do: while it is
  // busy their pushes cost no eventfd write.
  bool ready = has_ready_work();
  if (!ready) {
    waker_.prepare_sleep();
    ready = has_ready_work();
  }
  int timeout = ready ? 0 : wait_timeout_ms(max_wait);
  epoll_event events[kMaxEvents];
  // The work since the last wait ended counts as busy.
  Instant before_wait = system_now();
  if (before_wait > awake_since_) {
    busy_us_.add(static_cast<uint64_t>((before_wait - awake_since_).count()));
  }
  polls_.add();
  int n = ::epoll_wait(epfd_, events, kMaxEvents, timeout);
  waker_.awake();
  refresh_now();
  awake_since_ = now_;
  for (int i = 0; i < n; ++i) {
    dispatch(events[i]);
  }
  timers_.advance(now_);
  run_deferred();
  run_injected();
  for (size_t i = 0; i < sources_.size(); ++i) {
    sources_[i]->poll();
    run_deferred();
  }
  run_turn_end();
}

void EventLoop::run_turn_end() {
  if (turn_work_.empty() && backlog_.empty() && turn_flush_.empty()) {
    return;
  }
  // This turn's work first: what a packet that just arrived asked for (another track's object, an
  // ACK) waits behind at most the slice of the backlog that the previous turn ran.
  if (run_slice(turn_work_)) {
    slices_cut_.add();
  }
  backlog_.append(turn_work_);
  // Then the backlog's slice: new work arriving every turn cannot starve it. What its items queue
  // (a writer the socket let go) runs first in the next turn.
  if (!backlog_.empty() && run_slice(backlog_)) {
    slices_cut_.add();
  }
}

bool EventLoop::run_slice(TurnQueue& q) {
  refresh_now();
  const Instant start = now_;
  // The backlog's slice lasts at least as long as the rest of the turn did (its events and this
  // turn's own work): when what arrives is expensive (a storm of handshakes, each read costs the
  // TLS work), finishing old work keeps pace with taking on new.
  const Duration max_time =
      &q == &backlog_ ? std::max(slice_.max_time, start - awake_since_) : slice_.max_time;
  size_t items = 0;
  size_t read_clock_at = 1;  // the item count after which the clock is read next
  bool used = false;
  do {
    while (!used && q.run_one()) {
      ++items;
      run_deferred();
      if (items >= slice_.max_items) {
        used = true;
      } else if (items >= read_clock_at) {
        refresh_now();
        clock_reads_.add();
        const Duration took = now_ - start;
        used = took >= max_time;
        read_clock_at = items + clock_stride(items, took, max_time - took);
      }
    }
    // One send for what the slice wrote; a socket that drained queues the writers it held back.
    turn_flush_.run();
    run_deferred();
  } while (&q == &turn_work_ && !q.empty() && !used);
  items_.add(items);
  return !q.empty();
}

size_t EventLoop::clock_stride(size_t items, Duration took, Duration left) {
  // At the pace of the slice's items so far, the next read comes before half of what is left of
  // the slice has passed; the stride at most doubles the items run so far (the first items may
  // have been cheap ones), and is at most kMaxClockStride.
  size_t n = std::min(items, kMaxClockStride);
  if (took.count() > 0 && left.count() > 0) {
    const auto pace = static_cast<uint64_t>(items) * static_cast<uint64_t>(left.count()) /
                      (2 * static_cast<uint64_t>(took.count()));
    n = static_cast<size_t>(std::min<uint64_t>(n, pace));
  }
  return std::max<size_t>(n, 1);
}

void EventLoop::dispatch(const epoll_event& ev) {
  if (ev.data.u64 == kWakeTag) {
    return;  // edge-triggered: nothing to read back
  }
  auto fd = static_cast<uint32_t>(ev.data.u64 & 0xffffffffu);
  auto gen = static_cast<uint32_t>(ev.data.u64 >> 32);
  if (fd >= regs_.size() || regs_[fd].handler == nullptr || regs_[fd].gen != gen) {
    return;
  }
  regs_[fd].handler->on_io(ev.events);
  run_deferred();
}

void EventLoop::run_deferred() {
  // Tasks deferred by these run in the next pass, so a task that re-defers itself cannot starve
  // the loop.
  if (deferred_.empty()) {
    return;
  }
  running_.swap(deferred_);
  for (auto& fn : running_) {
    fn();
  }
  running_.clear();
}

void EventLoop::run_injected() {
  if (!injected_pending_.load(std::memory_order_relaxed)) {
    return;
  }
  std::vector<std::function<void()>> batch;
  {
    MutexLock lock(inject_mu_);
    batch.swap(injected_);
    injected_pending_.store(false, std::memory_order_relaxed);
  }
  for (auto& fn : batch) {
    fn();
    run_deferred();
  }
}

}  // namespace moqd::runtime
