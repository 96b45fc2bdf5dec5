#include "relay/connection.h"

#include "base/log.h"
#include "relay/relay.h"
#include "relay/status_page.h"
#include "relay/worker.h"
#include "session/protocols.h"

namespace moqd::relay {

namespace ws = transport::websocket;

std::string_view peer_address(std::string_view peer) {
  size_t colon = peer.rfind(':');
  return colon == std::string_view::npos ? peer : peer.substr(0, colon);
}

ServerConnection::ServerConnection(RelayWorker& worker, int fd, std::string peer,
                                   Listener listener, bool counted, bool ops_only)
    : worker_(worker),
      peer_(std::move(peer)),
      listener_(listener),
      counted_(counted),
      ops_only_(ops_only),
      tcp_(worker.loop(), fd, peer_),
      session_(worker) {
  make_ws(tcp_);
  tcp_.set_handler(this);
  worker_.connections.fetch_add(1, std::memory_order_relaxed);
}

void ServerConnection::make_ws(transport::Pipe& pipe) {
  ws_ = std::make_unique<ws::WsServerConnection>(
      pipe, worker_.loop(), worker_.loop(), worker_.live().websocket,
      [this](const ws::HttpRequest& r) { return on_request(r); });
  ws_->set_open_callback([this] { on_upgraded(); });
  ws_->set_response_callback([this](int status, const char* reason) {
    if (status >= 400) {
      MOQD_LOG(kInfo, "http refused peer=%s status=%d reason=%s tls=%s", peer_.c_str(), status,
               reason, tls_ ? "yes" : "no");
    }
  });
}

bool ServerConnection::start_tls() {
  auto cert = worker_.certificate();
  if (!cert) {
    return false;
  }
  auto pipe = transport::tls::ServerPipe::make(tcp_, cert, peer_);
  if (!pipe) {
    MOQD_LOG(kWarn, "tls: cannot start a session for peer=%s: %s", peer_.c_str(),
             pipe.error().detail);
    return false;
  }
  tls_ = std::move(*pipe);
  make_ws(*tls_);  // replaces the plaintext layer, which has seen no byte
  tls_->set_handler(ws_.get());
  return true;
}

ServerConnection::~ServerConnection() {
  worker_.connections.fetch_sub(1, std::memory_order_relaxed);
  if (counted_) {
    worker_.relay().release_connection(peer_address(peer_));
  }
}

std::optional<ws::PlainResponse> ServerConnection::on_ops_request(const ws::HttpRequest& r) {
  Relay& relay = worker_.relay();
  const bool metrics = listener_ == Listener::kMetrics;
  if (metrics && r.path == "/metrics") {
    return ws::PlainResponse{200, "text/plain; version=0.0.4; charset=utf-8", relay.metrics_text(), {}};
  }
  if (metrics && r.path == "/cluster") {
    return ws::PlainResponse{200, "application/json", relay.cluster_json(), {}};
  }
  if (metrics && r.path == "/ready") {
    if (relay.is_draining()) {
      return ws::PlainResponse{503, "text/plain", "draining\n", {}};
    }
    return ws::PlainResponse{200, "text/plain", "ready\n", {}};
  }
  const bool status_here = relay.config().status_page &&
                           (metrics || relay.config().metrics_listen.empty());
  if (status_here && (r.path == "/" || r.path == "/index.html")) {
    return ws::PlainResponse{200, "text/html; charset=utf-8", status_page_html(), {}};
  }
  if (status_here && r.path == "/status.json") {
    return ws::PlainResponse{200, "application/json", relay.status_json(), {}};
  }
  return std::nullopt;
}

ws::RequestDecision ServerConnection::on_request(const ws::HttpRequest& r) {
  if (r.header("upgrade")) {
    if (listener_ == Listener::kMetrics) {
      return ws::PlainResponse{404, "text/plain", "no MoQ on the metrics listener\n", {}};
    }
    if (ops_only_) {
      worker_.note_refused(peer_, "max-connections");
      return ws::PlainResponse{503, "text/plain", "connection limit reached\n", {}};
    }
    auto acceptable = session::websocket_subprotocols(worker_.relay().config().versions);
    auto decision = ws::decide_upgrade(r, acceptable);
    auto* refused = std::get_if<ws::PlainResponse>(&decision);
    if (refused != nullptr && refused->status == 400 && ws::validate_upgrade(r)) {
      std::string accepted;
      for (const auto& a : acceptable) {
        accepted += accepted.empty() ? a : "," + a;
      }
      MOQD_LOG(kInfo, "websocket refused peer=%s: no acceptable subprotocol offered=\"%s\" accepted=%s",
               peer_.c_str(), ws::offered_subprotocols(r).c_str(), accepted.c_str());
    }
    return decision;
  }
  if (r.method == "OPTIONS") {
    ws::PlainResponse pre{204, "text/plain", "", {}};
    pre.extra_headers.push_back({"Access-Control-Allow-Methods", "GET, OPTIONS"});
    pre.extra_headers.push_back({"Access-Control-Allow-Headers", "*"});
    return pre;
  }
  if (r.method != "GET" && r.method != "HEAD") {
    return ws::PlainResponse{405, "text/plain", "method not allowed\n", {}};
  }
  if (r.method == "GET" || r.method == "HEAD") {
    if (auto ops = on_ops_request(r)) {
      return std::move(*ops);
    }
  }
  if (r.path == "/health") {
    return ws::PlainResponse{200, "application/json", worker_.relay().health_json(), {}};
  }
  if (r.path == "/stats") {
    return ws::PlainResponse{200, "application/json", worker_.relay().stats_json(), {}};
  }
  if (r.path == "/certificate.pem") {
    // The public certificate chain, for clients that trust a generated certificate over TLS
    // (wss://, https://) the way others pin /certificate.sha256.
    if (const auto& cert = worker_.certificate()) {
      return ws::PlainResponse{200, "application/x-pem-file", cert->cert_pem(), {}};
    }
    return ws::PlainResponse{404, "text/plain", "no certificate\n", {}};
  }
  if (r.path == "/certificate.sha256") {
    if (const auto& cert = worker_.certificate()) {
      return ws::PlainResponse{200, "text/plain", cert->sha256_hex(), {}};
    }
    return ws::PlainResponse{404, "text/plain", "no certificate: TLS is not configured\n", {}};
  }
  return ws::PlainResponse{404, "text/plain", "not found\n", {}};
}

void ServerConnection::on_upgraded() {
  const auto& sp = ws_->subprotocol();
  const auto& request = ws_->request();
  mux_ = std::make_unique<ws::MuxSession>(*ws_, worker_.loop(), sp.framing, ws::Role::kServer,
                                          sp.app_protocol, request.target(), peer_,
                                          worker_.live().mux);
  ws_->set_message_handler(mux_.get());
  session_.start(*mux_, request.path, request.query);
}

void ServerConnection::close(Error reason) {
  if (!session_.close(reason)) {
    tcp_.close();
  }
}

void ServerConnection::on_pipe_data(std::span<const uint8_t> data) {
  if (first_data_ && !data.empty()) {
    first_data_ = false;
    if (data[0] == transport::tls::kHandshakeRecord && !start_tls()) {
      tcp_.abort();
      return;
    }
  }
  if (tls_) {
    tls_->on_pipe_data(data);
  } else {
    ws_->on_pipe_data(data);
  }
}

void ServerConnection::on_pipe_writable() {
  if (tls_) {
    tls_->on_pipe_writable();
  } else {
    ws_->on_pipe_writable();
  }
}

void ServerConnection::on_pipe_closed() {
  if (tls_) {
    tls_->on_pipe_closed();
  } else {
    ws_->on_pipe_closed();
  }
  RelayWorker* worker = &worker_;
  ServerConnection* self = this;
  worker_.loop().defer([worker, self] { worker->remove_connection(self); });
}

}  // namespace moqd::relay
