#pragma once
// The client stack over QUIC: one UDP socket (its own, or a SharedQuicSocket that many
// connections of the loop share, ConnectionOptions::shared_udp), one transport::quic::Connection,
// and the MoQ session in the client role once the handshake has picked the ALPN ("moql" runs SETUP,
// "moq-lite-03"/"moq-lite-04" do not). With TransportKind::kWebTransport the ALPN is "h3" and the
// MoQ session runs over the WebTransport session that a webtransport::Client establishes at the
// URL's path and query, its protocol chosen from the same list as the ALPNs. Owned by the CLI or
// the load generator; one event loop.
#include <ngtcp2/ngtcp2.h>
#include <sys/socket.h>

#include <memory>
#include <string>
#include <vector>

#include "client/connection.h"
#include "client/shared_quic_socket.h"
#include "runtime/udp.h"
#include "transport/quic/connection.h"
#include "transport/quic/tls.h"
#include "transport/webtransport/client.h"

namespace moqd::client {

// ALPNs a QUIC client offers for `versions`, most preferred first: wire::served_alpns (the newest
// moq-lite ALPN first, then the IETF drafts', then moql, SETUP for lite-01/02), at most
// transport::quic::kMaxAlpns (the newest IETF drafts left out first).
std::vector<std::string> quic_alpns(wire::VersionSet versions);

// How to verify the relay for `url` and `tls` (see TlsOptions). For http:// (and ws://) URLs
// without a TLS flag this fetches http://host:port/certificate.sha256 (blocking, bounded by
// `fetch_timeout`) and pins it. Fails on a bad --tls-fingerprint, a failed fetch or a malformed
// hash.
Result<transport::quic::Verification> verification_for(const Url& url, const TlsOptions& tls,
                                                       Duration fetch_timeout);

// Blocking GET of `target` from url's host:port over plain HTTP/1.1; the body of a 200 answer.
// Fails (kTransport) on connection errors, non-200 statuses or when `timeout` passes.
Result<std::string> http_get(const Url& url, std::string_view target, Duration timeout);

class QuicConnection final : public Link,
                             private transport::quic::PacketSink,
                             private transport::quic::ConnectionObserver,
                             private transport::webtransport::ClientObserver,
                             private SharedQuicSocket::Member {
 public:
  // How long the blocking GET /certificate.sha256 may take.
  static constexpr Duration kFetchTimeout = std::chrono::seconds(5);

  QuicConnection(runtime::EventLoop& loop, model::Origin& origin, ConnectionOptions options);
  ~QuicConnection() override;

  // Resolves the host, settles verification (maybe fetching the pinned hash), opens the socket
  // and sends the first Initial; the handshake then runs on the loop.
  Status connect() override;
  void close() override;
  bool is_flushed() const override;
  bool is_transport_closed() const override;
  // Its own socket, or the shared one (whose counters then cover every connection on it).
  const runtime::UdpSocket* udp_socket() const override { return socket(); }

 private:
  // PacketSink: packets are written straight into the socket's send batch.
  std::span<uint8_t> packet_buffer(size_t len) override;
  void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override;
  void wait_for_room(TurnWork& writer) override;
  // ConnectionObserver
  void on_handshake_completed(transport::quic::Connection& conn) override;
  void on_done(transport::quic::Connection& conn) override;
  // webtransport::ClientObserver
  void on_session(transport::Session& session) override;
  void on_failed(int status, const char* reason) override;
  // The connection's visitor until the MoQ session takes over at the end of the handshake: it
  // turns a failed handshake into close_reason().
  struct HandshakeVisitor final : transport::SessionVisitor {
    explicit HandshakeVisitor(QuicConnection& owner) : owner(owner) {}
    void on_incoming_stream(transport::Stream& stream) override;
    void on_streams_available() override {}
    void on_closed(uint64_t code, std::string_view reason) override;
    QuicConnection& owner;
  };

  Status resolve();
  // The socket packets go through: udp_, or the shared socket's; null before connect().
  runtime::UdpSocket* socket() const;
  void on_datagram(const sockaddr* from, socklen_t from_len,
                   std::span<const uint8_t> datagram) override;
  ngtcp2_path path_to(const sockaddr* remote, socklen_t remote_len);

  HandshakeVisitor handshake_visitor_{*this};
  sockaddr_storage remote_{};
  socklen_t remote_len_ = 0;
  sockaddr_storage local_{};
  socklen_t local_len_ = 0;
  std::unique_ptr<runtime::UdpSocket> udp_;  // null on a shared socket
  SharedQuicSocket* shared_ = nullptr;       // set once registered on it (key_)
  uint64_t key_ = 0;
  std::unique_ptr<transport::quic::Connection> conn_;  // destroyed before udp_
  std::unique_ptr<transport::webtransport::Client> wt_;  // destroyed before conn_
};

// The stack options.transport names.
LinkPtr make_link(runtime::EventLoop& loop, model::Origin& origin, ConnectionOptions options);

}  // namespace moqd::client
