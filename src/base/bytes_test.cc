#include "base/bytes.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "base/counting.h"
#include "base/mutex.h"

namespace moqd {
namespace {

TEST(BytesTest, SmallCopiesReuseReleasedBlocks) {
  const uint8_t header[] = {0x43, 0xe8};
  const uint8_t* first = nullptr;
  {
    Bytes a = Bytes::copy(header);
    first = a.data();
  }
  Bytes b = Bytes::copy(header);
  if (Bytes::kRecyclesSmallBlocks) {
    EXPECT_EQ(b.data(), first);  // the block just released, from this thread's free list
  }
}

TEST(BytesTest, RecycledBlockHoldsNewContentAndCountsAsLive) {
  const int64_t live = Bytes::live_buffers();
  std::vector<Bytes> held;
  for (int round = 0; round < 3; ++round) {
    for (uint8_t i = 0; i < 100; ++i) {
      const uint8_t data[] = {i, static_cast<uint8_t>(round), 7};
      held.push_back(Bytes::copy(data));
    }
    EXPECT_EQ(Bytes::live_buffers(), live + 100);
    for (uint8_t i = 0; i < 100; ++i) {
      ASSERT_EQ(held[i].size(), 3u);
      EXPECT_EQ(held[i].data()[0], i);
      EXPECT_EQ(held[i].data()[1], round);
    }
    held.clear();
    EXPECT_EQ(Bytes::live_buffers(), live);
  }
}

// widened_by: the view grows to the front only over exactly the given bytes, sharing the buffer.
TEST(BytesTest, WidenedByCoversExactlyThePrefixBeforeTheView) {
  const uint8_t wire[] = {0xff, 0x05, 'h', 'e', 'l', 'l', 'o', 0x03, 'a', 'b', 'c'};
  Bytes all = Bytes::copy(wire);
  Bytes hello = all.slice(2, 5);
  const uint8_t five[] = {0x05};
  Bytes framed = hello.widened_by(five);
  ASSERT_EQ(framed.size(), 6u);
  EXPECT_EQ(framed.data(), all.data() + 1);  // the same buffer: no copy
  EXPECT_EQ(framed, Bytes::copy(std::span<const uint8_t>(wire + 1, 6)));
  EXPECT_EQ(all.use_count(), 3u);
  // Two bytes before it: the view may widen by both.
  const uint8_t two[] = {0xff, 0x05};
  EXPECT_EQ(hello.widened_by(two), Bytes::copy(std::span<const uint8_t>(wire, 7)));
  // Other bytes before it, a prefix longer than the room before the view, an empty prefix or view.
  const uint8_t wrong[] = {0x06};
  EXPECT_TRUE(hello.widened_by(wrong).empty());
  const uint8_t three[] = {0x00, 0xff, 0x05};
  EXPECT_TRUE(hello.widened_by(three).empty());
  EXPECT_TRUE(hello.widened_by({}).empty());
  EXPECT_TRUE(all.slice(2, 0).widened_by(five).empty());
  EXPECT_TRUE(all.widened_by(five).empty());  // at the buffer's start
  EXPECT_TRUE(Bytes().widened_by(five).empty());
  const uint8_t three_hdr[] = {0x03};
  EXPECT_EQ(all.slice(8, 3).widened_by(three_hdr), Bytes::copy(std::span<const uint8_t>(wire + 7, 4)));
}

TEST(BytesTest, SlicesKeepASmallBlockAlive) {
  Bytes s;
  {
    Bytes whole = Bytes::copy(std::string_view("abcdef"));
    s = whole.slice(2, 3);
  }
  Bytes other = Bytes::copy(std::string_view("zzzzzz"));  // must not take s's block
  EXPECT_EQ(s.view(), "cde");
  EXPECT_EQ(s.use_count(), 1u);
}

TEST(BytesTest, LargeCopiesAreExact) {
  std::vector<uint8_t> big(Bytes::kPooledCapacity + 1, 0x5a);
  Bytes b = Bytes::from(big);
  EXPECT_EQ(b.size(), big.size());
  EXPECT_EQ(b.data()[big.size() - 1], 0x5a);
}

TEST(BytesTest, ABlockReleasedOnAnotherThreadIsSafe) {
  // The Bridge's pattern: one thread makes the only reference, another drops it.
  Bytes b = Bytes::copy(std::string_view("hi"));
  std::thread t([moved = std::move(b)]() mutable { moved = Bytes(); });
  t.join();
  Bytes again = Bytes::copy(std::string_view("ok"));
  EXPECT_EQ(again.view(), "ok");
}

TEST(MutexTest, CountsAcquisitionsInTheCountingBuild) {
  Mutex mu;
  const uint64_t before = counting::lock_count();
  const uint64_t path_before = counting::path_lock_count();
  { MutexLock lock(mu); }
  {
    counting::PathScope path;
    EXPECT_EQ(counting::in_path(), counting::kEnabled);
    MutexLock lock(mu);
  }
  EXPECT_FALSE(counting::in_path());
  const uint64_t want = counting::kEnabled ? 2 : 0;
  EXPECT_EQ(counting::lock_count() - before, want);
  EXPECT_EQ(counting::path_lock_count() - path_before, want / 2);
}

}  // namespace
}  // namespace moqd
