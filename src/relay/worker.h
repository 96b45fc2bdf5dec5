#pragma once
// One relay worker: its event loop's share of the relay. Owns the listeners it accepts on, the
// connections it accepted, its Origin (the tracks homed here and replicas of other workers'
// tracks) and its Bridge to the other workers. Everything here runs on the worker's thread,
// except the atomic counters read by /health.
#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/grant.h"
#include "model/origin.h"
#include "relay/bridge.h"
#include "relay/metrics.h"
#include "relay/status.h"
#include "base/counter.h"
#include "base/mutex.h"
#include "base/trim_policy.h"
#include "relay/config.h"
#include "runtime/dns.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"
#include "runtime/udp.h"
#include "runtime/workers.h"

namespace moqd::relay {

class Relay;
class ServerConnection;
class QuicEndpoint;
class ClusterLink;
class DnsPeersWatcher;
struct ClusterDnsName;
struct SelfAddresses;
class PeersFileWatcher;

// What carries a session, as /health counts them.
enum TransportClass : size_t { kWebSocket, kQuic, kWebTransport, kTransportClasses };
// The class of a transport::Session::kind() ("websocket/qmux-00", "quic", "webtransport").
TransportClass transport_class(std::string_view kind);
inline const char* transport_class_name(TransportClass c) {
  static constexpr const char* kNames[] = {"websocket", "quic", "webtransport"};
  return kNames[c];
}

class RelayWorker {
 public:
  // How often worker 0 checks whether a generated certificate needs renewal.
  static constexpr Duration kCertificateCheckInterval = std::chrono::hours(1);

  RelayWorker(Relay& relay, size_t index, runtime::Workers& workers,
              const std::vector<Bridge*>& bridges);
  ~RelayWorker();

  size_t index() const { return index_; }
  Relay& relay() { return relay_; }
  runtime::EventLoop& loop() { return loop_; }
  model::Origin& origin() { return origin_; }
  Bridge& bridge() { return bridge_; }
  const model::CacheBudget& budget() const { return budget_; }
  runtime::Workers& workers() { return workers_; }
  // The endpoint for listen address `index` (listen() order), or null.
  QuicEndpoint* quic_endpoint(size_t index);
  // This worker's snapshot of the relay's certificate; new QUIC connections use it.
  const std::shared_ptr<const transport::quic::Certificate>& certificate() const {
    return certificate_;
  }
  void set_certificate(std::shared_ptr<const transport::quic::Certificate> cert) {
    certificate_ = std::move(cert);
  }
  // This worker's snapshot of the limits new sessions get (RelayConfig::live(); SIGHUP replaces
  // it). Existing sessions keep theirs.
  const LiveLimits& live() const { return *live_; }
  void set_live(std::shared_ptr<const LiveLimits> l);
  // The session settings this worker's relay sessions share, made from live() (so a SIGHUP reaches
  // the sessions that start afterwards) with the relay's versions and hop ids and this worker's
  // counters: `link` for a relay link admitted by a cluster token on a closed relay (exempt from
  // --max-announce-rate and --idle-timeout). A session keeps the snapshot it started with alive:
  // a reload replaces the worker's, not the sessions'.
  std::shared_ptr<const session::SessionConfig> session_config(bool link) const;
  // This worker's snapshot of the auth policy (keys, public prefixes); sessions admitted from
  // now on use it. Never null.
  const std::shared_ptr<const auth::AuthPolicy>& auth_policy() const { return auth_policy_; }
  void set_auth_policy(std::shared_ptr<const auth::AuthPolicy> p) { auth_policy_ = std::move(p); }
  // Counters for /metrics, written by this worker only (relay/metrics.h, session::TrafficCounters).
  WorkerMetrics& metrics() { return metrics_; }
  const WorkerMetrics& metrics() const { return metrics_; }
  session::TrafficCounters& traffic() { return traffic_; }
  const session::TrafficCounters& traffic() const { return traffic_; }
  // The worker's last status snapshot (relay/status.h). Any thread.
  WorkerStatus status() const;
  // Microseconds this worker's loop spent on work rather than waiting in epoll_wait.
  uint64_t loop_busy_us() const { return loop_.busy_us(); }

  // Listens on host:port, TCP and QUIC over UDP (SO_REUSEPORT: every worker binds the same port).
  Status listen(const std::string& host, uint16_t port);
  // Worker 0: serves /metrics, /health, /ready and the status page on host:port (TCP).
  Result<uint16_t> listen_metrics(const std::string& host, uint16_t port);
  // Starts the status snapshots (worker thread, once the loop runs), and on worker 0 the memory
  // trim check.
  void start_status();
  // Worker thread: keeps a cluster link to `peer` (relay/cluster.h) until drain, or until
  // remove_cluster_link of the same URL and cost.
  void add_cluster_link(ClusterPeer peer);
  void remove_cluster_link(const ClusterPeer& peer);
  // Worker 0: watches --cluster-peers-file (relay/cluster.h PeersFileWatcher).
  void watch_peers_file(const std::string& path, size_t first_worker);
  // Worker 0: follows a --cluster-dns name (relay/cluster_dns.h DnsPeersWatcher).
  void watch_cluster_dns(ClusterDnsName dns, runtime::DnsResolverOptions resolver,
                         SelfAddresses self, size_t first_worker);
  // How often worker 0 compares the process's resident memory with what the allocator has
  // allocated, and the difference above which it gives the freed memory back (malloc_trim):
  // glibc keeps what a burst freed (an attack, a crowd leaving) at the process's peak otherwise.
  // Up to kTrimThreshold of freed memory may stay resident, so it must sit well inside the margin
  // the hostile tests allow RSS after an attack (16 MB): at 16 MB a flood's leftovers of 16.1 MB
  // stayed put and failed hostile_quic's recovery test. A trim also waits for the heap in use to
  // drop by kTrimThreshold (base/trim_policy.h): in a steady state it costs the loop a walk of the
  // whole heap for a few KB.
  static constexpr Duration kTrimInterval = std::chrono::seconds(1);
  static constexpr size_t kTrimThreshold = 8u << 20;
  // The busiest loop's share of the last interval above which no trim runs (TrimPolicy): with
  // 1,000 viewers a loop is busy most of the time, with a lone bystander well under 1%.
  static constexpr double kTrimMaxBusy = 0.05;
  // Worker thread: stop accepting; sessions whose version has GOAWAY get one naming `goaway_url`
  // and may leave on their own until `deadline` (from now); the others, and those still there at
  // the deadline, are closed with going_away. Ordering (Bridge::hold): no broadcast or track
  // withdrawn by the first of those closes reaches another worker before every worker has sent
  // its GOAWAYs (Relay::goaways_sent), and none withdrawn by the deadline's closes before every
  // worker has closed its sessions (Relay::deadline_passed). So a session that gets a GOAWAY
  // has it written before any end the drain causes. Every worker of the relay must be drained
  // for its bridge to be released. Once per worker; a second call does nothing.
  void drain(const std::string& goaway_url, Duration deadline, Duration hard_stop);

  // From connections (worker thread).
  // `hops`: the route's hop list; `cost`: the link's price (--cluster-connect ?cost=N).
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops, uint64_t cost,
                        model::BroadcastSource& source);
  void remove_connection(ServerConnection* c);
  // A connection refused by a connection cap (`reason` names the flag): counted and logged at
  // most once a second per worker, with the count since the last line.
  void note_refused(std::string_view peer, const char* reason);

  // Counters of the worker's QUIC sockets and its loop. Any thread: the sockets and the loop
  // live as long as the worker, and their counters are relaxed atomics.
  runtime::UdpSocket::Stats udp_stats() const;
  uint64_t udp_dropped() const;
  uint64_t loop_polls() const { return loop_.polls(); }
  // The loop's turn work: items run, and slices that left work for a later turn (a burst served
  // a slice at a time; EventLoop::TurnSlice).
  uint64_t loop_turn_items() const { return loop_.turn_items(); }
  uint64_t loop_slices_cut() const { return loop_.turn_slices_cut(); }
  // Worker 0's malloc_trim calls: how many, and how long they held its loop (base/counter.h: the
  // worker writes, any thread reads).
  struct TrimStats {
    Counter calls;
    Counter total_us;
    Counter max_us;
  };
  const TrimStats& trim_stats() const { return trim_stats_; }
  // Datagrams this worker's endpoints forwarded to another worker (QuicEndpoint::forwarded).
  uint64_t quic_forwarded() const;
  // Skip-ahead on this worker: by its subscriptions (slow viewers) and by its bridge's feeds
  // (another worker not keeping up). Written by the worker; read from any thread.
  session::SkipCounters& viewer_skips() { return viewer_skips_; }
  const session::SkipCounters& viewer_skips() const { return viewer_skips_; }
  const session::SkipCounters& bridge_skips() const { return bridge_.skips(); }

  // Read from any thread.
  std::atomic<int64_t> sessions{0};
  std::atomic<int64_t> connections{0};
  // Ready sessions by what carries them (index: TransportClass), for /health.
  std::atomic<int64_t> sessions_by_transport[kTransportClasses]{};

 private:
  void accept(int fd, std::string peer);
  void accept_metrics(int fd, std::string peer);
  // What /cluster names a route's source by: a cluster link's URL, "inbound PEER" for another
  // session (a relay that dialled us, or a client), or "local".
  std::string route_via(const model::BroadcastSource* source) const;
  // Rebuilds the status snapshot and schedules the next rebuild.
  void refresh_status();
  // Worker 0 only: replaces a generated certificate that needs renewal, on every worker.
  void check_certificate();
  // Worker 0: malloc_trim when base/trim_policy.h says so (in use dropped and resident beyond it
  // grew, each by kTrimThreshold), timed into trim_stats_.
  void trim_memory();

  Relay& relay_;
  size_t index_;
  runtime::EventLoop& loop_;
  runtime::Workers& workers_;
  std::shared_ptr<const transport::quic::Certificate> certificate_;
  session::SkipCounters viewer_skips_;  // outlives the sessions (connections_)
  WorkerMetrics metrics_;                // idem
  session::TrafficCounters traffic_;     // idem
  std::shared_ptr<const auth::AuthPolicy> auth_policy_;
  std::shared_ptr<const LiveLimits> live_;
  struct SessionConfigs {
    session::SessionConfig client, link;
  };
  void make_session_configs();
  std::shared_ptr<const SessionConfigs> session_configs_;  // from live_; never null
  mutable Mutex status_mu_;
  WorkerStatus status_;  // guarded by status_mu_
  model::CacheBudget budget_;  // this worker's share of --cache-budget; outlives origin_
  model::Origin origin_;
  Bridge bridge_;
  bool draining_ = false;
  // Per reason (0: per address, 1: total): refusals since the last line, and when it was written.
  TrimPolicy trim_policy_{kTrimThreshold, kTrimMaxBusy};
  TrimStats trim_stats_;
  // trim_memory: each worker's loop_busy_us() at the last check, and when that was.
  std::vector<uint64_t> trim_busy_us_;
  std::optional<Instant> trim_checked_at_;
  uint64_t refused_since_log_[2] = {};
  std::optional<Instant> refused_logged_at_[2];
  std::vector<std::unique_ptr<runtime::TcpListener>> listeners_;
  std::unique_ptr<runtime::TcpListener> metrics_listener_;  // kept while draining (/ready)
  std::vector<std::unique_ptr<QuicEndpoint>> endpoints_;  // one per listen address
  std::list<std::unique_ptr<ServerConnection>> connections_;
  std::vector<std::unique_ptr<ClusterLink>> cluster_links_;  // destroyed first (~RelayWorker)
  std::unique_ptr<PeersFileWatcher> peers_file_;
  std::vector<std::unique_ptr<DnsPeersWatcher>> dns_watchers_;
};

}  // namespace moqd::relay
