#pragma once
// QuicEndpoint: raw QUIC (ngtcp2) for one RelayWorker on one listen address. Owns the worker's
// SO_REUSEPORT UdpSocket on the TCP listener's host:port, the QUIC connections it accepted and
// their MoQ sessions. Worker thread only.
//
// Routing: every CID a connection issues comes from transport/quic/cid.h and names this worker in
// byte 0, and the workers' sockets on a port carry a classic-BPF program (relay/steering.h) with
// which the kernel delivers each datagram to the socket of the worker its DCID names, whatever the
// client's address (a NAT rebinding, a migration). A datagram that still lands on another
// worker's socket (steering off or failed its start-up check) and whose 16-byte DCID names
// another worker is copied there through Workers::post, injected into its endpoint for the same
// address, and counted (forwarded()); an injected datagram is never forwarded again. Initials are
// handled where they land: their DCID is the client's choice (the program steers them by its
// first byte too, so a client's retransmitted Initials land together).
//
// An unknown short-header DCID gets a stateless reset (RFC 9000 §10.3): at most one per received
// packet, always smaller than it, at most kMaxResetsPerSecond. Beyond --max-handshakes-per-second,
// or while --max-pending-handshakes handshakes from unproven addresses are in progress on this
// worker, an Initial without a token gets a stateless Retry (RFC 9000 §8.1.2) instead of a connection;
// an Initial with a valid Retry token is accepted whatever the rate, since its address is
// proven, and one with an invalid Retry token gets CONNECTION_CLOSE INVALID_TOKEN. Both answers
// are smaller than the 1200-byte Initial that triggers them, so they cannot amplify.
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/counter.h"
#include "runtime/udp.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"
#include "wire/version.h"

namespace moqd::relay {

class RelayWorker;
class QuicServerSession;

// A connection ID as a map key: its bytes in place (no allocation per datagram looked up).
struct CidKey {
  uint8_t len = 0;
  std::array<uint8_t, NGTCP2_MAX_CIDLEN> bytes{};
  explicit CidKey(std::span<const uint8_t> cid) : len(static_cast<uint8_t>(std::min<size_t>(cid.size(), NGTCP2_MAX_CIDLEN))) {
    std::copy_n(cid.begin(), len, bytes.begin());
  }
  bool operator==(const CidKey& o) const {
    return len == o.len && std::equal(bytes.begin(), bytes.begin() + len, o.bytes.begin());
  }
};
struct CidKeyHash {
  // Our CIDs are random past byte 0 (cid.h), and a client's Initial DCID is its own random choice,
  // so eight of their bytes (zero-padded when shorter) mixed once are as good as hashing them all;
  // looked up for every datagram.
  size_t operator()(const CidKey& k) const {
    uint64_t h = 0;
    std::memcpy(&h, k.bytes.data() + 1, sizeof h);
    h ^= k.len;
    h *= 0x9e3779b97f4a7c15ull;
    return static_cast<size_t>(h ^ (h >> 32));
  }
};

// The MoQ protocols moqd speaks, most preferred first (wire::served_alpns: the newest moq-lite
// ALPN first, then moql, SETUP on the first bidi stream), each only while --versions keeps its
// version(s). They are the ALPNs of raw QUIC and the WebTransport protocols (WT-Protocol) of a
// CONNECT.
std::vector<std::string> moq_protocols(const wire::VersionSet& versions);
// The ALPN of HTTP/3, for WebTransport.
inline constexpr std::string_view kH3Alpn = "h3";
// The ALPNs the QUIC endpoint accepts, most preferred first: moq_protocols(), then h3 (every one
// reachable over raw QUIC; the TLS server picks from the ClientHello, so GnuTLS's 8-protocol
// limit does not apply).
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
  // Stops accepting new connections; a session whose version has GOAWAY gets one naming
  // `goaway_url` (WebTransport: also HTTP/3 GOAWAY and DRAIN_WEBTRANSPORT_SESSION) and stays; the
  // others are closed with going_away.
  void drain(const std::string& goaway_url);
  // Closes every session still there with going_away (the drain's deadline).
  void close_all();
  // Drops every connection at once (the end of the drain).
  void abort();

  // transport::quic::PacketSink: packets are written straight into the socket's send batch.
  std::span<uint8_t> packet_buffer(size_t len) override { return socket_->prepare(len); }
  void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override;
  void wait_for_room(TurnWork& writer) override { socket_->wait_for_room(writer); }

  size_t connection_count() const { return sessions_.size(); }
  const runtime::UdpSocket& socket() const { return *socket_; }
  runtime::UdpSocket& mutable_socket() { return *socket_; }
  // Datagrams that reached this worker but belong to another one's connection, and were
  // forwarded there (with the steering program attached: none, unless it is broken). Any thread.
  uint64_t forwarded() const { return forwarded_.get(); }

  // For QuicServerSession.
  RelayWorker& worker() { return worker_; }
  void on_cid_issued(QuicServerSession* s, const ngtcp2_cid& cid);
  void remove(QuicServerSession* s);
  // A connection accepted without a Retry token finished its handshake or went away.
  void on_unvalidated_done() { --pending_unvalidated_; }
  // Handshakes from unproven addresses in progress (--max-pending-handshakes).
  size_t pending_handshakes() const { return pending_unvalidated_; }

 private:
  QuicEndpoint(RelayWorker& worker, size_t index, std::unique_ptr<runtime::UdpSocket> socket);
  void on_datagram(const sockaddr* from, socklen_t from_len, std::span<const uint8_t> datagram,
                   bool forwarded);
  bool forward(std::span<const uint8_t> dcid, const sockaddr* from, socklen_t from_len,
               std::span<const uint8_t> datagram);
  void accept(const ngtcp2_path& path, std::span<const uint8_t> datagram);
  void send_retry(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd);
  void send_invalid_token(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd);
  // An Initial CONNECTION_CLOSE (CONNECTION_REFUSED) for a proven address at
  // --max-connections-per-address; counted and logged.
  void send_refused(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd, std::string_view address);
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
  std::unordered_map<CidKey, QuicServerSession*, CidKeyHash> by_cid_;  // CID -> owner
  Counter forwarded_;
  // Per-second windows for the handshake and reset limits.
  Instant window_start_{};
  uint32_t handshakes_in_window_ = 0;
  uint32_t resets_in_window_ = 0;
  bool logged_handshake_limit_ = false;
  bool logged_pending_limit_ = false;
  bool logged_connection_limit_ = false;
  size_t pending_unvalidated_ = 0;
};

}  // namespace moqd::relay
