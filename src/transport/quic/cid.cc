#include "transport/quic/cid.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#include <cstdlib>
#include <cstring>

namespace moqd::transport::quic {
namespace {

constexpr uint32_t kQuicV1 = 0x00000001;
constexpr size_t kMaxV1CidLength = NGTCP2_MAX_CIDLEN;  // 20
constexpr size_t kResetKeyLength = 32;

// Made on first use (thread-safe static); never leaves the process.
const std::array<uint8_t, kResetKeyLength>& reset_key() {
  static const std::array<uint8_t, kResetKeyLength> key = [] {
    std::array<uint8_t, kResetKeyLength> k{};
    fill_random(k.data(), k.size());
    return k;
  }();
  return key;
}

uint32_t read_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

void fill_random(uint8_t* out, size_t n) {
  if (gnutls_rnd(GNUTLS_RND_RANDOM, out, n) != 0) {
    std::abort();  // no entropy: issuing guessable CIDs and reset tokens is worse than stopping
  }
}

ngtcp2_cid make_cid(size_t worker) {
  ngtcp2_cid cid{};
  cid.datalen = kCidLength;
  cid.data[0] = static_cast<uint8_t>(worker);
  fill_random(cid.data + 1, kCidLength - 1);
  return cid;
}

std::optional<size_t> worker_of(std::span<const uint8_t> cid) {
  if (cid.size() != kCidLength) {
    return std::nullopt;
  }
  return cid[0];
}

StatelessResetToken stateless_reset_token(std::span<const uint8_t> cid) {
  uint8_t digest[32];
  const auto& key = reset_key();
  if (gnutls_hmac_fast(GNUTLS_MAC_SHA256, key.data(), key.size(), cid.data(), cid.size(),
                       digest) != 0) {
    std::abort();  // SHA-256 HMAC is always available in GnuTLS; failing here is a broken library
  }
  StatelessResetToken token;
  std::memcpy(token.data(), digest, token.size());
  return token;
}

void generate_cid(size_t worker, ngtcp2_cid* cid, uint8_t* reset_token) {
  *cid = make_cid(worker);
  auto token = stateless_reset_token({cid->data, cid->datalen});
  std::memcpy(reset_token, token.data(), token.size());
}

std::optional<std::span<const uint8_t>> extract_dcid(std::span<const uint8_t> datagram,
                                                     size_t short_dcid_len) {
  // The fixed bit is not checked: a peer may grease it (RFC 9287).
  if (datagram.empty()) {
    return std::nullopt;
  }
  if (!is_long_header(datagram)) {
    if (datagram.size() < 1 + short_dcid_len) {
      return std::nullopt;
    }
    return datagram.subspan(1, short_dcid_len);
  }
  // Long header: flags(1) version(4) dcid_len(1) dcid(...)
  if (datagram.size() < 6) {
    return std::nullopt;
  }
  size_t len = datagram[5];
  if (read_u32(&datagram[1]) == kQuicV1 && len > kMaxV1CidLength) {
    return std::nullopt;
  }
  if (datagram.size() < 6 + len) {
    return std::nullopt;
  }
  return datagram.subspan(6, len);
}

bool is_initial(std::span<const uint8_t> datagram) {
  return datagram.size() >= 6 && is_long_header(datagram) && ((datagram[0] >> 4) & 0x3) == 0 &&
         read_u32(&datagram[1]) == kQuicV1;
}

}  // namespace moqd::transport::quic
