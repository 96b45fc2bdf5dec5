#include "runtime/dns.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace moqd::runtime {
namespace {

using Bytes8 = std::vector<uint8_t>;

void put16(Bytes8& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void put32(Bytes8& b, uint32_t v) {
  put16(b, static_cast<uint16_t>(v >> 16));
  put16(b, static_cast<uint16_t>(v));
}

// A response header: id 0x1234, QR RD RA and `rcode`, one question, `answers` answers.
Bytes8 header(uint16_t answers, uint8_t rcode = 0) {
  Bytes8 b;
  put16(b, 0x1234);
  put16(b, static_cast<uint16_t>(0x8180 | rcode));
  put16(b, 1);
  put16(b, answers);
  put16(b, 0);
  put16(b, 0);
  return b;
}

// The question "peers.test." type `type`, class IN, at offset 12 (answers point back to it).
void question(Bytes8& b, uint16_t type) {
  static constexpr char kName[] = "\x05peers\x04test";  // and its terminating 0: the root label
  b.insert(b.end(), kName, kName + sizeof kName);
  put16(b, type);
  put16(b, 1);
}

// An answer record named by a compression pointer to the question's name.
void answer(Bytes8& b, uint16_t type, uint32_t ttl, std::initializer_list<uint8_t> data,
            uint16_t klass = 1) {
  put16(b, 0xc00c);
  put16(b, type);
  put16(b, klass);
  put32(b, ttl);
  put16(b, static_cast<uint16_t>(data.size()));
  b.insert(b.end(), data);
}

TEST(DnsAnswer, AddressesAndSmallestTtl) {
  Bytes8 m = header(3);
  question(m, 1);
  answer(m, 1, 30, {10, 0, 0, 7});
  answer(m, 28, 10, {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7});
  answer(m, 1, 60, {127, 0, 0, 3});
  auto a = parse_dns_answer(m.data(), m.size());
  ASSERT_TRUE(a.has_value()) << a.error().detail;
  EXPECT_EQ(a->rcode, 0);
  EXPECT_EQ(a->addresses, (std::vector<std::string>{"10.0.0.7", "fd00::7", "127.0.0.3"}));
  ASSERT_TRUE(a->min_ttl.has_value());
  EXPECT_EQ(*a->min_ttl, 10u);
}

TEST(DnsAnswer, OtherTypesAndClassesAreSkippedButTheirTtlCounts) {
  Bytes8 m = header(3);
  question(m, 1);
  // A CNAME (type 5) pointing at the question's name, with the smallest TTL.
  answer(m, 5, 2, {0xc0, 0x0c});
  answer(m, 1, 30, {10, 0, 0, 8}, /*klass=*/3);  // CHAOS: not an address of ours
  answer(m, 1, 40, {10, 0, 0, 9});
  auto a = parse_dns_answer(m.data(), m.size());
  ASSERT_TRUE(a.has_value()) << a.error().detail;
  EXPECT_EQ(a->addresses, (std::vector<std::string>{"10.0.0.9"}));
  EXPECT_EQ(*a->min_ttl, 2u);
}

TEST(DnsAnswer, NameErrorHasNoAddressAndItsRcode) {
  Bytes8 m = header(0, 3);
  question(m, 28);
  auto a = parse_dns_answer(m.data(), m.size());
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->rcode, 3);
  EXPECT_TRUE(a->addresses.empty());
  EXPECT_FALSE(a->min_ttl.has_value());
}

TEST(DnsAnswer, WrongSizedAddressIsMalformed) {
  Bytes8 m = header(1);
  question(m, 1);
  answer(m, 1, 30, {10, 0, 0, 7, 1});
  EXPECT_FALSE(parse_dns_answer(m.data(), m.size()).has_value());
  Bytes8 six = header(1);
  question(six, 28);
  answer(six, 28, 30, {1, 2, 3, 4});
  EXPECT_FALSE(parse_dns_answer(six.data(), six.size()).has_value());
}

TEST(DnsAnswer, TruncatedOrLyingMessagesAreErrors) {
  Bytes8 m = header(1);
  question(m, 1);
  answer(m, 1, 30, {10, 0, 0, 7});
  // Every prefix of the message is an error: the header promises a record it does not hold.
  for (size_t n = 0; n < m.size(); ++n) {
    EXPECT_FALSE(parse_dns_answer(m.data(), n).has_value()) << "prefix of " << n << " bytes";
  }
  // An answer count larger than the records present.
  Bytes8 more = m;
  more[7] = 2;
  EXPECT_FALSE(parse_dns_answer(more.data(), more.size()).has_value());
  // A compression pointer that points at itself.
  Bytes8 loop = header(1);
  question(loop, 1);
  size_t at = loop.size();
  answer(loop, 1, 30, {10, 0, 0, 7});
  loop[at] = 0xc0;
  loop[at + 1] = static_cast<uint8_t>(at);
  EXPECT_FALSE(parse_dns_answer(loop.data(), loop.size()).has_value());
  EXPECT_FALSE(parse_dns_answer(nullptr, 0).has_value());
}

}  // namespace
}  // namespace moqd::runtime
