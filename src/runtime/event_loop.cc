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
    : epfd_(::epoll_create1(EPOLL_CLOEXEC)), now_(system_now()), timers_(now_) {
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
  if (!deferred_.empty() || !turn_work_.empty() || !turn_flush_.empty() ||
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
  // The work since the last wait ended (now_ was read then) counts as busy.
  Instant before_wait = system_now();
  if (before_wait > now_) {
    busy_us_.add(static_cast<uint64_t>((before_wait - now_).count()));
  }
  polls_.add();
  int n = ::epoll_wait(epfd_, events, kMaxEvents, timeout);
  waker_.awake();
  refresh_now();
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
  if (turn_work_.empty() && turn_flush_.empty()) {
    return;
  }
  // The turn's events may have taken a while: the time that writers stamp on packets is now.
  refresh_now();
  size_t budget = kMaxTurnWork;
  do {
    budget -= turn_work_.run(budget);
    run_deferred();
    turn_flush_.run();
    run_deferred();
  } while (!turn_work_.empty() && budget > 0);
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
