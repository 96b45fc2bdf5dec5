#pragma once
// Time for every layer: a Clock to read and a Timers service to schedule callbacks. Production
// code gets the worker's event loop (runtime/event_loop.h); tests get a ManualClock, which is both
// and fires due timers only when advanced, so tests never sleep.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>

#include "base/turn.h"

namespace moqd {

using Duration = std::chrono::microseconds;
using Instant = std::chrono::time_point<std::chrono::steady_clock, Duration>;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Instant now() const = 0;
};

// Opaque handle; 0 is "no timer". Cancelling a fired or cancelled timer is a no-op, so holders
// never need to know whether it already ran.
using TimerId = uint64_t;

// Schedules callbacks on the owning thread. Callbacks run from the loop, never re-entrantly from
// schedule() or cancel(). A callback may schedule or cancel timers.
class Timers {
 public:
  virtual ~Timers() = default;
  virtual TimerId schedule(Duration delay, std::function<void()> fn) = 0;
  virtual void cancel(TimerId id) = 0;
  // Runs `w` once at the end of the current turn (base/turn.h): after the turn's events and due
  // timers, never from inside this call. Work it queues runs in the same turn.
  virtual void at_turn_end(TurnWork& w) = 0;
};

class SystemClock final : public Clock {
 public:
  Instant now() const override {
    return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
  }
};

// A clock that moves only when told to, with timers that fire in deadline order as it moves.
// Single-threaded; for tests.
class ManualClock final : public Clock, public Timers {
 public:
  Instant now() const override { return now_; }
  TimerId schedule(Duration delay, std::function<void()> fn) override;
  void cancel(TimerId id) override;
  void at_turn_end(TurnWork& w) override { turn_.push(w); }
  // Moves time forward by `d`, running every timer that falls due, in order, at its deadline, and
  // the turn work queued before or by each (as a loop turn would, at the time it ran).
  void advance(Duration d);
  size_t pending_timers() const { return by_deadline_.size(); }

 private:
  Instant now_{Duration{1'000'000'000}};
  TimerId next_id_ = 1;
  std::multimap<Instant, TimerId> by_deadline_;
  std::unordered_map<TimerId, std::pair<Instant, std::function<void()>>> timers_;
  TurnQueue turn_;
};

}  // namespace moqd
