#include "testing/sim_network.h"

#include <arpa/inet.h>

#include <utility>

namespace moqd::test {

void SimNetwork::Endpoint::send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) {
  ++sent_;
  bytes_sent_ += pkt.size();
  const auto* to = reinterpret_cast<const sockaddr_in*>(path.remote.addr);
  net_->transmit(*this, *to, pkt);
}

ngtcp2_path SimNetwork::Endpoint::path_to(const Endpoint& peer) const {
  ngtcp2_path p{};
  p.local.addr = const_cast<sockaddr*>(reinterpret_cast<const sockaddr*>(&addr_));
  p.local.addrlen = sizeof(addr_);
  p.remote.addr = const_cast<sockaddr*>(reinterpret_cast<const sockaddr*>(&peer.addr_));
  p.remote.addrlen = sizeof(peer.addr_);
  return p;
}

SimNetwork::~SimNetwork() {
  for (auto& [key, timer] : timers_) {
    clock_.cancel(timer);
  }
}

SimNetwork::Endpoint& SimNetwork::add_endpoint(uint16_t port) {
  auto ep = std::make_unique<Endpoint>();
  ep->net_ = this;
  ep->addr_.sin_family = AF_INET;
  ep->addr_.sin_port = htons(port);
  ep->addr_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  Endpoint& ref = *ep;
  endpoints_[port] = std::move(ep);
  return ref;
}

double SimNetwork::uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / static_cast<double>(uint64_t{1} << 53));
}

void SimNetwork::transmit(Endpoint& from, const sockaddr_in& to, std::span<const uint8_t> pkt) {
  const SimLinkConfig& link = from.link_;
  // Draw both numbers for every packet so that changing loss does not shift the jitter sequence.
  double drop = uniform();
  double jitter = uniform();
  if (drop < link.loss) {
    ++from.dropped_;
    return;
  }
  auto extra = Duration(static_cast<int64_t>(jitter * static_cast<double>(link.jitter.count())));
  uint64_t key = next_key_++;
  uint16_t from_port = ntohs(from.addr_.sin_port);
  uint16_t to_port = ntohs(to.sin_port);
  timers_[key] = clock_.schedule(
      link.delay + extra,
      [this, key, from_port, to_port, data = std::vector<uint8_t>(pkt.begin(), pkt.end())] {
        deliver(key, from_port, to_port, data);
      });
}

void SimNetwork::deliver(uint64_t key, uint16_t from_port, uint16_t to_port,
                         const std::vector<uint8_t>& pkt) {
  timers_.erase(key);
  auto to = endpoints_.find(to_port);
  auto from = endpoints_.find(from_port);
  if (to == endpoints_.end() || from == endpoints_.end() || !to->second->receiver_) {
    return;  // nobody listens there: the datagram is lost
  }
  ++to->second->received_;
  to->second->bytes_received_ += pkt.size();
  ngtcp2_path path = to->second->path_to(*from->second);
  to->second->receiver_(path, pkt);
}

}  // namespace moqd::test
