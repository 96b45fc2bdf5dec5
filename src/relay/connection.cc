#include "relay/connection.h"

#include "base/log.h"
#include "relay/relay.h"
#include "relay/worker.h"

namespace moqd::relay {

namespace ws = transport::websocket;

ServerConnection::ServerConnection(RelayWorker& worker, int fd, std::string peer)
    : worker_(worker),
      peer_(std::move(peer)),
      tcp_(worker.loop(), fd, peer_),
      ws_(tcp_, worker.loop(), worker.loop(), worker.relay().config().websocket,
          [this](const ws::HttpRequest& r) { return on_request(r); }),
      session_(worker) {
  ws_.set_open_callback([this] { on_upgraded(); });
  ws_.set_response_callback([this](int status, const char* reason) {
    if (status >= 400) {
      MOQD_LOG(kInfo, "http refused peer=%s status=%d reason=%s", peer_.c_str(), status, reason);
    }
  });
  tcp_.set_handler(this);
  worker_.connections.fetch_add(1, std::memory_order_relaxed);
}

ServerConnection::~ServerConnection() {
  worker_.connections.fetch_sub(1, std::memory_order_relaxed);
}

ws::RequestDecision ServerConnection::on_request(const ws::HttpRequest& r) {
  if (r.header("upgrade")) {
    return ws::decide_upgrade(r);
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
  if (r.path == "/health") {
    return ws::PlainResponse{200, "application/json", worker_.relay().health_json(), {}};
  }
  if (r.path == "/stats") {
    return ws::PlainResponse{200, "application/json", worker_.relay().stats_json(), {}};
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
  const auto& sp = ws_.subprotocol();
  const auto& request = ws_.request();
  mux_ = std::make_unique<ws::MuxSession>(ws_, worker_.loop(), sp.framing, ws::Role::kServer,
                                          sp.app_protocol, request.target(), peer_,
                                          worker_.relay().config().mux);
  ws_.set_message_handler(mux_.get());
  session_.start(*mux_, request.path, request.query);
}

void ServerConnection::close(Error reason) {
  if (!session_.close(reason)) {
    tcp_.close();
  }
}

void ServerConnection::on_pipe_data(std::span<const uint8_t> data) { ws_.on_pipe_data(data); }

void ServerConnection::on_pipe_writable() { ws_.on_pipe_writable(); }

void ServerConnection::on_pipe_closed() {
  ws_.on_pipe_closed();
  RelayWorker* worker = &worker_;
  ServerConnection* self = this;
  worker_.loop().defer([worker, self] { worker->remove_connection(self); });
}

}  // namespace moqd::relay
