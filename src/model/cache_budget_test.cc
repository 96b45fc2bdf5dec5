#include "model/cache_budget.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/track.h"

namespace moqd::model {
namespace {

using std::chrono::seconds;

class CacheBudgetTest : public testing::Test {
 protected:
  std::unique_ptr<Track> make_track(const std::string& name, CacheBudget* a,
                                    CacheBudget* b = nullptr) {
    auto t = std::make_unique<Track>("room", name, CacheLimits{}, seconds(5), clock_, clock_);
    t->attach_budget(a);
    t->attach_budget(b);
    return t;
  }
  static void add_group(Track& t, uint64_t seq, size_t bytes) {
    Group* g = t.begin_group(seq);
    ASSERT_NE(g, nullptr);
    t.begin_object(*g, bytes);
    t.append_chunk(*g, Bytes::copy(std::string(bytes, 'x')));
    t.finish_group(*g);
  }

  ManualClock clock_;
};

TEST_F(CacheBudgetTest, CountsCachedBytesOfEveryAttachedTrack) {
  CacheBudget budget(1000);
  auto a = make_track("a", &budget);
  auto b = make_track("b", &budget);
  add_group(*a, 0, 100);
  add_group(*b, 0, 200);
  EXPECT_EQ(budget.used(), 300u);
  EXPECT_EQ(budget.track_count(), 2u);
  a.reset();
  EXPECT_EQ(budget.used(), 200u);
  EXPECT_EQ(budget.track_count(), 1u);
}

TEST_F(CacheBudgetTest, OverBudgetEvictsOldestGroupsOfTheLeastRecentlyServedTrack) {
  CacheBudget budget(300);
  auto a = make_track("a", &budget);
  auto b = make_track("b", &budget);
  add_group(*a, 0, 100);
  add_group(*a, 1, 100);
  add_group(*b, 0, 100);
  a->note_served();  // b is now the least recently served
  add_group(*b, 1, 100);
  EXPECT_EQ(b->cached_groups(), 1u);  // b lost its oldest group
  EXPECT_EQ(a->cached_groups(), 2u);
  EXPECT_EQ(budget.used(), 300u);
  EXPECT_EQ(budget.evictions(), 1u);
}

TEST_F(CacheBudgetTest, WithoutServingTheFirstAttachedTrackGivesUpGroupsFirst) {
  CacheBudget budget(300);
  auto a = make_track("a", &budget);
  auto b = make_track("b", &budget);
  add_group(*a, 0, 100);
  add_group(*a, 1, 100);
  add_group(*b, 0, 100);
  add_group(*b, 1, 100);
  EXPECT_EQ(a->cached_groups(), 1u);
  EXPECT_EQ(b->cached_groups(), 2u);
}

TEST_F(CacheBudgetTest, NewestGroupIsNeverEvictedEvenOverBudget) {
  CacheBudget budget(50);
  auto a = make_track("a", &budget);
  add_group(*a, 0, 100);
  EXPECT_EQ(a->cached_groups(), 1u);
  EXPECT_EQ(budget.used(), 100u);
  add_group(*a, 1, 100);
  EXPECT_EQ(a->cached_groups(), 1u);
  EXPECT_EQ(a->newest_group()->sequence(), 1u);
}

TEST_F(CacheBudgetTest, PublisherBudgetOnlyEvictsThatPublishersTracks) {
  CacheBudget global(10000);
  CacheBudget alice(200);
  auto mine = make_track("mine", &global, &alice);
  auto other = make_track("other", &global);
  add_group(*other, 0, 100);
  add_group(*other, 1, 100);
  add_group(*mine, 0, 100);
  add_group(*mine, 1, 100);
  add_group(*mine, 2, 100);
  EXPECT_EQ(mine->cached_groups(), 2u);
  EXPECT_EQ(other->cached_groups(), 2u);
  EXPECT_EQ(alice.used(), 200u);
  EXPECT_EQ(global.used(), 400u);
}

TEST_F(CacheBudgetTest, BudgetDestroyedFirstDetachesItsTracks) {
  auto budget = std::make_unique<CacheBudget>(1000);
  auto a = make_track("a", budget.get());
  add_group(*a, 0, 100);
  budget.reset();
  add_group(*a, 1, 100);  // must not touch the dead budget
  a->note_served();
  EXPECT_EQ(a->cached_groups(), 2u);
}

}  // namespace
}  // namespace moqd::model
