#include "client/quic_connection.h"

#include <netdb.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "base/log.h"
#include "runtime/tcp.h"
#include "transport/quic/cid.h"
#include "transport/quic/tls.h"
#include "transport/websocket/http1.h"
#include "wire/draft14_alpn.h"

namespace moqd::client {

namespace quic = transport::quic;

namespace {

// TLS alerts (RFC 8446 §6.2) that mean the certificate was not accepted.
bool is_certificate_alert(uint64_t alert) {
  return alert == 42 || alert == 43 || alert == 44 || alert == 45 || alert == 46 || alert == 48;
}

// ngtcp2 reports a failed handshake as 0x100 + the TLS alert (transport/quic/connection.cc).
constexpr uint64_t kCryptoErrorBase = 0x100;
constexpr uint64_t kAlertNoApplicationProtocol = 120;

// Static details for the CLI's error line: Error carries no owned string.
const char* describe_handshake_failure(uint64_t code, std::string_view reason) {
  if (code >= kCryptoErrorBase && code < kCryptoErrorBase + 0x100) {
    uint64_t alert = code - kCryptoErrorBase;
    if (is_certificate_alert(alert)) {
      return "QUIC handshake failed: the relay's certificate was rejected "
             "(see --tls-ca, --tls-fingerprint, --tls-insecure)";
    }
    if (alert == kAlertNoApplicationProtocol) {
      return "QUIC handshake failed: the relay offers none of our MoQ versions (ALPN)";
    }
    return "QUIC handshake failed (TLS alert)";
  }
  if (reason == "handshake timeout") {
    return "QUIC handshake timed out: no QUIC relay answered at that address";
  }
  return "QUIC connection closed during the handshake";
}

// The CLI's error line for a WebTransport CONNECT that got no session; static details.
Error webtransport_refusal(int status, const char* reason) {
  switch (status) {
    case 0:
      return make_error(ErrorCode::kTransport, reason);
    case 400:
      return make_error(ErrorCode::kVersion,
                        "the relay refused the WebTransport CONNECT (400: bad request or no "
                        "common MoQ version)");
    case 401:
    case 403:
      return make_error(ErrorCode::kUnauthorized,
                        "the relay refused the WebTransport CONNECT (403: not authorized)");
    case 404:
      return make_error(ErrorCode::kNotFound,
                        "the relay refused the WebTransport CONNECT (404: not found)");
    case 429:
    case 503:
      return make_error(ErrorCode::kGoingAway,
                        "the relay refused the WebTransport CONNECT (busy or going away)");
    default:
      return make_error(ErrorCode::kTransport, "the relay refused the WebTransport CONNECT");
  }
}

// 16-byte random connection IDs, as RFC 9000 §5.1 recommends for unlinkability.
void new_random_cid(ngtcp2_cid* cid, uint8_t* token) {
  cid->datalen = 16;
  transport::quic::fill_random(cid->data, cid->datalen);
  transport::quic::fill_random(token, NGTCP2_STATELESS_RESET_TOKENLEN);
}

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\r' || s.front() == '\n' ||
                        s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\n' ||
                        s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return std::string(s);
}

using SteadyClock = std::chrono::steady_clock;

int remaining_ms(SteadyClock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on fd until the deadline; false on timeout or error.
bool wait_fd(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int ms = remaining_ms(deadline);
    if (ms == 0) {
      return false;
    }
    int rv = ::poll(&p, 1, ms);
    if (rv > 0) {
      return true;
    }
    if (rv == 0 || errno != EINTR) {
      return false;
    }
  }
}

Status send_all(int fd, std::string_view data, SteadyClock::time_point deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_fd(fd, POLLOUT, deadline)) {
        return fail(ErrorCode::kTransport, "timed out sending the HTTP request");
      }
    } else {
      return fail(ErrorCode::kTransport, "cannot send the HTTP request");
    }
  }
  return {};
}

// Reads until the peer closes (the request says Connection: close) or `enough` holds.
Result<std::string> read_response(int fd, SteadyClock::time_point deadline,
                                  const std::function<bool(const std::string&)>& enough) {
  // A fingerprint answer is tiny; anything larger is not one.
  constexpr size_t kMaxResponseBytes = 64 * 1024;
  std::string data;
  char buf[4096];
  while (!enough(data)) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      data.append(buf, static_cast<size_t>(n));
      if (data.size() > kMaxResponseBytes) {
        return fail(ErrorCode::kBoundsExceeded, "HTTP response too large");
      }
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!wait_fd(fd, POLLIN, deadline)) {
        return fail(ErrorCode::kTimeout, "timed out waiting for the HTTP response");
      }
    } else {
      return fail(ErrorCode::kTransport, "cannot read the HTTP response");
    }
  }
  return data;
}

}  // namespace

std::vector<std::string> quic_alpns(wire::VersionSet versions) {
  std::vector<std::string> out = wire::served_alpns(session::client_versions(versions));
  // `moq-00` and `moql` both reach draft 14 through SETUP; a client offering moql needs no moq-00
  // (it would only push a newer draft out of the eight).
  if (std::find(out.begin(), out.end(), wire::kSetupAlpn) != out.end()) {
    std::erase(out, std::string(wire::kDraft14Alpn));
  }
  // GnuTLS takes at most kMaxAlpns from a client. Past it the newest IETF drafts are left out
  // first (they come right after moq-lite's ALPNs): moq-lite's ALPNs, moql and the older drafts
  // that deployed relays speak stay, so the default set offers drafts 15..18 and `--versions`
  // naming 19 or 20 offers them.
  for (size_t i = 0; out.size() > transport::quic::kMaxAlpns && i < out.size();) {
    const wire::ProtocolInfo* row = wire::protocol_for_alpn(out[i]);
    if (row != nullptr && !wire::is_lite(row->version) && out[i] != wire::kSetupAlpn) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return out;
}

Result<std::string> http_get(const Url& url, std::string_view target, Duration timeout) {
  namespace ws = transport::websocket;
  auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(timeout);
  auto fd = runtime::tcp_connect(url.host, url.port);
  if (!fd) {
    return tl::unexpected(fd.error());
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{*fd};
  std::string request = ws::write_http_request(
      "GET", target, {{"Host", url.authority()}, {"Connection", "close"}, {"Accept", "*/*"}});
  if (auto st = send_all(*fd, request, deadline); !st) {
    return tl::unexpected(st.error());
  }
  std::optional<size_t> body_at;
  std::optional<size_t> length;
  Error bad_head{};
  bool head_failed = false;
  auto enough = [&](const std::string& data) {
    if (!body_at) {
      auto parsed = ws::parse_http_response(
          std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
      if (!parsed) {
        bad_head = parsed.error();
        head_failed = true;
        return true;
      }
      if (!*parsed) {
        return false;
      }
      body_at = (*parsed)->consumed;
      if (auto cl = (*parsed)->value.header("Content-Length")) {
        length = std::strtoull(std::string(*cl).c_str(), nullptr, 10);
      }
      if ((*parsed)->value.status != 200) {
        return true;
      }
    }
    return length && data.size() - *body_at >= *length;
  };
  auto data = read_response(*fd, deadline, enough);
  if (!data) {
    return tl::unexpected(data.error());
  }
  if (head_failed) {
    return tl::unexpected(bad_head);
  }
  auto parsed = ws::parse_http_response(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data->data()), data->size()));
  if (!parsed || !*parsed) {
    return fail(ErrorCode::kTransport, "incomplete HTTP response");
  }
  if ((*parsed)->value.status != 200) {
    return fail(ErrorCode::kNotFound, "the relay did not serve its certificate hash (HTTP error)");
  }
  std::string body = data->substr((*parsed)->consumed);
  if (length && body.size() > *length) {
    body.resize(*length);
  }
  return body;
}

Result<quic::Verification> verification_for(const Url& url, const TlsOptions& tls,
                                            Duration fetch_timeout) {
  quic::Verification v;
  if (!tls.fingerprint.empty()) {
    auto hash = quic::parse_sha256_hex(tls.fingerprint);
    if (!hash) {
      return fail(ErrorCode::kDecode, "--tls-fingerprint must be 64 hex digits (SHA-256)");
    }
    v.mode = quic::VerifyMode::kFingerprint;
    v.fingerprint = *hash;
  } else if (!tls.ca_file.empty()) {
    v.mode = quic::VerifyMode::kCaFile;
    v.ca_file = tls.ca_file;
  } else if (tls.insecure) {
    v.mode = quic::VerifyMode::kInsecure;
  } else if (url.scheme == "http" || url.scheme == "ws") {
    // As the JS client does for http:// URLs: trust whatever hash the relay serves over plain
    // HTTP, which is only as safe as the network path (development setups).
    auto body = http_get(url, "/certificate.sha256", fetch_timeout);
    if (!body) {
      return tl::unexpected(body.error());
    }
    auto hash = quic::parse_sha256_hex(trim(*body));
    if (!hash) {
      return fail(ErrorCode::kDecode, "GET /certificate.sha256 did not answer a SHA-256 hex hash");
    }
    MOQD_LOG(kDebug, "quic: pinning the relay's certificate sha256 %s", trim(*body).c_str());
    v.mode = quic::VerifyMode::kFingerprint;
    v.fingerprint = *hash;
  }
  return v;
}

QuicConnection::QuicConnection(runtime::EventLoop& loop, model::Origin& origin,
                               ConnectionOptions options)
    : Link(loop, origin, std::move(options)) {}

QuicConnection::~QuicConnection() {
  session_.reset();
  wt_.reset();
  if (conn_) {
    conn_->set_visitor(nullptr);  // its destructor reports on_closed: nobody is listening now
  }
  conn_.reset();
  if (shared_ != nullptr) {
    shared_->remove(key_);
  }
  udp_.reset();
}

runtime::UdpSocket* QuicConnection::socket() const {
  return shared_ != nullptr ? &shared_->socket() : udp_.get();
}

Status QuicConnection::resolve() {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  std::string port = std::to_string(options_.url.port);
  addrinfo* res = nullptr;
  int rv = getaddrinfo(options_.url.host.c_str(), port.c_str(), &hints, &res);
  if (rv != 0) {
    hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
    rv = getaddrinfo(options_.url.host.c_str(), port.c_str(), &hints, &res);
  }
  if (rv != 0 || res == nullptr) {
    return fail(ErrorCode::kTransport, "cannot resolve the relay's host name");
  }
  std::memcpy(&remote_, res->ai_addr, res->ai_addrlen);
  remote_len_ = static_cast<socklen_t>(res->ai_addrlen);
  freeaddrinfo(res);
  return {};
}

Status QuicConnection::connect() {
  std::vector<std::string> alpns = quic_alpns(options_.versions);
  if (alpns.empty()) {
    return fail(ErrorCode::kVersion, "no MoQ version left to offer over QUIC");
  }
  if (options_.transport == TransportKind::kWebTransport) {
    alpns = {"h3"};  // the MoQ version travels in WT-Available-Protocols instead
  }
  auto verification = verification_for(options_.url, options_.tls, kFetchTimeout);
  if (!verification) {
    return tl::unexpected(verification.error());
  }
  if (auto st = resolve(); !st) {
    return st;
  }
  char numeric[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&remote_), remote_len_, numeric,
                  sizeof numeric, nullptr, 0, NI_NUMERICHOST) != 0) {
    return fail(ErrorCode::kTransport, "cannot format the relay's address");
  }
  quic::CidGenerator new_cid = new_random_cid;
  if (options_.shared_udp != nullptr) {
    const sockaddr_storage& local = options_.shared_udp->socket().local_address();
    if (local.ss_family != remote_.ss_family) {
      return fail(ErrorCode::kTransport,
                  "the shared UDP socket's address family is not the relay's");
    }
    shared_ = options_.shared_udp;
    key_ = shared_->add(*this);
    local_ = local;
    local_len_ = shared_->socket().local_address_len();
    new_cid = [key = key_](ngtcp2_cid* cid, uint8_t* token) {
      SharedQuicSocket::fill_cid(key, cid, token);
    };
  } else {
    auto udp = runtime::UdpSocket::open_client(loop_, numeric, options_.udp);
    if (!udp) {
      return tl::unexpected(udp.error());
    }
    udp_ = std::move(*udp);
    local_ = udp_->local_address();
    local_len_ = udp_->local_address_len();
    udp_->set_handler([this](const sockaddr* from, socklen_t len, std::span<const uint8_t> d) {
      on_datagram(from, len, d);
    });
  }
  std::string server_name = options_.url.host;
  quic::TlsFactory make_tls = [server_name, alpns, v = *verification](ngtcp2_crypto_conn_ref* ref) {
    return quic::make_client_session(server_name, alpns, v, ref);
  };
  quic::ConnectionContext ctx{*this, loop_, loop_, std::move(new_cid), this};
  auto conn = quic::Connection::connect(path_to(reinterpret_cast<const sockaddr*>(&remote_),
                                                remote_len_),
                                        make_tls, ctx, options_.quic);
  if (!conn) {
    return tl::unexpected(conn.error());
  }
  conn_ = std::move(*conn);
  conn_->set_visitor(&handshake_visitor_);
  return {};
}

ngtcp2_path QuicConnection::path_to(const sockaddr* remote, socklen_t remote_len) {
  ngtcp2_path path{};
  path.local.addr = reinterpret_cast<ngtcp2_sockaddr*>(&local_);
  path.local.addrlen = local_len_;
  path.remote.addr = const_cast<ngtcp2_sockaddr*>(reinterpret_cast<const ngtcp2_sockaddr*>(remote));
  path.remote.addrlen = remote_len;
  return path;
}

void QuicConnection::on_datagram(const sockaddr* from, socklen_t from_len,
                                 std::span<const uint8_t> datagram) {
  if (!conn_ || conn_->is_done()) {
    return;
  }
  (void)conn_->on_packet(path_to(from, from_len), datagram);
}

std::span<uint8_t> QuicConnection::packet_buffer(size_t len) {
  runtime::UdpSocket* s = socket();
  return s != nullptr ? s->prepare(len) : PacketSink::packet_buffer(len);
}

void QuicConnection::wait_for_room(TurnWork& writer) {
  if (runtime::UdpSocket* s = socket()) {
    s->wait_for_room(writer);
  }
}

void QuicConnection::send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) {
  if (runtime::UdpSocket* s = socket()) {
    s->send(reinterpret_cast<const sockaddr*>(path.remote.addr), path.remote.addrlen, pkt);
  }
}

void QuicConnection::on_handshake_completed(quic::Connection& conn) {
  MOQD_LOG(kDebug, "quic: connected to %s alpn=%s", std::string(conn.peer()).c_str(),
           std::string(conn.protocol()).c_str());
  if (options_.transport != TransportKind::kWebTransport) {
    start_session(conn);
    return;
  }
  transport::webtransport::ClientConfig config;
  config.authority = options_.url.authority();
  config.path = options_.url.target();
  config.protocols = quic_alpns(options_.versions);
  transport::webtransport::ClientObserver& observer = *this;
  wt_ = std::make_unique<transport::webtransport::Client>(conn, loop_, observer, std::move(config));
}

void QuicConnection::on_session(transport::Session& session) {
  MOQD_LOG(kDebug, "webtransport: session at %s protocol=%s", options_.url.target().c_str(),
           std::string(session.protocol()).c_str());
  start_session(session);
}

void QuicConnection::on_failed(int status, const char* reason) {
  MOQD_LOG(kDebug, "webtransport: no session: status=%d (%s)", status, reason);
  mark_closed(webtransport_refusal(status, reason));
}

void QuicConnection::on_done(quic::Connection&) {
  if (!is_closed()) {
    mark_closed(make_error(ErrorCode::kTransport, "QUIC connection closed"));
  }
}

void QuicConnection::HandshakeVisitor::on_incoming_stream(transport::Stream& stream) {
  // Only before the handshake completes, when no MoQ stream can exist yet.
  stream.reset(static_cast<uint64_t>(ErrorCode::kUnexpectedStream));
}

void QuicConnection::HandshakeVisitor::on_closed(uint64_t code, std::string_view reason) {
  MOQD_LOG(kDebug, "quic: closed before the session started: code=%llu reason=%s",
           static_cast<unsigned long long>(code), std::string(reason).c_str());
  owner.mark_closed(make_error(ErrorCode::kTransport, describe_handshake_failure(code, reason)));
}

void QuicConnection::close() {
  if (session_ && !is_closed()) {
    session_->close(make_error(ErrorCode::kCancel, "client done"));
  } else if (conn_ && !conn_->is_closed()) {
    conn_->close(static_cast<uint64_t>(ErrorCode::kCancel), "client done");
  }
  if (runtime::UdpSocket* s = socket()) {
    s->flush();  // the CONNECTION_CLOSE, before a caller that exits next stops the loop
  }
}

bool QuicConnection::is_flushed() const {
  return !conn_ || conn_->is_closed() ||
         (conn_->unsent_bytes() == 0 && !conn_->has_unacked_stream_data());
}

bool QuicConnection::is_transport_closed() const { return !conn_ || conn_->is_closed(); }

LinkPtr make_link(runtime::EventLoop& loop, model::Origin& origin, ConnectionOptions options) {
  if (options.transport == TransportKind::kQuic ||
      options.transport == TransportKind::kWebTransport) {
    return std::make_unique<QuicConnection>(loop, origin, std::move(options));
  }
  return std::make_unique<Connection>(loop, origin, std::move(options));
}

}  // namespace moqd::client
