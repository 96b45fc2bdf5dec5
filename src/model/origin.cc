#include "model/origin.h"

#include <algorithm>
#include <utility>

#include "model/path.h"

namespace moqd::model {

struct Origin::Broadcast {
  struct Publisher {
    BroadcastSource* source;
    Hops hops;
    uint64_t cost;
    uint64_t order;  // announcement order: newer wins ties
    uint64_t score;  // route_distance() + cost
  };
  std::string path;
  // Every route; active() is the best of them.
  std::vector<Publisher> publishers;
  std::map<std::string, TrackPtr> tracks;  // by track name; never ended ones

  // True when `a` is preferred over `b` (see the file comment in origin.h).
  static bool better(const Publisher& a, const Publisher& b) {
    if (a.score != b.score) {
      return a.score < b.score;
    }
    if (a.hops != b.hops) {
      return a.hops < b.hops;
    }
    return a.order > b.order;
  }
  const Publisher* active() const {
    const Publisher* best = nullptr;
    for (const Publisher& p : publishers) {
      if (best == nullptr || better(p, *best)) {
        best = &p;
      }
    }
    return best;
  }
};

namespace {
// A track may move between two relayed routes of the same origin relay without ending: both
// carry the same publisher's groups, so their sequences agree.
bool same_origin_relay(const Hops& a, const Hops& b) {
  return !a.empty() && !b.empty() && hop_relay(a.front()) == hop_relay(b.front());
}
}  // namespace

bool hops_contain(const Hops& hops, uint64_t relay) {
  relay = hop_relay(relay);
  return std::any_of(hops.begin(), hops.end(), [&](uint64_t h) { return hop_relay(h) == relay; });
}

uint64_t warm_key(std::string_view path, uint64_t relay) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](uint8_t byte) {
    h ^= byte;
    h *= 0x100000001b3ull;
  };
  for (char c : path) {
    mix(static_cast<uint8_t>(c));
  }
  relay = hop_relay(relay);
  for (int i = 0; i < 8; ++i) {
    mix(static_cast<uint8_t>(relay >> (8 * i)));
  }
  return h;
}

uint64_t route_distance(std::string_view path, const Hops& hops, uint64_t self) {
  if (self == 0) {
    return hops.size();
  }
  const uint64_t own = warm_key(path, self);
  for (size_t i = hops.size(); i-- > 1;) {
    if (is_warm_hop(hops[i]) && warm_key(path, hops[i]) < own) {
      return hops.size() - i;
    }
  }
  return hops.size();
}

Origin::Origin(OriginConfig config, const Clock& clock, Timers& timers)
    : config_(config), clock_(clock), timers_(timers) {}

Origin::~Origin() = default;

void Origin::announce(const std::string& path, BroadcastSource* source, Hops hops, uint64_t cost) {
  std::string p = normalize_path(path);
  std::unique_ptr<Broadcast>& slot = broadcasts_[p];
  if (!slot) {
    slot = std::make_unique<Broadcast>();
    slot->path = p;
  }
  Broadcast& b = *slot;
  const Broadcast::Publisher* before = b.active();
  if (before != nullptr && before->source == source && before->hops == hops &&
      before->cost == cost) {
    return;
  }
  BroadcastSource* old = before != nullptr ? before->source : nullptr;
  Hops old_hops = before != nullptr ? before->hops : Hops{};
  std::erase_if(b.publishers, [&](const auto& pub) { return pub.source == source; });
  const uint64_t score = route_distance(p, hops, config_.hop_id) + cost;
  b.publishers.push_back({source, std::move(hops), cost, ++announce_order_, score});
  const Broadcast::Publisher* after = b.active();
  if (old != nullptr && after->source == old && after->hops == old_hops) {
    return;  // a backup route: nothing changes for listeners
  }
  switch_active(p, old, old_hops);
}

void Origin::unannounce(const std::string& path, BroadcastSource* source) {
  std::string p = normalize_path(path);
  auto it = broadcasts_.find(p);
  if (it == broadcasts_.end()) {
    return;
  }
  Broadcast& b = *it->second;
  auto pub = std::find_if(b.publishers.begin(), b.publishers.end(),
                          [&](const auto& x) { return x.source == source; });
  if (pub == b.publishers.end()) {
    return;
  }
  bool was_active = &*pub == b.active();
  Hops old_hops = pub->hops;
  b.publishers.erase(pub);
  if (!was_active) {
    return;
  }
  switch_active(p, source, old_hops);
}

void Origin::switch_active(const std::string& p, BroadcastSource* old, const Hops& old_hops) {
  Broadcast& b = *broadcasts_.find(p)->second;
  const Broadcast::Publisher* next = b.active();
  // The same source with another hop list (a relay on the way became warm or cold): its
  // subscriptions go on as they are, and listeners hear the path active again with the new hops.
  const bool same_source = old != nullptr && next != nullptr && next->source == old &&
                        same_origin_relay(old_hops, next->hops);
  if (old != nullptr && !same_source) {
    if (next != nullptr && same_origin_relay(old_hops, next->hops)) {
      // Re-serve through the new route: the tracks stay, their source changes.
      BroadcastSource* src = next->source;
      std::vector<Track*> moving;
      for (auto& [name, t] : b.tracks) {
        moving.push_back(t.get());
      }
      for (Track* t : moving) {
        t->switch_source(&src->track_source(b.path, t->name()));
      }
    } else {
      end_tracks(b);
    }
  }
  // Callbacks may have changed the broadcast: look it up again.
  std::optional<Hops> next_hops;
  auto it = broadcasts_.find(p);
  if (it != broadcasts_.end()) {
    if (const Broadcast::Publisher* a = it->second->active(); a != nullptr) {
      next_hops = a->hops;
    } else {
      broadcasts_.erase(it);
    }
  }
  if (old != nullptr && !same_source) {
    notify(p, false, old_hops);
  }
  if (next_hops) {
    notify(p, true, *next_hops);
  }
  update_presence(p);
}

bool Origin::is_active(const std::string& path) const {
  auto it = broadcasts_.find(normalize_path(path));
  return it != broadcasts_.end() && !it->second->publishers.empty();
}

BroadcastSource* Origin::active_source(const std::string& path) const {
  auto it = broadcasts_.find(normalize_path(path));
  if (it == broadcasts_.end() || it->second->publishers.empty()) {
    return nullptr;
  }
  return it->second->active()->source;
}

std::vector<Origin::Route> Origin::routes(const std::string& path) const {
  std::vector<Route> out;
  auto it = broadcasts_.find(normalize_path(path));
  if (it == broadcasts_.end()) {
    return out;
  }
  std::vector<const Broadcast::Publisher*> pubs;
  for (const auto& pub : it->second->publishers) {
    pubs.push_back(&pub);
  }
  std::sort(pubs.begin(), pubs.end(),
            [](const auto* a, const auto* b) { return Broadcast::better(*a, *b); });
  for (const auto* pub : pubs) {
    out.push_back(Route{pub->source, pub->hops, pub->cost, out.empty()});
  }
  return out;
}

bool Origin::is_carrying(const std::string& path) const {
  auto it = broadcasts_.find(normalize_path(path));
  if (it == broadcasts_.end() || it->second->publishers.empty()) {
    return false;
  }
  if (it->second->active()->hops.empty()) {
    return false;
  }
  return !it->second->tracks.empty() || elsewhere_.count(it->first) != 0;
}

void Origin::set_carried_elsewhere(const std::string& path, bool carried) {
  std::string p = normalize_path(path);
  const bool was = elsewhere_.count(p) != 0;
  if (was == carried) {
    return;
  }
  if (carried) {
    elsewhere_.insert(p);
  } else {
    elsewhere_.erase(p);
  }
  auto it = broadcasts_.find(p);
  if (it != broadcasts_.end() && !it->second->publishers.empty() && it->second->tracks.empty()) {
    notify_carrying(*it->second, carried);
  }
}

void Origin::set_presence_observer(std::function<void(const std::string&, bool)> fn) {
  presence_observer_ = std::move(fn);
}

void Origin::update_presence(const std::string& path) {
  auto it = broadcasts_.find(path);
  const bool has = it != broadcasts_.end() && !it->second->tracks.empty();
  if (has == (present_.count(path) != 0)) {
    return;
  }
  if (has) {
    present_.insert(path);
  } else {
    present_.erase(path);
  }
  if (presence_observer_) {
    presence_observer_(path, has);
  }
}

std::vector<std::string> Origin::active_paths(const std::string& prefix) const {
  std::string pfx = normalize_path(prefix);
  std::vector<std::string> out;
  // Paths under `pfx` all start with it as a string, so they are one contiguous, sorted run.
  for (auto it = broadcasts_.lower_bound(pfx);
       it != broadcasts_.end() && it->first.starts_with(pfx); ++it) {
    if (has_prefix(pfx, it->first) && !it->second->publishers.empty()) {
      out.push_back(it->first);
    }
  }
  return out;
}

void Origin::add_listener(const std::string& prefix, AnnounceListener* l) {
  std::string pfx = normalize_path(prefix);
  listeners_.emplace_back(pfx, l);
  std::vector<std::pair<std::string, Hops>> snapshot;
  for (std::string& p : active_paths(pfx)) {
    Hops hops = broadcasts_.find(p)->second->active()->hops;
    snapshot.emplace_back(std::move(p), hops);
  }
  for (const auto& [p, hops] : snapshot) {
    bool listening = std::any_of(listeners_.begin(), listeners_.end(),
                                 [&](const auto& e) { return e.second == l; });
    if (!listening) {
      return;
    }
    l->on_announce(p, true, hops);
  }
}

void Origin::remove_listener(AnnounceListener* l) {
  if (notify_depth_ > 0) {
    for (auto& e : listeners_) {
      if (e.second == l) {
        e.second = nullptr;
      }
    }
  } else {
    std::erase_if(listeners_, [&](const auto& e) { return e.second == l; });
  }
}

Track* Origin::track(const std::string& path, const std::string& name) {
  auto it = broadcasts_.find(normalize_path(path));
  if (it == broadcasts_.end() || it->second->publishers.empty()) {
    return nullptr;
  }
  Broadcast& b = *it->second;
  auto t = b.tracks.find(name);
  if (t != b.tracks.end()) {
    if (!t->second->is_ended()) {
      return t->second.get();
    }
    retired_.push_back(std::move(t->second));
    b.tracks.erase(t);
  }
  Track* created = create_track(b, name);
  const std::string bpath = b.path;
  notify_track(bpath, name);
  return created;
}

void Origin::notify_track(const std::string& path, const std::string& name) {
  ++notify_depth_;
  for (size_t i = 0, n = listeners_.size(); i < n; ++i) {
    AnnounceListener* l = listeners_[i].second;
    if (l && has_prefix(listeners_[i].first, path)) {
      l->on_track(path, name);
    }
  }
  if (--notify_depth_ == 0) {
    std::erase_if(listeners_, [](const auto& e) { return e.second == nullptr; });
  }
}

std::vector<std::pair<std::string, std::string>> Origin::live_tracks(const std::string& prefix) const {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string p = normalize_path(prefix);
  for (const auto& [path, b] : broadcasts_) {
    if (b->publishers.empty() || !has_prefix(p, path)) {
      continue;
    }
    for (const auto& [name, t] : b->tracks) {
      if (!t->is_ended()) {
        out.emplace_back(path, name);
      }
    }
  }
  return out;
}

size_t Origin::broadcast_count() const {
  return broadcasts_.size();
}

size_t Origin::track_count() const {
  size_t n = retired_.size();
  for (const auto& [path, b] : broadcasts_) {
    n += b->tracks.size();
  }
  return n;
}

Track* Origin::create_track(Broadcast& b, const std::string& name) {
  auto t = std::make_unique<Track>(b.path, name, config_.cache, config_.upstream_linger, clock_,
                                   timers_);
  Track* raw = t.get();
  BroadcastSource* publisher = b.active()->source;
  raw->set_source(&publisher->track_source(b.path, name));
  raw->attach_budget(config_.budget);
  raw->attach_budget(publisher->cache_budget());
  // The Track cancels this timer callback when destroyed, so the raw pointers stay valid.
  raw->set_idle_callback([this, raw] { on_track_idle(raw); });
  b.tracks.emplace(name, std::move(t));
  if (b.tracks.size() == 1) {
    const std::string path = b.path;
    if (elsewhere_.count(path) == 0) {
      notify_carrying(b, true);
    }
    update_presence(path);
  }
  return raw;
}

void Origin::end_tracks(Broadcast& b) {
  std::vector<Track*> ending;
  for (auto& [name, t] : b.tracks) {
    ending.push_back(t.get());
    retired_.push_back(std::move(t));
  }
  b.tracks.clear();
  for (Track* t : ending) {
    t->end(make_error(ErrorCode::kClosed, "broadcast publisher changed or left"));
  }
}

void Origin::notify(const std::string& path, bool active, const Hops& hops) {
  ++notify_depth_;
  for (size_t i = 0, n = listeners_.size(); i < n; ++i) {
    AnnounceListener* l = listeners_[i].second;
    if (l && has_prefix(listeners_[i].first, path)) {
      l->on_announce(path, active, hops);
    }
  }
  if (--notify_depth_ == 0) {
    std::erase_if(listeners_, [](const auto& e) { return e.second == nullptr; });
  }
}

void Origin::notify_carrying(const Broadcast& b, bool carrying) {
  const Broadcast::Publisher* a = b.active();
  if (a == nullptr || a->hops.empty()) {
    return;  // a local publisher: its relay is the origin, warm or not
  }
  const std::string path = b.path;
  const Hops hops = a->hops;
  ++notify_depth_;
  for (size_t i = 0, n = listeners_.size(); i < n; ++i) {
    AnnounceListener* l = listeners_[i].second;
    if (l && has_prefix(listeners_[i].first, path)) {
      l->on_carrying(path, hops, carrying);
    }
  }
  if (--notify_depth_ == 0) {
    std::erase_if(listeners_, [](const auto& e) { return e.second == nullptr; });
  }
}

void Origin::on_track_idle(Track* t) {
  auto it = broadcasts_.find(t->broadcast());
  if (it != broadcasts_.end()) {
    auto& tracks = it->second->tracks;
    auto e = tracks.find(t->name());
    if (e != tracks.end() && e->second.get() == t) {
      tracks.erase(e);
      if (tracks.empty()) {
        const std::string path = it->first;
        if (elsewhere_.count(path) == 0) {
          notify_carrying(*it->second, false);
        }
        update_presence(path);
      }
      return;
    }
  }
  std::erase_if(retired_, [&](const TrackPtr& r) { return r.get() == t; });
}

void Origin::for_each_track_impl(
    const std::function<void(const std::string&, const Track&)>& fn) const {
  for (const auto& [path, b] : broadcasts_) {
    for (const auto& [name, t] : b->tracks) {
      fn(path, *t);
    }
  }
}

}  // namespace moqd::model
