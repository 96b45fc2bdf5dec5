// Steering in the kernel: the program on a real reuseport group, and the relay's start-up check
// and forwarding counter. (The program's logic alone: src/transport/quic/steering_test.cc.)
#include "relay/steering.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "relay/relay.h"
#include "relay/worker.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"
#include "runtime/udp.h"
#include "transport/quic/cid.h"
#include "transport/quic/steering.h"

namespace moqd::relay {
// Named, not anonymous: scripts/test.sh builds tests in unity batches.
namespace steering_test {

namespace quic = transport::quic;

// A datagram whose DCID names `worker` in byte 0; the DCID's other bytes (and a long header's
// version) vary with `seed`, as a real CID's random bytes do, so a program reading the wrong byte
// picks a different socket for some of them. Long header: a Handshake packet (not an Initial,
// which a worker takes wherever it lands). The size is not a multiple of the workers.
std::vector<uint8_t> naming(uint8_t worker, bool long_header, uint32_t seed) {
  const size_t at = long_header ? quic::kLongHeaderDcidOffset : quic::kShortHeaderDcidOffset;
  std::vector<uint8_t> d(at + quic::kCidLength + 25, 0x5a);
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 1; i < at + quic::kCidLength; ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    d[i] = static_cast<uint8_t>(x >> 8);
  }
  if (long_header) {
    d[0] = 0xe0;
    d[1] = 0x00, d[2] = 0x00, d[3] = 0x00, d[4] = 0x01;
    d[5] = static_cast<uint8_t>(quic::kCidLength);
    d[at + quic::kCidLength] = 0;  // SCID length
  } else {
    d[0] = 0x40;
  }
  d[at] = worker;
  return d;
}

// The worker a datagram built by naming() names.
uint8_t named_worker(std::span<const uint8_t> d) {
  return d[(d[0] & 0x80) != 0 ? quic::kLongHeaderDcidOffset : quic::kShortHeaderDcidOffset];
}

// Sends `d` from a fresh socket (so from a new source port each time: the kernel's 4-tuple hash
// would pick differently).
void send_from_fresh_port(uint16_t port, const std::vector<uint8_t>& d) {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to),
            static_cast<ssize_t>(d.size()));
  ::close(fd);
}

void send_naming(uint16_t port, uint8_t worker, bool long_header = false, uint32_t seed = 0) {
  send_from_fresh_port(port, naming(worker, long_header, seed));
}

// A broken program: the layout and which header forms it misdelivers.
struct BrokenVariant {
  const char* name;
  quic::SteeringLayout layout;
  bool breaks_long;
  bool breaks_short;
};
void PrintTo(const BrokenVariant& v, std::ostream* os) {
  *os << v.name;
}

class SteeringKernelTest : public ::testing::Test {
 protected:
  static constexpr size_t kSockets = 4;
  void SetUp() override {
    auto port = runtime::pick_port("127.0.0.1");
    ASSERT_TRUE(port);
    port_ = *port;
    runtime::UdpSocket::Options o;
    o.reuse_port = true;
    o.gso = o.gro = false;
    for (size_t i = 0; i < kSockets; ++i) {
      auto s = runtime::UdpSocket::bind(loop_, "127.0.0.1", port_, o);
      ASSERT_TRUE(s);
      sockets_.push_back(std::move(*s));
    }
  }
  // Sends `n` datagrams of one header form naming worker i % kSockets from as many source ports;
  // how many reached a socket other than the one they name.
  size_t misrouted(size_t n, bool long_header = false) {
    for (size_t i = 0; i < n; ++i) {
      send_naming(port_, static_cast<uint8_t>(i % kSockets), long_header, static_cast<uint32_t>(i));
    }
    size_t wrong = 0, got = 0;
    for (size_t s = 0; s < kSockets; ++s) {
      sockets_[s]->drain_now([&](std::span<const uint8_t> d) {
        ++got;
        wrong += named_worker(d) != s ? 1 : 0;
      });
    }
    EXPECT_EQ(got, n);
    return wrong;
  }
  // The assertion every correct program must pass: 200 short-header and 200 long-header
  // datagrams, each on the socket its DCID names.
  ::testing::AssertionResult steers_every_datagram() {
    size_t wrong_short = misrouted(200, false);
    size_t wrong_long = misrouted(200, true);
    if (wrong_short == 0 && wrong_long == 0) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << wrong_short << "/200 short-header and " << wrong_long
                                         << "/200 long-header datagrams on the wrong socket";
  }

  runtime::EventLoop loop_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<runtime::UdpSocket>> sockets_;
};

TEST_F(SteeringKernelTest, EveryDatagramReachesTheSocketItsConnectionIdNames) {
  ASSERT_TRUE(sockets_[2]->attach_reuseport_program(quic::reuseport_steering_program(kSockets)));
  EXPECT_TRUE(steers_every_datagram());
}

TEST_F(SteeringKernelTest, WithoutTheProgramTheKernelHashScattersThem) {
  EXPECT_GT(misrouted(200), 0u);  // what the program is for, and proof this test can fail
}

TEST_F(SteeringKernelTest, DetachingGivesTheKernelHashBack) {
  ASSERT_TRUE(sockets_[0]->attach_reuseport_program(quic::reuseport_steering_program(kSockets)));
  sockets_[0]->detach_reuseport_program();
  EXPECT_GT(misrouted(200), 0u);
}

// Each broken program on the real kernel: the assertion a correct program passes fails, and only
// for the header forms the break touches.
class SteeringKernelBrokenTest : public SteeringKernelTest,
                                 public ::testing::WithParamInterface<BrokenVariant> {};

TEST_P(SteeringKernelBrokenTest, TheCorrectSteeringAssertionFails) {
  const BrokenVariant& v = GetParam();
  ASSERT_TRUE(
      sockets_[1]->attach_reuseport_program(quic::reuseport_steering_program(kSockets, v.layout)));
  EXPECT_FALSE(steers_every_datagram());
  EXPECT_EQ(misrouted(200, true) > 0, v.breaks_long);
  EXPECT_EQ(misrouted(200, false) > 0, v.breaks_short);
}

// With 4 sockets. Offsets one off each way: 5 is the long header's DCID length byte (16, so
// always socket 0), 2 the short header DCID's second (random) byte.
INSTANTIATE_TEST_SUITE_P(
    Variants, SteeringKernelBrokenTest,
    ::testing::Values(BrokenVariant{"WrongLongOffset", {.long_dcid_offset = 5}, true, false},
                      BrokenVariant{"WrongShortOffset", {.short_dcid_offset = 2}, false, true},
                      BrokenVariant{"WrongModulus", {.modulus = 3}, true, true},
                      BrokenVariant{"WrongWorkerByte", {.worker_byte = 1}, true, true}),
    [](const ::testing::TestParamInfo<BrokenVariant>& i) { return std::string(i.param.name); });

// The relay: with steering, datagrams naming a worker reach it, so none is forwarded; without (off,
// or a broken program its start-up check caught and detached), the hash lands many on another
// worker, which forwards them (and counts).
struct RelayOutcome {
  bool steered = false;
  uint64_t forwarded = 0;
  std::string log;  // what start() logged
};

// A relay with `workers` workers, then `n` datagrams, alternately short and long header, naming
// worker i % workers.
RelayOutcome relay_after_traffic(size_t workers, bool steering,
                                 const quic::SteeringLayout& layout = {}, size_t n = 120) {
  RelayConfig c;
  c.listen = {"127.0.0.1:0"};
  c.workers = workers;
  c.quic_steering = steering;
  c.quic_steering_layout_for_tests = layout;
  c.certificate = nullptr;
  Relay relay(c, nullptr);
  RelayOutcome out;
  ::testing::internal::CaptureStderr();
  auto bound = relay.start();
  log::flush();
  out.log = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(bound);
  if (!bound) {
    return out;
  }
  out.steered = relay.quic_steered(0);
  for (size_t i = 0; i < n; ++i) {
    send_naming((*bound)[0].port, static_cast<uint8_t>(i % workers), i % 2 == 1,
                static_cast<uint32_t>(i));
  }
  uint64_t in = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    in = out.forwarded = 0;
    for (size_t w = 0; w < workers; ++w) {
      in += relay.worker(w).udp_stats().datagrams_in;
      out.forwarded += relay.worker(w).quic_forwarded();
    }
    if (in >= n) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(in, n);
  relay.drain_and_stop();
  return out;
}

TEST(RelaySteeringTest, SteeredDatagramsAreNeverForwarded) {
  for (size_t workers : {2, 3}) {
    RelayOutcome r = relay_after_traffic(workers, true);
    EXPECT_TRUE(r.steered) << workers << " workers";
    EXPECT_EQ(r.log.find("cannot steer"), std::string::npos) << r.log;
    EXPECT_EQ(r.forwarded, 0u) << workers << " workers";
  }
}

TEST(RelaySteeringTest, UnsteeredDatagramsOnTheWrongWorkerAreForwardedAndCounted) {
  RelayOutcome r = relay_after_traffic(3, false);
  EXPECT_FALSE(r.steered);
  EXPECT_GT(r.forwarded, 0u);
}

// A broken program on a 2-worker relay, and what its start-up check says about it.
struct RelayBrokenVariant {
  const char* name;
  quic::SteeringLayout layout;
  const char* caught_by;  // which probe fails
};
void PrintTo(const RelayBrokenVariant& v, std::ostream* os) {
  *os << v.name;
}

class RelaySteeringBrokenTest : public ::testing::TestWithParam<RelayBrokenVariant> {};

// The check catches it: the program is detached, a warning says which probe failed, and the
// datagrams the kernel's hash then puts on the wrong worker are forwarded and counted.
TEST_P(RelaySteeringBrokenTest, TheStartUpCheckDetachesItAndMissteeredDatagramsAreCounted) {
  const RelayBrokenVariant& v = GetParam();
  RelayOutcome r = relay_after_traffic(2, true, v.layout);
  EXPECT_FALSE(r.steered);
  EXPECT_NE(r.log.find("cannot steer datagrams by connection ID"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find(v.caught_by), std::string::npos) << r.log;
  EXPECT_GT(r.forwarded, 0u);
}

// With 2 workers: the long offset on the DCID length byte (16: worker 0), the short offset on
// the DCID's second byte (0 in the probe), modulus workers - 1, the DCID's second byte.
INSTANTIATE_TEST_SUITE_P(
    Variants, RelaySteeringBrokenTest,
    ::testing::Values(
        RelayBrokenVariant{"WrongLongOffset", {.long_dcid_offset = 5}, "a long-header probe"},
        RelayBrokenVariant{"WrongShortOffset", {.short_dcid_offset = 2}, "a short-header probe"},
        RelayBrokenVariant{"WrongModulus", {.modulus = 1}, "a short-header probe"},
        RelayBrokenVariant{"WrongWorkerByte", {.worker_byte = 1}, "a short-header probe"}),
    [](const ::testing::TestParamInfo<RelayBrokenVariant>& i) {
      return std::string(i.param.name);
    });

}  // namespace steering_test
}  // namespace moqd::relay
