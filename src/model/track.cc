#include "model/track.h"

#include <algorithm>
#include <utility>

namespace moqd::model {

Track::Track(std::string broadcast, std::string name, CacheLimits limits, Duration linger,
             const Clock& clock, Timers& timers)
    : broadcast_(std::move(broadcast)),
      name_(std::move(name)),
      limits_(limits),
      linger_(linger),
      clock_(clock),
      timers_(timers) {}

Track::~Track() {
  timers_.cancel(linger_timer_);
  timers_.cancel(idle_timer_);
  stop_upstream();
  release_budgets(cached_bytes_);
  for (auto& b : budgets_) {
    if (b.budget != nullptr) {
      b.budget->detach(b.link);
      b.budget = nullptr;
    }
  }
}

void Track::attach_budget(CacheBudget* budget) {
  if (budget == nullptr) {
    return;
  }
  for (auto& b : budgets_) {
    if (b.budget == nullptr) {
      b.budget = budget;
      b.link = budget->attach(this);
      budget->charge(cached_bytes_);
      return;
    }
  }
}

void Track::forget_budget(CacheBudget* budget) {
  for (auto& b : budgets_) {
    if (b.budget == budget) {
      budget->detach(b.link);
      b.budget = nullptr;
    }
  }
}

void Track::note_served() {
  for (auto& b : budgets_) {
    if (b.budget != nullptr) {
      b.budget->touch(b.link);
    }
  }
}

void Track::charge_budgets(uint64_t n) {
  for (auto& b : budgets_) {
    if (b.budget != nullptr) {
      b.budget->charge(n);
    }
  }
  for (auto& b : budgets_) {
    if (b.budget != nullptr && b.budget->used() > b.budget->limit()) {
      b.budget->enforce();
    }
  }
}

void Track::release_budgets(uint64_t n) {
  for (auto& b : budgets_) {
    if (b.budget != nullptr) {
      b.budget->release(n);
    }
  }
}

bool Track::evict_oldest_group() {
  if (cache_.size() <= 1) {
    return false;
  }
  drop_oldest();
  return true;
}

void Track::drop_oldest() {
  uint64_t bytes = cache_.front()->bytes();
  cached_bytes_ -= bytes;
  cache_.pop_front();
  release_budgets(bytes);
}

Group* Track::begin_group(uint64_t sequence) { return begin_group(sequence, 0, false); }

Group* Track::begin_group(uint64_t sequence, uint64_t subgroup, bool has_extensions) {
  if (ended_ || (sequence_floor_ && sequence <= *sequence_floor_)) {
    return nullptr;
  }
  for (const GroupRef& g : cache_) {
    if (g->sequence() == sequence && g->subgroup() == subgroup) {
      return nullptr;
    }
  }
  cache_.emplace_back(new Group(sequence, next_arrival_++, clock_.now()));
  Group* g = cache_.back().get();
  g->set_subgroup(subgroup, has_extensions);
  if (!largest_sequence_ || sequence > *largest_sequence_) {
    largest_sequence_ = sequence;
  }
  // A new group is told at once, before eviction can take an older one: a burst of more groups
  // than the cache holds in one turn still reaches every listener (each takes a GroupRef). What
  // else changed in the turn is told once, at its end.
  notify_now();
  evict();
  return g;
}

void Track::begin_object(Group& g, uint64_t size, ObjectStatus status) {
  if (ended_) {
    return;
  }
  Object& o = g.begin_object(size, status);
  o.arrived = clock_.now();
  o.timestamp = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(o.arrived.time_since_epoch()).count());
  notify();
}

void Track::begin_timed_object(Group& g, uint64_t size, uint64_t timestamp) {
  if (ended_) {
    return;
  }
  Object& o = g.begin_object(size);
  o.arrived = clock_.now();
  o.timestamp = timestamp;
  notify();
}

void Track::begin_ietf_object(Group& g, IetfObject in) {
  if (ended_) {
    return;
  }
  Object& o = g.begin_object_with_id(in.id, in.size, ObjectStatus::kNormal);
  o.arrived = clock_.now();
  o.timestamp = in.timestamp.value_or(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(o.arrived.time_since_epoch()).count()));
  o.extensions = std::move(in.extensions);
  o.extensions_draft = o.extensions.empty() ? 0 : in.extensions_draft;
  o.lite_refused = o.lite_refused || in.lite_refused;
  o.unreliable = in.unreliable;
  notify();
}

void Track::expect_properties() {
  if (!ended_) {
    properties_pending_ = true;
  }
}

void Track::set_properties(const TrackProperties& p) {
  if (ended_) {
    return;
  }
  properties_ = p;
  properties_pending_ = false;
  notify();
}

void Track::append_chunk(Group& g, Bytes chunk) {
  if (ended_ || chunk.empty()) {
    return;
  }
  uint64_t before = g.bytes();
  g.append_chunk(std::move(chunk));
  g.mark_arrival(clock_.now());
  bytes_in_ += g.bytes() - before;
  if (is_cached(g)) {
    cached_bytes_ += g.bytes() - before;
    charge_budgets(g.bytes() - before);
  }
  evict();
  notify();
}

void Track::finish_group(Group& g) {
  if (ended_ || g.is_done()) {
    return;
  }
  // A group finished inside an object was truncated: readers must reset, not wait for bytes.
  if (!g.objects().empty() && !g.objects().back().is_complete()) {
    g.abort();
  } else {
    g.finish();
  }
  notify();
}

void Track::switch_source(TrackSource* next) {
  if (ended_) {
    return;
  }
  for (const GroupRef& g : cache_) {
    if (!g->is_done()) {
      g->abort();
      notify();
    }
  }
  if (largest_sequence_) {
    sequence_floor_ = largest_sequence_;
  }
  bool feeding = upstream_active_;
  stop_upstream();
  source_ = next;
  if (feeding && source_ != nullptr) {
    upstream_active_ = true;
    source_->start_track(*this);
  }
}

void Track::abort_group(Group& g) {
  if (ended_ || g.is_done()) {
    return;
  }
  g.abort();
  notify();
}

void Track::end(Error reason) {
  if (ended_) {
    return;
  }
  // Listeners hear what changed before the end (a group that began this turn is collected by its
  // subscribers before they lose the track).
  if (is_queued()) {
    notify_now();
  }
  ended_ = true;
  timers_.cancel(linger_timer_);
  linger_timer_ = 0;
  // No producer call reaches an ended track, so a group still open would stay open for good and
  // its readers would wait on it forever: abort it, and readers reset their copies.
  for (const GroupRef& g : cache_) {
    if (!g->is_done()) {
      g->abort();
    }
  }
  ++notify_depth_;
  for (size_t i = 0, n = listeners_.size(); i < n; ++i) {
    TrackListener* l = std::exchange(listeners_[i], nullptr);
    if (l) {
      --listener_count_;
      viewer_count_ -= l->is_viewer() ? 1 : 0;
      demand_count_ -= l->wants_data() ? 1 : 0;
      l->on_track_ended(*this, reason);
    }
  }
  --notify_depth_;
  compact_listeners();
  stop_upstream();
  schedule_idle();
}

void Track::add_listener(TrackListener* l) {
  if (ended_ || l == nullptr) {
    return;
  }
  listeners_.push_back(l);
  viewer_count_ += l->is_viewer() ? 1 : 0;
  if (l->wants_data() && ++demand_count_ == 1) {
    notify_demand(true);
  }
  if (++listener_count_ > 1) {
    return;
  }
  timers_.cancel(linger_timer_);
  linger_timer_ = 0;
  if (!upstream_active_ && source_) {
    upstream_active_ = true;
    source_->start_track(*this);
  }
}

void Track::remove_listener(TrackListener* l) {
  auto it = std::find(listeners_.begin(), listeners_.end(), l);
  if (l == nullptr || it == listeners_.end()) {
    return;
  }
  viewer_count_ -= l->is_viewer() ? 1 : 0;
  if (notify_depth_ > 0) {
    *it = nullptr;
  } else {
    listeners_.erase(it);
  }
  if (l->wants_data() && --demand_count_ == 0 && !ended_) {
    notify_demand(false);
  }
  if (--listener_count_ == 0 && !ended_) {
    linger_timer_ = timers_.schedule(linger_, [this] {
      linger_timer_ = 0;
      auto idle = idle_callback_;
      if (on_linger_expired() && idle) {
        idle();  // may destroy this Track: touch nothing after
      }
    });
  }
}

GroupRef Track::newest_group() const {
  return cache_.empty() ? GroupRef() : cache_.back();
}

size_t Track::first_cached_index(uint64_t first_arrival) const {
  if (cache_.empty()) {
    return 0;
  }
  uint64_t oldest = cache_.front()->arrival();
  return first_arrival > oldest ? std::min<uint64_t>(first_arrival - oldest, cache_.size()) : 0;
}

std::vector<GroupRef> Track::groups_from(uint64_t first_arrival) const {
  auto start = static_cast<ptrdiff_t>(first_cached_index(first_arrival));
  return std::vector<GroupRef>(cache_.begin() + start, cache_.end());
}

void Track::notify_now() {
  unqueue();
  ++notify_depth_;
  for (size_t i = 0, n = listeners_.size(); i < n; ++i) {
    if (TrackListener* l = listeners_[i]) {
      l->on_track_data(*this);
    }
  }
  --notify_depth_;
  compact_listeners();
}

void Track::notify_demand(bool demanded) {
  ++notify_depth_;
  for (size_t i = 0, n = listeners_.size(); i < n; ++i) {
    if (TrackListener* l = listeners_[i]) {
      l->on_track_demand(*this, demanded);
    }
  }
  --notify_depth_;
  compact_listeners();
}

void Track::compact_listeners() {
  if (notify_depth_ == 0 && listeners_.size() != listener_count_) {
    std::erase(listeners_, nullptr);
  }
}

// Oldest first, never the newest: a late joiner always has a group to start at.
void Track::evict() {
  Instant now = clock_.now();
  while (cache_.size() > 1) {
    const GroupRef& oldest = cache_.front();
    bool over = cache_.size() > limits_.max_groups || cached_bytes_ > limits_.max_bytes ||
                now - oldest->created() > limits_.max_age;
    if (!over) {
      return;
    }
    drop_oldest();
  }
}

// The cache holds a contiguous run of arrival indices, because groups join at the back and leave
// from the front.
bool Track::is_cached(const Group& g) const {
  return !cache_.empty() && g.arrival() >= cache_.front()->arrival() &&
         g.arrival() < next_arrival_ && cache_[g.arrival() - cache_.front()->arrival()].get() == &g;
}

void Track::stop_upstream() {
  if (!upstream_active_) {
    return;
  }
  upstream_active_ = false;
  if (source_) {
    source_->stop_track(*this);
  }
}

void Track::schedule_idle() {
  timers_.cancel(idle_timer_);
  idle_timer_ = timers_.schedule(Duration::zero(), [this] {
    idle_timer_ = 0;
    auto idle = idle_callback_;
    if (idle) {
      idle();  // may destroy this Track: touch nothing after
    }
  });
}

// True when the track is idle (no listener came back) and its owner should be told.
bool Track::on_linger_expired() {
  if (listener_count_ > 0) {
    return false;
  }
  stop_upstream();
  return true;
}

}  // namespace moqd::model
