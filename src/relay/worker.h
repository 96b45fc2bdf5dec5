#pragma once
// One relay worker: its event loop's share of the relay. Owns the listeners it accepts on, the
// connections it accepted, its Origin (the tracks homed here and replicas of other workers'
// tracks) and its Bridge to the other workers. Everything here runs on the worker's thread,
// except the atomic counters read by /health.
#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "model/origin.h"
#include "relay/bridge.h"
#include "relay/config.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"
#include "runtime/workers.h"

namespace moqd::relay {

class Relay;
class ServerConnection;

class RelayWorker {
 public:
  RelayWorker(Relay& relay, size_t index, runtime::Workers& workers,
              const std::vector<Bridge*>& bridges);
  ~RelayWorker();

  size_t index() const { return index_; }
  Relay& relay() { return relay_; }
  runtime::EventLoop& loop() { return loop_; }
  model::Origin& origin() { return origin_; }
  Bridge& bridge() { return bridge_; }
  const model::CacheBudget& budget() const { return budget_; }

  // Listens on host:port (SO_REUSEPORT: every worker binds the same port).
  Status listen(const std::string& host, uint16_t port);
  // Worker thread: stop accepting and close every session with going_away.
  void drain();

  // From connections (worker thread).
  void on_peer_announce(const std::string& path, bool active, uint64_t hops,
                        model::BroadcastSource& source);
  void remove_connection(ServerConnection* c);

  // Read from any thread.
  std::atomic<int64_t> sessions{0};
  std::atomic<int64_t> connections{0};

 private:
  void accept(int fd, std::string peer);

  Relay& relay_;
  size_t index_;
  runtime::EventLoop& loop_;
  model::CacheBudget budget_;  // this worker's share of --cache-budget; outlives origin_
  model::Origin origin_;
  Bridge bridge_;
  bool draining_ = false;
  std::vector<std::unique_ptr<runtime::TcpListener>> listeners_;
  std::vector<int> udp_fds_;
  std::list<std::unique_ptr<ServerConnection>> connections_;
};

}  // namespace moqd::relay
