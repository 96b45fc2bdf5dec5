#pragma once
// moqd's configuration (flags and TOML keys of the same names; see apps/moqd) and the auth hook.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "auth/grant.h"
#include "model/origin.h"
#include "session/config.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"
#include "transport/quic/steering.h"
#include "transport/websocket/mux_session.h"
#include "transport/websocket/ws_connection.h"
#include "wire/version.h"

namespace moqd::relay {

// One --cluster-connect URL: the URL without its `cost` query parameter, and that cost
// (relay/cluster.h).
struct ClusterPeer {
  std::string url;
  uint64_t cost = 0;
};

struct ClusterConfig {
  std::vector<ClusterPeer> peers;  // --cluster-connect, repeatable
  std::string node;                // --cluster-node (default: the host name)
  std::string token;               // --cluster-token (presented to the peers as ?jwt=)
  // --cluster-peers-file: more peers, one URL per line ('#' comments), re-read when it changes.
  std::string peers_file;
  // --cluster-dns URL (repeatable): every address the URL's host name resolves to is a peer,
  // looked up again on the answer's TTL (relay/cluster_dns.h).
  std::vector<std::string> dns;
  // --cluster-dns-server IPv4:PORT: the nameserver asked instead of /etc/resolv.conf's.
  std::string dns_server;
  // This relay's moq-lite-04 hop id: hop_id_for_node(node), below 2^52 (set whether or not it has peers).
  uint64_t hop_id = 0;
  // A cluster node: --cluster-node, --cluster-connect, --cluster-peers-file or --cluster-dns given.
  // Only then do IETF sessions (17+) declare RELAY_HOPS (session/ietf_cluster.h).
  bool node_named = false;
};

// The settings a SIGHUP may change for sessions that start afterwards (each worker holds an
// immutable snapshot; see Relay::reload).
struct LiveLimits {
  session::SessionLimits limits;
  wire::DecodeLimits decode;
  transport::websocket::WsConfig websocket;
  transport::websocket::MuxConfig mux;
};

struct RelayConfig {
  std::vector<std::string> listen = {"[::]:4443"};  // --listen, repeatable
  size_t workers = 1;                                // --workers (default: cores)
  wire::VersionSet versions = wire::VersionSet::all();  // --versions
  session::SessionLimits limits;
  wire::DecodeLimits decode;
  model::OriginConfig origin;
  transport::websocket::WsConfig websocket;
  // Stream limits and receive windows per session (--max-streams, --max-session-buffer).
  transport::websocket::MuxConfig mux;
  // Cached payload bytes over all tracks of the relay (--cache-budget); each worker gets an equal
  // share, so no byte of accounting crosses cores.
  uint64_t cache_budget = 1ull << 30;
  // --drain-timeout: on SIGTERM, GOAWAY first; sessions that have not left by half of it are
  // closed with going_away, and whatever remains at three quarters is dropped.
  Duration drain_timeout = std::chrono::seconds(10);
  // --metrics-listen ADDR:PORT: /metrics, /health, /ready and the status page on their own TCP
  // listener (worker 0); "" (default): none.
  std::string metrics_listen;
  // --status-page: the live status page at / (on the metrics listener when there is one, else
  // on the public listener).
  bool status_page = true;
  // --goaway-url: where GOAWAY sends clients ("" = reconnect to the same URL).
  std::string goaway_url;
  // --auth-key, --auth-key-dir, --auth-public. Null or empty: open, as without auth.
  std::shared_ptr<const auth::AuthPolicy> auth;
  // The TLS certificate for QUIC (--tls-cert/--tls-key, or generated at startup when absent).
  // Immutable and shared read-only by every worker (a config snapshot); without one, QUIC
  // Initials are dropped.
  std::shared_ptr<const transport::quic::Certificate> certificate;
  // Generated certificates are replaced before they expire (checked hourly by worker 0); loaded
  // ones are the operator's to renew.
  bool renew_certificate = false;
  // New QUIC connections accepted per second per worker (--max-handshakes-per-second); above it,
  // an Initial without a token is answered with a Retry, so only clients that prove their address
  // get a connection.
  uint32_t max_handshakes_per_second = 1000;
  // QUIC handshakes from unproven addresses (no Retry token) in progress at once per worker
  // (--max-pending-handshakes); past it every Initial without a token gets a Retry, so a flood
  // of spoofed Initials holds at most this many connections' state. --handshake-timeout
  // (quic.handshake_timeout) bounds how long each is held.
  size_t max_pending_handshakes = 256;
  // Connections (TCP and QUIC) over the whole relay (--max-connections). Past it a TCP connection
  // is still served plain HTTP (/health, /stats) within kOpsReserve more, but its upgrade gets 503;
  // beyond that, and for QUIC, new connections are refused. main() lowers it to fit the fd limit.
  size_t max_connections = 10000;
  // Connections from one source address (--max-connections-per-address); past it refused.
  size_t max_connections_per_address = 256;
  // UDP segmentation offload on send and receive (--udp-gso, --udp-gro); on by default, with a
  // fallback where the kernel lacks them. Off is for measuring what they are worth.
  bool udp_gso = true;
  bool udp_gro = true;
  // With several workers, a classic-BPF program on the shared QUIC port steers each datagram to
  // the worker its connection ID names (--quic-steering); off, the kernel's 4-tuple hash picks
  // and a datagram on the wrong worker is forwarded (as after a client's address changes).
  bool quic_steering = true;
  // Test-only, no flag: where the steering program reads the worker from. Anything but the
  // default builds a broken program, which the start-up check must catch (relay/steering.h).
  transport::quic::SteeringLayout quic_steering_layout_for_tests;
  transport::quic::ConnectionConfig quic;
  // --cluster-connect, --cluster-node, --cluster-token (relay/cluster.h).
  ClusterConfig cluster;

  LiveLimits live() const { return LiveLimits{limits, decode, websocket, mux}; }
};

}  // namespace moqd::relay
