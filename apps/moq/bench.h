#pragma once
// `moq bench`: measures delivery through a relay (see bench.cc).
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/connection.h"

namespace moqd::bench {

struct Options {
  std::string url;
  size_t subscribers = 10;
  double rate = 100;          // frames per second
  size_t frame_size = 1000;   // bytes (at least 8: the send time)
  uint64_t group_every = 10;  // frames per group
  double seconds = 5;
  client::TransportKind transport = client::TransportKind::kWebSocket;
  client::TlsOptions tls;
};

// Prints one summary line; 0 when every subscriber received every frame.
int run(const Options& options);

}  // namespace moqd::bench
