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
#include <thread>
#include <vector>

#include "relay/relay.h"
#include "relay/worker.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"
#include "runtime/udp.h"
#include "transport/quic/cid.h"
#include "transport/quic/steering.h"

namespace moqd::relay {
namespace {

namespace quic = transport::quic;

// A short-header datagram whose DCID names `worker`, sent from a fresh socket (so from a new
// source port each time: the kernel's 4-tuple hash would pick differently).
void send_naming(uint16_t port, uint8_t worker) {
  std::vector<uint8_t> d(1 + quic::kCidLength + 24, 0x5a);  // not a multiple of the workers
  d[0] = 0x40;
  d[1] = worker;
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
  // Sends `n` datagrams naming worker i % kSockets from as many source ports; how many reached a
  // socket other than the one they name.
  size_t misrouted(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      send_naming(port_, static_cast<uint8_t>(i % kSockets));
    }
    size_t wrong = 0, got = 0;
    for (size_t s = 0; s < kSockets; ++s) {
      sockets_[s]->drain_now([&](std::span<const uint8_t> d) {
        ++got;
        wrong += d[1] != s ? 1 : 0;
      });
    }
    EXPECT_EQ(got, n);
    return wrong;
  }

  runtime::EventLoop loop_;
  uint16_t port_ = 0;
  std::vector<std::unique_ptr<runtime::UdpSocket>> sockets_;
};

TEST_F(SteeringKernelTest, EveryDatagramReachesTheSocketItsConnectionIdNames) {
  ASSERT_TRUE(sockets_[2]->attach_reuseport_program(quic::reuseport_steering_program(kSockets)));
  EXPECT_EQ(misrouted(200), 0u);
}

TEST_F(SteeringKernelTest, WithoutTheProgramTheKernelHashScattersThem) {
  EXPECT_GT(misrouted(200), 0u);  // what the program is for, and proof this test can fail
}

TEST_F(SteeringKernelTest, AProgramWithTheWrongModulusIsCaught) {
  ASSERT_TRUE(sockets_[0]->attach_reuseport_program(quic::reuseport_steering_program(kSockets - 1)));
  EXPECT_GT(misrouted(200), 0u);
}

TEST_F(SteeringKernelTest, DetachingGivesTheKernelHashBack) {
  ASSERT_TRUE(sockets_[0]->attach_reuseport_program(quic::reuseport_steering_program(kSockets)));
  sockets_[0]->detach_reuseport_program();
  EXPECT_GT(misrouted(200), 0u);
}

// The relay: with steering, datagrams naming a worker reach it, so none is forwarded; without,
// the hash lands many on another worker, which forwards them (and counts).
uint64_t forwarded_after_traffic(bool steering) {
  RelayConfig c;
  c.listen = {"127.0.0.1:0"};
  c.workers = 3;
  c.quic_steering = steering;
  c.certificate = nullptr;
  Relay relay(c, nullptr);
  auto bound = relay.start();
  EXPECT_TRUE(bound);
  if (!bound) {
    return 0;
  }
  for (size_t i = 0; i < 120; ++i) {
    send_naming((*bound)[0].port, static_cast<uint8_t>(i % 3));
  }
  uint64_t forwarded = 0, in = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    in = forwarded = 0;
    for (size_t w = 0; w < 3; ++w) {
      in += relay.worker(w).udp_stats().datagrams_in;
      forwarded += relay.worker(w).quic_forwarded();
    }
    if (in >= 120) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(in, 120u);
  relay.drain_and_stop();
  return forwarded;
}

TEST(RelaySteeringTest, SteeredDatagramsAreNeverForwarded) {
  EXPECT_EQ(forwarded_after_traffic(true), 0u);
}

TEST(RelaySteeringTest, UnsteeredDatagramsOnTheWrongWorkerAreForwardedAndCounted) {
  EXPECT_GT(forwarded_after_traffic(false), 0u);
}

}  // namespace
}  // namespace moqd::relay
