#pragma once
// `moq bench fanout`: one publisher of one track to N viewers through a relay (or a cluster of
// relays, viewers spread over them and reported per relay), with the relay and
// the generator on disjoint CPUs, the generator spread over processes, a bystander track on the
// side, and the relay's own cost per delivered byte set against the machine's limit measured in
// the same invocation (bench_limits.h). See docs/BENCHMARKS.md.
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace moqd::bench {

// The generator's default --viewers-per-socket (docs/BENCHMARKS.md, twelfth session).
inline constexpr size_t kDefaultViewersPerSocket = 100;

struct FanoutOptions {
  std::string moqd;        // the relay binary to start (default: moqd beside moq)
  // Measure relays already running instead (--relay, repeatable: a cluster)... The publisher and
  // the bystander use the first; viewers are dealt round-robin over `viewer_relays` (indices into
  // relay_urls; empty: all of them).
  std::vector<std::string> relay_urls;
  std::vector<pid_t> relay_pids;  // ...whose CPU and memory are read from /proc/PID, in order
  std::vector<size_t> viewer_relays;
  std::string relay_cpus;  // CPU lists; default: the upper half of the allowed CPUs
  std::string gen_cpus;    // default: the rest
  size_t gen_workers = 0;  // viewer processes; default: one per generator CPU
  size_t viewers = 100;
  double duration_s = 10;
  double bitrate = 0;      // bits/s of the track; with fps it gives the frame size
  double fps = 30;
  uint64_t group_frames = 60;
  size_t frame_size = 0;   // bytes; default from bitrate (1 Mbit/s when neither is given)
  std::string transport = "quic";  // quic, ws, wt
  std::string versions;            // --versions for every generator session; empty: all
  size_t socket_buffer = 4 << 20;  // each generator socket's SO_RCVBUF/SO_SNDBUF
  // QUIC viewers sharing one generator socket (client::SharedQuicSocket); 0 = a socket each
  size_t viewers_per_socket = kDefaultViewersPerSocket;
  std::string ack_mode = "chromium";  // chromium (ACK every 10 packets) or ngtcp2 (every 2)
  std::vector<std::string> relay_args;  // extra moqd flags (e.g. --debug-spin-per-delivery 2us)
  bool json = false;
  bool find_max = false;
  double max_p99_ms = 50;
  size_t max_trials = 8;
  bool progress = true;
  double limits_seconds = 0.3;
  // UDP payload bytes per datagram the limits probe uses (--limit-packet-size); 0: the mean size
  // of the datagrams the relay sent in the run's window (its /stats), see limit_packet_size().
  size_t limit_packet_size = 0;
  // Soak: every this many seconds of the publishing window, one "sample {json}" line on stderr
  // with the relay's RSS and open fds and the viewers' latency over the interval; 0 = none.
  double sample_every_s = 0;
};

// Adds `fanout` and the hidden `worker` subcommands to `bench`; the callback sets *exit_code.
void add_fanout_command(CLI::App& bench, int* exit_code);

}  // namespace moqd::bench
