#include "base/ring.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/bytes.h"

namespace moqd {
namespace {

TEST(RingTest, AllocatesNothingUntilTheFirstPush) {
  Ring<Bytes> r;
  EXPECT_EQ(r.capacity(), 0u);
  EXPECT_TRUE(r.empty());
  r.push_back(Bytes::copy("a"));
  EXPECT_EQ(r.capacity(), 4u);
}

TEST(RingTest, KeepsFifoOrderAcrossWrapsAndGrowth) {
  Ring<int> r;
  std::vector<int> model;
  int next = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < round % 7 + 1; ++i) {
      r.push_back(next);
      model.push_back(next++);
    }
    for (int i = 0; i < round % 5 && !model.empty(); ++i) {
      ASSERT_EQ(r.front(), model.front());
      r.pop_front();
      model.erase(model.begin());
    }
    ASSERT_EQ(r.size(), model.size());
    for (size_t i = 0; i < model.size(); ++i) {
      ASSERT_EQ(r[i], model[i]);
    }
    if (!model.empty()) {
      EXPECT_EQ(r.back(), model.back());
    }
  }
}

TEST(RingTest, AQueueAtSteadyDepthStopsGrowing) {
  Ring<int> r;
  for (int i = 0; i < 3; ++i) {
    r.push_back(i);
  }
  size_t capacity = r.capacity();
  for (int i = 3; i < 10'000; ++i) {
    r.push_back(i);
    r.pop_front();
  }
  EXPECT_EQ(r.capacity(), capacity);
  EXPECT_EQ(r.front(), 9997);
}

TEST(RingTest, PoppedAndTruncatedElementsAreReleasedAtOnce) {
  int64_t live = Bytes::live_buffers();
  Ring<Bytes> r;
  for (int i = 0; i < 6; ++i) {
    r.push_back(Bytes::copy(std::string(100, 'x')));
  }
  EXPECT_EQ(Bytes::live_buffers(), live + 6);
  r.pop_front();
  EXPECT_EQ(Bytes::live_buffers(), live + 5);
  r.truncate(2);
  EXPECT_EQ(r.size(), 2u);
  EXPECT_EQ(Bytes::live_buffers(), live + 2);
  r.clear();
  EXPECT_EQ(Bytes::live_buffers(), live);
  EXPECT_EQ(r.capacity(), 0u);
}

}  // namespace
}  // namespace moqd
