#include "base/codec.h"

#include <gtest/gtest.h>

#include "base/bytes.h"
#include "base/clock.h"

namespace moqd {
namespace {

std::vector<uint8_t> encode_varint(uint64_t v) {
  std::vector<uint8_t> out;
  Writer(out).varint(v);
  return out;
}

TEST(VarintTest, EncodesMinimalForms) {
  EXPECT_EQ(to_hex(encode_varint(37)), "25");
  EXPECT_EQ(to_hex(encode_varint(100)), "40 64");
  EXPECT_EQ(to_hex(encode_varint(42069)), "80 00 a4 55");
  EXPECT_EQ(to_hex(encode_varint(0xff0dad02)), "c0 00 00 00 ff 0d ad 02");
  EXPECT_EQ(to_hex(encode_varint(kMaxVarint)), "ff ff ff ff ff ff ff ff");
}

TEST(VarintTest, DecodesNonMinimalForms) {
  auto bytes = from_hex("40 25 80 00 00 25 c0 00 00 00 00 00 00 25");
  Reader r(bytes);
  EXPECT_EQ(r.varint(), 37u);
  EXPECT_EQ(r.varint(), 37u);
  EXPECT_EQ(r.varint(), 37u);
  EXPECT_TRUE(r.empty());
  EXPECT_TRUE(r.ok());
}

TEST(VarintTest, TruncatedVarintFailsAndSticks) {
  auto bytes = from_hex("80 00 a4");
  Reader r(bytes);
  EXPECT_FALSE(r.varint());
  EXPECT_TRUE(r.is_truncated());
  EXPECT_FALSE(r.u8());
}

TEST(ReaderTest, StringOverLimitIsTooLongNotTruncated) {
  auto bytes = from_hex("05 68 65 6c 6c 6f");
  Reader r(bytes);
  EXPECT_FALSE(r.string(4));
  EXPECT_TRUE(r.is_too_long());
  EXPECT_FALSE(r.is_truncated());
  Reader r2(bytes);
  EXPECT_EQ(r2.string(5), "hello");
}

TEST(BytesTest, CopiesShareOneBuffer) {
  int64_t before = Bytes::live_buffers();
  {
    Bytes a = Bytes::copy(std::string_view("hello world"));
    Bytes b = a;
    Bytes c = a.slice(6);
    EXPECT_EQ(a.use_count(), 3u);
    EXPECT_EQ(c.view(), "world");
    EXPECT_EQ(Bytes::live_buffers(), before + 1);
  }
  EXPECT_EQ(Bytes::live_buffers(), before);
}

TEST(ManualClockTest, FiresTimersInDeadlineOrderAtTheirDeadline) {
  ManualClock clock;
  std::vector<std::pair<int, Instant>> fired;
  clock.schedule(std::chrono::milliseconds(20), [&] { fired.push_back({2, clock.now()}); });
  Instant start = clock.now();
  clock.schedule(std::chrono::milliseconds(10), [&] { fired.push_back({1, clock.now()}); });
  TimerId cancelled = clock.schedule(std::chrono::milliseconds(15), [&] { fired.push_back({3, clock.now()}); });
  clock.cancel(cancelled);
  clock.advance(std::chrono::milliseconds(25));
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[0].first, 1);
  EXPECT_EQ(fired[0].second - start, std::chrono::milliseconds(10));
  EXPECT_EQ(fired[1].first, 2);
  EXPECT_EQ(clock.now() - start, std::chrono::milliseconds(25));
}

}  // namespace
}  // namespace moqd
