#include "transport/quic/cid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace moqd::transport::quic {
namespace {

std::vector<uint8_t> long_header(uint8_t first, uint32_t version, std::vector<uint8_t> dcid,
                                 size_t tail) {
  // Sized once and filled in place: g++ 12 at -O2 misreads insert() into a 6-byte vector as an
  // out-of-bounds copy (-Warray-bounds).
  std::vector<uint8_t> p(6 + dcid.size() + tail, 0);
  p[0] = first;
  p[1] = static_cast<uint8_t>(version >> 24);
  p[2] = static_cast<uint8_t>(version >> 16);
  p[3] = static_cast<uint8_t>(version >> 8);
  p[4] = static_cast<uint8_t>(version);
  p[5] = static_cast<uint8_t>(dcid.size());
  std::copy(dcid.begin(), dcid.end(), p.begin() + 6);
  return p;
}

TEST(CidTest, MadeCidsNameTheirWorkerAndDiffer) {
  std::set<std::vector<uint8_t>> seen;
  for (size_t w : {0u, 1u, 7u, 255u}) {
    for (int i = 0; i < 50; ++i) {
      ngtcp2_cid cid = make_cid(w);
      ASSERT_EQ(cid.datalen, kCidLength);
      EXPECT_EQ(worker_of({cid.data, cid.datalen}), w);
      EXPECT_TRUE(seen.insert({cid.data, cid.data + cid.datalen}).second);
    }
  }
}

TEST(CidTest, ForeignLengthCidHasNoWorker) {
  std::vector<uint8_t> eight(8, 3);
  EXPECT_EQ(worker_of(eight), std::nullopt);
  EXPECT_EQ(worker_of({}), std::nullopt);
}

TEST(CidTest, ResetTokenIsStablePerCidAndDiffersAcrossCids) {
  ngtcp2_cid a = make_cid(1);
  ngtcp2_cid b = make_cid(1);
  EXPECT_EQ(stateless_reset_token({a.data, a.datalen}), stateless_reset_token({a.data, a.datalen}));
  EXPECT_NE(stateless_reset_token({a.data, a.datalen}), stateless_reset_token({b.data, b.datalen}));
  ngtcp2_cid c;
  uint8_t token[kStatelessResetTokenLength];
  generate_cid(3, &c, token);
  EXPECT_EQ(worker_of({c.data, c.datalen}), 3u);
  auto expected = stateless_reset_token({c.data, c.datalen});
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), token));
}

TEST(CidTest, ExtractsShortHeaderDcid) {
  ngtcp2_cid cid = make_cid(2);
  std::vector<uint8_t> p = {0x41};
  p.insert(p.end(), cid.data, cid.data + cid.datalen);
  p.resize(p.size() + 20, 0);
  auto d = extract_dcid(p, kCidLength);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->data(), p.data() + 1);
  EXPECT_EQ(worker_of(*d), 2u);
  EXPECT_FALSE(is_initial(p));
  EXPECT_FALSE(is_long_header(p));
}

TEST(CidTest, ExtractsLongHeaderDcidOfAnyLengthUpTo20) {
  for (size_t len : {0u, 1u, 8u, 16u, 20u}) {
    auto p = long_header(0xc3, 1, std::vector<uint8_t>(len, 9), 30);
    auto d = extract_dcid(p, kCidLength);
    ASSERT_TRUE(d) << len;
    EXPECT_EQ(d->size(), len);
    EXPECT_EQ(d->data(), p.data() + 6);
    EXPECT_TRUE(is_initial(p));
  }
}

TEST(CidTest, RejectsTruncatedAndOverlongHeaders) {
  EXPECT_FALSE(extract_dcid({}, kCidLength));
  std::vector<uint8_t> short_pkt = {0x40, 1, 2, 3};
  EXPECT_FALSE(extract_dcid(short_pkt, kCidLength));
  auto p = long_header(0xc0, 1, std::vector<uint8_t>(16, 1), 0);
  p.resize(6 + 15);  // one DCID byte missing
  EXPECT_FALSE(extract_dcid(p, kCidLength));
  EXPECT_FALSE(extract_dcid(long_header(0xc0, 1, std::vector<uint8_t>(21, 1), 10), kCidLength));
  std::vector<uint8_t> five = {0xc0, 0, 0, 0, 1};
  EXPECT_FALSE(extract_dcid(five, kCidLength));
}

TEST(CidTest, OtherVersionsMayCarryLongerCids) {
  auto p = long_header(0xc0, 0x1a2a3a4a, std::vector<uint8_t>(40, 1), 0);
  auto d = extract_dcid(p, kCidLength);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->size(), 40u);
  EXPECT_FALSE(is_initial(p));
}

TEST(CidTest, HandshakePacketIsNotInitial) {
  EXPECT_FALSE(is_initial(long_header(0xe0, 1, std::vector<uint8_t>(16, 1), 30)));
}

}  // namespace
}  // namespace moqd::transport::quic
