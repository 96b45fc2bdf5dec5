#include "base/trim_policy.h"

#include <gtest/gtest.h>

namespace moqd {
namespace {

constexpr uint64_t kMiB = 1u << 20;
constexpr uint64_t kThreshold = 8 * kMiB;
constexpr double kMaxBusy = 0.05;

// A steady state: the heap in use stays put while resident memory beyond it grows by far more
// than the threshold (fragmentation): the policy never trims, however long it runs.
TEST(TrimPolicy, SteadyHeapWithGrowingGapNeverTrims) {
  TrimPolicy p(kThreshold, kMaxBusy);
  for (uint64_t s = 0; s < 100; ++s) {
    EXPECT_FALSE(p.should_trim({40 * kMiB, 50 * kMiB + s * kMiB})) << "second " << s;
  }
}

// A crowd arriving: in use and resident both grow: no trim.
TEST(TrimPolicy, GrowingHeapNeverTrims) {
  TrimPolicy p(kThreshold, kMaxBusy);
  for (uint64_t s = 0; s < 50; ++s) {
    EXPECT_FALSE(p.should_trim({2 * kMiB + s * kMiB, 10 * kMiB + 2 * s * kMiB})) << "second " << s;
  }
}

// A crowd leaving: in use falls by 30 MB from its peak and resident stays at the peak: trim.
TEST(TrimPolicy, DropFromPeakWithResidentKeptTrims) {
  TrimPolicy p(kThreshold, kMaxBusy);
  EXPECT_FALSE(p.should_trim({2 * kMiB, 10 * kMiB}));
  EXPECT_FALSE(p.should_trim({40 * kMiB, 50 * kMiB}));
  EXPECT_TRUE(p.should_trim({10 * kMiB, 50 * kMiB}));
}

// Both conditions, each just under and at the threshold.
TEST(TrimPolicy, EachConditionMustReachTheThreshold) {
  TrimPolicy drop_short(kThreshold, kMaxBusy);
  EXPECT_FALSE(drop_short.should_trim({40 * kMiB, 48 * kMiB}));  // floor 8 MiB
  EXPECT_FALSE(drop_short.should_trim({32 * kMiB + 1, 60 * kMiB}));
  EXPECT_TRUE(drop_short.should_trim({32 * kMiB, 60 * kMiB}));

  TrimPolicy gap_short(kThreshold, kMaxBusy);
  EXPECT_FALSE(gap_short.should_trim({40 * kMiB, 48 * kMiB}));  // floor 8 MiB
  EXPECT_FALSE(gap_short.should_trim({20 * kMiB, 36 * kMiB - 1}));
  EXPECT_TRUE(gap_short.should_trim({20 * kMiB, 36 * kMiB}));
}

// A heap freed while the allocator returned its pages on its own (resident fell with in use):
// nothing kept, no trim.
TEST(TrimPolicy, DropAlreadyReturnedDoesNotTrim) {
  TrimPolicy p(kThreshold, kMaxBusy);
  EXPECT_FALSE(p.should_trim({40 * kMiB, 48 * kMiB}));
  EXPECT_FALSE(p.should_trim({5 * kMiB, 13 * kMiB}));
}

// After a trim the peak restarts from what the trim left, and what it could not return is the
// new floor: the same sample again does not trim a second time.
TEST(TrimPolicy, TrimResetsPeakAndFloor) {
  TrimPolicy p(kThreshold, kMaxBusy);
  EXPECT_FALSE(p.should_trim({40 * kMiB, 48 * kMiB}));
  EXPECT_TRUE(p.should_trim({10 * kMiB, 48 * kMiB}));
  p.trimmed({10 * kMiB, 30 * kMiB});  // 20 MiB it could not return
  EXPECT_FALSE(p.should_trim({10 * kMiB, 30 * kMiB}));
  EXPECT_FALSE(p.should_trim({10 * kMiB, 45 * kMiB}));  // gap grew, in use did not drop
  EXPECT_FALSE(p.should_trim({30 * kMiB, 50 * kMiB}));
  EXPECT_TRUE(p.should_trim({20 * kMiB, 50 * kMiB}));  // fell 10 from 30; gap 30 >= 20 + 8
}

// A crowd left but a loop is still busy: the trim waits (its walk would stall that loop) and runs
// at the first check where every loop is idle; the freed memory stays counted meanwhile.
TEST(TrimPolicy, WaitsForIdleLoops) {
  TrimPolicy p(kThreshold, kMaxBusy);
  EXPECT_FALSE(p.should_trim({40 * kMiB, 48 * kMiB, 0.9}));
  EXPECT_FALSE(p.should_trim({10 * kMiB, 48 * kMiB, 0.9}));
  EXPECT_FALSE(p.should_trim({10 * kMiB, 48 * kMiB, 0.0501}));
  EXPECT_TRUE(p.should_trim({10 * kMiB, 48 * kMiB, 0.05}));
}

}  // namespace
}  // namespace moqd
