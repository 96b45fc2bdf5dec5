#include "client/shared_quic_socket.h"

#include <cstring>

#include "transport/quic/cid.h"

namespace moqd::client {

namespace {

// RFC 9000 §17.2: the long header's first bit; its DCID length byte follows the 4-byte version.
constexpr uint8_t kLongHeaderBit = 0x80;
constexpr size_t kLongDcidLenOffset = 5;
constexpr size_t kLongDcidOffset = 6;
constexpr size_t kShortDcidOffset = 1;

}  // namespace

Result<std::unique_ptr<SharedQuicSocket>> SharedQuicSocket::open(runtime::EventLoop& loop,
                                                                 const std::string& host,
                                                                 runtime::UdpSocket::Options o) {
  // No GSO: a run would carry packets of several connections, and a relay's reuseport steering
  // program reads only the first one's DCID (a GSO super-datagram reaches a UDP_GRO socket whole
  // on loopback), so the others would land on the wrong worker and be forwarded there. The
  // connections' packets still leave in one sendmmsg per turn, a message each.
  o.gso = false;
  auto udp = runtime::UdpSocket::open_client(loop, host, o);
  if (!udp) {
    return tl::unexpected(udp.error());
  }
  return std::unique_ptr<SharedQuicSocket>(new SharedQuicSocket(std::move(*udp)));
}

SharedQuicSocket::SharedQuicSocket(std::unique_ptr<runtime::UdpSocket> udp) : udp_(std::move(udp)) {
  udp_->set_handler([this](const sockaddr* from, socklen_t len, std::span<const uint8_t> d) {
    on_datagram(from, len, d);
  });
}

uint64_t SharedQuicSocket::add(Member& m) {
  uint64_t key;
  do {
    transport::quic::fill_random(reinterpret_cast<uint8_t*>(&key), sizeof key);
  } while (members_.count(key) != 0);
  members_.emplace(key, &m);
  return key;
}

void SharedQuicSocket::remove(uint64_t key) {
  members_.erase(key);
}

void SharedQuicSocket::fill_cid(uint64_t key, ngtcp2_cid* cid, uint8_t* reset_token) {
  cid->datalen = kCidLen;
  std::memcpy(cid->data, &key, kKeyLen);
  transport::quic::fill_random(cid->data + kKeyLen, kCidLen - kKeyLen);
  transport::quic::fill_random(reset_token, NGTCP2_STATELESS_RESET_TOKENLEN);
}

std::optional<uint64_t> SharedQuicSocket::key_of(std::span<const uint8_t> d) {
  size_t at;
  if (d.empty()) {
    return std::nullopt;
  }
  if (d[0] & kLongHeaderBit) {
    if (d.size() <= kLongDcidLenOffset || d[kLongDcidLenOffset] != kCidLen) {
      return std::nullopt;
    }
    at = kLongDcidOffset;
  } else {
    at = kShortDcidOffset;
  }
  if (d.size() < at + kCidLen) {
    return std::nullopt;
  }
  uint64_t key;
  std::memcpy(&key, d.data() + at, kKeyLen);
  return key;
}

void SharedQuicSocket::on_datagram(const sockaddr* from, socklen_t from_len,
                                   std::span<const uint8_t> datagram) {
  auto key = key_of(datagram);
  auto it = key ? members_.find(*key) : members_.end();
  if (it == members_.end()) {
    unknown_.add();
    return;
  }
  routed_.add();
  it->second->on_datagram(from, from_len, datagram);
}

}  // namespace moqd::client
