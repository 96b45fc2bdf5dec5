#pragma once
// The origin: every broadcast this worker knows (published by a local session, or learned from
// another worker or an upstream relay), discovery by path prefix with live updates, and the tracks
// subscribers are reading. No I/O and no protocol. One per worker.
//
// Several sources of a path (routes): the best one is active, the others stay as backups. Best
// is the lowest score, route_distance() + cost (a local publisher: 0); between equal scores, the
// lexicographically smaller hop list (so the nearer copy), then the newest announcement. So among local publishers the newest wins, as before clustering; among relayed
// routes the shortest, cheapest path wins with a tie-break every relay computes alike.
//
// Warm copies: a relay that carries a broadcast (has live tracks of it: an upstream subscription)
// marks its own hop with kWarmHop when it announces the broadcast to its peers. A route's distance
// is then counted from the nearest warm copy, not from the origin relay, because the relays before
// it already pull the broadcast: one more subscription costs only the hops after it. A warm mark
// is honoured only from a relay whose warm_key() for the path is below this relay's own, so two
// relays that each pull a broadcast never re-parent onto each other at once (see
// docs/ARCHITECTURE.md, Clustering). When the active source changes:
// - to another hop list of the same source (a warm mark came or went), nothing moves: the tracks
//   keep their subscription through that source;
// - between two relayed routes from the same origin relay (the same first hop id), the open
//   tracks move to the new route (Track::switch_source): subscribers keep their subscription and
//   see only groups newer than those they had;
// - otherwise the broadcast's open tracks end (subscribers see their subscription end), because a
//   different publisher may restart its group sequences at 0 (a publisher that reconnects
//   mid-track is such a switch).
// Either way (but for the first case, where they hear only active with the new hops) discovery
// listeners hear ended-then-active, with the new route's hops. Ended tracks
// close with ErrorCode::kClosed and their sources get stop_track synchronously (a leaving source
// must therefore unannounce while it is still alive).
//
// Callbacks (on_announce, on_track_ended) may call back into the Origin: a listener may remove
// itself, and a subscriber whose track ended may ask for the track again (it gets a fresh one
// from the new publisher). Destroy the Origin after every session has left it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "model/track.h"

namespace moqd::model {

// Publishes a broadcast: asked for tracks by name.
class BroadcastSource {
 public:
  virtual ~BroadcastSource() = default;
  // The source that will feed track `name` of broadcast `path`; called when a Track is created.
  virtual TrackSource& track_source(const std::string& path, const std::string& name) = 0;
  // The budget this publisher's cached bytes count against (--max-publisher-cache), or null.
  virtual CacheBudget* cache_budget() { return nullptr; }
};

// The relays an announcement crossed, oldest first (moq-lite-04 hop ids: the origin relay's id
// first, the neighbour's last). Empty for a broadcast published by a local client.
using Hops = std::vector<uint64_t>;

// A hop id of the form id | kWarmHop, id below 2^52 (relay::hop_id_for_node), names a relay
// that carried the broadcast when it announced it. Only that form is warm: a hop id with any bit
// above 52 set is not one of ours (another relay implementation's, e.g. a random 62-bit id) and
// is an opaque id, never warm, compared whole. Compare relays with hop_relay().
inline constexpr uint64_t kWarmHop = uint64_t{1} << 52;
constexpr bool is_warm_hop(uint64_t hop) { return (hop >> 52) == 1; }
constexpr uint64_t hop_relay(uint64_t hop) { return is_warm_hop(hop) ? hop & ~kWarmHop : hop; }
// True when `hops` holds relay `relay` (warm or not).
bool hops_contain(const Hops& hops, uint64_t relay);
// The order in which relays may pull `path` from each other's warm copies: FNV-1a 64 of the path
// then of the relay's hop id (8 bytes, little-endian, warm bit cleared). Stable across builds.
uint64_t warm_key(std::string_view path, uint64_t relay);
// The relays one more subscription to `path` over a route with `hops` must cross: hops.size()
// counted from the last honoured warm hop (hops[i], i >= 1, warm, and warm_key(path, hops[i]) <
// warm_key(path, self)), else from the origin relay. `self` 0 (not a relay) honours none.
uint64_t route_distance(std::string_view path, const Hops& hops, uint64_t self);

// Discovery listener for a prefix.
class AnnounceListener {
 public:
  virtual ~AnnounceListener() = default;
  // `path` is the full normalised broadcast path; `hops` the relays it crossed (active route's).
  virtual void on_announce(const std::string& path, bool active, const Hops& hops) = 0;
  // The origin started (`carrying`) or stopped carrying active broadcast `path` (see
  // Origin::is_carrying); `hops` are its active route's. The default ignores it.
  virtual void on_carrying(const std::string& /*path*/, const Hops& /*hops*/, bool /*carrying*/) {}
  // A track `name` of active broadcast `path` came alive here (Origin::track created it: a
  // subscriber asked for it, or a publisher pushed it). Called after the track is registered, so
  // Origin::track(path, name) returns it; the listener may subscribe to it from here. The default
  // ignores it.
  virtual void on_track(const std::string& /*path*/, const std::string& /*name*/) {}
};

struct OriginConfig {
  CacheLimits cache;
  Duration upstream_linger = std::chrono::seconds(5);  // --upstream-linger
  // This worker's share of the global cache budget (--cache-budget / workers); null: unbounded.
  // Owned by the caller and must outlive the Origin.
  CacheBudget* budget = nullptr;
  // This relay's hop id (SessionConfig::hop_id), for route_distance(); 0: not a relay.
  uint64_t hop_id = 0;
};

class Origin {
 public:
  Origin(OriginConfig config, const Clock& clock, Timers& timers);
  ~Origin();

  // Adds (or updates) `source` as a route to `path`; it becomes active when it is the best (see
  // the file comment). `hops`: the relays the announcement crossed (empty for a local client);
  // `cost`: the price of the link it came over (--cluster-connect ?cost=N), added to its score.
  void announce(const std::string& path, BroadcastSource* source, Hops hops = {},
                uint64_t cost = 0);
  // Withdraws `source`'s announcement of `path`; a no-op if it has none.
  void unannounce(const std::string& path, BroadcastSource* source);
  bool is_active(const std::string& path) const;
  // The publisher whose announcement of `path` is active, or null.
  BroadcastSource* active_source(const std::string& path) const;
  // One route to a broadcast, for /cluster.
  struct Route {
    BroadcastSource* source = nullptr;
    Hops hops;
    uint64_t cost = 0;
    bool active = false;
  };
  // Every route to `path`, best (the active one) first.
  std::vector<Route> routes(const std::string& path) const;
  // True when `path` is active through a relayed route (hops not empty) and has live tracks here
  // or on another worker (set_carried_elsewhere): this relay pulls it from upstream, so its peers
  // may pull the warm copy from here.
  bool is_carrying(const std::string& path) const;
  // Another worker of this relay has tracks of `path` (relay/bridge tells it, as the other
  // workers' presence observers fire), so warmness is the relay's, not this worker's. Kept
  // whether or not `path` is known here yet; listeners hear on_carrying when it changes.
  void set_carried_elsewhere(const std::string& path, bool carried);
  // Called with (path, true) when this Origin's first track of `path` appears and (path, false)
  // when its last one goes (idle after the linger, ended, or the broadcast withdrawn). One
  // observer; an empty function clears it. It must not call back into the Origin.
  void set_presence_observer(std::function<void(const std::string&, bool)> fn);
  // Active paths under `prefix`, sorted.
  std::vector<std::string> active_paths(const std::string& prefix) const;

  // Adds a discovery listener. It first receives on_announce(active) for every active path under
  // `prefix` (normalised; "foo" does not match "foobar") synchronously, before this returns, then
  // live updates. remove_listener of an unknown listener is a no-op.
  void add_listener(const std::string& prefix, AnnounceListener* l);
  void remove_listener(AnnounceListener* l);

  // The track (created on first use) of an active broadcast, or null when `path` is not active.
  // The caller adds itself as a listener right away; a Track with no listeners and no pending
  // linger is destroyed (from a timer, never inside a call). An ended track is never returned:
  // a fresh one replaces it.
  Track* track(const std::string& path, const std::string& name);

  // Active broadcasts.
  size_t broadcast_count() const;
  // Calls `fn(path, track)` for every live track of every active broadcast (status page).
  template <class F>
  void for_each_track(F&& fn) const {
    for_each_track_impl([&](const std::string& path, const Track& t) { fn(path, t); });
  }
  // (path, name) of every live (not ended) track of the active broadcasts under `prefix`.
  std::vector<std::pair<std::string, std::string>> live_tracks(const std::string& prefix) const;
  // Track objects alive, including ended ones waiting for their idle timer.
  size_t track_count() const;

 private:
  struct Broadcast;
  using TrackPtr = std::unique_ptr<Track>;
  Track* create_track(Broadcast& b, const std::string& name);
  // Ends every track of `b` (moved to retired_ first, so callbacks may create fresh ones).
  void end_tracks(Broadcast& b);
  // The active source of `b` changed from `old` (hops `old_hops`): moves or ends the tracks and
  // tells the listeners. `b` may be gone when this returns.
  void switch_active(const std::string& path, BroadcastSource* old, const Hops& old_hops);
  void notify(const std::string& path, bool active, const Hops& hops);
  // Tells the listeners under `path` that track `name` came alive (on_track).
  void notify_track(const std::string& path, const std::string& name);
  // Tells listeners that `b` started or stopped carrying (its first track came, its last went).
  void notify_carrying(const Broadcast& b, bool carrying);
  void on_track_idle(Track* t);
  // Tells the presence observer when whether `path` has tracks here changed.
  void update_presence(const std::string& path);
  void for_each_track_impl(const std::function<void(const std::string&, const Track&)>& fn) const;

  OriginConfig config_;
  const Clock& clock_;
  Timers& timers_;
  std::map<std::string, std::unique_ptr<Broadcast>> broadcasts_;
  // Ended tracks waiting for their idle timer.
  std::vector<TrackPtr> retired_;
  // Removed listeners become null while callbacks run and are compacted after.
  std::vector<std::pair<std::string, AnnounceListener*>> listeners_;
  int notify_depth_ = 0;
  uint64_t announce_order_ = 0;  // stamps announcements: newer wins ties
  std::set<std::string> present_;    // paths with tracks here, as last told the observer
  std::set<std::string> elsewhere_;  // paths with tracks on another worker
  std::function<void(const std::string&, bool)> presence_observer_;
};

}  // namespace moqd::model
