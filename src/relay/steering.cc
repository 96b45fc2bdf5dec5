#include "relay/steering.h"

#include <cstring>
#include <string>

#include "relay/quic_endpoint.h"
#include "transport/quic/cid.h"
#include "transport/quic/steering.h"

namespace moqd::relay {
namespace {

namespace quic = transport::quic;

// A datagram whose DCID names `worker`, marked so the check knows its own: short header, or a
// long header (a Handshake packet: not an Initial, so after start a worker would forward it too).
constexpr char kProbeMark[] = "moqd steering probe";
constexpr size_t kShortProbeSize = 1 + quic::kCidLength + sizeof kProbeMark;
constexpr size_t kLongProbeSize =
    quic::kLongHeaderDcidOffset + quic::kCidLength + 1 + sizeof kProbeMark;

std::vector<uint8_t> probe(size_t worker, bool long_header) {
  if (!long_header) {
    std::vector<uint8_t> p(kShortProbeSize, 0);
    p[0] = 0x40;
    p[quic::kShortHeaderDcidOffset] = static_cast<uint8_t>(worker);
    std::memcpy(p.data() + kShortProbeSize - sizeof kProbeMark, kProbeMark, sizeof kProbeMark);
    return p;
  }
  std::vector<uint8_t> p(kLongProbeSize, 0);
  p[0] = 0xe0;  // long header, Handshake
  p[4] = 0x01;  // QUIC v1
  p[5] = static_cast<uint8_t>(quic::kCidLength);
  p[quic::kLongHeaderDcidOffset] = static_cast<uint8_t>(worker);
  // The byte after the DCID is the SCID length: 0.
  std::memcpy(p.data() + kLongProbeSize - sizeof kProbeMark, kProbeMark, sizeof kProbeMark);
  return p;
}

// The worker a probe names, or -1 for another datagram.
int probe_worker(std::span<const uint8_t> d) {
  size_t at = 0;
  if (d.size() == kShortProbeSize && d[0] == 0x40) {
    at = quic::kShortHeaderDcidOffset;
  } else if (d.size() == kLongProbeSize && d[0] == 0xe0) {
    at = quic::kLongHeaderDcidOffset;
  } else {
    return -1;
  }
  if (std::memcmp(d.data() + d.size() - sizeof kProbeMark, kProbeMark, sizeof kProbeMark) != 0) {
    return -1;
  }
  return d[at];
}

Status check(const std::vector<QuicEndpoint*>& endpoints) {
  for (size_t n = 0; n < 2 * endpoints.size(); ++n) {
    const size_t i = n / 2;
    const bool long_probe = n % 2 == 1;
    if (auto st = endpoints[0]->socket().send_to_self(probe(i, long_probe)); !st) {
      return st;
    }
    for (size_t j = 0; j < endpoints.size(); ++j) {
      int seen = -1;
      endpoints[j]->mutable_socket().drain_now([&](std::span<const uint8_t> d) {
        if (int w = probe_worker(d); w >= 0) {
          seen = w;
        }
      });
      if (seen >= 0 && (static_cast<size_t>(seen) != i || j != i)) {
        return fail(ErrorCode::kTransport,
                    long_probe ? "a long-header probe reached another worker's socket"
                               : "a short-header probe reached another worker's socket");
      }
      if (j == i && seen < 0) {
        return fail(ErrorCode::kTransport,
                    long_probe ? "a long-header probe did not reach its worker's socket"
                               : "a short-header probe did not reach its worker's socket");
      }
    }
  }
  return {};
}

}  // namespace

Status steer_by_connection_id(const std::vector<QuicEndpoint*>& endpoints,
                              const quic::SteeringLayout& layout) {
  if (endpoints.size() < 2) {
    return {};
  }
  auto program = quic::reuseport_steering_program(endpoints.size(), layout);
  if (auto st = endpoints[0]->mutable_socket().attach_reuseport_program(program); !st) {
    return st;
  }
  if (auto st = check(endpoints); !st) {
    endpoints[0]->mutable_socket().detach_reuseport_program();
    return st;
  }
  return {};
}

}  // namespace moqd::relay
