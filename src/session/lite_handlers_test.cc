// The moq-lite stream handlers one at a time, each on a FakeStream with a FakeLiteContext in place
// of the Session (lite_context.h): the peer's bytes go in, and what the handler wrote, reset or
// asked of its session comes out, byte for byte. Layouts are the ones src/wire/lite_test.cc and
// lite05_test.cc check against captures.
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/codec.h"
#include "model/origin.h"
#include "session/handlers.h"
#include "session/moq_session.h"
#include "testing/fake_stream.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::test::FakeStream;

std::string written_hex(const std::vector<uint8_t>& bytes) { return to_hex(bytes); }
std::string wire_hex(const char* h) { return to_hex(from_hex(h)); }
uint64_t error_value(ErrorCode c) { return static_cast<uint64_t>(c); }

// Everything a handler may ask of its session, recorded. Owns the streams it hands out, the
// origin, and the handlers made on it (destroyed first).
class FakeLiteContext final : public LiteContext {
 public:
  explicit FakeLiteContext(wire::Version v) : version_(v) {}

  // A stream the peer opened (client-initiated ids: bidi 0, 4, ...; uni 2, 6, ...).
  FakeStream& peer_bidi() { return streams_.emplace_back(next_bidi_ += 4); }
  FakeStream& peer_uni() { return streams_.emplace_back(next_uni_ += 4); }
  // The streams handlers opened through open_uni()/open_bidi(), in order.
  std::vector<FakeStream*> opened;
  // open_uni()/open_bidi() answer null while false.
  bool streams_available = true;

  // HandlerContext
  std::optional<wire::Version> version() const override { return version_; }
  uint64_t id() const override { return 1; }
  const SessionConfig& config() const override { return config_; }
  const Clock& clock() const override { return clock_; }
  Timers& timers() override { return clock_; }
  std::string to_full(std::string_view p) const override { return full_path_of(config_.root, p); }
  std::optional<std::string> to_peer(std::string_view p) const override {
    return peer_path_of(config_.root, p);
  }
  bool authorize(Action action, std::string_view path) override {
    auth_calls.emplace_back(action, std::string(path));
    return !deny;
  }
  bool is_relay_link() const override { return relay_link; }
  void fail(Error e) override { failures.push_back(e); }
  void retire(StreamHandler* h) override {
    if (h->mark_retired()) {
      ++retired;
    }
  }
  // ServeContext
  model::Origin& origin() override { return origin_; }
  const model::BroadcastSource* peer_source() const override { return peer; }
  transport::Stream* open_uni() override { return open(next_local_uni_); }
  size_t subscription_count() const override { return subscriptions.size(); }
  void add_subscription(Subscription* s) override { subscriptions.push_back(s); }
  void forget_subscription(Subscription* s) override { std::erase(subscriptions, s); }
  void wait_for_streams(Subscription*) override { ++waits; }
  bool add_announce_stream() override {
    if (announce_streams >= config_.limits.max_announce_streams) {
      return false;
    }
    ++announce_streams;
    return true;
  }
  void remove_announce_stream() override { --announce_streams; }
  // PeerContext
  transport::Stream* open_bidi() override { return open(next_local_bidi_); }
  void wait_for_streams(UpstreamTrack*) override { ++waits; }
  uint64_t next_upstream_id() override { return next_upstream_id_++; }
  void register_upstream(uint64_t id, UpstreamTrack* u) override { upstreams[id] = u; }
  UpstreamTrack* upstream_by_id(uint64_t id) override {
    auto it = upstreams.find(id);
    return it == upstreams.end() ? nullptr : it->second;
  }
  void forget_upstream(UpstreamTrack* u) override {
    std::erase_if(upstreams, [u](const auto& kv) { return kv.second == u; });
  }
  bool admit_ingress(uint64_t n) override {
    ingress += n;
    return true;
  }
  void announce_from_peer(const std::string& full, bool active, const model::Hops&) override {
    peer_announces.emplace_back(full, active);
  }
  // ControlContext
  bool is_admission_pending() const override { return false; }
  void on_setup_complete(wire::Version v) override {
    version_ = v;
    setup_complete = v;
  }
  bool note_peer_setup_stream() override { return !std::exchange(peer_setup_seen, true); }
  void set_peer_hop_id(uint64_t id) override { peer_hop_id = id; }
  void on_goaway(const std::string& uri) override { goaways.push_back(uri); }
  // LiteContext
  void adopt(std::unique_ptr<StreamHandler> h) override { handlers_.push_back(std::move(h)); }

  void set_version(std::optional<wire::Version> v) { version_ = v; }
  SessionConfig& mutable_config() { return config_; }
  // Ends the loop turn: the track's listeners hear of new data then (base/turn.h).
  void end_turn() { clock_.advance(Duration::zero()); }

  // What was asked.
  std::vector<Error> failures;
  int retired = 0;
  std::vector<std::pair<Action, std::string>> auth_calls;
  bool deny = false;
  bool relay_link = false;
  const model::BroadcastSource* peer = nullptr;
  std::vector<Subscription*> subscriptions;
  int waits = 0;
  size_t announce_streams = 0;
  std::map<uint64_t, UpstreamTrack*> upstreams;
  uint64_t ingress = 0;
  std::vector<std::pair<std::string, bool>> peer_announces;
  std::optional<wire::Version> setup_complete;
  bool peer_setup_seen = false;
  uint64_t peer_hop_id = 0;
  std::vector<std::string> goaways;

 private:
  FakeStream* open(transport::StreamId& next) {
    if (!streams_available) {
      return nullptr;
    }
    FakeStream* s = &streams_.emplace_back(next += 4);
    opened.push_back(s);
    return s;
  }

  // Declaration order is destruction order reversed: handlers go first, the streams last.
  std::deque<FakeStream> streams_;
  transport::StreamId next_bidi_ = transport::StreamId(0) - 4;
  transport::StreamId next_uni_ = 2 - 4;
  transport::StreamId next_local_bidi_ = 1 - 4;
  transport::StreamId next_local_uni_ = 3 - 4;
  std::optional<wire::Version> version_;
  ManualClock clock_;
  SessionConfig config_;
  model::Origin origin_{model::OriginConfig{}, clock_, clock_};
  uint64_t next_upstream_id_ = 0;

 public:
  // Upstream tracks made on this context (GroupReceiver tests), before the handlers that look
  // them up.
  std::vector<std::unique_ptr<UpstreamTrack>> upstream_tracks;

 private:
  std::vector<std::unique_ptr<StreamHandler>> handlers_;
};

// --- PendingStream: a stream's type picks its handler.

TEST(LitePendingStream, SubscribeTypeHandsTheStreamToASubscription) {
  FakeLiteContext ctx(wire::Version::kLite02);
  moqd::testing::TestBroadcast bob(ctx.origin(), "bob");
  FakeStream& s = ctx.peer_bidi();
  ctx.make<PendingStream>(s);
  // Type 2 (SUBSCRIBE), then SUBSCRIBE id 0 "bob" "t" priority 5.
  s.receive(from_hex("02 08 00 03 62 6f 62 01 74 05"));
  EXPECT_EQ(written_hex(s.written()), wire_hex("00"));  // SUBSCRIBE_OK from the Subscription
  EXPECT_EQ(ctx.subscriptions.size(), 1u);
  EXPECT_EQ(ctx.retired, 1);  // the PendingStream itself
}

TEST(LitePendingStream, UnknownBidiTypeIsResetAndStopped) {
  FakeLiteContext ctx(wire::Version::kLite02);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<PendingStream>(s);
  s.receive(from_hex("06 00"));  // TRACK: lite-05 only
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kUnexpectedStream));
  EXPECT_EQ(s.stop_sending_code(), error_value(ErrorCode::kUnexpectedStream));
  EXPECT_TRUE(s.released());
  EXPECT_TRUE(ctx.failures.empty());
}

TEST(LitePendingStream, UniStreamWaitsUnreadUntilSetupCompletes) {
  FakeLiteContext ctx(wire::Version::kLite02);
  ctx.set_version(std::nullopt);
  FakeStream& g = ctx.peer_uni();
  PendingStream* p = ctx.make<PendingStream>(g);
  g.receive(from_hex("00 02 09 01"));
  EXPECT_EQ(g.unread(), 4u);  // held: a group may overtake SETUP
  ctx.set_version(wire::Version::kLite02);
  p->on_session_ready();
  // Type 0 (group) taken; the GroupReceiver read the header of an unknown subscription (9).
  EXPECT_EQ(g.stop_sending_code(), error_value(ErrorCode::kCancel));
  EXPECT_TRUE(ctx.failures.empty());
}

TEST(LitePendingStream, SecondLite05SetupStreamIsAProtocolViolation) {
  FakeLiteContext ctx(wire::Version::kLite05);
  FakeStream& first = ctx.peer_uni();
  ctx.make<PendingStream>(first);
  first.receive(from_hex("01 01 00"), /*fin=*/true);  // type 1 (SETUP), empty SETUP
  EXPECT_TRUE(ctx.failures.empty());
  FakeStream& second = ctx.peer_uni();
  ctx.make<PendingStream>(second);
  second.receive(from_hex("01 01 00"), /*fin=*/true);
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kProtocolViolation);
}

// --- SetupServer: the compat CLIENT_SETUP (lite-01/02) on the first bidi stream.

// @moq/lite's CLIENT_SETUP offering lite-02, lite-01 and draft 14 (src/wire/lite_test.cc).
constexpr const char* kLiteCompatClientSetup =
    "20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e"
    "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";

TEST(LiteSetupServer, SelectsTheFirstOfferedVersionItServes) {
  FakeLiteContext ctx(wire::Version::kLite02);
  ctx.set_version(std::nullopt);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<SetupServer>(s)->on_readable();
  s.receive(from_hex(kLiteCompatClientSetup));
  EXPECT_EQ(written_hex(s.written()), wire_hex("21 00 09 c0 00 00 00 ff 0d ad 02 00"));
  EXPECT_EQ(ctx.setup_complete, wire::Version::kLite02);
  EXPECT_TRUE(ctx.failures.empty());
  EXPECT_EQ(s.unread(), 0u);
  EXPECT_FALSE(s.finished());  // the stream stays open as the session stream
}

TEST(LiteSetupServer, SkipsOfferedVersionsNotEnabled) {
  FakeLiteContext ctx(wire::Version::kLite01);
  ctx.set_version(std::nullopt);
  ctx.mutable_config().versions = wire::VersionSet::none();
  ctx.mutable_config().versions.add(wire::Version::kLite01);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<SetupServer>(s);
  s.receive(from_hex(kLiteCompatClientSetup));
  EXPECT_EQ(written_hex(s.written()), wire_hex("21 00 09 c0 00 00 00 ff 0d ad 01 00"));
  EXPECT_EQ(ctx.setup_complete, wire::Version::kLite01);
}

TEST(LiteSetupServer, NoCommonVersionFailsWithoutAnswering) {
  FakeLiteContext ctx(wire::Version::kLite03);
  ctx.set_version(std::nullopt);
  // lite-03 is reached by ALPN only: never selected in SETUP, even when enabled.
  ctx.mutable_config().versions = wire::VersionSet::none();
  ctx.mutable_config().versions.add(wire::Version::kLite03);
  ctx.mutable_config().versions.add(wire::Version::kTransport14);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<SetupServer>(s);
  s.receive(from_hex(kLiteCompatClientSetup));
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kVersion);
  EXPECT_TRUE(s.written().empty());
  EXPECT_FALSE(ctx.setup_complete);
}

TEST(LiteSetupServer, SetupCutShortByFinIsADecodeError) {
  FakeLiteContext ctx(wire::Version::kLite02);
  ctx.set_version(std::nullopt);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<SetupServer>(s);
  auto bytes = from_hex(kLiteCompatClientSetup);
  bytes.resize(10);
  s.receive(bytes);
  EXPECT_TRUE(ctx.failures.empty());  // need more: waits
  s.receive(std::vector<uint8_t>{}, /*fin=*/true);
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
  EXPECT_TRUE(s.written().empty());
}

TEST(LiteSetupServer, ResetSessionStreamIsAProtocolViolation) {
  FakeLiteContext ctx(wire::Version::kLite02);
  ctx.set_version(std::nullopt);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<SetupServer>(s);
  s.receive(from_hex(kLiteCompatClientSetup));
  s.peer_reset(0);
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kProtocolViolation);
}

// --- LiteSetupReceiver (lite-05's uni SETUP stream) and GoawayStream (lite-04, client side).

TEST(LiteSetupReceiver, KeepsThePeersOriginAndEndsWithItsFin) {
  FakeLiteContext ctx(wire::Version::kLite05);
  FakeStream& s = ctx.peer_uni();
  ctx.make<LiteSetupReceiver>(s);
  // @moq/net's SETUP after its 01 stream type (src/wire/lite05_test.cc): Origin 0x0fbf0986f96e88.
  s.receive(from_hex("0b 01 05 08 c0 0f bf 09 86 f9 6e 88"));
  EXPECT_EQ(ctx.peer_hop_id, uint64_t{0x0fbf0986f96e88});
  EXPECT_EQ(ctx.retired, 0);
  s.receive(std::vector<uint8_t>{}, /*fin=*/true);
  EXPECT_EQ(ctx.retired, 1);
  EXPECT_TRUE(ctx.failures.empty());
}

TEST(LiteSetupReceiver, MalformedSetupFailsTheSession) {
  FakeLiteContext ctx(wire::Version::kLite05);
  FakeStream& s = ctx.peer_uni();
  ctx.make<LiteSetupReceiver>(s);
  s.receive(from_hex("0b 01 05 08 c0 0f"), /*fin=*/true);
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
  EXPECT_EQ(ctx.peer_hop_id, 0u);
}

TEST(LiteGoawayStream, TellsTheUriOnceThenDrains) {
  FakeLiteContext ctx(wire::Version::kLite04);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<GoawayStream>(s, /*receiving=*/true);
  s.receive(from_hex("04 03 6d 6f"));  // GOAWAY{"moq"}, one byte short
  EXPECT_TRUE(ctx.goaways.empty());
  s.receive(from_hex("71"), /*fin=*/true);
  EXPECT_EQ(ctx.goaways, (std::vector<std::string>{"moq"}));
  EXPECT_EQ(ctx.retired, 1);
  EXPECT_TRUE(s.written().empty());
}

// --- Subscription: SUBSCRIBE -> SUBSCRIBE_OK and the group streams, or a reset.

// SUBSCRIBE id=0 broadcast "bob" track "t" priority 5, lite-01/02 (src/wire/lite_test.cc).
constexpr const char* kLiteSubscribeBob02 = "08 00 03 62 6f 62 01 74 05";

class LiteSubscriptionTest : public ::testing::Test {
 protected:
  explicit LiteSubscriptionTest(wire::Version v = wire::Version::kLite02) : ctx(v) {}
  // A peer's lite-02 SUBSCRIBE to bob/t on a new bidi stream, taken by a Subscription.
  FakeStream& subscribe_bob_t() {
    FakeStream& s = ctx.peer_bidi();
    ctx.make<Subscription>(s);
    s.receive(from_hex(kLiteSubscribeBob02));
    return s;
  }
  FakeLiteContext ctx;
  moqd::testing::TestBroadcast bob{ctx.origin(), "bob"};
};

TEST_F(LiteSubscriptionTest, AnswersOkThenSendsEachGroupOnItsOwnUniStream) {
  FakeStream& s = subscribe_bob_t();
  EXPECT_EQ(written_hex(s.written()), wire_hex("00"));  // lite-02 SUBSCRIBE_OK
  ASSERT_EQ(ctx.subscriptions.size(), 1u);
  EXPECT_EQ(ctx.auth_calls.at(0), std::make_pair(Action::kSubscribe, std::string("bob")));
  ASSERT_NE(bob.feed("t").track(), nullptr);

  bob.write_group("t", 0, {"hello", "abc"});
  ctx.end_turn();
  ASSERT_EQ(ctx.opened.size(), 1u);
  FakeStream& g = *ctx.opened[0];
  EXPECT_TRUE(g.is_uni());
  // Stream type 0, GROUP{subscribe 0, sequence 0}, FRAME "hello", FRAME "abc", FIN.
  EXPECT_EQ(written_hex(g.written()), wire_hex("00 02 00 00 05 68 65 6c 6c 6f 03 61 62 63"));
  EXPECT_TRUE(g.finished());
}

TEST_F(LiteSubscriptionTest, UnknownBroadcastIsResetNotFound) {
  FakeStream& s = ctx.peer_bidi();
  ctx.make<Subscription>(s);
  s.receive(from_hex("0a 00 05 61 6c 69 63 65 01 74 05"));  // "alice" "t"
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kNotFound));
  EXPECT_TRUE(s.written().empty());
  EXPECT_TRUE(ctx.subscriptions.empty());
  EXPECT_EQ(ctx.retired, 1);
  EXPECT_TRUE(s.released());
}

TEST_F(LiteSubscriptionTest, UnauthorizedIsResetUnauthorized) {
  ctx.deny = true;
  FakeStream& s = subscribe_bob_t();
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kUnauthorized));
  EXPECT_TRUE(s.written().empty());
  EXPECT_EQ(bob.feed("t").starts, 0);
}

TEST_F(LiteSubscriptionTest, OverMaxSubscriptionsIsResetBoundsExceeded) {
  ctx.mutable_config().limits.max_subscriptions = 1;
  FakeStream& first = subscribe_bob_t();
  FakeStream& second = subscribe_bob_t();
  EXPECT_EQ(written_hex(first.written()), wire_hex("00"));
  EXPECT_EQ(second.reset_code(), error_value(ErrorCode::kBoundsExceeded));
}

TEST_F(LiteSubscriptionTest, MalformedSubscribeFailsTheSession) {
  FakeStream& s = ctx.peer_bidi();
  ctx.make<Subscription>(s);
  s.receive(from_hex("08 00 03 62 6f"), /*fin=*/true);  // cut short
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
  EXPECT_TRUE(s.written().empty());
}

TEST_F(LiteSubscriptionTest, WaitsForStreamCreditThenSends) {
  ctx.streams_available = false;
  FakeStream& s = ctx.peer_bidi();
  Subscription* sub = ctx.make<Subscription>(s);
  s.receive(from_hex(kLiteSubscribeBob02));
  bob.write_group("t", 0, {"x"});
  ctx.end_turn();
  EXPECT_TRUE(ctx.opened.empty());
  EXPECT_GE(ctx.waits, 1);
  ctx.streams_available = true;
  sub->pump();  // what the session does on on_streams_available
  ASSERT_EQ(ctx.opened.size(), 1u);
  EXPECT_EQ(written_hex(ctx.opened[0]->written()), wire_hex("00 02 00 00 01 78"));
}

// A moq-lite publisher's objects as the QUIC receive path leaves them: each payload a slice of one
// buffer holding the stream's bytes, its FRAME header just before it. "hello" and "abc" have their
// own header before them; "wxyz" has a wrong one (07) before it; "q" is a copy of its own.
struct ReceivedFrames {
  // The group's stream as received: FRAME "hello", FRAME "abc", 07 "wxyz".
  Bytes wire = Bytes::copy(from_hex("ff 05 68 65 6c 6c 6f 03 61 62 63 07 77 78 79 7a"));
  void append_to(model::Track& t, model::Group& g) const {
    t.begin_object(g, 5);
    t.append_chunk(g, wire.slice(2, 5));
    t.begin_object(g, 3);
    t.append_chunk(g, wire.slice(8, 3));
    t.begin_object(g, 4);
    t.append_chunk(g, wire.slice(12, 4));
    t.begin_object(g, 1);
    t.append_chunk(g, Bytes::copy(std::string_view("q")));
  }
};
// GROUP{0, 0}, then "hello", "abc", "wxyz", "q", each after its FRAME header (the size).
constexpr const char* kReceivedFramesGroup = "00 02 00 00 05 68 65 6c 6c 6f 03 61 62 63 04 77 78 79 7a 01 71";

// A header found just before its payload is written with it as one Bytes (framed: 1 write, not
// the header and payload's 2), by every subscriber; the rest as before; the bytes identical.
TEST_F(LiteSubscriptionTest, HeaderBeforeItsPayloadGoesOutWithItAsOneWrite) {
  subscribe_bob_t();
  subscribe_bob_t();
  model::GroupRef g = bob.write_group("t", 0, {}, /*finish=*/false);
  ASSERT_TRUE(g);
  model::Track& t = *bob.feed("t").track();
  ReceivedFrames frames;
  frames.append_to(t, *g);
  t.finish_group(*g);
  ctx.end_turn();
  ASSERT_EQ(ctx.opened.size(), 2u);
  for (FakeStream* out : ctx.opened) {
    EXPECT_EQ(written_hex(out->written()), wire_hex(kReceivedFramesGroup));
    // GROUP header 1, "hello" 1, "abc" 1, "wxyz" 2 (header, payload), "q" 2.
    EXPECT_EQ(out->writes(), 7u);
    EXPECT_TRUE(out->finished());
  }
  // Framed headers share the received buffer: only "wxyz" and "q" got headers of their own.
  EXPECT_EQ(g->objects()[0].header.data(), frames.wire.data() + 1);
  EXPECT_EQ(g->objects()[1].header.data(), frames.wire.data() + 7);
  EXPECT_EQ(g->objects()[2].header.size(), 1u);
  EXPECT_EQ(g->objects()[3].header.size(), 1u);
}

// A subscriber that takes a framed object in pieces (little write capacity) gets the header alone
// first, then the payload: the same bytes.
TEST_F(LiteSubscriptionTest, FramedObjectTakenInPiecesWritesTheHeaderAlone) {
  subscribe_bob_t();
  subscribe_bob_t();
  model::GroupRef g = bob.write_group("t", 0, {"x"}, /*finish=*/false);  // opens both streams
  ctx.end_turn();
  ASSERT_EQ(ctx.opened.size(), 2u);
  ctx.opened[1]->capacity = 2;
  model::Track& t = *bob.feed("t").track();
  ReceivedFrames frames;
  frames.append_to(t, *g);
  t.finish_group(*g);
  ctx.end_turn();
  // The first subscriber framed "hello" and "abc"; the second reads them 2 bytes at a time.
  ASSERT_EQ(g->objects()[1].header.data(), frames.wire.data() + 1);
  const char* want = "00 02 00 00 01 78 05 68 65 6c 6c 6f 03 61 62 63 04 77 78 79 7a 01 71";
  EXPECT_EQ(written_hex(ctx.opened[0]->written()), wire_hex(want));
  EXPECT_EQ(written_hex(ctx.opened[1]->written()), wire_hex(want));
  EXPECT_TRUE(ctx.opened[1]->finished());
}

class LiteSubscription03Test : public LiteSubscriptionTest {
 protected:
  LiteSubscription03Test() : LiteSubscriptionTest(wire::Version::kLite03) {}
};

TEST_F(LiteSubscription03Test, OkEchoesTheRequestedFields) {
  FakeStream& s = ctx.peer_bidi();
  ctx.make<Subscription>(s);
  // SUBSCRIBE id 0 "bob" "t" priority 5, unordered, no latency bound, no start/end.
  s.receive(from_hex("0c 00 03 62 6f 62 01 74 05 00 00 00 00"));
  // SUBSCRIBE_OK: type 0, size 5, {priority 5, ordered 0, max latency 0, start 0, end 0}.
  EXPECT_EQ(written_hex(s.written()), wire_hex("00 05 05 00 00 00 00"));
}

TEST_F(LiteSubscription03Test, EndBeforeStartIsResetProtocolViolation) {
  FakeStream& s = ctx.peer_bidi();
  ctx.make<Subscription>(s);
  // start group 5 (+1 encoding: 06), end group 2 (03).
  s.receive(from_hex("0c 00 03 62 6f 62 01 74 05 00 00 06 03"));
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kProtocolViolation));
  EXPECT_TRUE(s.written().empty());
}

// --- TrackResponder (lite-05 TRACK): TRACK_INFO from the origin's track, then FIN.

TEST(LiteTrackResponder, AnswersTrackInfoAndFins) {
  FakeLiteContext ctx(wire::Version::kLite05);
  moqd::testing::TestBroadcast alice(ctx.origin(), "room/alice");
  FakeStream& s = ctx.peer_bidi();
  ctx.make<TrackResponder>(s);
  // TRACK{"room/alice", "video"} (the §3.5 capture).
  s.receive(from_hex("11 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f"));
  // TRACK_INFO{priority 0, unordered, no latency bound, timescale 1000}: the defaults.
  EXPECT_EQ(written_hex(s.written()), wire_hex("05 00 00 00 43 e8"));
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(ctx.retired, 0);  // until the peer's FIN
  s.receive(std::vector<uint8_t>{}, /*fin=*/true);
  EXPECT_EQ(ctx.retired, 1);
}

TEST(LiteTrackResponder, UnknownTrackIsResetNotFound) {
  FakeLiteContext ctx(wire::Version::kLite05);
  FakeStream& s = ctx.peer_bidi();
  ctx.make<TrackResponder>(s);
  s.receive(from_hex("11 0a 72 6f 6f 6d 2f 61 6c 69 63 65 05 76 69 64 65 6f"));
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kNotFound));
  EXPECT_TRUE(s.written().empty());
  EXPECT_EQ(ctx.retired, 1);
}

// --- AnnounceResponder: ANNOUNCE_PLEASE -> the current set, then live changes.

TEST(LiteAnnounceResponder, Lite02SendsInitThenChanges) {
  FakeLiteContext ctx(wire::Version::kLite02);
  moqd::testing::TestBroadcast bob(ctx.origin(), "bob");
  FakeStream& s = ctx.peer_bidi();
  ctx.make<AnnounceResponder>(s);
  s.receive(from_hex("01 00"));  // ANNOUNCE_PLEASE prefix ""
  EXPECT_EQ(written_hex(s.written()), wire_hex("05 01 03 62 6f 62"));  // ANNOUNCE_INIT ["bob"]
  EXPECT_EQ(ctx.announce_streams, 1u);
  {
    moqd::testing::TestBroadcast alice(ctx.origin(), "alice");
  }
  // ANNOUNCE active "alice", then ended "alice".
  EXPECT_EQ(written_hex(s.written()),
            wire_hex("05 01 03 62 6f 62 07 01 05 61 6c 69 63 65 07 00 05 61 6c 69 63 65"));
  s.receive(std::vector<uint8_t>{}, /*fin=*/true);
  EXPECT_TRUE(s.finished());
  EXPECT_EQ(ctx.announce_streams, 0u);
  EXPECT_EQ(ctx.retired, 1);
}

TEST(LiteAnnounceResponder, Lite04AppendsOurHopAndHidesThePeersOwn) {
  FakeLiteContext ctx(wire::Version::kLite04);
  ctx.mutable_config().hop_id = 7;
  moqd::testing::TestBroadcast bob(ctx.origin(), "bob");
  // The peer's own broadcast: never announced back to it (split horizon).
  moqd::testing::TestBroadcast mine(ctx.origin(), "mine");
  ctx.peer = &mine;
  FakeStream& s = ctx.peer_bidi();
  ctx.make<AnnounceResponder>(s);
  s.receive(from_hex("02 00 00"));  // ANNOUNCE_PLEASE prefix "", no exclude_hop
  // lite-04 has no ANNOUNCE_INIT: ANNOUNCE active "bob" with hops [7].
  EXPECT_EQ(written_hex(s.written()), wire_hex("07 01 03 62 6f 62 01 07"));
}

TEST(LiteAnnounceResponder, OverMaxAnnounceStreamsIsResetBoundsExceeded) {
  FakeLiteContext ctx(wire::Version::kLite02);
  ctx.mutable_config().limits.max_announce_streams = 0;
  FakeStream& s = ctx.peer_bidi();
  ctx.make<AnnounceResponder>(s);
  s.receive(from_hex("01 00"));
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kBoundsExceeded));
  EXPECT_TRUE(s.written().empty());
  EXPECT_EQ(ctx.announce_streams, 0u);
}

TEST(LiteAnnounceResponder, UnauthorizedDiscoveryIsReset) {
  FakeLiteContext ctx(wire::Version::kLite02);
  ctx.deny = true;
  FakeStream& s = ctx.peer_bidi();
  ctx.make<AnnounceResponder>(s);
  s.receive(from_hex("05 04 72 6f 6f 6d"));  // prefix "room"
  EXPECT_EQ(s.reset_code(), error_value(ErrorCode::kUnauthorized));
  EXPECT_EQ(ctx.auth_calls.at(0), std::make_pair(Action::kDiscover, std::string("room")));
  EXPECT_EQ(ctx.announce_streams, 0u);
}

// --- GroupReceiver: a group uni stream from the publishing peer into the origin's track.

// The peer's broadcast, fed by one UpstreamTrack made on the fake context.
class UpstreamFedBroadcast final : public model::BroadcastSource {
 public:
  explicit UpstreamFedBroadcast(UpstreamTrack& t) : track_(t) {}
  model::TrackSource& track_source(const std::string&, const std::string&) override {
    return track_;
  }

 private:
  UpstreamTrack& track_;
};

class LiteGroupReceiverTest : public ::testing::Test {
 protected:
  LiteGroupReceiverTest() {
    ctx.origin().announce("bob", &peer);
    subscribed = collector.subscribe(ctx.origin(), "bob", "t");  // starts the UpstreamTrack
  }
  ~LiteGroupReceiverTest() override {
    collector.unsubscribe();
    ctx.origin().unannounce("bob", &peer);
  }
  // A group stream from the peer, its type byte already taken (PendingStream does that).
  FakeStream& group_stream() {
    FakeStream& g = ctx.peer_uni();
    ctx.make<GroupReceiver>(g);
    return g;
  }

  FakeLiteContext ctx{wire::Version::kLite02};
  UpstreamTrack& upstream =
      *ctx.upstream_tracks.emplace_back(std::make_unique<UpstreamTrack>(ctx, "bob", "t"));
  UpstreamFedBroadcast peer{upstream};
  moqd::testing::FrameCollector collector;
  bool subscribed = false;
};

TEST_F(LiteGroupReceiverTest, SubscribesUpstreamThenWritesFramesIntoTheTrack) {
  ASSERT_TRUE(subscribed);
  ASSERT_EQ(ctx.opened.size(), 1u);
  // The UpstreamTrack's SUBSCRIBE: type 2, SUBSCRIBE{id 0, "bob", "t", upstream_priority 128}.
  EXPECT_EQ(written_hex(ctx.opened[0]->written()), wire_hex("02 08 00 03 62 6f 62 01 74 80"));
  FakeStream& g = group_stream();
  // GROUP{subscribe 0, sequence 1}, FRAME "hello", FRAME "abc", FIN.
  g.receive(from_hex("02 00 01 05 68 65 6c 6c 6f 03 61 62 63"), /*fin=*/true);
  ctx.end_turn();
  const auto* got = collector.group(1);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->frames, (std::vector<std::string>{"hello", "abc"}));
  EXPECT_TRUE(got->finished);
  EXPECT_EQ(ctx.ingress, 8u);
  EXPECT_TRUE(ctx.failures.empty());
  EXPECT_EQ(ctx.retired, 1);
}

TEST_F(LiteGroupReceiverTest, BytesSplitAnywhereGiveTheSameFrames) {
  ASSERT_TRUE(subscribed);
  FakeStream& g = group_stream();
  auto bytes = from_hex("02 00 01 05 68 65 6c 6c 6f 03 61 62 63");
  for (size_t i = 0; i < bytes.size(); ++i) {
    g.receive(std::vector<uint8_t>{bytes[i]}, /*fin=*/i + 1 == bytes.size());
  }
  ctx.end_turn();
  const auto* got = collector.group(1);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->frames, (std::vector<std::string>{"hello", "abc"}));
  EXPECT_TRUE(got->finished);
  EXPECT_TRUE(ctx.failures.empty());
}

TEST_F(LiteGroupReceiverTest, GroupHeaderCutShortByFinIsADecodeError) {
  ASSERT_TRUE(subscribed);
  FakeStream& g = group_stream();
  g.receive(from_hex("02 00"), /*fin=*/true);
  ctx.end_turn();
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
  EXPECT_TRUE(collector.sequences().empty());
}

TEST_F(LiteGroupReceiverTest, MalformedGroupHeaderIsADecodeError) {
  ASSERT_TRUE(subscribed);
  FakeStream& g = group_stream();
  // The header's size says 1 byte, too short for its two varints.
  g.receive(from_hex("01 00 05 68"));
  ctx.end_turn();
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
}

TEST_F(LiteGroupReceiverTest, FinInsideAFrameAbortsTheGroup) {
  ASSERT_TRUE(subscribed);
  FakeStream& g = group_stream();
  g.receive(from_hex("02 00 01 05 68 65"), /*fin=*/true);
  ctx.end_turn();
  EXPECT_EQ(collector.aborted_sequences(), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(ctx.failures.empty());
  EXPECT_EQ(ctx.retired, 1);
}

// A FIN inside a frame header (the first byte of a 2-byte size unread): is_fin_received() stays
// false while bytes are unread, so the group used to hang until the session ended.
TEST_F(LiteGroupReceiverTest, FinInsideAFrameHeaderAbortsTheGroupAndIsADecodeError) {
  ASSERT_TRUE(subscribed);
  FakeStream& g = group_stream();
  g.receive(from_hex("02 00 01 01 61 40"), /*fin=*/true);
  ctx.end_turn();
  EXPECT_EQ(collector.aborted_sequences(), (std::vector<uint64_t>{1}));
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
}

// lite-05: the timed header's timestamp delta arrives, its size does not.
TEST(LiteGroupReceiverLite05, FinInsideATimedFrameHeaderAbortsTheGroupAndIsADecodeError) {
  FakeLiteContext ctx{wire::Version::kLite05};
  UpstreamTrack& upstream =
      *ctx.upstream_tracks.emplace_back(std::make_unique<UpstreamTrack>(ctx, "bob", "t"));
  UpstreamFedBroadcast peer{upstream};
  moqd::testing::FrameCollector collector;
  ctx.origin().announce("bob", &peer);
  ASSERT_TRUE(collector.subscribe(ctx.origin(), "bob", "t"));
  FakeStream& g = ctx.peer_uni();
  ctx.make<GroupReceiver>(g);
  g.receive(from_hex("02 00 01 01"), /*fin=*/true);
  ctx.end_turn();
  EXPECT_EQ(collector.aborted_sequences(), (std::vector<uint64_t>{1}));
  ASSERT_EQ(ctx.failures.size(), 1u);
  EXPECT_EQ(ctx.failures[0].code, ErrorCode::kDecode);
  collector.unsubscribe();
  ctx.origin().unannounce("bob", &peer);
}

TEST_F(LiteGroupReceiverTest, GroupOfUnknownSubscriptionIsStoppedNotAnError) {
  ASSERT_TRUE(subscribed);
  FakeStream& g = group_stream();
  g.receive(from_hex("02 09 01 01 78"));
  ctx.end_turn();
  EXPECT_EQ(g.stop_sending_code(), error_value(ErrorCode::kCancel));
  EXPECT_TRUE(ctx.failures.empty());
  EXPECT_TRUE(collector.sequences().empty());
}

TEST_F(LiteGroupReceiverTest, FrameOverMaxFrameSizeDropsTheGroup) {
  ASSERT_TRUE(subscribed);
  ctx.mutable_config().limits.max_frame_size = 4;
  FakeStream& g = group_stream();
  g.receive(from_hex("02 00 01 05 68 65 6c 6c 6f"));
  ctx.end_turn();
  EXPECT_EQ(g.stop_sending_code(), error_value(ErrorCode::kWrongSize));
  EXPECT_EQ(collector.aborted_sequences(), (std::vector<uint64_t>{1}));
  EXPECT_TRUE(ctx.failures.empty());
}

}  // namespace
}  // namespace moqd::session
