#include "model/origin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/test_mocks.h"

namespace moqd::model {
namespace {

using std::chrono::seconds;
using testing::_;
using testing::InSequence;
using testing::Invoke;
using testing::StrictMock;

class OriginTest : public testing::Test {
 protected:
  OriginTest() : origin_(OriginConfig{.upstream_linger = seconds(5)}, clock_, clock_) {}

  // Sources and listeners outlive the Origin, as sessions must.
  ManualClock clock_;
  FakeBroadcastSource alice_, alice2_, alice3_;
  StrictMock<MockAnnounceListener> discovery_;
  Origin origin_;
};

TEST_F(OriginTest, ListenerGetsSnapshotThenLiveUpdatesUnderItsPrefix) {
  origin_.announce("foo/a", &alice_, distinct_hops(2));
  origin_.announce("foobar", &alice2_);
  origin_.announce("foo", &alice3_);
  {
    InSequence order;
    EXPECT_CALL(discovery_, on_announce_n("foo", true, 0));
    EXPECT_CALL(discovery_, on_announce_n("foo/a", true, 2));
  }
  origin_.add_listener("/foo/", &discovery_);

  EXPECT_CALL(discovery_, on_announce_n("foo/b/c", true, 1));
  origin_.announce("foo//b/c/", &alice_, distinct_hops(1));
  origin_.announce("foobaz", &alice_);  // not under "foo"
  EXPECT_CALL(discovery_, on_announce_n("foo/a", false, 2));
  origin_.unannounce("/foo/a", &alice_);

  origin_.remove_listener(&discovery_);
  origin_.announce("foo/d", &alice_);
  EXPECT_EQ(origin_.active_paths("foo"), (std::vector<std::string>{"foo", "foo/b/c", "foo/d"}));
  EXPECT_EQ(origin_.active_paths("").size(), 5u);
}

TEST_F(OriginTest, PathsAreNormalised) {
  origin_.announce("//room/alice/", &alice_);
  EXPECT_TRUE(origin_.is_active("room/alice"));
  EXPECT_TRUE(origin_.is_active("/room//alice"));
  EXPECT_FALSE(origin_.is_active("room"));
  EXPECT_EQ(origin_.broadcast_count(), 1u);
}

TEST_F(OriginTest, TrackIsNullForAnInactiveBroadcast) {
  EXPECT_EQ(origin_.track("room/alice", "video"), nullptr);
  origin_.announce("room/alice", &alice_);
  origin_.unannounce("room/alice", &alice_);
  EXPECT_EQ(origin_.track("room/alice", "video"), nullptr);
  EXPECT_EQ(origin_.broadcast_count(), 0u);
}

TEST_F(OriginTest, TrackIsSharedAndDestroyedAfterLinger) {
  origin_.announce("room/alice", &alice_);
  Track* t = origin_.track("/room/alice", "video");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->broadcast(), "room/alice");
  EXPECT_EQ(origin_.track("room/alice", "video"), t);
  EXPECT_EQ(t->source(), &alice_.tracks);

  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(alice_.tracks, start_track(testing::Ref(*t)));
  t->add_listener(&sub);
  t->remove_listener(&sub);
  clock_.advance(seconds(4));
  EXPECT_EQ(origin_.track_count(), 1u);
  EXPECT_CALL(alice_.tracks, stop_track(_));
  clock_.advance(seconds(1));
  EXPECT_EQ(origin_.track_count(), 0u);
}

TEST_F(OriginTest, DuplicatePublisherSwitchEndsTracksAndEmitsEndedThenActive) {
  origin_.announce("room/alice", &alice_, distinct_hops(1));
  EXPECT_CALL(discovery_, on_announce_n("room/alice", true, 1));
  origin_.add_listener("room", &discovery_);
  Track* old_track = origin_.track("room/alice", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(alice_.tracks, start_track(_));
  old_track->add_listener(&sub);

  {
    InSequence order;
    EXPECT_CALL(sub, on_track_ended(_, make_error(ErrorCode::kClosed, "")));
    EXPECT_CALL(alice_.tracks, stop_track(testing::Ref(*old_track)));
    EXPECT_CALL(discovery_, on_announce_n("room/alice", false, 1));
    EXPECT_CALL(discovery_, on_announce_n("room/alice", true, 0));
  }
  origin_.announce("room/alice", &alice2_);

  Track* fresh = origin_.track("room/alice", "video");
  ASSERT_NE(fresh, nullptr);
  EXPECT_NE(fresh, old_track);
  EXPECT_EQ(fresh->source(), &alice2_.tracks);
  EXPECT_EQ(origin_.track_count(), 2u);
  clock_.advance(Duration::zero());  // the ended track is destroyed from a timer
  EXPECT_EQ(origin_.track_count(), 1u);
  EXPECT_EQ(origin_.broadcast_count(), 1u);
  origin_.remove_listener(&discovery_);
}

TEST_F(OriginTest, SubscriberMayResubscribeFromInsideTrackEnded) {
  origin_.announce("room/alice", &alice_);
  Track* old_track = origin_.track("room/alice", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(alice_.tracks, start_track(_));
  old_track->add_listener(&sub);
  Track* fresh = nullptr;
  EXPECT_CALL(sub, on_track_ended(_, _)).WillOnce(Invoke([&](Track&, Error) {
    fresh = origin_.track("room/alice", "video");
    fresh->add_listener(&sub);
  }));
  EXPECT_CALL(alice2_.tracks, start_track(_));
  EXPECT_CALL(alice_.tracks, stop_track(_));
  origin_.announce("room/alice", &alice2_);
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->listener_count(), 1u);
  fresh->remove_listener(&sub);
  EXPECT_CALL(alice2_.tracks, stop_track(_));
}

TEST_F(OriginTest, BackupTakesOverWhenTheActivePublisherLeaves) {
  origin_.announce("room/alice", &alice_, distinct_hops(3));
  origin_.announce("room/alice", &alice2_, distinct_hops(2));
  origin_.announce("room/alice", &alice3_, distinct_hops(1));
  Track* t = origin_.track("room/alice", "video");
  EXPECT_EQ(t->source(), &alice3_.tracks);
  EXPECT_CALL(discovery_, on_announce_n("room/alice", true, 1));
  origin_.add_listener("", &discovery_);

  // A backup leaving changes nothing visible.
  origin_.unannounce("room/alice", &alice2_);
  EXPECT_EQ(origin_.track("room/alice", "video"), t);

  {
    InSequence order;
    EXPECT_CALL(discovery_, on_announce_n("room/alice", false, 1));
    EXPECT_CALL(discovery_, on_announce_n("room/alice", true, 3));
  }
  origin_.unannounce("room/alice", &alice3_);
  EXPECT_TRUE(t->is_ended());
  Track* next = origin_.track("room/alice", "video");
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->source(), &alice_.tracks);
  origin_.remove_listener(&discovery_);
}

TEST_F(OriginTest, MostRecentBackupTakesOver) {
  origin_.announce("p", &alice_);
  origin_.announce("p", &alice2_);
  origin_.announce("p", &alice3_);
  origin_.unannounce("p", &alice3_);
  EXPECT_EQ(origin_.track("p", "t")->source(), &alice2_.tracks);
}

TEST_F(OriginTest, LastPublisherLeavingEndsTracksAndEmitsEnded) {
  origin_.announce("room/alice", &alice_);
  EXPECT_CALL(discovery_, on_announce_n("room/alice", true, 0));
  origin_.add_listener("room", &discovery_);
  Track* t = origin_.track("room/alice", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(alice_.tracks, start_track(_));
  t->add_listener(&sub);
  {
    InSequence order;
    EXPECT_CALL(sub, on_track_ended(_, make_error(ErrorCode::kClosed, "")));
    EXPECT_CALL(alice_.tracks, stop_track(_));
    EXPECT_CALL(discovery_, on_announce_n("room/alice", false, 0)).WillOnce(Invoke([&] {
      EXPECT_FALSE(origin_.is_active("room/alice"));
    }));
  }
  origin_.unannounce("room/alice", &alice_);
  EXPECT_EQ(origin_.broadcast_count(), 0u);
  clock_.advance(Duration::zero());
  EXPECT_EQ(origin_.track_count(), 0u);
  origin_.remove_listener(&discovery_);
}

TEST_F(OriginTest, TrackEndedByItsSourceIsReplacedOnNextRequest) {
  origin_.announce("room/alice", &alice_);
  Track* t = origin_.track("room/alice", "video");
  t->end(make_error(ErrorCode::kCancel, "publisher finished"));
  Track* fresh = origin_.track("room/alice", "video");
  EXPECT_NE(fresh, t);
  EXPECT_FALSE(fresh->is_ended());
  clock_.advance(Duration::zero());
  EXPECT_EQ(origin_.track_count(), 1u);
  EXPECT_EQ(origin_.track("room/alice", "video"), fresh);
}

TEST_F(OriginTest, DiscoveryListenerMayRemoveItselfWhileNotified) {
  StrictMock<MockAnnounceListener> other;
  origin_.add_listener("", &discovery_);
  origin_.add_listener("", &other);
  EXPECT_CALL(discovery_, on_announce_n("a", true, 0)).WillOnce(Invoke([&] {
    origin_.remove_listener(&discovery_);
  }));
  EXPECT_CALL(other, on_announce_n("a", true, 0));
  origin_.announce("a", &alice_);
  EXPECT_CALL(other, on_announce_n("b", true, 0));
  origin_.announce("b", &alice_);
  origin_.remove_listener(&other);
}

TEST_F(OriginTest, ReannouncingTheActivePublisherIsANoOp) {
  origin_.announce("a", &alice_);
  EXPECT_CALL(discovery_, on_announce_n("a", true, 0));
  origin_.add_listener("a", &discovery_);
  testing::Mock::VerifyAndClearExpectations(&discovery_);
  origin_.announce("a", &alice_);
  origin_.unannounce("a", &alice2_);  // never announced: a no-op
  EXPECT_TRUE(origin_.is_active("a"));
  origin_.remove_listener(&discovery_);
}

// Routes of a cluster (relay/cluster.h): fewest hops plus cost wins, the smaller hop list on a
// tie, whatever the announcement order; a backup route appearing changes nothing visible.
TEST_F(OriginTest, ShortestCheapestRouteWinsWithADeterministicTieBreak) {
  FakeBroadcastSource via_b, via_d, via_e;
  origin_.add_listener("", &discovery_);
  EXPECT_CALL(discovery_, on_announce_n("p", true, 3));
  origin_.announce("p", &via_b, Hops{7, 8, 9});
  {
    InSequence order;
    EXPECT_CALL(discovery_, on_announce_n("p", false, 3));
    EXPECT_CALL(discovery_, on_announce_n("p", true, 2));
  }
  origin_.announce("p", &via_d, Hops{7, 5});
  testing::Mock::VerifyAndClearExpectations(&discovery_);
  // Same score (2) but a larger list: a backup, nothing visible changes.
  origin_.announce("p", &via_e, Hops{7, 6});
  EXPECT_EQ(origin_.active_source("p"), &via_d);
  // Same score and a smaller list: it wins, whichever came first.
  FakeBroadcastSource via_f;
  EXPECT_CALL(discovery_, on_announce_n("p", false, 2));
  EXPECT_CALL(discovery_, on_announce_n("p", true, 2));
  origin_.announce("p", &via_f, Hops{7, 4});
  EXPECT_EQ(origin_.active_source("p"), &via_f);
  testing::Mock::VerifyAndClearExpectations(&discovery_);
  // A cost makes a short route dearer than a long one.
  EXPECT_CALL(discovery_, on_announce_n("p", false, 2));
  EXPECT_CALL(discovery_, on_announce_n("p", true, 2));
  origin_.unannounce("p", &via_f);
  EXPECT_EQ(origin_.active_source("p"), &via_d);
  testing::Mock::VerifyAndClearExpectations(&discovery_);
  EXPECT_CALL(discovery_, on_announce_n(_, _, _)).Times(testing::AnyNumber());
  origin_.announce("p", &via_d, Hops{7, 5}, 5);
  origin_.announce("p", &via_e, Hops{7, 6}, 5);
  EXPECT_EQ(origin_.active_source("p"), &via_b);
  auto routes = origin_.routes("p");
  ASSERT_EQ(routes.size(), 3u);
  EXPECT_EQ(routes[0].source, &via_b);
  EXPECT_TRUE(routes[0].active);
  EXPECT_EQ(routes[1].source, &via_d);
  EXPECT_EQ(routes[1].cost, 5u);
  EXPECT_FALSE(routes[1].active);
  for (auto* s : {&via_b, &via_d, &via_e}) {
    origin_.unannounce("p", s);
  }
  origin_.remove_listener(&discovery_);
}

// A local publisher beats any relayed route, and among local publishers the newest still wins.
TEST_F(OriginTest, LocalPublisherBeatsRelayedRoutes) {
  FakeBroadcastSource via_b;
  origin_.announce("p", &alice_);
  origin_.announce("p", &via_b, Hops{1});
  EXPECT_EQ(origin_.active_source("p"), &alice_);
  origin_.announce("p", &alice2_);
  EXPECT_EQ(origin_.active_source("p"), &alice2_);
  origin_.unannounce("p", &alice2_);
  origin_.unannounce("p", &alice_);
  EXPECT_EQ(origin_.active_source("p"), &via_b);
  origin_.unannounce("p", &via_b);
}

// When the active route dies and another route from the same origin relay remains, the track
// is not ended: it moves to the new route (stop on the old source, start on the new), its
// listener stays, and only groups newer than those already seen are taken from the new route.
TEST_F(OriginTest, DeadRouteMovesTracksToAnotherRouteOfTheSameOrigin) {
  FakeBroadcastSource via_b, via_d;
  origin_.announce("p", &via_b, Hops{42, 2});
  origin_.announce("p", &via_d, Hops{42, 4, 5});
  EXPECT_CALL(discovery_, on_announce_n("p", true, 2));
  origin_.add_listener("", &discovery_);
  testing::Mock::VerifyAndClearExpectations(&discovery_);
  Track* t = origin_.track("p", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(via_b.tracks, start_track(testing::Ref(*t)));
  t->add_listener(&sub);
  EXPECT_CALL(sub, on_track_data(_)).Times(testing::AnyNumber());
  Group* g5 = t->begin_group(5);
  t->finish_group(*t->begin_group(4));
  t->begin_object(*g5, 3);
  {
    InSequence order;
    EXPECT_CALL(via_b.tracks, stop_track(testing::Ref(*t)));
    EXPECT_CALL(via_d.tracks, start_track(testing::Ref(*t)));
    EXPECT_CALL(discovery_, on_announce_n("p", false, 2));
    EXPECT_CALL(discovery_, on_announce_n("p", true, 3));
  }
  origin_.unannounce("p", &via_b);
  EXPECT_FALSE(t->is_ended());
  EXPECT_EQ(origin_.track("p", "video"), t);
  EXPECT_EQ(t->source(), &via_d.tracks);
  EXPECT_TRUE(g5->is_aborted());  // the group the dead route was sending
  EXPECT_EQ(t->begin_group(5), nullptr);  // the new route's copy of it: a duplicate
  EXPECT_EQ(t->begin_group(3), nullptr);  // older than what listeners had: out of order
  EXPECT_NE(t->begin_group(6), nullptr);
  // A route from another origin relay is another publisher: its switch ends the track.
  FakeBroadcastSource other;
  origin_.announce("p", &other, Hops{99, 1, 2, 3});  // a backup (4 hops)
  EXPECT_CALL(sub, on_track_ended(_, _));
  EXPECT_CALL(via_d.tracks, stop_track(_));
  EXPECT_CALL(discovery_, on_announce_n(_, _, _)).Times(testing::AnyNumber());
  origin_.unannounce("p", &via_d);
  EXPECT_TRUE(t->is_ended());
  origin_.unannounce("p", &other);
  origin_.remove_listener(&discovery_);
}

// Relays whose warm_key() for `path` is below (`lower`) or above this relay's own.
struct Siblings {
  uint64_t lower = 0, higher = 0;
};
Siblings siblings_of(const std::string& path, uint64_t self) {
  Siblings s;
  for (uint64_t id = 100; s.lower == 0 || s.higher == 0; ++id) {
    (warm_key(path, id) < warm_key(path, self) ? s.lower : s.higher) = id;
  }
  return s;
}

// Path choice with warm copies (kWarmHop): a route's distance counts from the nearest warm copy
// whose relay keys below this one, so a cold route through a sibling, or a warm one from a
// sibling keying above, counts every hop; on equal scores the nearer copy (the smaller hop list)
// wins, as without warm marks; the link cost adds.
TEST(OriginWarmTest, WarmSiblingIsNearerOnlyWhenItKeysLower) {
  const uint64_t self = 7;
  ManualClock clock;
  Origin origin(OriginConfig{.hop_id = self}, clock, clock);
  const Siblings sib = siblings_of("p", self);
  EXPECT_EQ(route_distance("p", Hops{42, sib.lower | kWarmHop}, self), 1u);
  EXPECT_EQ(route_distance("p", Hops{42, sib.lower}, self), 2u);
  EXPECT_EQ(route_distance("p", Hops{42, sib.higher | kWarmHop}, self), 2u);
  EXPECT_EQ(route_distance("p", Hops{42, sib.lower | kWarmHop, 9}, self), 2u);
  EXPECT_EQ(route_distance("p", Hops{42 | kWarmHop}, self), 1u);  // the origin relay is no sibling
  EXPECT_EQ(route_distance("p", Hops{42, sib.lower | kWarmHop}, 0), 2u);  // not a relay

  // The origin relay over a dearer link (cost 1: score 2) against siblings over free links.
  FakeBroadcastSource direct, via_cold, via_lower, via_higher;
  origin.announce("p", &direct, Hops{42}, 1);
  origin.announce("p", &via_cold, Hops{42, sib.lower});
  origin.announce("p", &via_higher, Hops{42, sib.higher | kWarmHop});
  EXPECT_EQ(origin.active_source("p"), &direct);  // every score 2: the smaller hop list
  origin.announce("p", &via_lower, Hops{42, sib.lower | kWarmHop});
  EXPECT_EQ(origin.active_source("p"), &via_lower);  // score 1: the warm copy next door
  origin.announce("p", &direct, Hops{42});
  EXPECT_EQ(origin.active_source("p"), &direct);  // as near over an as cheap link: the origin
  origin.announce("p", &via_lower, Hops{42, sib.lower});
  origin.announce("p", &direct, Hops{42}, 1);
  EXPECT_EQ(origin.active_source("p"), &direct);  // the sibling went cold
  for (auto* s : {&direct, &via_cold, &via_lower, &via_higher}) {
    origin.unannounce("p", s);
  }
}

// A hop id with a bit above 52 set is not moqd's (moqd's are below 2^52): another relay
// implementation's (e.g. a random 62-bit id) or a bad peer's. Bit 52 in it is part of the id, not
// a warm mark: it discounts no route and names a relay other than the same bits without it.
TEST(OriginWarmTest, ForeignHopIdWithBit52SetIsNoWarmMark) {
  const uint64_t self = 7;
  const Siblings sib = siblings_of("p", self);
  const uint64_t foreign = (uint64_t{1} << 60) | kWarmHop | sib.lower;
  EXPECT_FALSE(is_warm_hop(foreign));
  EXPECT_EQ(hop_relay(foreign), foreign);
  EXPECT_EQ(route_distance("p", Hops{42, foreign}, self), 2u);
  EXPECT_FALSE(hops_contain(Hops{42, foreign}, sib.lower));
  EXPECT_FALSE(hops_contain(Hops{42, sib.lower}, foreign));
  // The form moqd sends still is one.
  EXPECT_TRUE(is_warm_hop(sib.lower | kWarmHop));
  EXPECT_EQ(hop_relay(sib.lower | kWarmHop), sib.lower);
  EXPECT_EQ(route_distance("p", Hops{42, sib.lower | kWarmHop}, self), 1u);

  ManualClock clock;
  Origin origin(OriginConfig{.hop_id = self}, clock, clock);
  FakeBroadcastSource direct, via_foreign;
  origin.announce("p", &direct, Hops{42}, 1);
  origin.announce("p", &via_foreign, Hops{42, foreign});
  // Both score 2: the smaller hop list; read as warm, the foreign route would have scored 1.
  EXPECT_EQ(origin.active_source("p"), &direct);
  origin.unannounce("p", &direct);
  origin.unannounce("p", &via_foreign);
}

// Two relays that both pull a broadcast and see each other's warm copy: exactly one of them may
// move onto the other's, for any pair and any path, so they never pull from each other.
TEST(OriginWarmTest, OfTwoWarmRelaysExactlyOneMayPullFromTheOther) {
  for (const char* path : {"p", "room/alice", "live/event-42"}) {
    for (uint64_t a = 1; a < 40; ++a) {
      for (uint64_t b = a + 1; b < 40; ++b) {
        bool a_moves = route_distance(path, Hops{99, b | kWarmHop}, a) == 1;
        bool b_moves = route_distance(path, Hops{99, a | kWarmHop}, b) == 1;
        EXPECT_NE(a_moves, b_moves) << path << " " << a << " " << b;
      }
    }
  }
}

// A relay peer re-announcing the active route with other hops (a warm mark came): the tracks
// keep their subscription through the same source (no stop, no start), and listeners hear the
// path active again with the new hops, not ended.
TEST_F(OriginTest, NewHopsOfTheActiveSourceKeepItsTracks) {
  FakeBroadcastSource via_b;
  origin_.announce("p", &via_b, Hops{42, 2});
  EXPECT_CALL(discovery_, on_announce_n("p", true, 2));
  origin_.add_listener("", &discovery_);
  Track* t = origin_.track("p", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(via_b.tracks, start_track(testing::Ref(*t)));
  t->add_listener(&sub);
  testing::Mock::VerifyAndClearExpectations(&via_b.tracks);
  EXPECT_CALL(discovery_, on_announce_n("p", true, 2));
  origin_.announce("p", &via_b, Hops{42, 2 | kWarmHop});
  EXPECT_FALSE(t->is_ended());
  EXPECT_EQ(origin_.track("p", "video"), t);
  EXPECT_EQ(origin_.routes("p").at(0).hops, (Hops{42, 2 | kWarmHop}));
  EXPECT_EQ(discovery_.seen.back().hops, (Hops{42, 2 | kWarmHop}));
  EXPECT_CALL(sub, on_track_ended(_, _));
  EXPECT_CALL(via_b.tracks, stop_track(_));
  EXPECT_CALL(discovery_, on_announce_n("p", false, 2));
  origin_.unannounce("p", &via_b);
  origin_.remove_listener(&discovery_);
}

// A relayed broadcast is carried while it has tracks (an upstream subscription, lingering included):
// listeners hear when the first track comes and when the last one goes. A local publisher's
// broadcast is never "carried": its relay is the origin.
TEST_F(OriginTest, CarryingFollowsTheTracksOfARelayedBroadcast) {
  FakeBroadcastSource via_b;
  origin_.announce("p", &via_b, Hops{42});
  origin_.announce("local", &alice_);
  EXPECT_CALL(discovery_, on_announce_n(_, true, _)).Times(2);
  origin_.add_listener("", &discovery_);
  EXPECT_FALSE(origin_.is_carrying("p"));
  Track* t = origin_.track("p", "video");
  EXPECT_TRUE(origin_.is_carrying("p"));
  Track* t2 = origin_.track("p", "audio");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(via_b.tracks, start_track(_)).Times(2);
  t->add_listener(&sub);
  t2->add_listener(&sub);
  Track* l = origin_.track("local", "video");
  EXPECT_CALL(alice_.tracks, start_track(_));
  l->add_listener(&sub);
  EXPECT_FALSE(origin_.is_carrying("local"));
  EXPECT_EQ(discovery_.carrying_seen, (std::vector<std::pair<std::string, bool>>{{"p", true}}));
  EXPECT_CALL(via_b.tracks, stop_track(_)).Times(2);
  EXPECT_CALL(alice_.tracks, stop_track(_));
  t->remove_listener(&sub);
  t2->remove_listener(&sub);
  l->remove_listener(&sub);
  clock_.advance(seconds(4));
  EXPECT_TRUE(origin_.is_carrying("p"));  // lingering: the upstream subscription is still open
  clock_.advance(seconds(2));
  EXPECT_FALSE(origin_.is_carrying("p"));
  EXPECT_EQ(discovery_.carrying_seen,
            (std::vector<std::pair<std::string, bool>>{{"p", true}, {"p", false}}));
  origin_.remove_listener(&discovery_);
}

}  // namespace
}  // namespace moqd::model
