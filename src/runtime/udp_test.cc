#include "runtime/udp.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

namespace moqd::runtime {
namespace {

using std::chrono::seconds;

constexpr auto kUdpDeadline = seconds(10);

// Datagram `seq` of `size` bytes: the sequence number in the first 4 bytes, then a pattern.
std::vector<uint8_t> make_datagram(uint32_t seq, size_t size) {
  std::vector<uint8_t> d(size);
  for (size_t i = 0; i < size; ++i) {
    d[i] = static_cast<uint8_t>(seq * 31 + i * 7);
  }
  d[0] = static_cast<uint8_t>(seq >> 24);
  d[1] = static_cast<uint8_t>(seq >> 16);
  d[2] = static_cast<uint8_t>(seq >> 8);
  d[3] = static_cast<uint8_t>(seq);
  return d;
}

uint32_t seq_of(std::span<const uint8_t> d) {
  return (uint32_t{d[0]} << 24) | (uint32_t{d[1]} << 16) | (uint32_t{d[2]} << 8) | d[3];
}

class UdpSocketTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    UdpSocket::Options o;
    o.gso = GetParam();
    o.gro = GetParam();
    auto s = UdpSocket::bind(loop_, "127.0.0.1", 0, o);
    ASSERT_TRUE(s);
    server_ = std::move(*s);
    auto c = UdpSocket::open_client(loop_, "127.0.0.1", o);
    ASSERT_TRUE(c);
    client_ = std::move(*c);
    ASSERT_NE(server_->port(), 0);
    ASSERT_NE(client_->port(), server_->port());
    // The server echoes every datagram to its sender.
    server_->set_handler([this](const sockaddr* from, socklen_t len, std::span<const uint8_t> d) {
      server_->send(from, len, d);
    });
    client_->set_handler([this](const sockaddr*, socklen_t, std::span<const uint8_t> d) {
      received_[seq_of(d)] = std::vector<uint8_t>(d.begin(), d.end());
    });
  }

  void send_from_client(uint32_t seq, size_t size) {
    auto d = make_datagram(seq, size);
    client_->send(reinterpret_cast<const sockaddr*>(&server_->local_address()),
                  server_->local_address_len(), d);
  }

  EventLoop loop_;
  std::unique_ptr<UdpSocket> server_;
  std::unique_ptr<UdpSocket> client_;
  std::map<uint32_t, std::vector<uint8_t>> received_;
};

TEST_P(UdpSocketTest, ManyDatagramsEchoByteExact) {
  constexpr uint32_t kBursts = 20;
  constexpr uint32_t kPerBurst = 40;
  uint32_t seq = 0;
  for (uint32_t b = 0; b < kBursts; ++b) {
    for (uint32_t i = 0; i < kPerBurst; ++i, ++seq) {
      send_from_client(seq, 1200);
    }
    ASSERT_TRUE(loop_.run_until([&] { return received_.size() == seq; }, kUdpDeadline));
  }
  for (uint32_t s = 0; s < seq; ++s) {
    ASSERT_EQ(received_[s], make_datagram(s, 1200)) << s;
  }
  EXPECT_EQ(client_->stats().datagrams_out, seq);
  EXPECT_EQ(server_->stats().datagrams_in, seq);
  EXPECT_EQ(server_->stats().datagrams_out, seq);
  EXPECT_EQ(client_->stats().datagrams_in, seq);
  EXPECT_EQ(client_->stats().bytes_out, uint64_t{seq} * 1200);
  EXPECT_LE(client_->stats().messages_out, seq);
  EXPECT_EQ(client_->stats().messages_out == seq, !GetParam());  // GSO runs carry several
  // Batching: far fewer syscalls than datagrams either way.
  EXPECT_LT(client_->stats().sendmsg_calls * 4, seq);
  EXPECT_GT(server_->stats().recv_calls, 0u);
  EXPECT_LT(server_->stats().recv_calls * 4, seq);
  EXPECT_GT(loop_.polls(), 0u);
  if (GetParam()) {
    EXPECT_GT(client_->stats().gso_batches, 0u);
    EXPECT_GT(server_->stats().gro_batches, 0u);
  } else {
    EXPECT_EQ(client_->stats().gso_batches, 0u);
    EXPECT_EQ(server_->stats().gro_batches, 0u);
  }
}

TEST_P(UdpSocketTest, MixedSizesKeepTheirBoundaries) {
  // A run of equal sizes, a shorter tail (allowed at the end of a GSO run), then larger ones.
  std::vector<size_t> sizes = {1200, 1200, 1200, 700, 1200, 1300, 1300, 5, 1, 1400, 1400, 1400};
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    send_from_client(i, std::max<size_t>(sizes[i], 4));
  }
  ASSERT_TRUE(loop_.run_until([&] { return received_.size() == sizes.size(); }, kUdpDeadline));
  for (uint32_t i = 0; i < sizes.size(); ++i) {
    EXPECT_EQ(received_[i], make_datagram(i, std::max<size_t>(sizes[i], 4))) << i;
  }
}

TEST_P(UdpSocketTest, TwoPeersInOneBatchEachGetTheirOwn) {
  UdpSocket::Options o;
  o.gso = GetParam();
  auto other = UdpSocket::open_client(loop_, "127.0.0.1", o);
  ASSERT_TRUE(other);
  size_t other_got = 0;
  (*other)->set_handler([&](const sockaddr*, socklen_t, std::span<const uint8_t> d) {
    EXPECT_EQ(d.size(), 1000u);
    ++other_got;
  });
  for (uint32_t i = 0; i < 10; ++i) {
    send_from_client(i, 1000);
    auto d = make_datagram(100 + i, 1000);
    (*other)->send(reinterpret_cast<const sockaddr*>(&server_->local_address()),
                   server_->local_address_len(), d);
  }
  ASSERT_TRUE(
      loop_.run_until([&] { return received_.size() == 10 && other_got == 10; }, kUdpDeadline));
  for (uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(received_.count(i), 1u);
  }
}

TEST_P(UdpSocketTest, AFullBatchIsSentAtOnceAndNothingIsDropped) {
  // Three batches' worth queued within one turn: each full batch goes to the kernel when the next
  // datagram needs its room, so the sender drops nothing.
  std::vector<uint8_t> d(1200, 0xab);
  size_t count = 3 * UdpSocket::kBatchBytes / d.size();
  for (size_t i = 0; i < count; ++i) {
    client_->send(reinterpret_cast<const sockaddr*>(&server_->local_address()),
                  server_->local_address_len(), d);
  }
  EXPECT_GE(client_->stats().datagrams_out, 2 * UdpSocket::kBatchBytes / d.size());
  size_t got = 0;
  server_->set_handler([&](const sockaddr*, socklen_t, std::span<const uint8_t>) { ++got; });
  client_->flush();
  EXPECT_EQ(client_->datagrams_dropped(), 0u);
  EXPECT_EQ(client_->stats().datagrams_out, count);
  // The kernel may drop some on a full receive buffer; the sender must not spin or lose its state.
  ASSERT_TRUE(loop_.run_until([&] { return got > 0; }, kUdpDeadline));
}

TEST_P(UdpSocketTest, PreparedRoomIsSentInPlace) {
  auto room = client_->prepare(300);
  ASSERT_EQ(room.size(), 300u);
  auto d = make_datagram(7, 300);
  std::copy(d.begin(), d.end(), room.begin());
  client_->send(reinterpret_cast<const sockaddr*>(&server_->local_address()),
                server_->local_address_len(), room);
  // The next room starts right after the datagram just queued: it was not copied.
  auto next = client_->prepare(10);
  EXPECT_EQ(next.data(), room.data() + room.size());
  send_from_client(8, 100);  // a copied datagram after the in-place one
  ASSERT_TRUE(loop_.run_until([&] { return received_.size() == 2; }, kUdpDeadline));
  EXPECT_EQ(received_[7], d);
  EXPECT_EQ(received_[8], make_datagram(8, 100));
  EXPECT_TRUE(client_->prepare(UdpSocket::kMaxDatagram + 1).empty());
}

// Issue #12: what every connection of a worker writes in one loop turn leaves in one sendmmsg,
// one GSO run per connection. Within one turn (one deferred task) the bound socket queues, in
// place, 6 datagrams for each of 4 peers (each peer's back to back, as a connection writes its
// packets; all of 1200 bytes but peer 0's last, shorter, as GSO allows at a run's end), so only
// the change of peer separates peers 1 to 3's runs.
// The end-of-turn flush sends them with one sendmmsg call: 4 messages, each a GSO run of 6
// (GSO off: 24 single datagrams, still one call). Every peer gets exactly its own, byte for byte.
TEST_P(UdpSocketTest, OneSendmmsgPerTurnCarriesOneGsoRunPerPeer) {
  constexpr uint32_t kPeers = 4;
  constexpr uint32_t kPerPeer = 6;
  auto size_of = [](uint32_t peer, uint32_t i) -> size_t {
    return peer == 0 && i == kPerPeer - 1 ? size_t{500} : size_t{1200};
  };
  UdpSocket::Options o;
  o.gso = GetParam();
  o.gro = GetParam();
  std::vector<std::unique_ptr<UdpSocket>> peers;
  std::vector<std::map<uint32_t, std::vector<uint8_t>>> got(kPeers);
  for (uint32_t p = 0; p < kPeers; ++p) {
    auto c = UdpSocket::open_client(loop_, "127.0.0.1", o);
    ASSERT_TRUE(c);
    peers.push_back(std::move(*c));
    peers.back()->set_handler([&got, p](const sockaddr*, socklen_t, std::span<const uint8_t> d) {
      got[p][seq_of(d)] = std::vector<uint8_t>(d.begin(), d.end());
    });
  }
  const UdpSocket::Stats before = server_->stats();
  bool queued = false;
  loop_.defer([&] {
    for (uint32_t p = 0; p < kPeers; ++p) {
      for (uint32_t i = 0; i < kPerPeer; ++i) {
        auto d = make_datagram(p * 100 + i, size_of(p, i));
        auto room = server_->prepare(d.size());
        ASSERT_EQ(room.size(), d.size());
        std::copy(d.begin(), d.end(), room.begin());
        server_->send(reinterpret_cast<const sockaddr*>(&peers[p]->local_address()),
                      peers[p]->local_address_len(), room);
      }
    }
    // Nothing leaves before the turn ends.
    EXPECT_EQ(server_->stats().sendmsg_calls, before.sendmsg_calls);
    queued = true;
  });
  ASSERT_TRUE(loop_.run_until(
      [&] {
        size_t n = 0;
        for (const auto& g : got) {
          n += g.size();
        }
        return queued && n == kPeers * kPerPeer;
      },
      kUdpDeadline));
  for (uint32_t p = 0; p < kPeers; ++p) {
    EXPECT_EQ(got[p].size(), kPerPeer) << "peer " << p;
    for (uint32_t i = 0; i < kPerPeer; ++i) {
      ASSERT_EQ(got[p].count(p * 100 + i), 1u) << "peer " << p << " datagram " << i;
      EXPECT_EQ(got[p][p * 100 + i], make_datagram(p * 100 + i, size_of(p, i)))
          << "peer " << p << " datagram " << i;
    }
  }
  const UdpSocket::Stats after = server_->stats();
  EXPECT_EQ(after.sendmsg_calls - before.sendmsg_calls, 1u) << "one sendmmsg for the whole turn";
  EXPECT_EQ(after.datagrams_out - before.datagrams_out, kPeers * kPerPeer);
  EXPECT_EQ(server_->datagrams_dropped(), 0u);
  if (GetParam()) {
    EXPECT_EQ(after.messages_out - before.messages_out, kPeers) << "one GSO run per peer";
    EXPECT_EQ(after.gso_batches - before.gso_batches, kPeers);
  } else {
    EXPECT_EQ(after.messages_out - before.messages_out, kPeers * kPerPeer);
    EXPECT_EQ(after.gso_batches - before.gso_batches, 0u);
  }
}

// A writer parked on a full socket: counts its runs.
struct ParkedWriter final : TurnWork {
  int runs = 0;
  void run_turn_work() override { ++runs; }
};

// Runs `body` on a thread in a network namespace of its own whose loopback is rate limited (a
// token-bucket qdisc): datagrams wait in the qdisc charged to the sending socket, so a small send
// buffer fills and the kernel answers EAGAIN, as a busy NIC does. (On the host's loopback the kernel
// takes every datagram at once.) Needs root, as make test runs; false when the namespace cannot be
// set up.
bool run_on_slow_loopback(const std::function<void()>& body) {
  bool ok = false;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0 ||
        std::system("ip link set lo up && "
                    "tc qdisc add dev lo root tbf rate 100mbit burst 3000 latency 500ms") != 0) {
      return;
    }
    ok = true;
    body();
  });
  t.join();
  return ok;
}

TEST(UdpSocketBackpressureTest, AWriterHeldBackByTheKernelRunsOnceTheBatchDrains) {
  // The kernel refuses (EAGAIN) after a few datagrams, the batch fills, prepare() has no room and
  // the writer parks; once the qdisc drains, the kernel takes the batch and the writer runs.
  bool ran = run_on_slow_loopback([] {
    EventLoop loop;
    UdpSocket::Options small;
    small.gso = false;
    small.buffer_bytes = 4096;
    auto server = UdpSocket::bind(loop, "127.0.0.1", 0, UdpSocket::Options{});
    auto client = UdpSocket::open_client(loop, "127.0.0.1", small);
    ASSERT_TRUE(server && client);
    size_t got = 0;
    (*server)->set_handler([&](const sockaddr*, socklen_t, std::span<const uint8_t>) { ++got; });
    const auto* to = reinterpret_cast<const sockaddr*>(&(*server)->local_address());
    socklen_t to_len = (*server)->local_address_len();
    size_t queued = 0;
    for (; queued < 2 * UdpSocket::kBatchBytes / 1000; ++queued) {
      auto room = (*client)->prepare(1000);
      if (room.empty()) {
        break;
      }
      std::fill(room.begin(), room.end(), static_cast<uint8_t>(queued));
      (*client)->send(to, to_len, room);
      if (queued == 10) {
        (*client)->flush();  // the kernel takes a few, then refuses the rest
      }
    }
    ASSERT_LT(queued, 2 * UdpSocket::kBatchBytes / 1000) << "the kernel never refused";
    ParkedWriter writer;
    (*client)->wait_for_room(writer);
    EXPECT_EQ(writer.runs, 0);
    ASSERT_TRUE(loop.run_until([&] { return writer.runs == 1; }, kUdpDeadline));
    EXPECT_EQ((*client)->datagrams_dropped(), 0u);
    EXPECT_EQ((*client)->stats().datagrams_out, queued);
    EXPECT_FALSE((*client)->prepare(1000).empty());
    ASSERT_TRUE(loop.run_until([&] { return got == queued; }, kUdpDeadline));
  });
  ASSERT_TRUE(ran) << "needs root: unshare(CLONE_NEWNET) and tc";
}

TEST_P(UdpSocketTest, HandlerMayDestroyTheSocket) {
  server_->set_handler([this](const sockaddr*, socklen_t, std::span<const uint8_t>) {
    server_.reset();
  });
  for (uint32_t i = 0; i < 5; ++i) {
    send_from_client(i, 100);
  }
  ASSERT_TRUE(loop_.run_until([&] { return server_ == nullptr; }, kUdpDeadline));
}

TEST(UdpSocketOpenTest, BindsIpv6AndReusePort) {
  EventLoop loop;
  UdpSocket::Options o;
  o.reuse_port = true;
  auto a = UdpSocket::bind(loop, "127.0.0.1", 0, o);
  ASSERT_TRUE(a);
  auto b = UdpSocket::bind(loop, "127.0.0.1", (*a)->port(), o);
  ASSERT_TRUE(b);
  EXPECT_EQ((*a)->port(), (*b)->port());
  EXPECT_FALSE(UdpSocket::bind(loop, "127.0.0.1", (*a)->port(), UdpSocket::Options{}));
  auto c = UdpSocket::open_client(loop, "::1", UdpSocket::Options{});
  if (c) {  // hosts without IPv6 cannot open it; that is not this test's concern
    EXPECT_EQ((*c)->local_address().ss_family, AF_INET6);
  }
}

INSTANTIATE_TEST_SUITE_P(GsoGro, UdpSocketTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "GsoGroOn" : "GsoGroOff"; });

}  // namespace
}  // namespace moqd::runtime
