#include "transport/quic/alpn_offer.h"

#include <algorithm>

namespace moqd::transport::quic {

std::optional<std::vector<std::string_view>> parse_alpn_offer(std::span<const uint8_t> data) {
  if (data.size() < 2) {
    return std::nullopt;
  }
  const size_t list_len = size_t{data[0]} << 8 | data[1];
  std::span<const uint8_t> list = data.subspan(2);
  if (list_len != list.size() || list.empty()) {
    return std::nullopt;
  }
  std::vector<std::string_view> names;
  size_t pos = 0;
  while (pos < list.size()) {
    const size_t len = list[pos++];
    if (len == 0 || len > list.size() - pos) {
      return std::nullopt;
    }
    names.emplace_back(reinterpret_cast<const char*>(list.data() + pos), len);
    pos += len;
  }
  return names;
}

std::optional<size_t> choose_alpn(std::span<const std::string> ours,
                                  std::span<const std::string_view> offers) {
  for (size_t i = 0; i < ours.size(); ++i) {
    if (std::find(offers.begin(), offers.end(), std::string_view(ours[i])) != offers.end()) {
      return i;
    }
  }
  return std::nullopt;
}

}  // namespace moqd::transport::quic
