#pragma once
// Steering QUIC datagrams to the worker that owns their connection, in the kernel: a classic-BPF
// program for SO_ATTACH_REUSEPORT_CBPF on the workers' SO_REUSEPORT sockets. It returns, for
// each datagram, the index of the socket in the reuseport group that should get it: the worker
// byte of the destination connection ID (cid.h: byte 0 of every CID moqd issues) modulo the
// number of workers. Long header (RFC 9000 §17.2): the DCID starts at offset 6 (flags, 4-byte
// version, DCID length); short header (§17.3): at offset 1. A datagram too short to hold a
// 16-byte DCID where the header puts it gets an index past the group, so the kernel falls back to
// its 4-tuple hash (an Initial's client-chosen DCID also lands on byte 0 mod workers: any worker
// may take an Initial). Sans-I/O: this only builds the program.
#include <linux/filter.h>

#include <cstddef>
#include <vector>

namespace moqd::transport::quic {

// Offsets of the DCID's first byte in each header form, within the UDP payload.
inline constexpr unsigned kLongHeaderDcidOffset = 6;
inline constexpr unsigned kShortHeaderDcidOffset = 1;
// What the program returns for a datagram it cannot read: no socket, so the kernel hashes.
inline constexpr unsigned kSteerFallback = 0xffffffffu;

// Where the program reads the worker from. The defaults are the only correct layout (and what
// production uses); other values exist so tests can build a deliberately broken program and show
// that the kernel tests and the relay's start-up check catch it (src/relay/steering_test.cc).
struct SteeringLayout {
  unsigned long_dcid_offset = kLongHeaderDcidOffset;
  unsigned short_dcid_offset = kShortHeaderDcidOffset;
  // Which byte of the DCID names the worker (cid.h: byte 0).
  unsigned worker_byte = 0;
  // What the worker byte is taken modulo; 0: the number of workers.
  unsigned modulus = 0;
};

// The program for `workers` sockets (1..256), in the reuseport group's order: socket i must
// belong to worker i. Built once per listen address at start; `layout` is for tests only.
std::vector<sock_filter> reuseport_steering_program(size_t workers,
                                                    const SteeringLayout& layout = {});

}  // namespace moqd::transport::quic
