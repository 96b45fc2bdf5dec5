#include "wire/ietf_cluster.h"

#include <algorithm>

namespace moqd::wire::ietf {

bool valid_hop_path(std::span<const uint64_t> hops) {
  if (hops.empty() || hops.size() > kMaxHopPath) {
    return false;
  }
  for (size_t i = 0; i < hops.size(); ++i) {
    if (hops[i] != 0 && std::find(hops.begin() + static_cast<std::ptrdiff_t>(i) + 1, hops.end(),
                                  hops[i]) != hops.end()) {
      return false;
    }
  }
  return true;
}

std::string encode_hop_path(std::span<const uint64_t> hops) {
  std::vector<uint8_t> out;
  for (uint64_t h : hops) {
    // Draft 17's form in every draft, as @moq/net's encodeLeadingOnes writes it (8 bytes from
    // 2^42): every draft's decoder reads it, so the bytes do not depend on the session's draft.
    write_varint(VarintForm::kLeadingOnes, h, out);
  }
  return std::string(out.begin(), out.end());
}

Result<std::vector<uint64_t>> decode_hop_path(Version v, std::string_view value) {
  const Draft* d = draft(v);
  if (d == nullptr || !d->request_streams) {
    return fail(ErrorCode::kVersion, "HOP_PATH outside drafts 17+");
  }
  std::vector<uint64_t> hops;
  std::span<const uint8_t> rest(reinterpret_cast<const uint8_t*>(value.data()), value.size());
  while (!rest.empty()) {
    auto r = read_varint(d->varint_form, rest);
    if (!r) {
      return fail(ErrorCode::kProtocolViolation, "HOP_PATH entry is not a varint");
    }
    if (!r->has_value()) {
      return fail(ErrorCode::kProtocolViolation, "HOP_PATH entries do not fill its length");
    }
    if (hops.size() == kMaxHopPath) {
      return fail(ErrorCode::kProtocolViolation, "HOP_PATH over 32 hops");
    }
    hops.push_back((*r)->value);
    rest = rest.subspan((*r)->consumed);
  }
  if (hops.empty()) {
    return fail(ErrorCode::kProtocolViolation, "HOP_PATH is empty");
  }
  if (!valid_hop_path(hops)) {
    return fail(ErrorCode::kProtocolViolation, "HOP_PATH repeats a hop");
  }
  return hops;
}

bool append_advert(const Advert& advert, Parameters& params) {
  if (!valid_hop_path(advert.hops)) {
    return false;
  }
  Parameter hop_path;
  hop_path.type = kParamHopPath;
  hop_path.bytes = encode_hop_path(advert.hops);
  params.push_back(std::move(hop_path));
  if (advert.cost != 0) {
    Parameter cost;
    cost.type = kParamRouteCost;
    cost.value = advert.cost;
    params.push_back(std::move(cost));
  }
  return true;
}

Result<Advert> read_advert(Version v, const Parameters& params) {
  const Parameter* hop_path = find(params, kParamHopPath);
  if (hop_path == nullptr) {
    return fail(ErrorCode::kProtocolViolation, "advertisement without HOP_PATH");
  }
  auto hops = decode_hop_path(v, hop_path->bytes);
  if (!hops) {
    return tl::unexpected(hops.error());
  }
  Advert a;
  a.hops = std::move(*hops);
  if (const Parameter* cost = find(params, kParamRouteCost); cost != nullptr) {
    a.cost = cost->value;
  }
  return a;
}

}  // namespace moqd::wire::ietf
