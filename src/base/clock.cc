#include "base/clock.h"

#include <utility>

namespace moqd {

TimerId ManualClock::schedule(Duration delay, std::function<void()> fn) {
  TimerId id = next_id_++;
  Instant at = now_ + (delay < Duration::zero() ? Duration::zero() : delay);
  by_deadline_.emplace(at, id);
  timers_.emplace(id, std::make_pair(at, std::move(fn)));
  return id;
}

void ManualClock::cancel(TimerId id) {
  auto it = timers_.find(id);
  if (it == timers_.end()) {
    return;
  }
  auto range = by_deadline_.equal_range(it->second.first);
  for (auto d = range.first; d != range.second; ++d) {
    if (d->second == id) {
      by_deadline_.erase(d);
      break;
    }
  }
  timers_.erase(it);
}

void ManualClock::advance(Duration d) {
  Instant target = now_ + d;
  turn_.run();
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= target) {
    auto [at, id] = *by_deadline_.begin();
    by_deadline_.erase(by_deadline_.begin());
    auto it = timers_.find(id);
    auto fn = std::move(it->second.second);
    timers_.erase(it);
    now_ = at;
    fn();
    turn_.run();
  }
  now_ = target;
}

}  // namespace moqd
