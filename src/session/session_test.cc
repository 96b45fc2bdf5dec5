// Session behaviour end to end: a server-role and a client-role Session over two MuxSessions on a
// FakeChannelPair (tests/testing/session_fixture.h), parameterised over the moq-lite drafts.
#include "session/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::RawStream;
using moqd::testing::SessionPair;
using moqd::testing::SessionPairOptions;
using moqd::testing::TestBroadcast;
using moqd::testing::VersionCase;
using moqd::testing::pattern_bytes;
using transport::websocket::FrameKind;
using namespace std::chrono_literals;

class AnnounceRecorder final : public model::AnnounceListener {
 public:
  void on_announce(const std::string& path, bool active, const model::Hops&) override {
    events.push_back((active ? "+" : "-") + path);
  }
  std::vector<std::string> events;
};

std::vector<uint64_t> codes_of(const std::vector<transport::websocket::MuxFrame>& frames) {
  std::vector<uint64_t> out;
  for (const auto& f : frames) {
    out.push_back(f.code);
  }
  return out;
}

bool contains(const std::vector<uint64_t>& v, uint64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

class SessionTest : public ::testing::TestWithParam<VersionCase> {
 protected:
  SessionPairOptions options() const { return moqd::testing::options_for(GetParam()); }
  SessionPair& start(SessionPairOptions o) {
    pair_ = std::make_unique<SessionPair>(std::move(o));
    pair_->start();
    return *pair_;
  }
  SessionPair& start() { return start(options()); }
  // Authorizations (Action::kSubscribe) one upstream subscription costs the publisher's side: its
  // SUBSCRIBE, and with lite-05 also the TRACK asked before it.
  size_t subscribe_auths() const { return GetParam().version == wire::Version::kLite05 ? 2 : 1; }
  // The pair delivers (`path` is announced across it), then `sub` subscribes to `path`'s "video" in
  // `origin` and the pair delivers again.
  void subscribe_across(FrameCollector& sub, model::Origin& origin, const std::string& path) {
    pair_->pump();
    ASSERT_TRUE(sub.subscribe(origin, path, "video"));
    pair_->pump();
  }
  void expect_both_up() {
    EXPECT_FALSE(pair_->server_handler().is_closed());
    EXPECT_FALSE(pair_->client_handler().is_closed());
  }
  // A raw bidi stream the server's transport opens to the client, bypassing the server Session.
  RawStream& open_raw_bidi(std::vector<uint8_t> bytes) {
    transport::Stream* s = pair_->server_mux().open_bidi();
    EXPECT_NE(s, nullptr);
    raw_.push_back(std::make_unique<RawStream>(*s, &fin_clock_));
    raw_.back()->write(std::move(bytes));
    return *raw_.back();
  }

  std::unique_ptr<SessionPair> pair_;
  int fin_clock_ = 0;
  std::vector<std::unique_ptr<RawStream>> raw_;
};

INSTANTIATE_TEST_SUITE_P(Versions, SessionTest,
                         ::testing::ValuesIn(moqd::testing::all_version_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// --- setup ---

TEST_P(SessionTest, NegotiatesTheVersionTheProtocolSelects) {
  SessionPair& p = start();
  ASSERT_TRUE(p.server_handler().ready_version.has_value());
  ASSERT_TRUE(p.client_handler().ready_version.has_value());
  EXPECT_EQ(*p.server_handler().ready_version, GetParam().version);
  EXPECT_EQ(*p.client_handler().ready_version, GetParam().version);
  EXPECT_EQ(p.server().version(), GetParam().version);
  EXPECT_EQ(p.client().version(), GetParam().version);
  expect_both_up();
}

TEST_P(SessionTest, NegotiatesOverTheLegacyWebTransportFraming) {
  SessionPairOptions o = options();
  o.framing = transport::websocket::Framing::kWebTransport;
  SessionPair& p = start(std::move(o));
  EXPECT_EQ(p.server().version(), GetParam().version);
  EXPECT_EQ(p.client().version(), GetParam().version);
}

TEST_P(SessionTest, ConnectDeniedClosesWithUnauthorized) {
  auto p = std::make_unique<SessionPair>(options());
  p->server_handler().deny_connect = true;
  p->start();
  ASSERT_TRUE(p->server_handler().closed_reason.has_value());
  EXPECT_EQ(p->server_handler().closed_reason->code, ErrorCode::kUnauthorized);
  ASSERT_TRUE(p->client_handler().closed_reason.has_value());
  EXPECT_EQ(p->client_handler().closed_reason->code, ErrorCode::kUnauthorized);
}

TEST(SessionSetupTest, ServerWhosePeerNeverSendsSetupTimesOut) {
  SessionPairOptions o;
  o.server.limits.setup_timeout = 2s;
  SessionPair p(o);
  p.server().start();  // the client never starts, so no SETUP comes
  p.pump();
  p.advance(1900ms);
  EXPECT_FALSE(p.server_handler().is_closed());
  p.advance(200ms);
  ASSERT_TRUE(p.server_handler().closed_reason.has_value());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kTimeout);
  EXPECT_FALSE(p.server().is_ready());
}

TEST(SessionSetupTest, NoCommonSetupVersionClosesWithVersion) {
  SessionPairOptions o;
  o.server.versions = wire::VersionSet::none();
  o.server.versions.add(wire::Version::kLite02);
  o.client.versions = wire::VersionSet::none();
  o.client.versions.add(wire::Version::kLite01);
  SessionPair p(o);
  p.start();
  ASSERT_TRUE(p.server_handler().closed_reason.has_value());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kVersion);
  ASSERT_TRUE(p.client_handler().closed_reason.has_value());
  EXPECT_EQ(p.client_handler().closed_reason->code, ErrorCode::kVersion);
}

TEST(SessionSetupTest, DisabledAlpnVersionClosesWithVersion) {
  SessionPairOptions o;
  o.protocol = "moq-lite-03";
  o.server.versions = wire::VersionSet::none();
  o.server.versions.add(wire::Version::kLite04);
  SessionPair p(o);
  p.start();
  ASSERT_TRUE(p.server_handler().closed_reason.has_value());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kVersion);
}

// --- discovery ---

TEST_P(SessionTest, PeerBroadcastIsLearnedAndWithdrawn) {
  SessionPair& p = start();
  AnnounceRecorder listener;
  p.server_origin().add_listener("", &listener);
  auto alice = std::make_unique<TestBroadcast>(p.client_origin(), "alice");
  p.pump();
  EXPECT_TRUE(p.server_origin().is_active("alice"));
  EXPECT_EQ(p.server_origin().active_source("alice"), &p.server());
  EXPECT_EQ(listener.events, std::vector<std::string>{"+alice"});
  ASSERT_FALSE(p.server_handler().announces.empty());
  EXPECT_EQ(p.server_handler().announces.back().path, "alice");
  EXPECT_TRUE(p.server_handler().announces.back().active);
  // Split horizon: the client does not learn its own broadcast back.
  EXPECT_TRUE(p.client_handler().announces.empty());

  alice->unannounce();
  p.pump();
  EXPECT_FALSE(p.server_origin().is_active("alice"));
  EXPECT_EQ(listener.events, (std::vector<std::string>{"+alice", "-alice"}));
  p.server_origin().remove_listener(&listener);
  expect_both_up();
}

TEST_P(SessionTest, BroadcastsPublishedBeforeTheSessionAreLearnedAtSetup) {
  auto pair = std::make_unique<SessionPair>(options());
  TestBroadcast early(pair->client_origin(), "early");
  pair->start();
  EXPECT_TRUE(pair->server_origin().is_active("early"));
  early.unannounce();
  pair->pump();
  EXPECT_FALSE(pair->server_origin().is_active("early"));
}

TEST_P(SessionTest, RootMapsPeerPathsIntoTheOrigin) {
  SessionPairOptions o = options();
  o.server.root = "room";
  SessionPair& p = start(std::move(o));
  TestBroadcast alice(p.client_origin(), "alice");
  TestBroadcast bob(p.server_origin(), "room/bob");
  TestBroadcast outside(p.server_origin(), "elsewhere/carol");
  p.pump();
  EXPECT_TRUE(p.server_origin().is_active("room/alice"));
  EXPECT_FALSE(p.server_origin().is_active("alice"));
  EXPECT_TRUE(p.client_origin().is_active("bob"));
  EXPECT_FALSE(p.client_origin().is_active("elsewhere/carol"));
  EXPECT_FALSE(p.client_origin().is_active("carol"));

  // A subscription through the root reaches the right broadcast in both directions.
  FrameCollector at_server;
  ASSERT_TRUE(at_server.subscribe(p.server_origin(), "room/alice", "t"));
  FrameCollector at_client;
  ASSERT_TRUE(at_client.subscribe(p.client_origin(), "bob", "t"));
  p.pump();
  alice.write_group("t", 0, {"from alice"});
  bob.write_group("t", 0, {"from bob"});
  p.pump();
  ASSERT_NE(at_server.group(0), nullptr);
  EXPECT_EQ(at_server.group(0)->frames, std::vector<std::string>{"from alice"});
  ASSERT_NE(at_client.group(0), nullptr);
  EXPECT_EQ(at_client.group(0)->frames, std::vector<std::string>{"from bob"});
  EXPECT_EQ(p.client_handler().auth_count(Action::kSubscribe, "room/bob"), 0u);
  EXPECT_EQ(p.server_handler().auth_count(Action::kSubscribe, "room/bob"), subscribe_auths());
}

TEST_P(SessionTest, PublishDeniedBroadcastIsNotLearned) {
  auto pair = std::make_unique<SessionPair>(options());
  pair->server_handler().deny_publish = true;
  pair->start();
  TestBroadcast alice(pair->client_origin(), "alice");
  pair->pump();
  EXPECT_FALSE(pair->server_origin().is_active("alice"));
  EXPECT_EQ(pair->server_handler().auth_count(Action::kPublish, "alice"), 1u);
  EXPECT_FALSE(pair->server_handler().is_closed());
}

// --- subscriptions ---

// Writes three groups (with an empty frame and a 1 MiB frame in 64 KiB chunks) on `pub` and checks
// that `sub` (subscribed through the other session) gets exactly those bytes.
void expect_round_trip(SessionPair& p, TestBroadcast& pub, FrameCollector& sub) {
  const std::vector<std::string> g0 = {"hello", "", "world"};
  const std::vector<std::string> g1 = {pattern_bytes(1 << 20, 7), "tail"};
  const std::vector<std::string> g2 = {"", pattern_bytes(70'000, 9), ""};
  pub.write_group("video", 0, g0);
  pub.write_group("video", 1, g1);
  p.pump();
  pub.write_group("video", 2, g2);
  p.pump();
  // Unordered subscriptions send newer groups first, so arrival order may differ.
  std::vector<uint64_t> seqs = sub.finished_sequences();
  std::sort(seqs.begin(), seqs.end());
  ASSERT_EQ(seqs, (std::vector<uint64_t>{0, 1, 2}));
  EXPECT_EQ(sub.groups.size(), 3u);
  EXPECT_EQ(sub.group(0)->frames, g0);
  ASSERT_EQ(sub.group(1)->frames.size(), 2u);
  EXPECT_TRUE(sub.group(1)->frames[0] == g1[0]) << "1 MiB frame differs";
  EXPECT_EQ(sub.group(1)->frames[1], "tail");
  EXPECT_EQ(sub.group(2)->frames, g2);
}

TEST_P(SessionTest, ServerSubscriberReceivesClientPublishedBytes) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
  ASSERT_EQ(alice.feed("video").starts, 1);
  expect_round_trip(p, alice, sub);
  expect_both_up();
}

TEST_P(SessionTest, ClientSubscriberReceivesServerPublishedBytes) {
  SessionPair& p = start();
  TestBroadcast bob(p.server_origin(), "bob");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.client_origin(), "bob"));
  ASSERT_EQ(bob.feed("video").starts, 1);
  expect_round_trip(p, bob, sub);
  expect_both_up();
}

// The relay's many viewers: a server session whose peer only subscribes never makes the
// publisher state (upstreams, announced paths, cache budget, rate buckets); the client's, whose
// peer announced and served a track, does.
TEST_P(SessionTest, AViewerOnlySessionNeverMakesThePublisherState) {
  SessionPair& p = start();
  TestBroadcast bob(p.server_origin(), "bob");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.client_origin(), "bob"));
  expect_round_trip(p, bob, sub);
  p.pump();
  EXPECT_FALSE(p.server().has_publisher_state());
  EXPECT_TRUE(p.client().has_publisher_state());
  expect_both_up();
}

TEST_P(SessionTest, RoundTripOverTheLegacyWebTransportFraming) {
  SessionPairOptions o = options();
  o.framing = transport::websocket::Framing::kWebTransport;
  SessionPair& p = start(std::move(o));
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
  expect_round_trip(p, alice, sub);
}

// qmux-01 and qmux-02 carry every version as qmux-00 does (records, RFC 9000 close on qmux-02).
TEST_P(SessionTest, RoundTripOverQmux01AndQmux02) {
  for (auto framing : {transport::websocket::Framing::kQmux01, transport::websocket::Framing::kQmux02}) {
    SCOPED_TRACE(std::string(transport::websocket::framing_name(framing)));
    SessionPairOptions o = options();
    o.framing = framing;
    SessionPair& p = start(std::move(o));
    EXPECT_EQ(p.server().version(), GetParam().version);
    TestBroadcast alice(p.client_origin(), "alice");
    FrameCollector sub;
    ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
    expect_round_trip(p, alice, sub);
  }
}

TEST_P(SessionTest, PublisherEndingTheTrackEndsTheRemoteSubscription) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
  alice.write_group("video", 0, {"last"});
  p.pump();
  alice.feed("video").track()->end(make_error(ErrorCode::kClosed, "done"));
  p.advance(1s);  // past the FIN delay and the upstream end grace
  EXPECT_TRUE(sub.ended);
  EXPECT_EQ(sub.finished_sequences(), std::vector<uint64_t>{0});
  expect_both_up();
}

TEST_P(SessionTest, LateJoinerStartsAtTheNewestGroup) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  FrameCollector local;  // keeps the publisher's track fed and cached
  ASSERT_TRUE(local.subscribe(p.client_origin(), "alice", "video"));
  alice.write_group("video", 0, {"g0"});
  alice.write_group("video", 1, {"g1"});
  model::GroupRef g2 = alice.write_group("video", 2, {"g2a"}, /*finish=*/false);
  ASSERT_TRUE(g2);

  FrameCollector remote;
  ASSERT_TRUE(remote.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  model::Track* t = alice.feed("video").track();
  ASSERT_NE(t, nullptr);
  t->begin_object(*g2, 3);
  t->append_chunk(*g2, Bytes::copy(std::string_view("g2b")));
  t->finish_group(*g2);
  alice.write_group("video", 3, {"g3"});
  p.pump();
  EXPECT_EQ(remote.sequences(), (std::vector<uint64_t>{2, 3}));
  ASSERT_NE(remote.group(2), nullptr);
  EXPECT_EQ(remote.group(2)->frames, (std::vector<std::string>{"g2a", "g2b"}));
  EXPECT_TRUE(remote.group(2)->finished);
}

TEST_P(SessionTest, UnsubscribeReleasesUpstreamAfterLingerExactlyOnce) {
  SessionPairOptions o = options();
  o.server_origin.upstream_linger = 1s;
  o.client_origin.upstream_linger = 1s;
  SessionPair& p = start(std::move(o));
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
  alice.write_group("video", 0, {"x"});
  p.pump();
  TestBroadcast::Feed& feed = alice.feed("video");
  ASSERT_EQ(feed.starts, 1);

  sub.unsubscribe();
  p.advance(900ms);
  // The server's linger has not expired: the upstream subscription is still open.
  EXPECT_EQ(p.client().subscription_count(), 1u);
  EXPECT_EQ(feed.stops, 0);
  p.advance(200ms);
  // The server FINned its SUBSCRIBE: the client's subscription is gone, its track lingers.
  EXPECT_EQ(p.client().subscription_count(), 0u);
  EXPECT_EQ(feed.stops, 0);
  p.advance(1s);
  EXPECT_EQ(feed.stops, 1);
  p.advance(10s);
  EXPECT_EQ(feed.stops, 1);
  EXPECT_EQ(feed.starts, 1);
  expect_both_up();
}

TEST_P(SessionTest, ResubscribeWithinLingerReusesTheUpstream) {
  SessionPairOptions o = options();
  o.server_origin.upstream_linger = 1s;
  SessionPair& p = start(std::move(o));
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  {
    FrameCollector first;
    ASSERT_TRUE(first.subscribe(p.server_origin(), "alice", "video"));
    p.pump();
  }
  p.advance(500ms);
  FrameCollector second;
  ASSERT_TRUE(second.subscribe(p.server_origin(), "alice", "video"));
  p.advance(2s);
  alice.write_group("video", 0, {"x"});
  p.pump();
  EXPECT_EQ(p.client_handler().auth_count(Action::kSubscribe, "alice"), subscribe_auths());
  EXPECT_EQ(second.finished_sequences(), std::vector<uint64_t>{0});
}

TEST_P(SessionTest, SubscribersOfOneTrackShareOneUpstreamSubscription) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  FrameCollector a;
  FrameCollector b;
  ASSERT_TRUE(a.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  ASSERT_TRUE(b.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  EXPECT_EQ(p.client_handler().auth_count(Action::kSubscribe, "alice"), subscribe_auths());
  EXPECT_EQ(p.client().subscription_count(), 1u);
  EXPECT_EQ(alice.feed("video").starts, 1);
  alice.write_group("video", 0, {"shared", pattern_bytes(100'000)});
  p.pump();
  ASSERT_NE(a.group(0), nullptr);
  ASSERT_NE(b.group(0), nullptr);
  EXPECT_EQ(a.group(0)->frames, b.group(0)->frames);
  EXPECT_TRUE(b.group(0)->finished);

  a.unsubscribe();
  alice.write_group("video", 1, {"still"});
  p.advance(10s);
  EXPECT_EQ(b.finished_sequences(), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(p.client_handler().auth_count(Action::kSubscribe, "alice"), subscribe_auths());
  EXPECT_EQ(alice.feed("video").stops, 0);
}

TEST_P(SessionTest, DifferentTracksGetTheirOwnUpstreamSubscriptions) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  FrameCollector video;
  FrameCollector audio;
  ASSERT_TRUE(video.subscribe(p.server_origin(), "alice", "video"));
  ASSERT_TRUE(audio.subscribe(p.server_origin(), "alice", "audio"));
  p.pump();
  EXPECT_EQ(p.client_handler().auth_count(Action::kSubscribe, "alice"), 2 * subscribe_auths());
  alice.write_group("video", 0, {"v"});
  alice.write_group("audio", 0, {"a"});
  p.pump();
  EXPECT_EQ(video.group(0)->frames, std::vector<std::string>{"v"});
  EXPECT_EQ(audio.group(0)->frames, std::vector<std::string>{"a"});
}

// --- errors ---

TEST_P(SessionTest, SubscribeForUnknownBroadcastIsResetWithNotFound) {
  SessionPair& p = start();
  // The server believes the client publishes "ghost"; the client has no such broadcast.
  p.server_origin().announce("ghost", &p.server());
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.server_origin(), "ghost", "video"));
  p.pump();
  EXPECT_TRUE(sub.ended);
  ASSERT_TRUE(sub.end_reason.has_value());
  EXPECT_EQ(sub.end_reason->code, ErrorCode::kNotFound);
  EXPECT_TRUE(contains(codes_of(p.sent_frames(p.client_channel(), FrameKind::kResetStream)),
                       static_cast<uint64_t>(ErrorCode::kNotFound)));
  expect_both_up();
  p.server_origin().unannounce("ghost", &p.server());
  // The session still serves other subscriptions.
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector ok;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(ok, p.server_origin(), "alice"));
  alice.write_group("video", 0, {"fine"});
  p.pump();
  EXPECT_EQ(ok.finished_sequences(), std::vector<uint64_t>{0});
}

TEST_P(SessionTest, SubscribeDeniedIsResetWithUnauthorized) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  p.pump();
  p.client_handler().deny_subscribe = true;
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(p.server_origin(), "alice", "video"));
  p.pump();
  EXPECT_TRUE(sub.ended);
  EXPECT_EQ(alice.feed("video").starts, 0);
  EXPECT_TRUE(contains(codes_of(p.sent_frames(p.client_channel(), FrameKind::kResetStream)),
                       static_cast<uint64_t>(ErrorCode::kUnauthorized)));
  expect_both_up();
}

TEST_P(SessionTest, FrameOverMaxFrameSizeDropsOnlyThatGroup) {
  SessionPairOptions o = options();
  o.server.limits.max_frame_size = 1000;
  SessionPair& p = start(std::move(o));
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
  alice.write_group("video", 0, {"small", pattern_bytes(1001)});
  p.pump();
  alice.write_group("video", 1, {pattern_bytes(1000)});
  p.pump();
  EXPECT_TRUE(contains(codes_of(p.sent_frames(p.server_channel(), FrameKind::kStopSending)),
                       static_cast<uint64_t>(ErrorCode::kWrongSize)));
  ASSERT_NE(sub.group(0), nullptr);
  EXPECT_FALSE(sub.group(0)->finished);
  EXPECT_TRUE(sub.group(0)->aborted);
  ASSERT_NE(sub.group(1), nullptr);
  EXPECT_TRUE(sub.group(1)->finished);
  EXPECT_EQ(sub.group(1)->frames, std::vector<std::string>{pattern_bytes(1000)});
  expect_both_up();
}

TEST_P(SessionTest, GarbageInsteadOfSubscribeClosesWithDecode) {
  SessionPair& p = start();
  // Subscribe type, then a 3-byte message whose string claims 5 bytes.
  open_raw_bidi({0x02, 0x03, 0x00, 0x05, 0x61});
  p.pump();
  ASSERT_TRUE(p.client_handler().closed_reason.has_value());
  EXPECT_EQ(p.client_handler().closed_reason->code, ErrorCode::kDecode);
  ASSERT_TRUE(p.server_handler().closed_reason.has_value());
  EXPECT_EQ(p.server_handler().closed_reason->code, ErrorCode::kDecode);
}

TEST_P(SessionTest, UnknownBidiStreamTypeIsResetAndSessionStaysUp) {
  SessionPair& p = start();
  RawStream& s = open_raw_bidi({0x07, 0x00});
  p.pump();
  EXPECT_EQ(s.reset_code, static_cast<uint64_t>(ErrorCode::kUnexpectedStream));
  EXPECT_EQ(s.stop_code, static_cast<uint64_t>(ErrorCode::kUnexpectedStream));
  expect_both_up();
}

TEST_P(SessionTest, SecondSetupIsAProtocolViolation) {
  SessionPair& p = start();
  open_raw_bidi({0x20, 0x00, 0x02, 0x01, 0x00});
  p.pump();
  ASSERT_TRUE(p.client_handler().closed_reason.has_value());
  EXPECT_EQ(p.client_handler().closed_reason->code, ErrorCode::kProtocolViolation);
}

TEST_P(SessionTest, ClosingOneSideWithdrawsItsBroadcastsOnTheOther) {
  SessionPair& p = start();
  TestBroadcast alice(p.client_origin(), "alice");
  FrameCollector sub;
  ASSERT_NO_FATAL_FAILURE(subscribe_across(sub, p.server_origin(), "alice"));
  ASSERT_TRUE(p.server_origin().is_active("alice"));
  p.client().close(make_error(ErrorCode::kCancel, "bye"));
  p.pump();
  EXPECT_TRUE(p.server_handler().is_closed());
  EXPECT_TRUE(p.client_handler().is_closed());
  EXPECT_FALSE(p.server_origin().is_active("alice"));
  EXPECT_TRUE(sub.ended);
}

// moq-lite-01/02 settle the version with SETUP on the first bidi stream. A stream the server opens
// right after answering can overtake that answer when a packet is lost; the client must hold it
// until SETUP completes, not close the session.
TEST(SessionSetupTest, AStreamThatOvertakesTheSetupAnswerIsHeldThenServed) {
  SessionPairOptions o;
  o.raw_server = true;  // "" protocol: the client sends CLIENT_SETUP
  SessionPair p(std::move(o));
  p.start();
  auto& raw = p.raw();
  ASSERT_EQ(raw.incoming.size(), 1u);  // the client's setup stream, with CLIENT_SETUP
  // The server's ANNOUNCE_PLEASE arrives first...
  std::vector<uint8_t> please{static_cast<uint8_t>(wire::BidiType::kAnnounce)};
  wire::encode(wire::Version::kLite02, wire::AnnouncePlease{""}, please);
  RawStream* announce = raw.open_bidi(std::move(please));
  ASSERT_NE(announce, nullptr);
  p.pump();
  EXPECT_FALSE(p.client_handler().is_closed());
  EXPECT_FALSE(p.client_handler().ready_version.has_value());
  EXPECT_TRUE(announce->data.empty());  // held, unanswered
  // ...then the SETUP answer: the client is ready and answers the held stream.
  std::vector<uint8_t> setup;
  wire::encode(wire::ServerSetup{static_cast<uint64_t>(wire::Version::kLite02), {}}, setup);
  raw.incoming[0]->write(std::move(setup));
  p.pump();
  EXPECT_FALSE(p.client_handler().is_closed());
  EXPECT_EQ(p.client_handler().ready_version, wire::Version::kLite02);
  EXPECT_FALSE(announce->data.empty());  // ANNOUNCE_INIT (lite-02's answer to the request)
  EXPECT_FALSE(announce->reset_code.has_value());
}

TEST(SessionSetupTest, APeerThatNeverSendsSetupIsClosedByTheSetupTimeout) {
  SessionPairOptions o;
  o.raw_server = true;
  SessionPair p(std::move(o));
  p.start();
  std::vector<uint8_t> please{static_cast<uint8_t>(wire::BidiType::kAnnounce)};
  wire::encode(wire::Version::kLite02, wire::AnnouncePlease{""}, please);
  ASSERT_NE(p.raw().open_bidi(std::move(please)), nullptr);
  p.pump();
  EXPECT_FALSE(p.client_handler().is_closed());
  p.advance(p.client().config().limits.setup_timeout + 100ms);
  ASSERT_TRUE(p.client_handler().is_closed());
  EXPECT_EQ(p.client_handler().closed_reason->code, ErrorCode::kTimeout);
}

}  // namespace
}  // namespace moqd::session
