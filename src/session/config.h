#pragma once
// Configuration of one MoQ session, and the hooks it calls into its owner (the relay or the
// client). One worker thread.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/counter.h"
#include "base/error.h"
#include "base/histogram.h"
#include "model/origin.h"
#include "wire/lite.h"
#include "wire/version.h"

namespace moqd::session {

enum class Role { kServer, kClient };

// What the auth hook is asked about: connecting (the root), publishing a broadcast, subscribing
// to one, discovering a prefix (ANNOUNCE_PLEASE: allowed when it may reveal something the peer may
// subscribe to), and seeing one announced path under it (silent: unseen paths are skipped).
enum class Action { kConnect, kPublish, kSubscribe, kDiscover, kSee };

struct SessionLimits {
  uint64_t max_frame_size = 16ull << 20;        // bytes in one frame (--max-frame-size)
  size_t max_subscriptions = 1024;              // open downstream subscriptions per session
  size_t max_announce_streams = 64;             // open ANNOUNCE_PLEASE streams per session
  size_t max_announced_paths = 4096;            // broadcasts one session may publish
  // Announcement changes (active or ended) per second a publishing peer may make
  // (--max-announce-rate), in a token bucket holding one second plus max_announced_paths (a
  // publisher announcing everything at once); past it the session is closed with bounds_exceeded.
  // 0: no limit. Applies to the server role.
  uint64_t max_announce_rate = 1000;
  // Bytes of announcements queued unsent on one discovery stream (--max-announce-buffer); a
  // listener that lets more pile up is not reading: that stream is reset with bounds_exceeded.
  uint64_t max_announce_buffer = 1ull << 20;
  // Broadcasts a client-role session may hear of from its peer (a relay announcing everyone's
  // broadcasts under the discovery prefix), kept in a hash set.
  size_t max_received_announced_paths = 1 << 20;
  uint64_t max_backlog_bytes = 8ull << 20;      // per subscription, before oldest groups drop
  Duration max_backlog_age = std::chrono::seconds(10);  // idem, by the oldest group's age
  Duration stall_timeout = std::chrono::seconds(30);    // no progress with data queued: close
  Duration setup_timeout = std::chrono::seconds(10);    // SETUP must complete within this
  // A ready session with no announcement, subscription, discovery request, upstream track, new
  // stream or byte sent for this long is closed with timeout (--idle-timeout); zero: never.
  Duration idle_timeout = Duration::zero();
  uint64_t max_publisher_cache = 256ull << 20;  // cached bytes of one publisher's tracks
  uint64_t max_publisher_rate = 256ull << 20;   // payload bytes/s a publisher may send; 0: no limit
  // Benchmark falsification only (--debug-spin-per-delivery): busy-waits this long each time a
  // subscription hands a chunk of a frame to the transport, so a load generator must show the
  // relay's cost per delivered byte rise. Zero (the default) costs one branch.
  Duration debug_spin_per_delivery = Duration::zero();
};

// Skip-ahead counters of one worker: `events` counts the times a reader (a subscription, or a
// bridge feed to another worker) dropped old groups to catch up, `groups` the groups dropped.
// Written by the owning worker's thread only; read from any thread (/stats).
struct SkipCounters {
  Counter events;
  Counter groups;
};

// Traffic of one worker's sessions, for /metrics: frames and payload bytes received from
// publishers and handed to subscribers' transports, subscriptions and announced broadcasts opened
// and closed, and the delivery latency (a frame's last byte entering the cache to that byte handed
// to a subscriber's transport, on the worker loop's clock). Written by the owning worker's thread
// only; read from any thread.
struct TrafficCounters {
  Counter frames_in, bytes_in, frames_out, bytes_out;
  Counter subscriptions_opened, subscriptions_closed;
  Counter announces_opened, announces_closed;
  // Announcements from a relay peer whose hop list already held this relay's id (loops, dropped).
  Counter announces_looped;
  // Hop-list updates (announcements re-sent because a route's hop list changed: a warm mark came
  // or went, or the route itself changed): sent to relay peers as ended-then-active, and such
  // pairs received from relay peers and applied as one update.
  Counter announce_updates_sent, announce_updates_received;
  // IETF objects that came as OBJECT_DATAGRAMs, delivered to an IETF subscriber as a datagram,
  // or on a SUBGROUP stream because its transport has none, the object did not fit, or the
  // transport refused it.
  Counter datagrams_forwarded, datagram_stream_fallbacks;
  LatencyHistogram delivery_latency;
};

struct SessionConfig {
  Role role = Role::kServer;
  wire::VersionSet versions = wire::VersionSet::all();
  SessionLimits limits;
  wire::DecodeLimits decode;
  // The session's root (the URL path, normalised): the peer sees paths relative to it.
  std::string root;
  // The query string of the URL, for the auth hook.
  std::string query;
  // When set, right after setup the session opens an Announce stream asking the peer for
  // broadcasts under this prefix (relative to root) and publishes what it learns into the origin.
  std::optional<std::string> discover_prefix = std::string();
  // This relay's moq-lite-04 hop id (from --cluster-node); 0: not a relay. A relay appends it to
  // the hop list of every broadcast it announces, drops announcements whose hops already hold it
  // (a loop), and asks its peers (ANNOUNCE_PLEASE exclude_hop) not to send those.
  uint64_t hop_id = 0;
  // The hop id IETF sessions (17+) declare in RELAY_HOPS and put in HOP_PATH (session/ietf_cluster.h):
  // hop_id on a relay run as a cluster node (relay::ClusterConfig::node_named); 0: the cluster
  // extension is not offered.
  uint64_t ietf_relay_hops = 0;
  // Priority used for SUBSCRIBE sent upstream.
  uint8_t upstream_priority = 128;
  // Where this session's subscriptions count their skip-ahead (the worker's counters, which
  // outlive the session); null: not counted.
  SkipCounters* skips = nullptr;
  // Where this session counts its traffic (the worker's, which outlive it); null: not counted.
  TrafficCounters* traffic = nullptr;
};

// The session's owner.
class SessionHandler {
 public:
  virtual ~SessionHandler() = default;
  // Auth hook: may the peer do `action` on `path` (full path, root included)? Called at accept
  // (path = root), publish (each announced path) and subscribe (the broadcast path).
  virtual bool authorize(Action action, std::string_view path, std::string_view query) = 0;
  // True while the connect decision is still being made (an auth service is asked); the handler
  // then calls Session::admit() once authorize(kConnect) can answer.
  virtual bool is_admission_pending() { return false; }
  // The session negotiated `version` and is live.
  virtual void on_session_ready(wire::Version version) = 0;
  // The peer announced or withdrew `path` (full). The default puts it into the origin; the relay
  // also tells its other workers.
  virtual void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                                model::BroadcastSource& source) = 0;
  // A route the peer announced with a price beyond its hops (`cost`: the IETF cluster extension's
  // ROUTE_COST + RELAY_COST, session/ietf_cluster.h), to be added to its score as a moq-lite
  // link's ?cost=N is. The default drops the cost (on_peer_announce, active).
  virtual void on_peer_route(const std::string& path, const model::Hops& hops, uint64_t /*cost*/,
                             model::BroadcastSource& source) {
    on_peer_announce(path, true, hops, source);
  }
  // True when the peer is another relay (a cluster link): it is sent hop-list updates (a warm
  // copy here, model::kWarmHop) and its own are applied. The default: a client.
  virtual bool is_relay_link() const { return false; }
  // The peer (a relay, lite-04) sent GOAWAY: reconnect to `uri` ("" means the same URL) and close
  // this session once moved. The default ignores it.
  virtual void on_goaway(const std::string& /*uri*/) {}
  // The session is over. The handler may destroy the session from here (the session does not
  // touch itself after this call).
  virtual void on_session_closed(Error reason) = 0;
};

}  // namespace moqd::session
