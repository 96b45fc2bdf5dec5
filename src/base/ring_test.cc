#include "base/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
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

TEST(RingTest, PushFrontAndEraseMatchADequeAcrossWrapsAndGrowth) {
  Ring<int> r;
  std::deque<int> model;
  int next = 0;
  for (int round = 0; round < 200; ++round) {
    switch (round % 5) {
      case 0:
      case 1:
        r.push_back(next);
        model.push_back(next++);
        break;
      case 2:
        r.push_front(next);
        model.push_front(next++);
        break;
      case 3:
        if (!model.empty()) {
          r.pop_front();
          model.pop_front();
        }
        break;
      case 4:
        if (!model.empty()) {
          int victim = model[model.size() / 2];
          EXPECT_EQ(r.erase(victim), 1u);
          model.erase(std::find(model.begin(), model.end(), victim));
        }
        EXPECT_EQ(r.erase(-1), 0u);
        break;
    }
    ASSERT_EQ(r.size(), model.size());
    for (size_t i = 0; i < model.size(); ++i) {
      ASSERT_EQ(r[i], model[i]) << "round " << round << " index " << i;
    }
  }
}

TEST(RingTest, EraseRemovesEveryCopyAndKeepsTheRestInOrder) {
  Ring<int> r;
  for (int v : {5, 1, 5, 2, 5, 3}) {
    r.push_back(v);
  }
  EXPECT_EQ(r.erase(5), 3u);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], 1);
  EXPECT_EQ(r[1], 2);
  EXPECT_EQ(r[2], 3);
}

TEST(RingTest, PushFrontIntoAnEmptyRingAllocatesItsFirstBuffer) {
  Ring<int> r;
  r.push_front(7);
  EXPECT_EQ(r.capacity(), 4u);
  EXPECT_EQ(r.front(), 7);
  r.push_back(8);
  r.push_front(6);
  EXPECT_EQ(r[0], 6);
  EXPECT_EQ(r[1], 7);
  EXPECT_EQ(r[2], 8);
}

}  // namespace
}  // namespace moqd
