#include "model/origin.h"

#include <algorithm>
#include <utility>

#include "model/path.h"

namespace moqd::model {

struct Origin::Broadcast {
  struct Publisher {
    BroadcastSource* source;
    uint64_t hops;
  };
  std::string path;
  // Announcement order; back() is the active publisher, the rest are backups.
  std::vector<Publisher> publishers;
  std::map<std::string, TrackPtr> tracks;  // by track name; never ended ones
};

Origin::Origin(OriginConfig config, const Clock& clock, Timers& timers)
    : config_(config), clock_(clock), timers_(timers) {}

Origin::~Origin() = default;

void Origin::announce(const std::string& path, BroadcastSource* source, uint64_t hops) {
  std::string p = normalize_path(path);
  std::unique_ptr<Broadcast>& slot = broadcasts_[p];
  if (!slot) {
    slot = std::make_unique<Broadcast>();
    slot->path = p;
  }
  Broadcast& b = *slot;
  if (!b.publishers.empty() && b.publishers.back().source == source) {
    return;
  }
  std::erase_if(b.publishers, [&](const auto& pub) { return pub.source == source; });
  bool had_active = !b.publishers.empty();
  uint64_t old_hops = had_active ? b.publishers.back().hops : 0;
  b.publishers.push_back({source, hops});
  if (had_active) {
    end_tracks(b);
    notify(p, false, old_hops);
  }
  notify(p, true, hops);
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
  bool was_active = pub + 1 == b.publishers.end();
  uint64_t old_hops = pub->hops;
  b.publishers.erase(pub);
  if (!was_active) {
    return;
  }
  end_tracks(b);
  // Callbacks may have changed the broadcast: look it up again.
  std::optional<uint64_t> next_hops;
  it = broadcasts_.find(p);
  if (it != broadcasts_.end()) {
    if (it->second->publishers.empty()) {
      broadcasts_.erase(it);
    } else {
      next_hops = it->second->publishers.back().hops;
    }
  }
  notify(p, false, old_hops);
  if (next_hops) {
    notify(p, true, *next_hops);
  }
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
  return it->second->publishers.back().source;
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
  std::vector<std::pair<std::string, uint64_t>> snapshot;
  for (std::string& p : active_paths(pfx)) {
    uint64_t hops = broadcasts_.find(p)->second->publishers.back().hops;
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
  return create_track(b, name);
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
  BroadcastSource* publisher = b.publishers.back().source;
  raw->set_source(&publisher->track_source(b.path, name));
  raw->attach_budget(config_.budget);
  raw->attach_budget(publisher->cache_budget());
  // The Track cancels this timer callback when destroyed, so the raw pointers stay valid.
  raw->set_idle_callback([this, raw] { on_track_idle(raw); });
  b.tracks.emplace(name, std::move(t));
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

void Origin::notify(const std::string& path, bool active, uint64_t hops) {
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

void Origin::on_track_idle(Track* t) {
  auto it = broadcasts_.find(t->broadcast());
  if (it != broadcasts_.end()) {
    auto& tracks = it->second->tracks;
    auto e = tracks.find(t->name());
    if (e != tracks.end() && e->second.get() == t) {
      tracks.erase(e);
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
