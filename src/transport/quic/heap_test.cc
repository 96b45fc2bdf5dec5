#include "transport/quic/heap.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "testing/quic_pair.h"

namespace moqd::transport::quic {
namespace {

TEST(Ngtcp2HeapTest, EachCallIsCountedAndFreeingReturnsToTheStart) {
  const ngtcp2_mem* mem = counting_mem();
  HeapCount start = ngtcp2_heap();

  void* a = mem->malloc(100, mem->user_data);
  ASSERT_NE(a, nullptr);
  HeapCount one = ngtcp2_heap();
  EXPECT_EQ(one.blocks, start.blocks + 1);
  EXPECT_GE(one.bytes, start.bytes + 100);  // usable size: at least what was asked

  void* b = mem->calloc(10, 30, mem->user_data);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(static_cast<const uint8_t*>(b)[299], 0);
  HeapCount two = ngtcp2_heap();
  EXPECT_EQ(two.blocks, start.blocks + 2);
  EXPECT_GE(two.bytes, one.bytes + 300);

  a = mem->realloc(a, 5000, mem->user_data);  // grows: the old block's bytes are uncounted
  ASSERT_NE(a, nullptr);
  HeapCount grown = ngtcp2_heap();
  EXPECT_EQ(grown.blocks, start.blocks + 2);
  EXPECT_GE(grown.bytes, start.bytes + 5300);
  EXPECT_LT(grown.bytes, start.bytes + 5300 + 200);  // not still holding the first 100

  void* c = mem->realloc(nullptr, 64, mem->user_data);  // realloc(nullptr) is a malloc
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(ngtcp2_heap().blocks, start.blocks + 3);

  mem->free(a, mem->user_data);
  mem->free(b, mem->user_data);
  mem->free(c, mem->user_data);
  mem->free(nullptr, mem->user_data);  // as free(nullptr): nothing
  HeapCount end = ngtcp2_heap();
  EXPECT_EQ(end.blocks, start.blocks);
  EXPECT_EQ(end.bytes, start.bytes);
}

TEST(Ngtcp2HeapTest, ABlockFreedOnAnotherThreadLeavesTheSumExact) {
  const ngtcp2_mem* mem = counting_mem();
  HeapCount start = ngtcp2_heap();
  void* p = nullptr;
  std::thread([&] { p = mem->malloc(1000, mem->user_data); }).join();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(ngtcp2_heap().blocks, start.blocks + 1);
  EXPECT_GE(ngtcp2_heap().bytes, start.bytes + 1000);
  mem->free(p, mem->user_data);  // this thread's slot goes negative, the other's stays positive
  EXPECT_EQ(ngtcp2_heap().blocks, start.blocks);
  EXPECT_EQ(ngtcp2_heap().bytes, start.bytes);
}

// Every connection's ngtcp2 state goes through counting_mem(): a handshaken pair holds blocks
// that are counted (the connection struct alone is over 9 KB), and none once both are gone.
TEST(Ngtcp2HeapTest, ConnectionsAllocateThroughTheCountingAllocator) {
  HeapCount start = ngtcp2_heap();
  auto pair = std::make_unique<test::QuicPair>();
  ASSERT_TRUE(pair->handshake());
  HeapCount live = ngtcp2_heap();
  EXPECT_GE(live.blocks, start.blocks + 2 * 10);
  EXPECT_GE(live.bytes, start.bytes + 2 * 9000);
  pair.reset();
  HeapCount end = ngtcp2_heap();
  EXPECT_EQ(end.blocks, start.blocks);
  EXPECT_EQ(end.bytes, start.bytes);
}

}  // namespace
}  // namespace moqd::transport::quic
