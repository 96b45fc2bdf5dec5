#pragma once
// A hashed timer wheel with 1 ms ticks: O(1) schedule and cancel, any delay (a timer further out
// than one turn stays in its slot until its turn comes). Owned by one EventLoop; single-threaded.
// Timer ids are generation-checked, so cancelling a fired, cancelled or unknown id is a no-op.
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "base/clock.h"

namespace moqd::runtime {

class TimerWheel {
 public:
  static constexpr Duration kTick = std::chrono::milliseconds(1);
  // Slots in one turn of the wheel (a power of two): 4096 ticks, about 4 s.
  static constexpr uint64_t kSlots = 4096;

  explicit TimerWheel(Instant start);

  // `fn` runs from advance() once `now + delay` has passed (never early; up to one tick late).
  // A delay <= 0 runs on the next advance() whatever its time.
  TimerId schedule(Instant now, Duration delay, std::function<void()> fn);
  void cancel(TimerId id);
  // Runs every timer due at `now`, in deadline order (ties in schedule order). Callbacks may
  // schedule and cancel; a timer they schedule falls due after `now` (a delay <= 0 runs on the
  // next call). Returns the count.
  size_t advance(Instant now);
  // How long from `now` until a timer may fall due: nullopt with none pending. May be early
  // (a lower bound), never late.
  std::optional<Duration> time_to_next(Instant now);
  size_t size() const { return live_; }

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint32_t kDueSlot = kSlots;  // delay <= 0: fires on the next advance()

  struct Node {
    std::function<void()> fn;
    uint64_t tick = 0;
    uint32_t gen = 1;
    uint32_t slot = kNone;  // kNone: free
    uint32_t prev = kNone;
    uint32_t next = kNone;
  };

  static uint64_t floor_tick(Instant t);
  static uint64_t ceil_tick(Instant t);
  uint32_t alloc_node();
  void link(uint32_t idx, uint32_t slot);
  void unlink(uint32_t idx);
  void fire(uint32_t idx);
  size_t fire_slot(uint32_t slot, uint64_t tick);
  uint64_t find_earliest();

  std::vector<Node> nodes_;
  std::vector<uint32_t> heads_;
  std::vector<uint32_t> tails_;
  std::vector<std::pair<uint32_t, uint32_t>> firing_;  // (index, gen), reused to avoid allocating
  uint32_t free_ = kNone;
  size_t live_ = 0;
  size_t in_wheel_ = 0;  // live nodes in the wheel's slots (not the due slot)
  uint64_t cur_tick_;         // every tick <= this has been processed
  uint64_t earliest_ = 0;     // lower bound on the earliest pending tick; 0: unknown
};

}  // namespace moqd::runtime
