#include "relay/worker.h"

#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "relay/connection.h"
#include "relay/relay.h"

namespace moqd::relay {

namespace {
model::OriginConfig origin_config(const RelayConfig& c, model::CacheBudget* budget) {
  model::OriginConfig oc = c.origin;
  oc.budget = budget;
  return oc;
}
}  // namespace

RelayWorker::RelayWorker(Relay& relay, size_t index, runtime::Workers& workers,
                         const std::vector<Bridge*>& bridges)
    : relay_(relay),
      index_(index),
      loop_(workers.loop(index)),
      budget_(relay.config().cache_budget / std::max<size_t>(1, relay.config().workers)),
      origin_(origin_config(relay.config(), &budget_), loop_, loop_),
      bridge_(index, workers, origin_, bridges) {}

RelayWorker::~RelayWorker() {
  connections_.clear();
  listeners_.clear();
  for (int fd : udp_fds_) {
    ::close(fd);
  }
}

Status RelayWorker::listen(const std::string& host, uint16_t port) {
  auto l = runtime::TcpListener::listen(loop_, host, port,
                                        [this](int fd, std::string peer) { accept(fd, std::move(peer)); });
  if (!l) {
    return tl::unexpected(l.error());
  }
  listeners_.push_back(std::move(*l));
  // The UDP side of the same port is held for QUIC, so no other program takes it.
  auto udp = runtime::bind_udp(host, port);
  if (!udp) {
    return tl::unexpected(udp.error());
  }
  udp_fds_.push_back(*udp);
  return {};
}

void RelayWorker::accept(int fd, std::string peer) {
  if (draining_) {
    ::close(fd);
    return;
  }
  connections_.push_back(std::make_unique<ServerConnection>(*this, fd, std::move(peer)));
}

void RelayWorker::remove_connection(ServerConnection* c) {
  connections_.remove_if([c](const auto& p) { return p.get() == c; });
}

void RelayWorker::drain() {
  draining_ = true;
  listeners_.clear();
  for (auto& c : connections_) {
    c->close(make_error(ErrorCode::kGoingAway, "relay shutting down"));
  }
  // A peer that stopped reading never completes the close handshake: after half the drain time,
  // drop what is left so moqd exits within --drain-timeout.
  loop_.schedule(relay_.config().drain_timeout / 2, [this] {
    for (auto& c : connections_) {
      c->abort();
    }
  });
}

void RelayWorker::on_peer_announce(const std::string& path, bool active, uint64_t hops,
                                   model::BroadcastSource& source) {
  if (active) {
    origin_.announce(path, &source, hops);
  } else {
    origin_.unannounce(path, &source);
  }
  bridge_.publish_local(path, active, hops);
}

}  // namespace moqd::relay
