#pragma once
// QuicEndpoint: raw QUIC (ngtcp2) for one RelayWorker on one listen address. Owns the worker's
// SO_REUSEPORT UdpSocket on the TCP listener's host:port, the QUIC connections it accepted and
// their MoQ sessions. Worker thread only.
//
// Routing: every CID a connection issues comes from transport/quic/cid.h and names this worker in
// byte 0. A datagram whose 16-byte DCID names another worker (the kernel's 4-tuple hash changed,
// e.g. after a client migrated) is copied to that worker through Workers::post and injected into
// its endpoint for the same address; an injected datagram is never forwarded again. Initials are
// always handled where they land: their DCID is the client's choice.
//
// An unknown short-header DCID gets a stateless reset (RFC 9000 §10.3): at most one per received
// packet, always smaller than it, at most kMaxResetsPerSecond. Beyond --max-handshakes-per-second,
// an Initial without a token gets a stateless Retry (RFC 9000 §8.1.2) instead of a connection;
// an Initial with a valid Retry token is accepted whatever the rate, since its address is
// proven, and one with an invalid Retry token gets CONNECTION_CLOSE INVALID_TOKEN. Both answers
// are smaller than the 1200-byte Initial that triggers them, so they cannot amplify.
#include <netinet/in.h>

#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/udp.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"
#include "wire/version.h"

namespace moqd::relay {

class RelayWorker;
class QuicServerSession;

// The MoQ protocols moqd speaks, most preferred first: moq-lite-04, moq-lite-03, moql (SETUP on
// the first bidi stream), each only while --versions keeps its version(s). They are the ALPNs of
// raw QUIC and the WebTransport protocols (WT-Protocol) of a CONNECT.
std::vector<std::string> moq_protocols(const wire::VersionSet& versions);
// The ALPN of HTTP/3, for WebTransport.
inline constexpr std::string_view kH3Alpn = "h3";
// The ALPNs the QUIC endpoint accepts: moq_protocols(), then h3.
std::vector<std::string> quic_alpns(const wire::VersionSet& versions);

class QuicEndpoint final : public transport::quic::PacketSink {
 public:
  // Stateless resets sent per second by one endpoint, at most.
  static constexpr uint32_t kMaxResetsPerSecond = 1000;

  // Binds host:port (UDP, SO_REUSEPORT). `index` is the listen address's index, the same on
  // every worker, so a forwarded datagram finds the sibling endpoint.
  static Result<std::unique_ptr<QuicEndpoint>> open(RelayWorker& worker, size_t index,
                                                    const std::string& host, uint16_t port);
  ~QuicEndpoint() override;

  // A datagram forwarded by another worker (runs on this worker's thread).
  void inject(const sockaddr* from, socklen_t from_len, std::span<const uint8_t> datagram);
  // Closes every session with going_away and stops accepting new connections.
  void drain();
  // Drops every connection at once (the end of the drain).
  void abort();

  // transport::quic::PacketSink
  void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override;

  size_t connection_count() const { return sessions_.size(); }
  const runtime::UdpSocket& socket() const { return *socket_; }

  // For QuicServerSession.
  RelayWorker& worker() { return worker_; }
  void on_cid_issued(QuicServerSession* s, const ngtcp2_cid& cid);
  void remove(QuicServerSession* s);

 private:
  QuicEndpoint(RelayWorker& worker, size_t index, std::unique_ptr<runtime::UdpSocket> socket);
  void on_datagram(const sockaddr* from, socklen_t from_len, std::span<const uint8_t> datagram,
                   bool forwarded);
  bool forward(std::span<const uint8_t> dcid, const sockaddr* from, socklen_t from_len,
               std::span<const uint8_t> datagram);
  void accept(const ngtcp2_path& path, std::span<const uint8_t> datagram);
  void send_retry(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd);
  void send_invalid_token(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd);
  void send_stateless_reset(const sockaddr* to, socklen_t to_len, std::span<const uint8_t> dcid,
                            size_t trigger_len);
  void roll_window();
  bool allow_handshake();
  ngtcp2_path make_path(const sockaddr* from, socklen_t from_len);

  RelayWorker& worker_;
  size_t index_;
  std::unique_ptr<runtime::UdpSocket> socket_;
  bool draining_ = false;
  std::list<std::unique_ptr<QuicServerSession>> sessions_;
  std::unordered_map<std::string, QuicServerSession*> by_cid_;  // CID bytes -> owner
  // Per-second windows for the handshake and reset limits.
  Instant window_start_{};
  uint32_t handshakes_in_window_ = 0;
  uint32_t resets_in_window_ = 0;
  bool logged_handshake_limit_ = false;
};

}  // namespace moqd::relay
