#pragma once
// The bridge between workers. Every worker has its own Origin; a broadcast announced by a session
// on worker A is announced on every other worker with a RemoteBroadcast as its source. When a
// subscriber on worker B needs a track of it, B's RemoteTrack asks A for a feed: A listens to its
// own Track (subscribing upstream once, like any subscriber) and posts the groups' events to B,
// copying each chunk once for B. B writes them into its own Track, from which all of B's
// subscribers read. So a track crosses to another core once, never once per subscriber, and a
// worker never touches another worker's state: everything goes through Workers::post.
//
// Feeds are paced by credit: A stops pulling once BridgeLimits::credit_bytes are posted but not
// yet acknowledged by B, and, while something is in flight, whenever A's mailbox to B is
// congested (B is not keeping up). B is then treated like a slow viewer: the track's bytes wait
// in the feed's cursors (references into A's cache, no copies), and past the backlog limits the
// feed skips to the newest group, aborting on B the old groups it had begun. So a slow worker
// never stalls the publisher or A's viewers, and what A holds for it is bounded. A track that
// ends is flushed through the credit window before its end is posted: B's viewers get every
// group A's viewers get.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "model/origin.h"
#include "runtime/workers.h"
#include "session/config.h"

namespace moqd::relay {

class RemoteBroadcast;
class Feed;

// What B receives for a feed, in order.
struct FeedEvent {
  // kProperties: the track's properties became known on the home worker (model::Track::
  // properties); sent before or between group events, once, and again if they change
  // (provisional ones replaced by the publisher's, model::TrackProperties::provisional).
  enum class Kind : uint8_t { kGroup, kObject, kChunk, kGroupEnd, kGroupAbort, kProperties };
  // Credit an event costs besides its payload, so that events without payload (empty frames,
  // group ends, aborts) are paced too.
  static constexpr uint64_t kCost = 64;

  Kind kind = Kind::kGroup;
  uint64_t sequence = 0;  // the group's
  uint64_t size = 0;      // kObject: declared size
  // kChunk: the home worker's reference to the chunk in its cache. The receiver reads it (span())
  // and appends its own copy: its allocation and its free are both the receiver's, so no heap
  // block crosses threads. The receiver never copies, moves or destroys this Bytes (its refcount
  // is the home worker's, not atomic); the home worker drops it when the batch comes back, so
  // the bytes, which are never written once in a cache, outlive the receiver's read.
  Bytes chunk;
  uint64_t timestamp = 0; // kObject: Object::timestamp
  model::TrackProperties properties{};  // kProperties
  // Every event but kProperties: the group's IETF subgroup (with `sequence`, which group).
  uint64_t subgroup = 0;
  bool has_extensions = false;  // kGroup: model::Group::has_extensions
  // kObject: model::Object's id, extension block (the home worker's reference, copied by the
  // receiver as `chunk` is; empty for moq-lite producers), its draft, and lite_refused.
  uint64_t object_id = 0;
  Bytes extensions;
  uint8_t extensions_draft = 0;
  bool lite_refused = false;

  uint64_t cost() const { return kCost + chunk.size() + extensions.size(); }
};

// One batch of a feed's events crossing to the receiving worker, and back as its acknowledgement.
// The home worker's Bridge owns every batch and reuses them: the receiver empties `events` (its
// capacity stays), sets `bytes` and posts the batch back, so in steady state a frame crossing
// allocates neither an event vector nor a task closure (a task capturing two pointers is stored
// inside std::function). Ownership moves with the task: one thread touches a batch at a time.
struct FeedBatch {
  size_t from = 0;     // the home worker, which owns the batch
  size_t to = 0;       // the receiving worker
  uint64_t id = 0;     // the feed's id there
  std::vector<FeedEvent> events;
  uint64_t bytes = 0;  // set by the receiver: the credit the batch returns
  size_t slot = 0;     // its index in the home Bridge's store
};

// Pacing and skip-ahead of the feeds one worker serves to another.
struct BridgeLimits {
  // Credit per feed: event costs (payload bytes plus FeedEvent::kCost each) posted to the
  // receiving worker and not yet acknowledged. Default 4 MiB.
  uint64_t credit_bytes = 4ull << 20;
  // Per feed: bytes of the track not yet posted (waiting for credit) past which the oldest
  // groups are skipped. Default 8 MiB, as a subscription's --max-backlog-bytes.
  uint64_t max_backlog_bytes = 8ull << 20;
  // Per feed: a group with bytes not yet posted that is older than this is skipped once a newer
  // group exists. Default 10 s, as --max-backlog-age.
  Duration max_backlog_age = std::chrono::seconds(10);
};

// What a worker's feeds hold, summed (tests and metrics; worker thread).
struct FeedStats {
  size_t feeds = 0;
  size_t groups_held = 0;       // groups referenced by the feeds' cursors
  uint64_t held_bytes = 0;      // their payload bytes
  uint64_t backlog_bytes = 0;   // of which not yet posted
  uint64_t in_flight_bytes = 0; // credit in use
};

class Bridge {
 public:
  // Announcement changes per batch: the receiving worker applies a batch in one task, so a
  // larger one would hold its loop (and its viewers) for longer; the rest waits for the next.
  static constexpr size_t kMaxAnnounceBatch = 256;
  // A feed logs its skip-ahead at most once per this interval.
  static constexpr Duration kSkipLogInterval = std::chrono::seconds(10);

  // `bridges` holds every worker's Bridge by worker index and outlives them all.
  Bridge(size_t self, runtime::Workers& workers, model::Origin& origin,
         const std::vector<Bridge*>& bridges, BridgeLimits limits = {});
  ~Bridge();

  size_t self() const { return self_; }
  model::Origin& origin() { return origin_; }
  const BridgeLimits& limits() const { return limits_; }
  const Clock& clock() { return workers_.loop(self_); }
  runtime::Workers& workers() { return workers_; }
  // Groups this worker's feeds skipped because a receiving worker fell behind. Written by this
  // worker; read from any thread.
  session::SkipCounters& skips() { return skips_; }
  const session::SkipCounters& skips() const { return skips_; }
  // Worker thread.
  FeedStats feed_stats() const;

  // A session on this worker announced or withdrew `path`: tell the other workers. Changes are
  // coalesced per path until the loop runs again (post_announce), and only a change of what the
  // other workers were last told crosses (so a path flipped between active and ended many times
  // in one turn costs them at most one task). Credit: the changes cross in batches of at most
  // kMaxAnnounceBatch, one task per other worker, and the next batch waits until every worker
  // has acknowledged the last; meanwhile changes keep coalescing here, one entry per path. So what this worker has
  // queued towards another for announcements is at most one batch, whatever its sessions do.
  void publish_local(const std::string& path, bool active, const model::Hops& hops, uint64_t cost);
  // A session on this worker that announced `path` changed its route's hop list: the other
  // workers hear this worker's best local route again (when it changed), no new publisher counted.
  void refresh_local(const std::string& path);
  // Announcement changes waiting for the flush, batches posted so far (one per other worker
  // each), and acknowledgements still awaited (for tests).
  size_t pending_announces() const { return pending_announces_.size(); }
  uint64_t announce_posts() const { return announce_posts_; }
  size_t announce_acks_awaited() const { return announce_acks_awaited_; }

  // Warmness across workers: this worker's Origin got its first track of `path` (`present`) or
  // lost its last. The change is coalesced per path until the loop runs again and only a change
  // of what the other workers were last told crosses, so a worker posts at most one task per
  // other worker per loop turn for it. Each other worker's Origin then counts `path` as carried
  // elsewhere while any worker has tracks of it (Origin::set_carried_elsewhere), and its relay
  // peers hear the warm mark whichever worker their link sits on. Tasks posted so far (tests).
  void on_local_presence(const std::string& path, bool present);
  uint64_t presence_posts() const { return presence_posts_; }

  // --- handlers of posted tasks (run on this bridge's worker) ---
  // Worker `from` has tracks of each path marked true, none of each marked false.
  void on_remote_presence(size_t from, const std::vector<std::pair<std::string, bool>>& changes);
  void on_remote_announce(const std::string& path, size_t home, bool active, model::Hops hops,
                          uint64_t cost);
  // Another worker applied a batch of this worker's announcement changes.
  void on_announce_ack();
  // True when `source` stands for another worker's broadcast here.
  bool is_remote(const model::BroadcastSource* source) const;
  void on_open_feed(const std::string& path, const std::string& name, uint8_t priority, size_t to,
                    uint64_t id);
  void on_close_feed(size_t to, uint64_t id);
  // A batch this worker posted came back: its credit returns to its feed (if still open) and the
  // batch to the pool.
  void on_feed_ack(FeedBatch* batch);
  // Applies a batch from its home worker to the feed's local track, then posts it back (home's
  // on_feed_ack) with its credit.
  void on_feed_events(FeedBatch* batch);
  void on_feed_end(uint64_t id, Error reason);

  // Used by RemoteTrack and Feed.
  uint64_t open_feed(size_t home, const std::string& path, const std::string& name,
                     model::Track& track);
  void close_feed(size_t home, uint64_t id);
  void feed_finished(Feed* f);
  // A batch for feed (to, id), empty, from the pool (or new).
  FeedBatch* take_batch(size_t to, uint64_t id);
  // Batches this worker owns (in flight or pooled) and pooled (tests, benchmarks).
  size_t batches_owned() const { return batch_store_.size(); }
  size_t batches_pooled() const { return free_batches_.size(); }
  // Pooled batches kept at most; more come back only after a burst, and are freed.
  static constexpr size_t kMaxPooledBatches = 64;
  // Every task this worker sends another (announcements, feed events and ends, acks) goes
  // through here, in order; while held they wait here, still in order.
  void post(size_t to, std::function<void()> task,
            runtime::Workers::Wake wake = runtime::Workers::Wake::kNow);
  // The drain (RelayWorker::drain): from hold() until its release(), nothing this worker does
  // reaches another worker, so a broadcast withdrawn here when its publisher is closed does not
  // end a viewer's track on a worker that has not yet told that viewer to go away (GOAWAY) or
  // closed it. Holds nest (the drain's start and its deadline each hold once and release once,
  // and their releases may arrive in either order): what waited is sent, in order, once every
  // hold() has had its release(). A release() without a hold does nothing. Worker thread.
  void hold() { ++holds_; }
  void release();
  bool is_held() const { return holds_ > 0; }
  Bridge& peer(size_t i) { return *bridges_[i]; }

  size_t remote_broadcast_count() const { return remote_.size(); }
  // Feeds this worker serves to others / receives from others.
  size_t feed_count() const { return feeds_.size(); }
  size_t inbound_feed_count() const { return inbound_.size(); }
  // Chunk events this worker's feeds posted to other workers, and chunks (and their bytes) this
  // worker copied in from other workers' feeds: a chunk crosses once per receiving worker, not
  // once per viewer there (tests, stats; worker thread).
  uint64_t chunks_posted() const { return chunks_posted_; }
  uint64_t chunks_copied() const { return chunks_copied_; }
  uint64_t chunk_bytes_copied() const { return chunk_bytes_copied_; }
  void count_chunk_posted() { ++chunks_posted_; }  // by Feed

 private:
  // Tells every other worker that `path` is reachable here with `hops` and `cost` (or no more).
  void publish_route(const std::string& path, const model::Hops& hops, uint64_t cost);
  void post_announce(const std::string& path, bool active, const model::Hops& hops, uint64_t cost);
  struct Inbound {
    size_t home;
    model::Track* track;
    // Open groups by (sequence, subgroup).
    std::map<std::pair<uint64_t, uint64_t>, model::GroupRef> groups;
  };

  size_t self_;
  BridgeLimits limits_;
  session::SkipCounters skips_;
  runtime::Workers& workers_;
  model::Origin& origin_;
  const std::vector<Bridge*>& bridges_;
  // Broadcasts homed on other workers, by path then home worker.
  std::map<std::pair<std::string, size_t>, std::unique_ptr<RemoteBroadcast>> remote_;
  // Feeds this worker serves to others, by (to, id).
  std::map<std::pair<size_t, uint64_t>, std::unique_ptr<Feed>> feeds_;
  // Feeds this worker receives, by id.
  std::map<uint64_t, Inbound> inbound_;
  // Local sessions announcing each path: the other workers hear "ended" when the last one leaves.
  std::map<std::string, size_t> local_publishers_;
  // publish_local's coalescing: the newest state of each changed path (active: its hops), what
  // the other workers were last told is active (with its hops), and the flush timer.
  void flush_announces();
  struct PendingAnnounce {
    bool active;
    model::Hops hops;
    uint64_t cost;
  };
  struct AnnounceChange {
    std::string path;
    PendingAnnounce state;
  };
  void schedule_flush();
  std::map<std::string, PendingAnnounce> pending_announces_;
  std::map<std::string, std::pair<model::Hops, uint64_t>> posted_active_;
  TimerId flush_timer_ = 0;
  // on_local_presence's coalescing: the newest state of each changed path, the paths the other
  // workers were last told have tracks here, and the flush timer.
  void flush_presence();
  std::map<std::string, bool> pending_presence_;
  std::set<std::string> posted_present_;
  TimerId presence_timer_ = 0;
  uint64_t presence_posts_ = 0;
  // Other workers with tracks of each path (on_remote_presence); a path with none is erased.
  std::map<std::string, std::set<size_t>> present_elsewhere_;
  uint64_t announce_posts_ = 0;
  size_t announce_acks_awaited_ = 0;  // for the batch in flight; none: the next may go
  // Apply one event of a batch; false once the feed was closed by a listener meanwhile.
  bool apply_feed_event(uint64_t id, const FeedEvent& e);
  void recycle_batch(FeedBatch* b);
  std::vector<std::unique_ptr<FeedBatch>> batch_store_;  // every batch of this worker's feeds
  std::vector<FeedBatch*> free_batches_;
  uint64_t next_feed_id_ = 1;
  uint64_t chunks_posted_ = 0;
  uint64_t chunks_copied_ = 0;
  uint64_t chunk_bytes_copied_ = 0;
  size_t holds_ = 0;  // hold() calls not yet released
  struct HeldTask {
    size_t to;
    std::function<void()> task;
    runtime::Workers::Wake wake;
  };
  std::vector<HeldTask> held_tasks_;  // in order
};

}  // namespace moqd::relay
