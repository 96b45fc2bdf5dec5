#pragma once
// moqd's configuration (flags and TOML keys of the same names; see apps/moqd) and the auth hook.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/origin.h"
#include "session/config.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"
#include "transport/websocket/mux_session.h"
#include "transport/websocket/ws_connection.h"
#include "wire/version.h"

namespace moqd::relay {

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
  Duration drain_timeout = std::chrono::seconds(10);  // --drain-timeout
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
  // UDP segmentation offload on send and receive (--udp-gso, --udp-gro); on by default, with a
  // fallback where the kernel lacks them. Off is for measuring what they are worth.
  bool udp_gso = true;
  bool udp_gro = true;
  // With several workers, a classic-BPF program on the shared QUIC port steers each datagram to
  // the worker its connection ID names (--quic-steering); off, the kernel's 4-tuple hash picks
  // and a datagram on the wrong worker is forwarded (as after a client's address changes).
  bool quic_steering = true;
  transport::quic::ConnectionConfig quic;
};

// The auth hook: asked at accept (path = the session root), publish (each announced broadcast)
// and subscribe (each broadcast, and each ANNOUNCE_PLEASE prefix). Called from every worker
// thread at once, so it must be thread-safe. The default allows everything.
class Authorizer {
 public:
  virtual ~Authorizer() = default;
  virtual bool allow(session::Action action, std::string_view path, std::string_view query) = 0;
};

class AllowAll final : public Authorizer {
 public:
  bool allow(session::Action, std::string_view, std::string_view) override { return true; }
};

}  // namespace moqd::relay
