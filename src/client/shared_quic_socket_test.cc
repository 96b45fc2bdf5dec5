// SharedQuicSocket: datagrams of many QUIC client connections on one UDP socket, routed by the
// key in their DCID; unknown keys dropped and counted; GRO super-datagrams split per packet.
#include "client/shared_quic_socket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

namespace moqd::client {
namespace shared_quic_socket_test {

constexpr auto kDeadline = std::chrono::seconds(10);

// Records what the socket routes to it; `on_each` (if set) runs after each datagram.
struct RecordingMember final : SharedQuicSocket::Member {
  void on_datagram(const sockaddr*, socklen_t, std::span<const uint8_t> d) override {
    got.emplace_back(d.begin(), d.end());
    if (on_each) {
      on_each();
    }
  }
  std::vector<std::vector<uint8_t>> got;
  std::function<void()> on_each;
};

// A short-header packet (RFC 9000 §17.3) of `size` bytes to the CID `cid`, with `seq` after it.
std::vector<uint8_t> short_packet(const ngtcp2_cid& cid, uint8_t seq, size_t size) {
  std::vector<uint8_t> p(size, static_cast<uint8_t>(0xa0 + seq));
  p[0] = 0x40;
  std::memcpy(p.data() + 1, cid.data, cid.datalen);
  p[1 + cid.datalen] = seq;
  return p;
}

// A long-header packet (§17.2) with a `dcid_len`-byte DCID copied from `cid`.
std::vector<uint8_t> long_packet(const ngtcp2_cid& cid, size_t dcid_len, size_t size) {
  std::vector<uint8_t> p(size, 0x55);
  p[0] = 0xc0;
  p[1] = 0;
  p[2] = 0;
  p[3] = 0;
  p[4] = 1;
  p[5] = static_cast<uint8_t>(dcid_len);
  std::memcpy(p.data() + 6, cid.data, dcid_len);
  return p;
}

ngtcp2_cid cid_for(uint64_t key) {
  ngtcp2_cid cid{};
  uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  SharedQuicSocket::fill_cid(key, &cid, token);
  return cid;
}

class SharedQuicSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    runtime::UdpSocket::Options o;
    auto s = SharedQuicSocket::open(loop_, "127.0.0.1", o);
    ASSERT_TRUE(s);
    shared_ = std::move(*s);
    auto c = runtime::UdpSocket::open_client(loop_, "127.0.0.1", o);
    ASSERT_TRUE(c);
    relay_ = std::move(*c);
    relay_->set_handler([](const sockaddr*, socklen_t, std::span<const uint8_t>) {});
  }
  void TearDown() override {
    for (uint64_t k : keys_) {
      shared_->remove(k);
    }
  }
  uint64_t add(RecordingMember& m) {
    keys_.push_back(shared_->add(m));
    return keys_.back();
  }
  // Queues `d` from the fake relay to the shared socket (sent at the end of the loop's turn, or
  // at flush()).
  void send(const std::vector<uint8_t>& d) {
    relay_->send(reinterpret_cast<const sockaddr*>(&shared_->socket().local_address()),
                 shared_->socket().local_address_len(), d);
  }
  bool wait_for(uint64_t datagrams) {
    relay_->flush();
    return loop_.run_until([&] { return shared_->socket().stats().datagrams_in >= datagrams; },
                           kDeadline);
  }

  runtime::EventLoop loop_;
  std::unique_ptr<SharedQuicSocket> shared_;
  std::unique_ptr<runtime::UdpSocket> relay_;
  std::vector<uint64_t> keys_;
};

TEST(SharedQuicSocketKeyTest, EveryCidOfAMemberStartsWithItsKeyAndIsRandomAfterIt) {
  ngtcp2_cid a = cid_for(0x1122334455667788u);
  ngtcp2_cid b = cid_for(0x1122334455667788u);
  ASSERT_EQ(a.datalen, SharedQuicSocket::kCidLen);
  EXPECT_EQ(std::memcmp(a.data, b.data, SharedQuicSocket::kKeyLen), 0);
  EXPECT_NE(std::memcmp(a.data + SharedQuicSocket::kKeyLen, b.data + SharedQuicSocket::kKeyLen,
                        SharedQuicSocket::kCidLen - SharedQuicSocket::kKeyLen),
            0);
  EXPECT_EQ(SharedQuicSocket::key_of(short_packet(a, 0, 40)), 0x1122334455667788u);
  EXPECT_EQ(SharedQuicSocket::key_of(long_packet(a, 16, 1200)), 0x1122334455667788u);
}

TEST(SharedQuicSocketKeyTest, HeadersWithoutAWholeCidHaveNoKey) {
  ngtcp2_cid a = cid_for(7);
  EXPECT_FALSE(SharedQuicSocket::key_of({}));
  // A long header whose DCID is not kCidLen bytes (a peer's, or an 8-byte one).
  EXPECT_FALSE(SharedQuicSocket::key_of(long_packet(a, 8, 1200)));
  // Cut inside the DCID: short at offset 1 + 16, long at 6 + 16.
  auto s = short_packet(a, 0, 40);
  s.resize(16);
  EXPECT_FALSE(SharedQuicSocket::key_of(s));
  auto l = long_packet(a, 16, 1200);
  l.resize(21);
  EXPECT_FALSE(SharedQuicSocket::key_of(l));
  l.resize(5);
  EXPECT_FALSE(SharedQuicSocket::key_of(l));
}

TEST_F(SharedQuicSocketTest, DatagramsReachTheMemberTheirDcidNamesAndUnknownOnesAreCounted) {
  RecordingMember a, b;
  ngtcp2_cid ca = cid_for(add(a));
  ngtcp2_cid cb = cid_for(add(b));
  EXPECT_EQ(shared_->members(), 2u);
  send(short_packet(ca, 1, 60));
  send(short_packet(cb, 2, 61));
  send(long_packet(cb, 16, 1200));
  send(short_packet(cid_for(0xdead), 3, 62));  // nobody's key
  send(long_packet(ca, 8, 1200));              // no key: an 8-byte DCID
  send(short_packet(ca, 4, 63));
  ASSERT_TRUE(wait_for(6));
  ASSERT_EQ(a.got.size(), 2u);
  EXPECT_EQ(a.got[0], short_packet(ca, 1, 60));
  EXPECT_EQ(a.got[1], short_packet(ca, 4, 63));
  ASSERT_EQ(b.got.size(), 2u);
  EXPECT_EQ(b.got[0], short_packet(cb, 2, 61));
  EXPECT_EQ(b.got[1], long_packet(cb, 16, 1200));
  EXPECT_EQ(shared_->routed(), 4u);
  EXPECT_EQ(shared_->unknown_dropped(), 2u);
}

TEST_F(SharedQuicSocketTest, AMemberLeavingInsideItsCallbackLeavesTheOthersReceiving) {
  RecordingMember a, b, c;
  uint64_t ka = add(a);
  ngtcp2_cid ca = cid_for(ka);
  ngtcp2_cid cb = cid_for(add(b));
  ngtcp2_cid cc = cid_for(add(c));
  a.on_each = [&] {
    shared_->remove(ka);  // as a closing connection does from its destructor
    std::erase(keys_, ka);
  };
  for (uint8_t i = 0; i < 5; ++i) {
    send(short_packet(ca, i, 100));
    send(short_packet(cb, i, 100));
    send(short_packet(cc, i, 100));
  }
  ASSERT_TRUE(wait_for(15));
  EXPECT_EQ(a.got.size(), 1u);
  EXPECT_EQ(b.got.size(), 5u);
  ASSERT_EQ(c.got.size(), 5u);
  EXPECT_EQ(shared_->members(), 2u);
  EXPECT_EQ(shared_->unknown_dropped(), 4u);
  for (uint8_t i = 0; i < 5; ++i) {
    EXPECT_EQ(c.got[i], short_packet(cc, i, 100));
  }
}

// The relay's packets to every viewer share one 4-tuple, so equal-size ones arrive as one GRO
// super-datagram (on loopback: the sender's GSO run, kept whole for a UDP_GRO socket); each
// packet in it must reach its own member, byte-exact.
TEST_F(SharedQuicSocketTest, AGroSuperDatagramIsSplitPerPacketAndRoutedPerPacket) {
  constexpr size_t kMembers = 4;
  constexpr uint8_t kRounds = 6;
  RecordingMember m[kMembers];
  ngtcp2_cid cid[kMembers];
  for (size_t i = 0; i < kMembers; ++i) {
    cid[i] = cid_for(add(m[i]));
  }
  for (uint8_t r = 0; r < kRounds; ++r) {
    for (size_t i = 0; i < kMembers; ++i) {
      send(short_packet(cid[i], r, 1200));
    }
  }
  ASSERT_TRUE(wait_for(kMembers * kRounds));
  EXPECT_GT(relay_->stats().gso_batches, 0u);
  EXPECT_GT(shared_->socket().stats().gro_batches, 0u);
  EXPECT_LT(shared_->socket().stats().recv_calls, kMembers * kRounds);
  for (size_t i = 0; i < kMembers; ++i) {
    ASSERT_EQ(m[i].got.size(), kRounds) << i;
    for (uint8_t r = 0; r < kRounds; ++r) {
      EXPECT_EQ(m[i].got[r], short_packet(cid[i], r, 1200)) << i << " " << int{r};
    }
  }
  EXPECT_EQ(shared_->unknown_dropped(), 0u);
}

TEST_F(SharedQuicSocketTest, KeysAreUniqueAmongMembers) {
  std::vector<RecordingMember> ms(200);
  std::vector<uint64_t> ks;
  for (auto& m : ms) {
    ks.push_back(add(m));
  }
  std::sort(ks.begin(), ks.end());
  EXPECT_EQ(std::adjacent_find(ks.begin(), ks.end()), ks.end());
  EXPECT_EQ(shared_->members(), 200u);
}

}  // namespace shared_quic_socket_test
}  // namespace moqd::client
