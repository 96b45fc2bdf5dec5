#include "model/track.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "model/test_mocks.h"

namespace moqd::model {
namespace {

using std::chrono::seconds;
using testing::_;
using testing::Invoke;
using testing::StrictMock;

class TrackTest : public testing::Test {
 protected:
  TrackTest() { make_track(CacheLimits{}); }

  void make_track(CacheLimits limits) {
    track_ = std::make_unique<Track>("room/alice", "video", limits, seconds(5), clock_, clock_);
    track_->set_source(&source_);
    track_->set_idle_callback([this] {
      ++idle_calls_;
      track_.reset();
    });
  }

  // Adds a group holding one object of `payload`.
  Group* add_group(uint64_t sequence, std::string_view payload, bool finish = true) {
    Group* g = track_->begin_group(sequence);
    if (g != nullptr) {
      track_->begin_object(*g, payload.size());
      track_->append_chunk(*g, Bytes::copy(payload));
      if (finish) {
        track_->finish_group(*g);
      }
    }
    return g;
  }

  std::vector<uint64_t> cached_sequences() const {
    std::vector<uint64_t> out;
    for (const GroupRef& g : track_->groups_from(0)) {
      out.push_back(g->sequence());
    }
    return out;
  }

  int64_t buffers_at_start_ = Bytes::live_buffers();
  ManualClock clock_;
  StrictMock<MockTrackSource> source_;
  std::unique_ptr<Track> track_;
  int idle_calls_ = 0;
};

TEST_F(TrackTest, DuplicateSequenceInCacheIsRejected) {
  ASSERT_NE(add_group(7, "a"), nullptr);
  EXPECT_EQ(track_->begin_group(7), nullptr);
  EXPECT_EQ(track_->cached_groups(), 1u);
  EXPECT_EQ(track_->largest_sequence(), 7u);
}

TEST_F(TrackTest, SubgroupsOfOneSequenceAreGroupsOfTheirOwn) {
  Group* sg0 = track_->begin_group(7, 0, false);
  ASSERT_NE(sg0, nullptr);
  Group* sg2 = track_->begin_group(7, 2, true);
  ASSERT_NE(sg2, nullptr);
  EXPECT_EQ(sg2->subgroup(), 2u);
  EXPECT_TRUE(sg2->has_extensions());
  EXPECT_FALSE(sg0->has_extensions());
  // A duplicate is the same (sequence, subgroup); begin_group(7) is subgroup 0.
  EXPECT_EQ(track_->begin_group(7, 2, true), nullptr);
  EXPECT_EQ(track_->begin_group(7), nullptr);
  EXPECT_EQ(track_->cached_groups(), 2u);
  // An IETF object: its id, its extension block held (the same buffer, not a copy) and the
  // timestamp it gave.
  Bytes ext = Bytes::copy("\x10\x05");
  Track::IetfObject in;
  in.id = 4;
  in.size = 1;
  in.extensions = ext;
  in.extensions_draft = 16;
  in.timestamp = 5;
  track_->begin_ietf_object(*sg0, in);
  const Object& o = sg0->objects()[0];
  EXPECT_EQ(o.id, 4u);
  EXPECT_EQ(o.extensions.data(), ext.data());
  EXPECT_EQ(o.extensions_draft, 16);
  EXPECT_EQ(o.timestamp, 5u);
  EXPECT_TRUE(o.lite_refused);  // id 4 as the first object: moq-lite numbers from 0
  track_->append_chunk(*sg0, Bytes::copy("x"));
  // Every object of a subgroup other than 0 is one moq-lite refuses.
  track_->begin_ietf_object(*sg2, Track::IetfObject{0, 0, {}, 0, std::nullopt, false});
  EXPECT_TRUE(sg2->objects()[0].lite_refused);
  EXPECT_EQ(sg2->objects()[0].extensions_draft, 0);
}

TEST_F(TrackTest, EvictsOldestGroupBeyondMaxGroups) {
  make_track(CacheLimits{.max_groups = 3});
  for (uint64_t s = 0; s < 5; ++s) {
    add_group(s, "x");
  }
  EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(track_->cached_bytes(), 3u);
}

TEST_F(TrackTest, EvictsOldestGroupBeyondMaxBytes) {
  make_track(CacheLimits{.max_groups = 100, .max_bytes = 10});
  add_group(0, "aaaa");
  add_group(1, "bbbb");
  EXPECT_EQ(track_->cached_groups(), 2u);
  add_group(2, "cccc");
  EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(track_->cached_bytes(), 8u);
}

TEST_F(TrackTest, NewestGroupIsNeverEvictedEvenOverTheByteLimit) {
  make_track(CacheLimits{.max_groups = 100, .max_bytes = 10});
  add_group(0, "aa");
  add_group(1, "this group alone is over the limit");
  EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{1}));
}

TEST_F(TrackTest, EvictsGroupsOlderThanMaxAgeButNeverTheNewest) {
  make_track(CacheLimits{.max_age = seconds(2)});
  add_group(0, "a");
  clock_.advance(seconds(1));
  add_group(1, "b");
  clock_.advance(seconds(2));
  Group* g = add_group(2, "c", /*finish=*/false);
  EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{1, 2}));
  clock_.advance(seconds(10));
  track_->begin_object(*g, 1);
  track_->append_chunk(*g, Bytes::copy("d"));
  EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{2}));
  EXPECT_EQ(track_->cached_bytes(), 2u);
}

TEST_F(TrackTest, LateJoinerStartsAtNewestGroup) {
  EXPECT_FALSE(track_->newest_group());
  add_group(0, "a");
  add_group(1, "b");
  add_group(5, "c");
  GroupRef newest = track_->newest_group();
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->sequence(), 5u);
  EXPECT_EQ(newest->arrival(), 2u);
  EXPECT_EQ(track_->next_arrival(), 3u);
}

TEST_F(TrackTest, GroupsFromFollowsArrivalOrderNotSequence) {
  make_track(CacheLimits{.max_groups = 3});
  add_group(10, "a");  // arrival 0, evicted below
  add_group(11, "b");
  add_group(3, "c");  // late group with an old sequence still arrives after
  add_group(12, "d");
  auto sequences = [](const std::vector<GroupRef>& gs) {
    std::vector<uint64_t> out;
    for (const GroupRef& g : gs) {
      out.push_back(g->sequence());
    }
    return out;
  };
  EXPECT_EQ(sequences(track_->groups_from(0)), (std::vector<uint64_t>{11, 3, 12}));
  EXPECT_EQ(sequences(track_->groups_from(1)), (std::vector<uint64_t>{11, 3, 12}));
  EXPECT_EQ(sequences(track_->groups_from(3)), (std::vector<uint64_t>{12}));
  EXPECT_TRUE(track_->groups_from(4).empty());
  EXPECT_TRUE(track_->groups_from(101).empty());
  EXPECT_EQ(track_->largest_sequence(), 12u);
}

TEST_F(TrackTest, CursorKeepsAnEvictedGroupAliveAndNothingLeaks) {
  make_track(CacheLimits{.max_groups = 1});
  {
    add_group(0, "old");
    GroupCursor reader(track_->newest_group());
    Group* open = add_group(1, "new", /*finish=*/false);
    GroupRef producer_ref(open);
    add_group(2, "newer");
    EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{2}));
    // The evicted group is still readable, and writes to it do not count toward the cache.
    EXPECT_EQ(reader.group()->sequence(), 0u);
    EXPECT_EQ(reader.peek(SIZE_MAX).kind, GroupCursor::Kind::kObjectStart);
    track_->begin_object(*open, 4);
    track_->append_chunk(*open, Bytes::copy("more"));
    EXPECT_EQ(track_->cached_bytes(), 5u);
    EXPECT_EQ(Bytes::live_buffers(), buffers_at_start_ + 4);
  }
  track_.reset();
  EXPECT_EQ(Bytes::live_buffers(), buffers_at_start_);
}

TEST_F(TrackTest, ANewGroupIsToldAtOnceAndTheRestOnceATurn) {
  StrictMock<MockTrackListener> l;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&l);
  EXPECT_CALL(l, on_track_data(_)).Times(1);  // the group, from inside begin_group
  add_group(0, "a");  // then an object, a chunk and the group's end, in the same turn
  testing::Mock::VerifyAndClearExpectations(&l);
  EXPECT_CALL(l, on_track_data(_)).Times(1);  // all three, once, as the turn ends
  clock_.advance(Duration::zero());
  testing::Mock::VerifyAndClearExpectations(&l);
  EXPECT_CALL(l, on_track_data(_)).Times(2);  // the group; then the rest at the turn's end
  Group* g = track_->begin_group(1);
  track_->begin_object(*g, 2);
  track_->append_chunk(*g, Bytes::copy("b"));
  track_->append_chunk(*g, Bytes::copy("c"));
  clock_.advance(Duration::zero());
  clock_.advance(Duration::zero());  // nothing new: nothing told
  testing::Mock::VerifyAndClearExpectations(&l);
  track_->remove_listener(&l);
  EXPECT_CALL(source_, stop_track(_));
}

TEST_F(TrackTest, ABurstOfMoreGroupsThanTheCacheHoldsReachesEveryListener) {
  StrictMock<MockTrackListener> l;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&l);
  std::vector<uint64_t> seen;
  EXPECT_CALL(l, on_track_data(_)).WillRepeatedly(Invoke([&](Track& t) {
    if (GroupRef newest = t.newest_group(); newest && (seen.empty() || seen.back() != newest->sequence())) {
      seen.push_back(newest->sequence());
    }
  }));
  for (uint64_t seq = 0; seq < 20; ++seq) {  // one turn, more groups than --cache-groups
    add_group(seq, "x");
  }
  clock_.advance(Duration::zero());
  EXPECT_EQ(seen.size(), 20u);
  EXPECT_LT(track_->cached_groups(), 20u);
  track_->remove_listener(&l);
  EXPECT_CALL(source_, stop_track(_));
}

TEST_F(TrackTest, ChangesPendingAtTheEndAreToldBeforeTheEnd) {
  StrictMock<MockTrackListener> l;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&l);
  testing::InSequence order;
  EXPECT_CALL(l, on_track_data(_)).Times(2);  // the group at once, its frame before the end
  EXPECT_CALL(l, on_track_ended(_, _));
  EXPECT_CALL(source_, stop_track(_));
  add_group(0, "a");
  track_->end(make_error(ErrorCode::kCancel, "done"));
}

TEST_F(TrackTest, ListenerMayRemoveItselfWhileNotified) {
  StrictMock<MockTrackListener> a, b, c;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&a);
  track_->add_listener(&b);
  track_->add_listener(&c);
  EXPECT_CALL(a, on_track_data(_)).WillOnce(Invoke([&](Track& t) { t.remove_listener(&a); }));
  EXPECT_CALL(b, on_track_data(_));
  EXPECT_CALL(c, on_track_data(_));
  track_->begin_group(0);
  clock_.advance(Duration::zero());
  EXPECT_EQ(track_->listener_count(), 2u);
  EXPECT_CALL(b, on_track_data(_));
  EXPECT_CALL(c, on_track_data(_));
  track_->begin_group(1);
  clock_.advance(Duration::zero());
  track_->remove_listener(&b);
  track_->remove_listener(&c);
  EXPECT_CALL(source_, stop_track(_));
}

TEST_F(TrackTest, FirstListenerStartsTheSourceOnce) {
  StrictMock<MockTrackListener> a, b;
  EXPECT_CALL(source_, start_track(testing::Ref(*track_)));
  track_->add_listener(&a);
  track_->add_listener(&b);
  EXPECT_TRUE(track_->is_upstream_active());
  track_->remove_listener(&a);
  track_->remove_listener(&b);
  EXPECT_CALL(source_, stop_track(_));
}

// A listener that records what on_track_demand told it; `wants` is its wants_data().
class DemandRecorder final : public TrackListener {
 public:
  explicit DemandRecorder(bool wants) : wants_(wants) {}
  void on_track_data(Track&) override {}
  void on_track_ended(Track&, Error) override {}
  bool wants_data() const override { return wants_; }
  void on_track_demand(Track&, bool demanded) override { told.push_back(demanded); }
  std::vector<bool> told;

 private:
  bool wants_;
};

TEST_F(TrackTest, DemandIsToldWhenItGoesBetweenNoneAndSome) {
  // A hold (wants no data, ietf_publish.h) is no demand: the first viewer brings demand, a second
  // changes nothing, the last one leaving takes it away; each change told to every listener.
  EXPECT_CALL(source_, start_track(_));
  DemandRecorder hold(false), a(true), b(true);
  track_->add_listener(&hold);
  EXPECT_EQ(track_->demand_count(), 0u);
  EXPECT_TRUE(hold.told.empty());
  track_->add_listener(&a);
  EXPECT_EQ(hold.told, (std::vector<bool>{true}));
  track_->add_listener(&b);
  track_->remove_listener(&a);
  EXPECT_EQ(hold.told, (std::vector<bool>{true}));
  EXPECT_EQ(track_->demand_count(), 1u);
  track_->remove_listener(&b);
  EXPECT_EQ(hold.told, (std::vector<bool>{true, false}));
  // `a` was told the demand its own arrival made (and not its going); `b` came to a track that
  // had demand and left it with none: told nothing.
  EXPECT_EQ(a.told, (std::vector<bool>{true}));
  EXPECT_TRUE(b.told.empty());
  EXPECT_EQ(track_->demand_count(), 0u);
  // The end tells no demand change.
  track_->add_listener(&a);
  EXPECT_CALL(source_, stop_track(_));
  track_->end(Error{});
  EXPECT_EQ(hold.told, (std::vector<bool>{true, false, true}));
}

TEST_F(TrackTest, RejoinWithinLingerDoesNotRestartTheSource) {
  StrictMock<MockTrackListener> a;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&a);
  track_->remove_listener(&a);
  clock_.advance(seconds(4));
  track_->add_listener(&a);
  EXPECT_EQ(clock_.pending_timers(), 0u);
  clock_.advance(seconds(10));
  EXPECT_TRUE(track_->is_upstream_active());
  EXPECT_EQ(idle_calls_, 0);
  // A second leave gets a full linger of its own.
  track_->remove_listener(&a);
  clock_.advance(seconds(4));
  track_->add_listener(&a);
  track_->remove_listener(&a);
  clock_.advance(seconds(4));
  EXPECT_TRUE(track_->is_upstream_active());
  EXPECT_CALL(source_, stop_track(_));
  clock_.advance(seconds(1));
  EXPECT_EQ(idle_calls_, 1);
}

TEST_F(TrackTest, LingerExpiryStopsTheSourceOnceAndReportsIdle) {
  StrictMock<MockTrackListener> a;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&a);
  track_->remove_listener(&a);
  clock_.advance(seconds(4));
  EXPECT_EQ(idle_calls_, 0);
  EXPECT_CALL(source_, stop_track(_)).Times(1);
  clock_.advance(seconds(1));
  EXPECT_EQ(idle_calls_, 1);
  EXPECT_EQ(track_, nullptr);  // the idle callback destroyed it
  clock_.advance(seconds(60));
  EXPECT_EQ(idle_calls_, 1);
}

TEST_F(TrackTest, EndNotifiesAndRemovesEveryListener) {
  StrictMock<MockTrackListener> a, b;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&a);
  track_->add_listener(&b);
  Error reason = make_error(ErrorCode::kClosed, "test");
  EXPECT_CALL(a, on_track_ended(_, reason)).WillOnce(Invoke([&](Track& t, Error) {
    EXPECT_EQ(t.listener_count(), 1u);
    t.remove_listener(&a);  // already removed: a no-op
  }));
  EXPECT_CALL(b, on_track_ended(_, reason));
  EXPECT_CALL(source_, stop_track(_));
  track_->end(reason);
  EXPECT_TRUE(track_->is_ended());
  EXPECT_EQ(track_->listener_count(), 0u);
  EXPECT_FALSE(track_->is_upstream_active());
  // Producer and consumer calls after end are no-ops.
  EXPECT_EQ(track_->begin_group(0), nullptr);
  track_->add_listener(&a);
  EXPECT_EQ(track_->listener_count(), 0u);
  track_->end(reason);
  clock_.advance(Duration::zero());
  EXPECT_EQ(idle_calls_, 1);
  EXPECT_EQ(track_, nullptr);
}

TEST_F(TrackTest, SourceEndingTheTrackGetsOneStop) {
  StrictMock<MockTrackListener> a;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&a);
  EXPECT_CALL(a, on_track_ended(_, _));
  EXPECT_CALL(source_, stop_track(_)).WillOnce(Invoke([](Track& t) {
    t.end(make_error(ErrorCode::kCancel, "re-entrant"));
  }));
  track_->end(make_error(ErrorCode::kClosed, "publisher finished"));
}

TEST_F(TrackTest, FinishInsideAnObjectAbortsTheGroup) {
  Group* g = track_->begin_group(0);
  track_->begin_object(*g, 10);
  track_->append_chunk(*g, Bytes::copy("abc"));
  track_->finish_group(*g);
  EXPECT_TRUE(g->is_aborted());
}

TEST_F(TrackTest, DestroyingAnActiveTrackStopsItsSource) {
  StrictMock<MockTrackListener> a;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&a);
  track_->remove_listener(&a);
  EXPECT_CALL(source_, stop_track(_));
  track_.reset();
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

// A relay whose upstream path died moves the track to another path (cluster failover): the groups
// still open from the old path can never finish and are aborted, and whatever the new path sends
// at or below the newest sequence the old one delivered is refused, so no viewer gets a group twice
// or sees one replayed.
TEST_F(TrackTest, SwitchSourceAbortsOpenGroupsAndRefusesWhatTheNewPathReplays) {
  testing::NiceMock<MockTrackListener> viewer;
  StrictMock<MockTrackSource> next;
  EXPECT_CALL(source_, start_track(_));
  track_->add_listener(&viewer);
  ASSERT_NE(add_group(1, "a"), nullptr);
  Group* open = add_group(2, "b", /*finish=*/false);
  ASSERT_NE(open, nullptr);

  EXPECT_CALL(source_, stop_track(_));
  EXPECT_CALL(next, start_track(testing::Ref(*track_)));
  track_->switch_source(&next);
  testing::Mock::VerifyAndClearExpectations(&source_);
  EXPECT_TRUE(open->is_aborted());
  EXPECT_EQ(track_->begin_group(2), nullptr);
  EXPECT_EQ(track_->begin_group(1), nullptr);
  EXPECT_EQ(track_->begin_group(0), nullptr);
  EXPECT_NE(add_group(3, "c"), nullptr);
  EXPECT_EQ(cached_sequences(), (std::vector<uint64_t>{1, 2, 3}));

  track_->remove_listener(&viewer);
  EXPECT_CALL(next, stop_track(_));
  track_.reset();
}

}  // namespace
}  // namespace moqd::model
