#pragma once
// One UDP socket per worker on a shared port, and each QUIC datagram delivered by the kernel to
// the worker that owns its connection: transport/quic/steering.h's program attached to the
// workers' reuseport group, then checked before the workers start.
#include <vector>

#include "base/error.h"
#include "transport/quic/steering.h"

namespace moqd::relay {

class QuicEndpoint;

// `endpoints[i]` is worker i's endpoint for one listen address, all bound in worker order (so
// socket i of the reuseport group is worker i's). Attaches the program, then sends two probes per
// worker, a short-header and a long-header (Handshake) datagram whose DCID names that worker, and
// reads every socket after each: each probe must reach its own worker's socket and no other (so
// both places the program reads a DCID are checked on the real kernel). Call before the workers'
// loops run (it reads the sockets directly). On any failure the program is detached again (the
// kernel's hash then picks, and endpoints forward what lands on the wrong worker) and the error
// says why. `layout` is for tests only (a deliberately broken program; production: the default).
Status steer_by_connection_id(const std::vector<QuicEndpoint*>& endpoints,
                              const transport::quic::SteeringLayout& layout = {});

}  // namespace moqd::relay
