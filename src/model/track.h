#pragma once
// A track: the groups of one (broadcast, track name), as a bounded cache shared by every
// subscriber on this worker. One producer feeds it; listeners are notified (edge-triggered) and
// pull with their own cursors. Owned by its Broadcast; one worker thread.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "model/cache_budget.h"
#include "model/group.h"

namespace moqd::model {

class Track;

// A track's immutable publisher properties (moq-lite-05 TRACK_INFO). A source that learns them
// from its peer (a moq-lite-05 publisher) marks the track's properties pending while it asks; every
// other source leaves the defaults: timescale 1000, and objects stamped with the millisecond their
// first byte reached moqd (moq-lite-01..04 and the bridge's own clock carry no timestamps).
struct TrackProperties {
  static constexpr uint64_t kMillis = 1000;
  uint8_t priority = 0;
  bool ordered = false;
  uint64_t max_latency_ms = 0;
  uint64_t timescale = kMillis;  // units per second, never 0
  // False when Object::timestamp may be in units moqd never learns: an IETF publisher whose
  // SUBSCRIBE_OK or PUBLISH declared no TIMESCALE. An IETF subscriber is then told no TIMESCALE
  // (it times objects by arrival), rather than a wrong one.
  bool timescale_known = true;
  // Stand-ins, not the publisher's: a moq-lite-05 publisher has not answered TRACK within its
  // source's bound (UpstreamTrack::kTrackInfoWait). timescale_known is false. Readers that must
  // not wait longer (an IETF subscriber's SUBSCRIBE_OK, a FETCH_OK) take them; a moq-lite-05
  // TRACK_INFO waits on for the publisher's, which replace these when they come.
  bool provisional = false;
  friend bool operator==(const TrackProperties&, const TrackProperties&) = default;
};

// Cache bounds for one track. The newest group is never evicted, whatever its size or age.
struct CacheLimits {
  size_t max_groups = 8;                     // groups kept (--cache-groups)
  uint64_t max_bytes = 64ull << 20;          // payload bytes kept (--cache-bytes)
  Duration max_age = std::chrono::seconds(30);  // age of a group, from its first byte (--cache-age)
};

// Told when a track changes. Raw pointers held by the track; remove yourself before you die.
// Callbacks must not add or remove other listeners of the same track (removing yourself is fine).
class TrackListener {
 public:
  virtual ~TrackListener() = default;
  // Something new: a group, an object, a chunk, a group's end or abort. Pull with the cursors.
  // A new group is told at once; objects, chunks and a group's end are told once per loop turn
  // (Timers::at_turn_end), however many the producer made in it: a frame that began and arrived
  // in three packets is one call, not four.
  virtual void on_track_data(Track& track) = 0;
  // The track is over (publisher finished it, the broadcast ended, or an error). The listener is
  // already removed when this is called, and the Track may be destroyed right after it returns.
  // Groups the listener holds through GroupRefs stay valid.
  virtual void on_track_ended(Track& track, Error reason) = 0;
  // A viewer (a subscriber) rather than a relay-internal reader such as a feed to another
  // worker; only viewers count in viewer_count().
  virtual bool is_viewer() const { return true; }
  // Wants the track's data: a viewer, or a feed to one elsewhere (another worker, a cluster
  // peer). False for a reader that only holds the track open (a PUBLISH's hold, ietf_publish.h).
  virtual bool wants_data() const { return true; }
  // Demand (listeners that want data) went from none to some (true) or back to none (false),
  // because another listener was added or removed; told to every listener still attached, never
  // on end(). Must not add or remove listeners of this track.
  virtual void on_track_demand(Track& /*track*/, bool /*demanded*/) {}
};

// The producer behind a track (a publisher's session, an upstream relay, another worker).
class TrackSource {
 public:
  virtual ~TrackSource() = default;
  // Start feeding `track` (send SUBSCRIBE upstream). Called once when the first listener arrives,
  // and again after a stop_track. The source writes into the track with its producer methods,
  // possibly already from inside this call.
  virtual void start_track(Track& track) = 0;
  // Stop feeding; the track no longer needs data. Called exactly once per start_track: when the
  // linger expires, from end() (also when the source itself called end(), so it must tolerate the
  // re-entrant call), or from the Track's destructor. The source must not touch `track` after this.
  virtual void stop_track(Track& track) = 0;
};

class Track final : private TurnWork {
 public:
  // `timers` drives linger and the deferred idle callback; it must outlive the track. Age eviction
  // needs no timer: it runs whenever a group begins or a chunk arrives.
  Track(std::string broadcast, std::string name, CacheLimits limits, Duration linger,
        const Clock& clock, Timers& timers);
  ~Track();
  Track(const Track&) = delete;
  Track& operator=(const Track&) = delete;

  const std::string& broadcast() const { return broadcast_; }
  const std::string& name() const { return name_; }
  bool is_ended() const { return ended_; }
  // True while the source has been asked to feed this track.
  bool is_upstream_active() const { return upstream_active_; }

  // --- producer side ---
  void set_source(TrackSource* source) { source_ = source; }
  TrackSource* source() const { return source_; }
  // Hands the track to another producer of the same broadcast (a relay whose path to the origin
  // died, re-served through another path) without ending it, so listeners keep reading: groups
  // still open are aborted, the old source is stopped and the new one started (if the track was
  // being fed), and from now on only groups newer than the newest one seen are taken
  // (begin_group refuses the rest), so no listener sees a group twice or an older one after a
  // newer. A no-op on an ended track.
  void switch_source(TrackSource* next);
  // Groups at or below this sequence are refused (set by switch_source), if any.
  std::optional<uint64_t> sequence_floor() const { return sequence_floor_; }
  // A new group arrives (a group stream opened). Returns it, or null if a group with that sequence
  // is already cached (a duplicate; the caller drops the stream) or the track has ended. The cache
  // holds the only reference: a producer that writes to it after another group begins must hold a
  // GroupRef, since eviction may drop the cache's. Producer calls after end() are no-ops.
  Group* begin_group(uint64_t sequence);
  // An IETF subgroup of group `sequence`: one Group per (sequence, subgroup), refused (null) as a
  // duplicate of that pair only. `has_extensions`: see Group::has_extensions.
  Group* begin_group(uint64_t sequence, uint64_t subgroup, bool has_extensions);
  void begin_object(Group& g, uint64_t size, ObjectStatus status = ObjectStatus::kNormal);
  // The same, with the object's presentation timestamp (Object::timestamp).
  void begin_timed_object(Group& g, uint64_t size, uint64_t timestamp);
  // An IETF producer's object: its id (Group::begin_object_with_id), its raw extension block in
  // draft `extensions_draft`'s encoding (held, not copied), the timestamp the block gave (else the
  // arrival millisecond, as begin_object), and whether the block holds more than moq-lite carries.
  struct IetfObject {
    uint64_t id = 0;
    uint64_t size = 0;
    Bytes extensions;
    uint8_t extensions_draft = 0;
    std::optional<uint64_t> timestamp;
    bool lite_refused = false;
    bool unreliable = false;  // Object::unreliable
  };
  void begin_ietf_object(Group& g, IetfObject o);
  // The source is asking its peer for the track's properties (moq-lite-05 TRACK): properties()
  // is empty until set_properties(). Listeners hear of the answer through on_track_data.
  void expect_properties();
  void set_properties(const TrackProperties& p);
  void append_chunk(Group& g, Bytes chunk);
  void finish_group(Group& g);
  void abort_group(Group& g);
  // Ends the track: cached groups still open are aborted, every listener gets on_track_ended and
  // is removed, then the source is stopped (if it was started). A no-op if already ended. The idle
  // callback follows from a timer.
  void end(Error reason);

  // --- owner side ---
  // Called when the track is no longer needed: its linger expired with no listener (after
  // stop_track), or it ended. Always called from a timer callback, never from inside a Track
  // method, so the owner may destroy the Track in it.
  void set_idle_callback(std::function<void()> fn) { idle_callback_ = std::move(fn); }

  // --- consumer side ---
  // Adds a listener; if it is the first, asks the source to start (or cancels a pending linger).
  // A no-op on an ended track (check is_ended(); the Origin never hands out ended tracks).
  void add_listener(TrackListener* l);
  // Removes it; when none are left, the source is stopped after the linger delay. Unknown
  // listeners are ignored.
  void remove_listener(TrackListener* l);
  size_t listener_count() const { return listener_count_; }
  // Listeners that are viewers (TrackListener::is_viewer), for the status page.
  size_t viewer_count() const { return viewer_count_; }
  // Listeners that want data (TrackListener::wants_data), and the linger the track was made with
  // (--upstream-linger).
  size_t demand_count() const { return demand_count_; }
  Duration linger() const { return linger_; }
  // Payload bytes this track received, and bytes its viewers took (counted by the session layer
  // through note_bytes_out), for the status page's bitrates.
  uint64_t bytes_in() const { return bytes_in_; }
  uint64_t bytes_out() const { return bytes_out_; }
  void note_bytes_out(uint64_t n) { bytes_out_ += n; }
  // The most important priority any subscriber asked for (higher first), which the source uses
  // for its own upstream request. Subscribers raise it before add_listener().
  void raise_priority(uint8_t p) { priority_ = priority_ ? std::max(*priority_, p) : p; }
  std::optional<uint8_t> priority() const { return priority_; }
  // The newest cached group by arrival (where a late joiner starts), or null.
  GroupRef newest_group() const;
  // Cached groups whose arrival index is at least `first_arrival`, oldest first (0: all cached).
  // A reader keeps the next arrival it wants and passes it here.
  std::vector<GroupRef> groups_from(uint64_t first_arrival) const;
  // The same groups handed to `f(const GroupRef&)` one by one, without building a vector (the
  // fan-out path asks on every pump). `f` must not change the track.
  template <class F>
  void for_each_group_from(uint64_t first_arrival, F&& f) const {
    for (size_t i = first_cached_index(first_arrival); i < cache_.size(); ++i) {
      f(cache_[i]);
    }
  }
  // Where a late joiner starts reading: the newest cached group's arrival index, or the next one
  // to be assigned when nothing is cached.
  uint64_t late_join_arrival() const {
    return cache_.empty() ? next_arrival_ : cache_.back()->arrival();
  }
  // The next arrival index that will be assigned (one past the newest).
  uint64_t next_arrival() const { return next_arrival_; }
  // The track's properties, or nullopt while the source is still asking for them.
  std::optional<TrackProperties> properties() const {
    return properties_pending_ ? std::nullopt : std::optional<TrackProperties>(properties_);
  }
  // Largest group sequence seen, if any.
  std::optional<uint64_t> largest_sequence() const { return largest_sequence_; }

  // Shares this track's cache with a budget (at most kMaxBudgets: the worker's and the
  // publisher's). Growth beyond a budget evicts the oldest groups of its least recently served
  // tracks.
  static constexpr size_t kMaxBudgets = 2;
  void attach_budget(CacheBudget* budget);
  // A subscriber took data: this track becomes the most recently served in its budgets.
  void note_served();
  // Evicts the oldest cached group unless it is the newest; false when nothing can go.
  bool evict_oldest_group();
  // The budget is being destroyed: drop the link without touching it further.
  void forget_budget(CacheBudget* budget);

  // Cached state, for tests and metrics.
  size_t cached_groups() const { return cache_.size(); }
  uint64_t cached_bytes() const { return cached_bytes_; }

 private:
  // Tells the listeners at the end of the turn (coalesced); notify_now() tells them at once.
  void notify() { timers_.at_turn_end(*this); }
  void run_turn_work() override { notify_now(); }
  void notify_now();
  // Index in cache_ of the first group whose arrival is at least `first_arrival`.
  size_t first_cached_index(uint64_t first_arrival) const;
  void evict();
  void charge_budgets(uint64_t n);
  void release_budgets(uint64_t n);
  void drop_oldest();
  bool is_cached(const Group& g) const;
  void stop_upstream();
  void schedule_idle();
  bool on_linger_expired();
  // Tells every listener that demand began or ended (TrackListener::on_track_demand).
  void notify_demand(bool demanded);
  void compact_listeners();

  std::string broadcast_;
  std::string name_;
  CacheLimits limits_;
  Duration linger_;
  const Clock& clock_;
  Timers& timers_;
  TrackSource* source_ = nullptr;
  bool upstream_active_ = false;
  bool ended_ = false;
  TimerId linger_timer_ = 0;
  TimerId idle_timer_ = 0;
  std::function<void()> idle_callback_;
  std::deque<GroupRef> cache_;  // arrival order
  uint64_t cached_bytes_ = 0;
  uint64_t next_arrival_ = 0;
  std::optional<uint64_t> largest_sequence_;
  std::optional<uint64_t> sequence_floor_;
  std::optional<uint8_t> priority_;
  TrackProperties properties_;
  bool properties_pending_ = false;
  struct BudgetLink {
    CacheBudget* budget = nullptr;
    CacheBudget::Link link;
  };
  BudgetLink budgets_[kMaxBudgets];
  // Removed listeners become null while a callback runs (notify_depth_ > 0) and are compacted
  // after, so listeners may remove themselves from inside callbacks.
  std::vector<TrackListener*> listeners_;
  size_t listener_count_ = 0;
  size_t viewer_count_ = 0;
  size_t demand_count_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
  int notify_depth_ = 0;
};

}  // namespace moqd::model
