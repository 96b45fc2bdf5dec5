#include "runtime/timer_wheel.h"

#include <algorithm>
#include <utility>

namespace moqd::runtime {

namespace {
constexpr uint64_t kTickUs = TimerWheel::kTick.count();
}

TimerWheel::TimerWheel(Instant start)
    : heads_(kSlots + 1, kNone), tails_(kSlots + 1, kNone), cur_tick_(floor_tick(start)) {}

uint64_t TimerWheel::floor_tick(Instant t) {
  int64_t us = t.time_since_epoch().count();
  return us <= 0 ? 0 : static_cast<uint64_t>(us) / kTickUs;
}

uint64_t TimerWheel::ceil_tick(Instant t) {
  int64_t us = t.time_since_epoch().count();
  return us <= 0 ? 0 : (static_cast<uint64_t>(us) + kTickUs - 1) / kTickUs;
}

uint32_t TimerWheel::alloc_node() {
  if (free_ != kNone) {
    uint32_t idx = free_;
    free_ = nodes_[idx].next;
    return idx;
  }
  nodes_.emplace_back();
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void TimerWheel::link(uint32_t idx, uint32_t slot) {
  Node& n = nodes_[idx];
  n.slot = slot;
  n.next = kNone;
  if (slot != kDueSlot) {
    ++in_wheel_;
  }
  n.prev = tails_[slot];
  if (n.prev == kNone) {
    heads_[slot] = idx;
  } else {
    nodes_[n.prev].next = idx;
  }
  tails_[slot] = idx;
}

void TimerWheel::unlink(uint32_t idx) {
  Node& n = nodes_[idx];
  if (n.slot != kDueSlot) {
    --in_wheel_;
  }
  if (n.prev == kNone) {
    heads_[n.slot] = n.next;
  } else {
    nodes_[n.prev].next = n.next;
  }
  if (n.next == kNone) {
    tails_[n.slot] = n.prev;
  } else {
    nodes_[n.next].prev = n.prev;
  }
  n.slot = kNone;
  n.prev = kNone;
  ++n.gen;
  if (n.gen == 0) {
    n.gen = 1;
  }
  n.next = free_;
  free_ = idx;
  --live_;
}

TimerId TimerWheel::schedule(Instant now, Duration delay, std::function<void()> fn) {
  uint32_t idx = alloc_node();
  Node& n = nodes_[idx];
  n.fn = std::move(fn);
  ++live_;
  if (delay <= Duration::zero()) {
    n.tick = cur_tick_;
    link(idx, kDueSlot);
  } else {
    // Never earlier than the next unprocessed tick, so every timer sits in a slot still ahead.
    n.tick = std::max(ceil_tick(now + delay), cur_tick_ + 1);
    link(idx, static_cast<uint32_t>(n.tick & (kSlots - 1)));
    if (earliest_ != 0) {
      earliest_ = std::min(earliest_, n.tick);
    }
  }
  return (static_cast<uint64_t>(n.gen) << 32) | (idx + 1);
}

void TimerWheel::cancel(TimerId id) {
  uint64_t low = id & 0xffffffffu;
  if (low == 0 || low > nodes_.size()) {
    return;
  }
  auto idx = static_cast<uint32_t>(low - 1);
  Node& n = nodes_[idx];
  if (n.slot == kNone || n.gen != static_cast<uint32_t>(id >> 32)) {
    return;
  }
  n.fn = nullptr;
  unlink(idx);
}

void TimerWheel::fire(uint32_t idx) {
  std::function<void()> fn = std::move(nodes_[idx].fn);
  nodes_[idx].fn = nullptr;
  unlink(idx);
  fn();
}

size_t TimerWheel::fire_slot(uint32_t slot, uint64_t tick) {
  // Collect first: callbacks may cancel (generation changes) or schedule (nodes_ may grow).
  firing_.clear();
  for (uint32_t i = heads_[slot]; i != kNone; i = nodes_[i].next) {
    if (nodes_[i].tick <= tick) {
      firing_.emplace_back(i, nodes_[i].gen);
    }
  }
  if (firing_.empty()) {
    return 0;
  }
  std::vector<std::pair<uint32_t, uint32_t>> batch;
  batch.swap(firing_);
  size_t fired = 0;
  for (auto [idx, gen] : batch) {
    if (nodes_[idx].slot == slot && nodes_[idx].gen == gen) {
      fire(idx);
      ++fired;
    }
  }
  batch.clear();
  if (firing_.capacity() < batch.capacity()) {
    firing_.swap(batch);
  }
  return fired;
}

size_t TimerWheel::advance(Instant now) {
  uint64_t target = floor_tick(now);
  size_t fired = fire_slot(kDueSlot, UINT64_MAX);
  if (target <= cur_tick_) {
    return fired;
  }
  uint64_t from = cur_tick_ + 1;
  if (earliest_ != 0) {
    from = std::max(from, earliest_);
  }
  for (uint64_t t = from; t <= target && in_wheel_ > 0; ++t) {
    cur_tick_ = t;
    fired += fire_slot(static_cast<uint32_t>(t & (kSlots - 1)), t);
  }
  cur_tick_ = target;
  earliest_ = 0;
  return fired;
}

uint64_t TimerWheel::find_earliest() {
  // Every pending tick is in (cur_tick_, ...) and sits in slot tick % kSlots, so the first slot
  // holding a node of its own turn is the earliest; none within a turn means later than that.
  for (uint64_t t = cur_tick_ + 1; t <= cur_tick_ + kSlots; ++t) {
    for (uint32_t i = heads_[t & (kSlots - 1)]; i != kNone; i = nodes_[i].next) {
      if (nodes_[i].tick <= t) {
        return t;
      }
    }
  }
  return cur_tick_ + kSlots + 1;
}

std::optional<Duration> TimerWheel::time_to_next(Instant now) {
  if (live_ == 0) {
    return std::nullopt;
  }
  if (heads_[kDueSlot] != kNone) {
    return Duration::zero();
  }
  if (earliest_ == 0) {
    earliest_ = find_earliest();
  }
  Duration at(static_cast<int64_t>(earliest_ * kTickUs));
  Duration left = at - now.time_since_epoch();
  return left < Duration::zero() ? Duration::zero() : left;
}

}  // namespace moqd::runtime
