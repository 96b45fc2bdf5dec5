#include "relay/relay_session.h"

#include "relay/relay.h"
#include "relay/worker.h"

namespace moqd::relay {

RelaySession::~RelaySession() {
  session_.reset();
  if (ready_) {
    worker_.sessions.fetch_sub(1, std::memory_order_relaxed);
    worker_.sessions_by_transport[transport_class_].fetch_sub(1, std::memory_order_relaxed);
  }
}

void RelaySession::start(transport::Session& transport, std::string root, std::string query) {
  const RelayConfig& rc = worker_.relay().config();
  session::SessionConfig sc;
  sc.role = session::Role::kServer;
  sc.versions = rc.versions;
  sc.limits = rc.limits;
  sc.decode = rc.decode;
  sc.root = std::move(root);
  sc.query = std::move(query);
  sc.discover_prefix = std::string();
  sc.skips = &worker_.viewer_skips();
  transport_class_ = transport_class(transport.kind());
  session_ = std::make_unique<session::Session>(transport, std::move(sc), worker_.origin(), *this,
                                                worker_.loop(), worker_.loop());
  session_->start();
}

bool RelaySession::close(Error reason) {
  if (!session_ || closed_) {
    return false;
  }
  session_->close(reason);
  return true;
}

bool RelaySession::authorize(session::Action action, std::string_view path,
                             std::string_view query) {
  return worker_.relay().auth().allow(action, path, query);
}

void RelaySession::on_session_ready(wire::Version) {
  ready_ = true;
  worker_.sessions.fetch_add(1, std::memory_order_relaxed);
  worker_.sessions_by_transport[transport_class_].fetch_add(1, std::memory_order_relaxed);
}

void RelaySession::on_peer_announce(const std::string& path, bool active, uint64_t hops,
                                    model::BroadcastSource& source) {
  worker_.on_peer_announce(path, active, hops, source);
}

void RelaySession::on_session_closed(Error) { closed_ = true; }

}  // namespace moqd::relay
