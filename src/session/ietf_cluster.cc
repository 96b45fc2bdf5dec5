#include "session/ietf_cluster.h"

#include <vector>

namespace moqd::session::ietf_cluster {

namespace wi = wire::ietf;

void add_setup_options(wire::Version v, uint64_t self, wi::Parameters& options) {
  const wi::Draft* d = wi::draft(v);
  if (self == 0 || d == nullptr || !d->request_streams) {
    return;
  }
  std::vector<uint8_t> value;
  // The form @moq/net's encodeLeadingOnes writes (never d18's 7-byte one): every draft reads it.
  wi::write_varint(wi::VarintForm::kLeadingOnes, self, value);
  wi::Parameter p;
  p.type = wi::kSetupRelayHops;
  p.bytes.assign(value.begin(), value.end());
  options.push_back(std::move(p));
}

bool negotiated(wire::Version v, uint64_t self, const std::optional<uint64_t>& peer) {
  const wi::Draft* d = wi::draft(v);
  return self != 0 && d != nullptr && d->request_streams && peer.has_value();
}

std::optional<wi::Advert> advert_for(const model::Hops& hops, uint64_t self, uint64_t peer) {
  // 0 identifies nothing: a peer that declared 0 excludes nothing.
  if (peer != 0 && model::hops_contain(hops, peer)) {
    return std::nullopt;
  }
  wi::Advert a;
  a.hops = hops;
  a.hops.push_back(self);
  a.cost = hops.size();
  if (!wi::valid_hop_path(a.hops)) {
    return std::nullopt;
  }
  return a;
}

uint64_t route_cost(const Inbound& in, uint64_t peer_relay_cost) { return in.cost + peer_relay_cost; }

Result<Inbound> read_inbound(wire::Version v, const wi::Parameters& params, uint64_t self) {
  auto advert = wi::read_advert(v, params);
  if (!advert) {
    return tl::unexpected(advert.error());
  }
  Inbound in;
  in.hops = std::move(advert->hops);
  in.cost = advert->cost;
  in.loop = self != 0 && model::hops_contain(in.hops, self);
  return in;
}

}  // namespace moqd::session::ietf_cluster
