#include "transport/quic/steering.h"

#include "transport/quic/cid.h"

namespace moqd::transport::quic {

std::vector<sock_filter> reuseport_steering_program(size_t workers, const SteeringLayout& layout) {
  const auto k =
      layout.modulus != 0 ? layout.modulus : static_cast<unsigned>(workers < 1 ? 1 : workers);
  const unsigned short_min = layout.short_dcid_offset + kCidLength;
  const unsigned long_min = layout.long_dcid_offset + kCidLength;
  const unsigned short_at = layout.short_dcid_offset + layout.worker_byte;
  const unsigned long_at = layout.long_dcid_offset + layout.worker_byte;
  // Jump offsets count instructions after the jump itself.
  return {
      /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
      /* 1 */ BPF_STMT(BPF_MISC | BPF_TAX, 0),                       // X = length
      /* 2 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, short_min, 0, 9),  // too short: 12
      /* 3 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),                 // the header byte
      /* 4 */ BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0x80, 0, 4),      // short header: 9
      /* 5 */ BPF_STMT(BPF_MISC | BPF_TXA, 0),                       // A = length
      /* 6 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, long_min, 0, 5),   // too short: 12
      /* 7 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, long_at),           // the worker byte
      /* 8 */ BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),                   // to 10
      /* 9 */ BPF_STMT(BPF_LD | BPF_B | BPF_ABS, short_at),          // the worker byte
      /* 10 */ BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, k),               // the worker byte mod workers
      /* 11 */ BPF_STMT(BPF_RET | BPF_A, 0),
      /* 12 */ BPF_STMT(BPF_RET | BPF_K, kSteerFallback),
  };
}

}  // namespace moqd::transport::quic
