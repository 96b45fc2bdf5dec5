#pragma once
// `moq bench limits`: what this machine can do for a QUIC relay, measured now. Two costs per byte a
// sending relay pays: AES-128-GCM packet protection through ngtcp2 1.11's GnuTLS crypto backend,
// and the UDP send path over loopback with the receiving side's kernel work included. The fan-out
// benchmark calls measure_limits() in-process and compares its own CPU per byte against
// limit_ns_per_byte() at the batch it achieved. Any thread; each call blocks for about
// (1 + sendmmsg_batches + gso_segments) x seconds and starts one receiver thread per UDP point.
// Errors setting up sockets or ciphers throw std::runtime_error (apps/ only).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace moqd::bench {

struct LimitsOptions {
  size_t packet_size = 1200;  // UDP payload bytes per datagram (one QUIC packet)
  double seconds = 0.5;       // wall time per measured point
  std::vector<size_t> sendmmsg_batches = {1, 8, 32, 64};  // datagrams per sendmmsg call
  std::vector<size_t> gso_segments = {1, 8, 16, 44};      // UDP_SEGMENT segments per sendmsg
  // Requested SO_SNDBUF/SO_RCVBUF of both sockets (bytes, default 4 MiB); FORCE variants when
  // permitted. Shrink the receive side to see drops (receive_buffer_bytes 0 = same as this).
  size_t socket_buffer_bytes = 4u << 20;
  size_t receive_buffer_bytes = 0;
  // Paced: the sender stays at most a window (receive buffer / 8, in datagrams) ahead of what
  // the receiver has read, as a QUIC sender stays within its congestion window, so a receiver
  // that falls behind (another process on its core) slows the sender instead of making drops
  // that the sender's CPU was spent on. Unpaced (--no-pace): as fast as the sender can go.
  bool pace = true;
};

// Per packet of packet_size bytes: a short header (1 + 16-byte DCID + 4-byte packet number) as
// AAD, the rest minus the 16-byte tag as plaintext. "seal" is AEAD encrypt + header-protection
// mask (what a sending relay does per packet); "open" is the mask + AEAD decrypt. ns_per_byte
// divides by packet_size (the bytes UDP carries, so it adds to UdpLimit::ns_per_byte);
// *_ns_per_plaintext_byte divides by the AEAD payload. CPU time of the measuring thread.
struct CryptoLimit {
  double seal_ns_per_packet, seal_ns_per_byte, open_ns_per_packet, open_ns_per_byte;
  double seal_ns_per_plaintext_byte = 0, open_ns_per_plaintext_byte = 0;
  size_t header_bytes = 0, plaintext_bytes = 0;
  uint64_t packets = 0;  // sealed (and as many opened) during the measurement
};

// One UDP point. CPU is user+sys. ns_per_byte: the whole process (RUSAGE_SELF: sender and
// receiver threads, and whatever else runs in the process) per byte received;
// sender_ns_per_byte: the sending thread alone (RUSAGE_THREAD, which on loopback includes the
// receive-side softirq up to the socket queue) per byte sent; ns_per_datagram: whole process per
// datagram received. receiver_kept_up is false when more than 0.1 % of datagrams were lost; then
// ns_per_byte is not a limit of the send path, only of this run.
struct UdpLimit {
  std::string mode;  // "sendmmsg" or "gso"
  size_t batch;      // datagrams per sendmmsg call, or segments per GSO send
  double ns_per_byte, sender_ns_per_byte, ns_per_datagram;
  uint64_t sent, received;
  bool receiver_kept_up;
  double receiver_ns_per_byte = 0;  // receiver thread alone (RUSAGE_THREAD) per byte received
  double seconds = 0;               // wall time of the sending loop
  double gbit_per_s = 0;            // received payload bits per wall second
  uint64_t send_calls = 0;
  bool gro = false;           // receiver had UDP_GRO on
  int64_t kernel_drops = -1;  // receive socket's drop counter (/proc/net/udp; skbs, so a GSO
                              // super-packet counts once); -1: unread
  bool paced = false;
  size_t window = 0;          // paced: datagrams allowed in flight
  uint64_t sender_waits = 0;  // paced: times the sender slept on the window
};

struct Limits {
  size_t packet_size;
  CryptoLimit crypto;
  std::vector<UdpLimit> udp;
  size_t socket_buffer_bytes;    // receive buffer as SO_RCVBUF reads back (kernel doubles it)
  size_t send_buffer_bytes = 0;  // send buffer as SO_SNDBUF reads back
  bool forced_buffers = false;   // SO_*BUFFORCE succeeded (root / CAP_NET_ADMIN)
};

// Runs every point of `options` now. Throws std::runtime_error when a socket or cipher cannot be
// set up, or when sealed packets fail to open (the probe would not be measuring real crypto).
Limits measure_limits(const LimitsOptions& options);

// How limit_ns_per_byte() got its UDP term: interpolation between the two measured points of
// that mode around `datagrams_per_send`, linear in 1/batch (a per-call cost spread over the
// batch plus a per-byte cost), or the nearest end point outside their range.
struct LimitEstimate {
  double ns_per_byte;  // crypto seal + UDP (whole process); NaN when no point of that mode
  double crypto_ns_per_byte, udp_ns_per_byte;
  size_t lower_batch, upper_batch;  // equal when one point was used
  bool interpolated;
  bool receiver_kept_up;  // at both points used
};
LimitEstimate estimate_limit(const Limits& limits, double datagrams_per_send, bool gso);

// Crypto + UDP at `datagrams_per_send` (the relay's achieved batch: datagrams per send call, GSO
// on when gso): estimate_limit(...).ns_per_byte, i.e. interpolated between measured batches.
// The UDP term is whole-process CPU: call measure_limits() while the process is otherwise idle
// (sender_ns_per_byte + receiver_ns_per_byte is the same cost counted per thread).
double limit_ns_per_byte(const Limits& limits, double datagrams_per_send, bool gso);

// The packet size to measure a relay's limit at, from what the relay sent in the same window:
// `bytes` of UDP payload in `datagrams` (its /stats bytes_out and datagrams_out). Their mean,
// rounded: crypto and the kernel cost a fixed part per packet plus a part per byte, so the
// probe's cost per byte at the mean size is the relay's own mix of full data packets and short
// ones (ACKs, a frame's tail). Clamped to what measure_limits() accepts: at least the smallest
// packet the crypto probe can seal, and small enough that the largest of `gso_segments` fits one
// UDP payload. `fallback` when the relay sent nothing.
size_t limit_packet_size(double bytes, double datagrams, const std::vector<size_t>& gso_segments,
                         size_t fallback = 1200);

std::string limits_json(const Limits& limits);       // one JSON object, no trailing newline
void print_limits(const Limits& limits, FILE* out);  // a readable table

// Adds the `limits` subcommand (flags: --json, --seconds, --packet-size, --batches LIST,
// --gso LIST, --socket-buffer, --receive-buffer, --no-pace) to `bench`; its callback runs the probe
// during parsing, prints, and sets *exit_code (0, or 1 on an error). Both must outlive bench's
// parse.
void add_limits_command(CLI::App& bench, int* exit_code);

}  // namespace moqd::bench
