#pragma once
// One relay worker: its event loop's share of the relay. Owns the listeners it accepts on, the
// connections it accepted, its Origin (the tracks homed here and replicas of other workers'
// tracks) and its Bridge to the other workers. Everything here runs on the worker's thread,
// except the atomic counters read by /health.
#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/origin.h"
#include "relay/bridge.h"
#include "relay/config.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"
#include "runtime/udp.h"
#include "runtime/workers.h"

namespace moqd::relay {

class Relay;
class ServerConnection;
class QuicEndpoint;

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

  // Listens on host:port, TCP and QUIC over UDP (SO_REUSEPORT: every worker binds the same port).
  Status listen(const std::string& host, uint16_t port);
  // Worker thread: stop accepting and close every session with going_away.
  void drain();

  // From connections (worker thread).
  void on_peer_announce(const std::string& path, bool active, uint64_t hops,
                        model::BroadcastSource& source);
  void remove_connection(ServerConnection* c);

  // Counters of the worker's QUIC sockets and its loop. Any thread: the sockets and the loop
  // live as long as the worker, and their counters are relaxed atomics.
  runtime::UdpSocket::Stats udp_stats() const;
  uint64_t udp_dropped() const;
  uint64_t loop_polls() const { return loop_.polls(); }
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
  // Worker 0 only: replaces a generated certificate that needs renewal, on every worker.
  void check_certificate();

  Relay& relay_;
  size_t index_;
  runtime::EventLoop& loop_;
  runtime::Workers& workers_;
  std::shared_ptr<const transport::quic::Certificate> certificate_;
  session::SkipCounters viewer_skips_;  // outlives the sessions (connections_)
  model::CacheBudget budget_;  // this worker's share of --cache-budget; outlives origin_
  model::Origin origin_;
  Bridge bridge_;
  bool draining_ = false;
  std::vector<std::unique_ptr<runtime::TcpListener>> listeners_;
  std::vector<std::unique_ptr<QuicEndpoint>> endpoints_;  // one per listen address
  std::list<std::unique_ptr<ServerConnection>> connections_;
};

}  // namespace moqd::relay
