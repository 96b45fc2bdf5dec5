#pragma once
// The bridge between workers. Every worker has its own Origin; a broadcast announced by a session
// on worker A is announced on every other worker with a RemoteBroadcast as its source. When a
// subscriber on worker B needs a track of it, B's RemoteTrack asks A for a feed: A listens to its
// own Track (subscribing upstream once, like any subscriber) and posts the groups' events to B,
// copying each chunk once for B. B writes them into its own Track, from which all of B's
// subscribers read. So a track crosses to another core once, never once per subscriber, and a
// worker never touches another worker's state: everything goes through Workers::post.
//
// Feeds are paced by credit: A stops pulling once kMaxInFlightBytes are posted but not yet
// acknowledged by B.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/origin.h"
#include "runtime/workers.h"

namespace moqd::relay {

class RemoteBroadcast;
class Feed;

// What B receives for a feed, in order.
struct FeedEvent {
  enum class Kind : uint8_t { kGroup, kObject, kChunk, kGroupEnd, kGroupAbort };
  Kind kind = Kind::kGroup;
  uint64_t sequence = 0;  // the group's
  uint64_t size = 0;      // kObject: declared size
  Bytes chunk;            // kChunk: a copy owned by the receiving worker
};

class Bridge {
 public:
  static constexpr uint64_t kMaxInFlightBytes = 4ull << 20;

  // `bridges` holds every worker's Bridge by worker index and outlives them all.
  Bridge(size_t self, runtime::Workers& workers, model::Origin& origin,
         const std::vector<Bridge*>& bridges);
  ~Bridge();

  size_t self() const { return self_; }
  model::Origin& origin() { return origin_; }

  // A session on this worker announced or withdrew `path`: tell the other workers.
  void publish_local(const std::string& path, bool active, uint64_t hops);

  // --- handlers of posted tasks (run on this bridge's worker) ---
  void on_remote_announce(const std::string& path, size_t home, bool active, uint64_t hops);
  void on_open_feed(const std::string& path, const std::string& name, uint8_t priority, size_t to,
                    uint64_t id);
  void on_close_feed(size_t to, uint64_t id);
  void on_feed_ack(size_t to, uint64_t id, uint64_t bytes);
  void on_feed_events(uint64_t id, std::vector<FeedEvent> events);
  void on_feed_end(uint64_t id, Error reason);

  // Used by RemoteTrack and Feed.
  uint64_t open_feed(size_t home, const std::string& path, const std::string& name,
                     model::Track& track);
  void close_feed(size_t home, uint64_t id);
  void feed_finished(Feed* f);
  void post(size_t to, std::function<void()> task) { workers_.post(to, std::move(task)); }
  Bridge& peer(size_t i) { return *bridges_[i]; }

  size_t remote_broadcast_count() const { return remote_.size(); }
  size_t feed_count() const { return feeds_.size(); }

 private:
  struct Inbound {
    size_t home;
    model::Track* track;
    std::map<uint64_t, model::GroupRef> groups;  // open groups by sequence
  };

  size_t self_;
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
  uint64_t next_feed_id_ = 1;
};

}  // namespace moqd::relay
