// The steering program, run by a small classic-BPF interpreter (the subset the program uses) on
// datagrams of both header forms; the real kernel path is tested in src/relay/steering_test.cc.
#include "transport/quic/steering.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "transport/quic/cid.h"

namespace moqd::transport::quic {
namespace {

// Runs `prog` on `pkt` as the kernel's reuseport hook does (offset 0 = the UDP payload).
// nullopt when the program would abort (an out-of-bounds load, which the kernel treats as 0).
std::optional<uint32_t> run(const std::vector<sock_filter>& prog, const std::vector<uint8_t>& pkt) {
  uint32_t a = 0, x = 0;
  for (size_t pc = 0; pc < prog.size(); ++pc) {
    const sock_filter& f = prog[pc];
    switch (f.code) {
      case BPF_LD | BPF_W | BPF_LEN: a = static_cast<uint32_t>(pkt.size()); break;
      case BPF_LD | BPF_B | BPF_ABS:
        if (f.k >= pkt.size()) return std::nullopt;
        a = pkt[f.k];
        break;
      case BPF_MISC | BPF_TAX: x = a; break;
      case BPF_MISC | BPF_TXA: a = x; break;
      case BPF_JMP | BPF_JGE | BPF_K: pc += a >= f.k ? f.jt : f.jf; break;
      case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f.k) != 0 ? f.jt : f.jf; break;
      case BPF_JMP | BPF_JA: pc += f.k; break;
      case BPF_ALU | BPF_MOD | BPF_K: a %= f.k; break;
      case BPF_RET | BPF_A: return a;
      case BPF_RET | BPF_K: return f.k;
      default: ADD_FAILURE() << "unexpected instruction " << f.code; return std::nullopt;
    }
  }
  ADD_FAILURE() << "fell off the end";
  return std::nullopt;
}

// Each packet is made at its full size and its header written over the start: growing a
// header-sized vector with resize() made g++ 12 at -O3 (Release) report a false -Warray-bounds
// in the reallocation's memmove.
std::vector<uint8_t> short_header(uint8_t worker, size_t payload = 40) {
  std::vector<uint8_t> p(1 + kCidLength + payload, 0xab);
  p[0] = 0x40;
  p[1] = worker;
  return p;
}

std::vector<uint8_t> long_header(uint8_t first_dcid_byte, size_t payload = 1200) {
  const uint8_t head[] = {0xc0, 0x00, 0x00, 0x00, 0x01, static_cast<uint8_t>(kCidLength),
                          first_dcid_byte};
  static_assert(sizeof(head) == kLongHeaderDcidOffset + 1);
  std::vector<uint8_t> p(kLongHeaderDcidOffset + kCidLength + payload, 0xcd);
  std::memcpy(p.data(), head, sizeof(head));
  return p;
}

TEST(SteeringTest, ShortHeaderGoesToTheWorkerItsDcidNames) {
  for (size_t workers : {1, 2, 3, 8, 16, 256}) {
    auto prog = reuseport_steering_program(workers);
    for (size_t w = 0; w < workers; ++w) {
      EXPECT_EQ(run(prog, short_header(static_cast<uint8_t>(w))), w) << workers << " workers";
    }
  }
}

TEST(SteeringTest, LongHeaderReadsTheDcidAtOffsetSix) {
  auto prog = reuseport_steering_program(8);
  for (uint8_t w = 0; w < 8; ++w) {
    auto p = long_header(w);
    p[1] = 0xee;  // version bytes that would mislead a program reading offset 1
    EXPECT_EQ(run(prog, p), w);
  }
  // A client-chosen Initial DCID: byte 0 mod the workers, a stable choice for its retransmits.
  EXPECT_EQ(run(prog, long_header(200)), 200u % 8);
}

TEST(SteeringTest, DatagramsTooShortFallBackToTheKernelHash) {
  auto prog = reuseport_steering_program(4);
  EXPECT_EQ(run(prog, {}), kSteerFallback);
  EXPECT_EQ(run(prog, {0x40, 0x01}), kSteerFallback);
  EXPECT_EQ(run(prog, std::vector<uint8_t>(kCidLength, 0x40)), kSteerFallback);  // 16 < 17
  EXPECT_EQ(run(prog, short_header(3, 0)), 3u);                                    // exactly 17
  auto lh = long_header(1, 0);
  lh.pop_back();  // 21 bytes: its DCID is not all there
  EXPECT_EQ(run(prog, lh), kSteerFallback);
  EXPECT_EQ(run(prog, long_header(1, 0)), 1u);
}

TEST(SteeringTest, OneWorkerAlwaysPicksSocketZero) {
  auto prog = reuseport_steering_program(1);
  EXPECT_EQ(run(prog, short_header(7)), 0u);
  EXPECT_EQ(run(prog, long_header(9)), 0u);
}

TEST(SteeringTest, TheDefaultLayoutIsTheProductionProgram) {
  auto a = reuseport_steering_program(5);
  auto b = reuseport_steering_program(5, SteeringLayout{});
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(sock_filter)), 0);
}

// What the tests' deliberately broken programs read instead (the kernel tests in
// src/relay/steering_test.cc show each misdelivers on a real reuseport group).
TEST(SteeringTest, ALayoutMovesWhereTheProgramReadsTheWorker) {
  auto sh = short_header(3);
  sh[2] = 6;  // the DCID's second byte
  auto lh = long_header(3);
  lh[7] = 6;
  EXPECT_EQ(run(reuseport_steering_program(8, {.short_dcid_offset = 2}), sh), 6u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.short_dcid_offset = 2}), lh), 3u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.long_dcid_offset = 7}), lh), 6u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.long_dcid_offset = 7}), sh), 3u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.worker_byte = 1}), sh), 6u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.worker_byte = 1}), lh), 6u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.modulus = 2}), sh), 1u);
  EXPECT_EQ(run(reuseport_steering_program(8, {.modulus = 2}), lh), 1u);
}

}  // namespace
}  // namespace moqd::transport::quic
