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
  origin_.announce("foo/a", &alice_, 2);
  origin_.announce("foobar", &alice2_);
  origin_.announce("foo", &alice3_);
  {
    InSequence order;
    EXPECT_CALL(discovery_, on_announce("foo", true, 0));
    EXPECT_CALL(discovery_, on_announce("foo/a", true, 2));
  }
  origin_.add_listener("/foo/", &discovery_);

  EXPECT_CALL(discovery_, on_announce("foo/b/c", true, 1));
  origin_.announce("foo//b/c/", &alice_, 1);
  origin_.announce("foobaz", &alice_);  // not under "foo"
  EXPECT_CALL(discovery_, on_announce("foo/a", false, 2));
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
  origin_.announce("room/alice", &alice_, 1);
  EXPECT_CALL(discovery_, on_announce("room/alice", true, 1));
  origin_.add_listener("room", &discovery_);
  Track* old_track = origin_.track("room/alice", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(alice_.tracks, start_track(_));
  old_track->add_listener(&sub);

  {
    InSequence order;
    EXPECT_CALL(sub, on_track_ended(_, make_error(ErrorCode::kClosed, "")));
    EXPECT_CALL(alice_.tracks, stop_track(testing::Ref(*old_track)));
    EXPECT_CALL(discovery_, on_announce("room/alice", false, 1));
    EXPECT_CALL(discovery_, on_announce("room/alice", true, 0));
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
  origin_.announce("room/alice", &alice_, 3);
  origin_.announce("room/alice", &alice2_, 2);
  origin_.announce("room/alice", &alice3_, 1);
  Track* t = origin_.track("room/alice", "video");
  EXPECT_EQ(t->source(), &alice3_.tracks);
  EXPECT_CALL(discovery_, on_announce("room/alice", true, 1));
  origin_.add_listener("", &discovery_);

  // A backup leaving changes nothing visible.
  origin_.unannounce("room/alice", &alice2_);
  EXPECT_EQ(origin_.track("room/alice", "video"), t);

  {
    InSequence order;
    EXPECT_CALL(discovery_, on_announce("room/alice", false, 1));
    EXPECT_CALL(discovery_, on_announce("room/alice", true, 3));
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
  EXPECT_CALL(discovery_, on_announce("room/alice", true, 0));
  origin_.add_listener("room", &discovery_);
  Track* t = origin_.track("room/alice", "video");
  StrictMock<MockTrackListener> sub;
  EXPECT_CALL(alice_.tracks, start_track(_));
  t->add_listener(&sub);
  {
    InSequence order;
    EXPECT_CALL(sub, on_track_ended(_, make_error(ErrorCode::kClosed, "")));
    EXPECT_CALL(alice_.tracks, stop_track(_));
    EXPECT_CALL(discovery_, on_announce("room/alice", false, 0)).WillOnce(Invoke([&] {
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
  EXPECT_CALL(discovery_, on_announce("a", true, 0)).WillOnce(Invoke([&] {
    origin_.remove_listener(&discovery_);
  }));
  EXPECT_CALL(other, on_announce("a", true, 0));
  origin_.announce("a", &alice_);
  EXPECT_CALL(other, on_announce("b", true, 0));
  origin_.announce("b", &alice_);
  origin_.remove_listener(&other);
}

TEST_F(OriginTest, ReannouncingTheActivePublisherIsANoOp) {
  origin_.announce("a", &alice_);
  EXPECT_CALL(discovery_, on_announce("a", true, 0));
  origin_.add_listener("a", &discovery_);
  testing::Mock::VerifyAndClearExpectations(&discovery_);
  origin_.announce("a", &alice_);
  origin_.unannounce("a", &alice2_);  // never announced: a no-op
  EXPECT_TRUE(origin_.is_active("a"));
  origin_.remove_listener(&discovery_);
}

}  // namespace
}  // namespace moqd::model
