#pragma once
// The relay: N workers (one event loop per core), each accepting on every listen address through
// SO_REUSEPORT, sharing nothing but messages. Created and driven from the main thread.
#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mutex.h"
#include "relay/config.h"
#include "runtime/workers.h"

namespace moqd::relay {

class RelayWorker;
class Bridge;

struct BoundAddress {
  std::string host;
  uint16_t port = 0;
  // "http://HOST:PORT/" with IPv6 hosts in brackets.
  std::string url() const;
};

class Relay {
 public:
  explicit Relay(RelayConfig config);
  Relay(RelayConfig config, std::nullptr_t) : Relay(std::move(config)) {}
  ~Relay();

  // Binds every listen address (port 0 picks a port free on TCP and UDP) and starts the workers.
  Result<std::vector<BoundAddress>> start();
  // Stops accepting, sends GOAWAY (config().goaway_url) where the protocol has it and closes the
  // other sessions with going_away, closes what is left at half of drain_timeout and waits up to
  // drain_timeout for the connections to finish; then stops the workers. Main thread.
  void drain_and_stop();

  const RelayConfig& config() const { return config_; }
  // SIGHUP (main thread): new sessions get `fresh`'s limits and auth policy, new QUIC handshakes
  // and TLS connections its certificate, and the drain its timeout and GOAWAY URL. Settings that
  // need a restart (listen addresses, workers, versions, caches, ...) are not read from it.
  void reload(const RelayConfig& fresh);
  // JSON for GET /health. Any thread.
  std::string health_json() const;
  // JSON for GET /stats: each worker's UDP and event-loop counters (datagrams, bytes, send and
  // receive calls, GSO/GRO batches, epoll_wait calls), and their sums, for load generators and
  // operators to compute datagrams per send and syscalls per packet. Any thread.
  std::string stats_json() const;
  // JSON for the status page (GET /status.json): broadcasts, tracks with viewers and byte
  // counters, per-worker load. Any thread.
  std::string status_json() const;
  // JSON for GET /cluster (metrics listener): this relay's node name and hop id, its cluster links
  // (URL, state, cost, connects, failures), and per broadcast the routes it knows (via whom, hop
  // list, cost; the first one is the one in use). Any thread.
  std::string cluster_json() const;
  // True once drain_and_stop() began (GET /ready answers 503).
  bool is_draining() const { return draining_.load(std::memory_order_relaxed); }
  // The metrics listener's port, once start() bound it (0: none).
  uint16_t metrics_port() const { return metrics_port_; }
  // Prometheus text for GET /metrics (relay/prometheus.cc). Any thread.
  std::string metrics_text() const;
  int64_t session_count() const;
  // Open connections over every worker (TCP and QUIC). Any thread.
  int64_t connection_count() const;

  // Connection admission (--max-connections, --max-connections-per-address). kAdmit and kOpsOnly
  // count the connection against `address` until release_connection(address); kOpsOnly may be
  // answered plain HTTP (/health) but not upgraded. Any worker thread (a mutex, taken per
  // connection accepted and closed, never per frame).
  enum class Admission { kAdmit, kOpsOnly, kRefuseAddress, kRefuseTotal };
  // Plain-HTTP connections allowed past --max-connections, so /health and /stats still answer.
  static constexpr size_t kOpsReserve = 16;
  Admission admit_connection(std::string_view address, bool ops_allowed);
  void release_connection(std::string_view address);
  // --max-connections-per-address alone (QUIC checks the total at accept): counts a connection
  // against `address` until release_connection(address), or false when it is at the cap. The
  // count is one per source address over the whole relay: TCP and QUIC, every worker.
  bool admit_address(std::string_view address);
  // Connections counted against `address` now. Any worker thread.
  size_t address_connections(std::string_view address) const;
  // The drain's start on one worker (RelayWorker::drain): called on each worker's thread once it
  // has sent its GOAWAYs and closed the sessions that have none, with its bridge held since
  // before the first of them. The last worker to arrive releases that hold on every worker's
  // bridge, so what a drain's close withdraws crosses workers only after every session that can
  // move has been told where to (a GOAWAY before its broadcast's end, never after).
  void goaways_sent();
  // The drain's deadline on one worker (RelayWorker::drain): called on each worker's thread once
  // it has closed its sessions, with its bridge held. The last worker to arrive releases every
  // worker's bridge, so withdrawals cross workers only once no viewer anywhere is still open.
  void deadline_passed();
  size_t worker_count() const { return relay_workers_.size(); }
  // Worker `i`; touch it only from its own thread (post there first).
  RelayWorker& worker(size_t i) { return *relay_workers_[i]; }
  // Whether listen address `index`'s QUIC datagrams are steered by connection ID: the program is
  // attached and passed its start-up check. After start().
  bool quic_steered(size_t index) const { return index < steered_.size() && steered_[index]; }

 private:
  // Attaches the connection-ID steering program to listen address `index`'s sockets (one per
  // worker on `port`), when configured and there is more than one worker; logs the outcome.
  void steer(size_t index, uint16_t port);
  // One worker arrived at a drain barrier (`arrivals`: its count); the last of them posts one
  // Bridge::release() to every worker.
  void release_bridges_after(std::atomic<size_t>& arrivals);

  RelayConfig config_;
  runtime::Workers workers_;
  std::vector<Bridge*> bridges_;
  std::vector<std::unique_ptr<RelayWorker>> relay_workers_;
  bool started_ = false;
  std::vector<bool> steered_;  // by listen address
  std::atomic<bool> draining_{false};
  std::atomic<size_t> goaway_arrivals_{0};    // goaways_sent() calls so far
  std::atomic<size_t> deadline_arrivals_{0};  // deadline_passed() calls so far
  uint16_t metrics_port_ = 0;
  mutable Mutex addresses_mu_;
  std::unordered_map<std::string, size_t> connections_by_address_;  // guarded by addresses_mu_
};

}  // namespace moqd::relay
