#pragma once
// The processes `moq bench fanout` and `moq bench msgs` start (`moq bench worker --role ...`):
// each runs one event loop of client sessions and talks to its parent over stdin/stdout, one
// line each way (the protocol is at the top of bench_worker.cc). Not meant to be run by hand.
#include <cstddef>
#include <cstdint>
#include <string>

#include "client/connection.h"

namespace moqd::bench {

struct WorkerOptions {
  std::string role;  // viewers, publisher, bystander, msgs
  std::string url;
  std::string path;          // the broadcast to publish or watch
  size_t count = 1;          // viewers (or msg publishers / subscribers) in this process
  std::string transport = "quic";
  std::string versions;     // comma-separated --versions names; empty: every version moq speaks
  std::string fingerprint;   // the relay certificate's SHA-256, fetched once by the parent
  size_t frame_size = 4200;  // bytes (at least 16: send time and index)
  double fps = 30;
  uint64_t group_frames = 60;
  double duration_s = 10;
  size_t socket_buffer = 4 << 20;
  size_t ack_thresh = 10;
  double max_ack_delay_ms = 25;
  double rate = 0;            // msgs: messages per second per publisher, 0 = as fast as it goes
  size_t subscribers = 1;     // msgs: subscriber sessions (count is the publishers)
  size_t connects_per_tick = 50;  // connections started per 10 ms while connecting
  // viewers over QUIC: this many connections share one client::SharedQuicSocket; 0 = a socket each
  size_t viewers_per_socket = 0;
};

// Runs the role until the parent says "stop" (or stdin closes); returns the exit code.
int run_worker(const WorkerOptions& o);

}  // namespace moqd::bench
