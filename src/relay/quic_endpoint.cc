#include "relay/quic_endpoint.h"

#include <gnutls/crypto.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/log.h"
#include "runtime/tcp.h"
#include "relay/connection.h"
#include "relay/relay.h"
#include "relay/relay_session.h"
#include "relay/worker.h"
#include "session/moq_session.h"
#include "transport/quic/cid.h"
#include "transport/quic/tls.h"
#include "transport/webtransport/server.h"

namespace moqd::relay {

namespace quic = transport::quic;
namespace wt = transport::webtransport;

namespace {

// A stateless reset is at most this long (RFC 9000 §10.3 suggests looking like a short packet)
// and always shorter than its trigger, so two endpoints cannot reset each other in a loop.
constexpr size_t kMaxResetLength = 43;
// The packet is the random bytes (its first byte becomes the header byte) then the token.
constexpr size_t kMinResetLength = NGTCP2_MIN_STATELESS_RESET_RANDLEN + NGTCP2_STATELESS_RESET_TOKENLEN;

}  // namespace

std::vector<std::string> moq_protocols(const wire::VersionSet& versions) {
  return wire::served_alpns(versions);
}

std::vector<std::string> quic_alpns(const wire::VersionSet& versions) {
  std::vector<std::string> out = moq_protocols(versions);
  if (out.empty()) {
    return out;
  }
  // WebTransport: the MoQ protocol is chosen in CONNECT. No bound on the list: the TLS server
  // hands GnuTLS (at most 8 per session) only the protocol it picked from the ClientHello.
  out.push_back(std::string(kH3Alpn));
  return out;
}

// One accepted QUIC connection and its MoQ session (the QUIC counterpart of ServerConnection's
// session part): directly over raw QUIC, or over a WebTransport session when the ALPN is h3.
// Owned by its QuicEndpoint; destroyed from the loop once the connection is done.
class QuicServerSession final : public quic::ConnectionObserver, public wt::ServerObserver {
 public:
  QuicServerSession(QuicEndpoint& endpoint, std::shared_ptr<const quic::Certificate> cert)
      : endpoint_(endpoint), worker_(endpoint.worker()), cert_(std::move(cert)), session_(worker_) {
    worker_.connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~QuicServerSession() override {
    worker_.connections.fetch_sub(1, std::memory_order_relaxed);
    validated();
    if (counted_) {
      worker_.relay().release_connection(address_);
    }
  }

  // The source address (without the port), as TCP connections name theirs.
  void set_address(std::string address) { address_ = std::move(address); }
  const std::string& address() const { return address_; }
  // --max-connections-per-address: the connection is counted against its source address once the
  // address is proven (a Retry token at accept, or a completed handshake), so a spoofed Initial
  // cannot use up another address's share. False when the address is at the cap.
  bool count_address() {
    if (!counted_) {
      counted_ = worker_.relay().admit_address(address_);
    }
    return counted_;
  }

  // Accepted without a Retry token: counted as a pending unvalidated handshake until it completes
  // or goes away.
  void set_unvalidated() {
    unvalidated_ = true;
  }
  void validated() {
    if (unvalidated_) {
      unvalidated_ = false;
      endpoint_.on_unvalidated_done();
    }
  }

  const quic::Certificate& certificate() const { return *cert_; }
  void set_connection(std::unique_ptr<quic::Connection> c) { conn_ = std::move(c); }
  quic::Connection* connection() { return conn_.get(); }
  std::vector<CidKey>& cids() { return cids_; }

  void close(Error reason) {
    if (h3_ != nullptr) {
      h3_->drain();  // GOAWAY, and no new WebTransport session
    }
    if (!session_.close(reason) && conn_ && !conn_->is_closed()) {
      conn_->close(static_cast<uint64_t>(reason.code), reason.detail);
    }
  }

  // GOAWAY for a draining relay; false when the session's version has none.
  bool goaway(const std::string& url) {
    if (h3_ != nullptr) {
      h3_->drain();
    }
    return session_.send_goaway(url);
  }

  // quic::ConnectionObserver
  void on_handshake_completed(quic::Connection& conn) override {
    worker_.metrics().quic_handshakes_completed.add();
    validated();
    if (!count_address()) {
      // Handshakes that started while the address was under the cap and finished past it.
      worker_.note_refused(conn.peer(), "max-connections-per-address");
      conn.close(static_cast<uint64_t>(ErrorCode::kBoundsExceeded), "max-connections-per-address");
      return;
    }
    if (conn.protocol() == kH3Alpn) {
      wt::ServerConfig c;
      c.protocols = moq_protocols(worker_.relay().config().versions);
      h3_ = std::make_unique<wt::Server>(conn, worker_.loop(), *this, std::move(c));
      return;
    }
    session_.start(conn, "", "");  // raw QUIC has no URL path: the session sees the whole origin
  }
  void on_done(quic::Connection&) override { endpoint_.remove(this); }

  // wt::ServerObserver
  std::optional<wt::Refusal> on_connect(const wt::ConnectRequest& request) override {
    auto [path, query] = split_target(request.path);
    if (!session_.admit(path, query, conn_ ? conn_->peer() : std::string_view("?"))) {
      return wt::Refusal{403, "unauthorized"};
    }
    return std::nullopt;
  }
  void on_refused(int status, const char* reason) override {
    MOQD_LOG(kInfo, "webtransport refused peer=%s status=%d reason=%s",
             conn_ ? std::string(conn_->peer()).c_str() : "?", status, reason);
  }
  void on_session(transport::Session& session, const wt::ConnectRequest& request) override {
    auto [path, query] = split_target(request.path);
    session_.start(session, std::move(path), std::move(query));
  }

 private:
  // "/room?jwt=x" -> ("/room", "jwt=x"), as the WebSocket path hands them to the auth hook.
  static std::pair<std::string, std::string> split_target(std::string_view target) {
    size_t q = target.find('?');
    if (q == std::string_view::npos) {
      return {std::string(target), std::string()};
    }
    return {std::string(target.substr(0, q)), std::string(target.substr(q + 1))};
  }

  QuicEndpoint& endpoint_;
  RelayWorker& worker_;
  std::shared_ptr<const quic::Certificate> cert_;  // TLS sessions borrow its credentials
  std::unique_ptr<quic::Connection> conn_;
  std::unique_ptr<wt::Server> h3_;  // ALPN h3 only; destroyed before conn_
  RelaySession session_;            // destroyed before h3_ and conn_
  std::vector<CidKey> cids_;        // every CID routed to us, until we are done
  bool unvalidated_ = false;
  bool counted_ = false;  // against address_ (--max-connections-per-address)
  std::string address_;
};

Result<std::unique_ptr<QuicEndpoint>> QuicEndpoint::open(RelayWorker& worker, size_t index,
                                                         const std::string& host, uint16_t port) {
  runtime::UdpSocket::Options o;
  o.reuse_port = true;
  o.gso = worker.relay().config().udp_gso;
  o.gro = worker.relay().config().udp_gro;
  auto s = runtime::UdpSocket::bind(worker.loop(), host, port, o);
  if (!s) {
    return tl::unexpected(s.error());
  }
  std::unique_ptr<QuicEndpoint> ep(new QuicEndpoint(worker, index, std::move(*s)));
  return ep;
}

QuicEndpoint::QuicEndpoint(RelayWorker& worker, size_t index,
                           std::unique_ptr<runtime::UdpSocket> socket)
    : worker_(worker), index_(index), socket_(std::move(socket)) {
  socket_->set_handler([this](const sockaddr* from, socklen_t len, std::span<const uint8_t> d) {
    on_datagram(from, len, d, false);
  });
}

QuicEndpoint::~QuicEndpoint() {
  by_cid_.clear();
  sessions_.clear();
}

void QuicEndpoint::inject(const sockaddr* from, socklen_t from_len,
                          std::span<const uint8_t> datagram) {
  on_datagram(from, from_len, datagram, true);
  socket_->flush();
}

ngtcp2_path QuicEndpoint::make_path(const sockaddr* from, socklen_t from_len) {
  ngtcp2_path path{};
  path.local.addr = const_cast<sockaddr*>(
      reinterpret_cast<const sockaddr*>(&socket_->local_address()));
  path.local.addrlen = socket_->local_address_len();
  path.remote.addr = const_cast<sockaddr*>(from);
  path.remote.addrlen = from_len;
  return path;
}

void QuicEndpoint::on_datagram(const sockaddr* from, socklen_t from_len,
                               std::span<const uint8_t> datagram, bool forwarded) {
  auto dcid = quic::extract_dcid(datagram, quic::kCidLength);
  if (!dcid) {
    return;
  }
  ngtcp2_path path = make_path(from, from_len);
  if (auto it = by_cid_.find(CidKey(*dcid)); it != by_cid_.end()) {
    if (quic::Connection* c = it->second->connection()) {
      (void)c->on_packet(path, datagram);  // errors close the connection; on_done follows
    }
    return;
  }
  if (quic::is_initial(datagram)) {
    accept(path, datagram);
    return;
  }
  if (!forwarded && forward(*dcid, from, from_len, datagram)) {
    return;
  }
  if (!quic::is_long_header(datagram)) {
    send_stateless_reset(from, from_len, *dcid, datagram.size());
  }
}

bool QuicEndpoint::forward(std::span<const uint8_t> dcid, const sockaddr* from, socklen_t from_len,
                           std::span<const uint8_t> datagram) {
  auto owner = quic::worker_of(dcid);
  size_t workers = worker_.relay().worker_count();
  if (!owner || *owner == worker_.index() || *owner >= workers) {
    return false;
  }
  forwarded_.add();
  sockaddr_storage addr{};
  std::memcpy(&addr, from, std::min<size_t>(from_len, sizeof addr));
  Relay* relay = &worker_.relay();
  size_t index = index_;
  size_t to = *owner;
  worker_.workers().post(to, [relay, to, index, addr, from_len,
                              bytes = std::vector<uint8_t>(datagram.begin(), datagram.end())] {
    if (QuicEndpoint* ep = relay->worker(to).quic_endpoint(index)) {
      ep->inject(reinterpret_cast<const sockaddr*>(&addr), from_len, bytes);
    }
  });
  return true;
}

void QuicEndpoint::roll_window() {
  Instant now = worker_.loop().now();
  if (now - window_start_ >= std::chrono::seconds(1)) {
    window_start_ = now;
    handshakes_in_window_ = 0;
    resets_in_window_ = 0;
    logged_handshake_limit_ = false;
    logged_pending_limit_ = false;
    logged_connection_limit_ = false;
  }
}

bool QuicEndpoint::allow_handshake() {
  roll_window();
  if (pending_unvalidated_ >= worker_.relay().config().max_pending_handshakes) {
    if (!logged_pending_limit_) {
      MOQD_LOG(kWarn, "quic: %zu handshakes pending on worker %zu (--max-pending-handshakes); "
               "answering every Initial with Retry", pending_unvalidated_, worker_.index());
      logged_pending_limit_ = true;
    }
    return false;
  }
  if (handshakes_in_window_ >= worker_.relay().config().max_handshakes_per_second) {
    if (!logged_handshake_limit_) {
      MOQD_LOG(kWarn, "quic: over --max-handshakes-per-second on worker %zu; answering with Retry",
               worker_.index());
      logged_handshake_limit_ = true;
    }
    return false;
  }
  ++handshakes_in_window_;
  return true;
}

void QuicEndpoint::accept(const ngtcp2_path& path, std::span<const uint8_t> datagram) {
  auto cert = worker_.certificate();
  ngtcp2_pkt_hd hd;
  if (draining_ || cert == nullptr || ngtcp2_accept(&hd, datagram.data(), datagram.size()) != 0) {
    return;
  }
  std::string address(peer_address(runtime::format_peer(path.remote.addr, path.remote.addrlen)));
  std::optional<quic::RetryInfo> retry;
  if (quic::has_retry_token(hd)) {
    auto r = quic::verify_retry_token(path, hd, worker_.loop().now());
    if (!r) {
      send_invalid_token(path, hd);
      return;
    }
    retry = *r;  // a proven address: not counted against the handshake rate
  } else if (worker_.relay().address_connections(address) >=
                 worker_.relay().config().max_connections_per_address ||
             !allow_handshake()) {
    send_retry(path, hd);  // at the address cap: refused once the address is proven
    return;
  }
  if (static_cast<size_t>(std::max<int64_t>(0, worker_.relay().connection_count())) >=
      worker_.relay().config().max_connections) {
    worker_.metrics().connections_refused.add();
    if (!logged_connection_limit_) {
      MOQD_LOG(kWarn, "quic: connection refused on worker %zu: --max-connections %zu reached",
               worker_.index(), worker_.relay().config().max_connections);
      logged_connection_limit_ = true;
    }
    return;
  }
  auto owned = std::make_unique<QuicServerSession>(*this, cert);
  QuicServerSession* s = owned.get();
  s->set_address(address);
  if (retry && !s->count_address()) {
    send_refused(path, hd, address);
    return;
  }
  std::vector<std::string> alpns = quic_alpns(worker_.relay().config().versions);
  auto tls = [s, alpns](ngtcp2_crypto_conn_ref* ref) {
    return quic::make_server_session(s->certificate(), alpns, ref);
  };
  size_t self = worker_.index();
  quic::ConnectionContext ctx{*this, worker_.loop(), worker_.loop(),
                              [this, s, self](ngtcp2_cid* cid, uint8_t* token) {
                                quic::generate_cid(self, cid, token);
                                on_cid_issued(s, *cid);
                              },
                              s};
  auto c = quic::Connection::accept(path, datagram, tls, std::move(ctx),
                                    worker_.relay().config().quic, retry);
  if (!c) {
    return;  // not an acceptable Initial (or no TLS): nothing was sent, nothing is kept
  }
  auto dcid = quic::extract_dcid(datagram, quic::kCidLength);
  by_cid_[CidKey(*dcid)] = s;  // the client keeps its chosen DCID until our Initial arrives
  s->cids().push_back(CidKey(*dcid));
  s->set_connection(std::move(*c));
  if (!retry) {
    ++pending_unvalidated_;
    s->set_unvalidated();
  }
  sessions_.push_back(std::move(owned));
  worker_.metrics().quic_handshakes_started.add();
  (void)s->connection()->on_packet(path, datagram);
}

void QuicEndpoint::send_retry(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd) {
  ngtcp2_cid scid = quic::make_cid(worker_.index());  // the retried Initial comes back here
  uint8_t pkt[quic::kStatelessPacketBufferSize];
  auto n = quic::write_retry(path, hd, scid, worker_.loop().now(), pkt);
  worker_.metrics().quic_retries.add();
  if (n) {
    socket_->send(path.remote.addr, path.remote.addrlen, {pkt, *n});
  }
}

void QuicEndpoint::send_invalid_token(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd) {
  uint8_t pkt[quic::kStatelessPacketBufferSize];
  auto n = quic::write_invalid_token_close(hd, pkt);
  worker_.metrics().quic_invalid_tokens.add();
  if (n) {
    socket_->send(path.remote.addr, path.remote.addrlen, {pkt, *n});
  }
}

void QuicEndpoint::send_refused(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd,
                                std::string_view address) {
  uint8_t pkt[quic::kStatelessPacketBufferSize];
  auto n = quic::write_refused_close(hd, pkt);
  worker_.note_refused(address, "max-connections-per-address");
  if (n) {
    socket_->send(path.remote.addr, path.remote.addrlen, {pkt, *n});
  }
}

void QuicEndpoint::on_cid_issued(QuicServerSession* s, const ngtcp2_cid& cid) {
  CidKey key({cid.data, cid.datalen});
  by_cid_[key] = s;
  s->cids().push_back(key);
}

void QuicEndpoint::remove(QuicServerSession* s) {
  for (const auto& key : s->cids()) {
    if (auto it = by_cid_.find(key); it != by_cid_.end() && it->second == s) {
      by_cid_.erase(it);
    }
  }
  s->cids().clear();
  // on_done may come from inside the connection: destroy it once the call has returned.
  worker_.loop().defer([this, s] {
    sessions_.remove_if([s](const auto& p) { return p.get() == s; });
  });
}

void QuicEndpoint::send_stateless_reset(const sockaddr* to, socklen_t to_len,
                                        std::span<const uint8_t> dcid, size_t trigger_len) {
  if (dcid.size() != quic::kCidLength || trigger_len <= kMinResetLength) {
    return;
  }
  roll_window();
  if (resets_in_window_ >= kMaxResetsPerSecond) {
    return;
  }
  ++resets_in_window_;
  size_t len = std::min(trigger_len - 1, kMaxResetLength);
  uint8_t rand[kMaxResetLength];
  size_t randlen = len - NGTCP2_STATELESS_RESET_TOKENLEN;
  gnutls_rnd(GNUTLS_RND_NONCE, rand, randlen);
  auto token = quic::stateless_reset_token(dcid);
  uint8_t pkt[kMaxResetLength];
  auto n = ngtcp2_pkt_write_stateless_reset(pkt, sizeof pkt, token.data(), rand, randlen);
  if (n > 0) {
    socket_->send(to, to_len, {pkt, static_cast<size_t>(n)});
  }
}

void QuicEndpoint::send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) {
  socket_->send(path.remote.addr, path.remote.addrlen, pkt);
}

void QuicEndpoint::drain(const std::string& goaway_url) {
  draining_ = true;
  for (auto& s : sessions_) {
    if (!s->goaway(goaway_url)) {
      s->close(make_error(ErrorCode::kGoingAway, "relay shutting down"));
    }
  }
}

void QuicEndpoint::close_all() {
  for (auto& s : sessions_) {
    s->close(make_error(ErrorCode::kGoingAway, "relay shutting down"));
  }
}

void QuicEndpoint::abort() {
  by_cid_.clear();
  sessions_.clear();
}

}  // namespace moqd::relay
