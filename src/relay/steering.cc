#include "relay/steering.h"

#include <cstring>
#include <string>

#include "relay/quic_endpoint.h"
#include "transport/quic/cid.h"
#include "transport/quic/steering.h"

namespace moqd::relay {
namespace {

namespace quic = transport::quic;

// A short-header datagram whose DCID names `worker`, marked so the check knows its own.
constexpr char kProbeMark[] = "moqd steering probe";

std::vector<uint8_t> probe(size_t worker) {
  std::vector<uint8_t> p(1 + quic::kCidLength + sizeof kProbeMark, 0);
  p[0] = 0x40;
  p[1] = static_cast<uint8_t>(worker);
  std::memcpy(p.data() + 1 + quic::kCidLength, kProbeMark, sizeof kProbeMark);
  return p;
}

// The worker a probe names, or -1 for another datagram.
int probe_worker(std::span<const uint8_t> d) {
  if (d.size() != 1 + quic::kCidLength + sizeof kProbeMark ||
      std::memcmp(d.data() + 1 + quic::kCidLength, kProbeMark, sizeof kProbeMark) != 0) {
    return -1;
  }
  return d[1];
}

Status check(const std::vector<QuicEndpoint*>& endpoints) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    if (auto st = endpoints[0]->socket().send_to_self(probe(i)); !st) {
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
        return fail(ErrorCode::kTransport, "a probe for one worker reached another worker's socket");
      }
      if (j == i && seen < 0) {
        return fail(ErrorCode::kTransport, "a probe did not reach its worker's socket");
      }
    }
  }
  return {};
}

}  // namespace

Status steer_by_connection_id(const std::vector<QuicEndpoint*>& endpoints) {
  if (endpoints.size() < 2) {
    return {};
  }
  auto program = quic::reuseport_steering_program(endpoints.size());
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
