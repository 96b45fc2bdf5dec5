#pragma once
// The relay: N workers (one event loop per core), each accepting on every listen address through
// SO_REUSEPORT, sharing nothing but messages. Created and driven from the main thread.
#include <memory>
#include <string>
#include <vector>

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
  Relay(RelayConfig config, std::unique_ptr<Authorizer> auth);
  ~Relay();

  // Binds every listen address (port 0 picks a port free on TCP and UDP) and starts the workers.
  Result<std::vector<BoundAddress>> start();
  // Stops accepting, closes every session with going_away and waits up to drain_timeout for the
  // connections to finish; then stops the workers. Main thread.
  void drain_and_stop();

  const RelayConfig& config() const { return config_; }
  Authorizer& auth() { return *auth_; }
  // JSON for GET /health. Any thread.
  std::string health_json() const;
  // JSON for GET /stats: each worker's UDP and event-loop counters (datagrams, bytes, send and
  // receive calls, GSO/GRO batches, epoll_wait calls), and their sums, for load generators and
  // operators to compute datagrams per send and syscalls per packet. Any thread.
  std::string stats_json() const;
  int64_t session_count() const;
  size_t worker_count() const { return relay_workers_.size(); }
  // Worker `i`; touch it only from its own thread (post there first).
  RelayWorker& worker(size_t i) { return *relay_workers_[i]; }

 private:
  // Attaches the connection-ID steering program to listen address `index`'s sockets (one per
  // worker on `port`), when configured and there is more than one worker; logs the outcome.
  void steer(size_t index, uint16_t port);

  RelayConfig config_;
  std::unique_ptr<Authorizer> auth_;
  runtime::Workers workers_;
  std::vector<Bridge*> bridges_;
  std::vector<std::unique_ptr<RelayWorker>> relay_workers_;
  bool started_ = false;
};

}  // namespace moqd::relay
