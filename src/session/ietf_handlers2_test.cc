// The IETF session's FETCH, PUBLISH and OBJECT_DATAGRAM handlers one at a time, as
// ietf_handlers_test.cc drives the stream handlers: FetchService (with its FetchResponder),
// PublishService (with its Hold) and DatagramReceiver, each with a fake of its context
// (ietf_context.h) that records what the handler asked of the session, FETCH data streams on
// testing/fake_stream.h. No IetfSession, transport or peer is involved. Messages the peer sends
// are decoded from the bytes the draft text gives them; what the handler sends is encoded as the
// session would write it, and compared byte for byte.
#include "session/ietf_datagram.h"
#include "session/ietf_fetch.h"
#include "session/ietf_publish.h"
#include "session/ietf_session_internal.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "base/codec.h"
#include "model/origin.h"
#include "testing/fake_stream.h"
#include "testing/ietf_fakes.h"
#include "testing/ietf_fixture.h"
#include "testing/session_fixture.h"

namespace moqd::session::ietf_detail {
namespace ietf_handlers2_test {

namespace wi = wire::ietf;

const char* kRoomAliceVideo = "02 04726f6f6d 05616c696365 05766964656f";

std::string hex_of(const std::vector<uint8_t>& b) { return to_hex(std::span<const uint8_t>(b)); }
std::string canon(std::string_view h) { return to_hex(from_hex(h)); }

// `m` as the session writes it in `v` (its control stream, or 17+ the request's stream).
std::string written(wire::Version v, const wi::ControlMessage& m) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(wi::encode(v, m, out));
  return hex_of(out);
}

// The peer's message `type length body_hex`, decoded in `v` as the session reads it.
wi::ControlMessage from_peer(wire::Version v, uint8_t type, const std::string& body_hex) {
  const std::vector<uint8_t> bytes = testing::ietf_message(type, body_hex);
  auto r = wi::decode_control(v, std::span<const uint8_t>(bytes), wi::Limits{});
  EXPECT_TRUE(r && r->has_value()) << canon(hex_of(bytes));
  if (!r || !r->has_value()) {
    return wi::Unsubscribe{};
  }
  EXPECT_EQ((*r)->consumed, bytes.size());
  return (*r)->value;
}

using testing::FakeHandlerContext;

// Authorizes everything but `denied`, and records the peer's announcements.
class FakeSessionHandler final : public SessionHandler {
 public:
  bool authorize(Action, std::string_view path, std::string_view) override { return path != denied; }
  void on_session_ready(wire::Version) override {}
  void on_peer_announce(const std::string& path, bool active, const model::Hops&,
                        model::BroadcastSource& source) override {
    announces.push_back((active ? "+" : "-") + path);
    if (origin != nullptr) {
      if (active) {
        origin->announce(path, &source);
      } else {
        origin->unannounce(path, &source);
      }
    }
  }
  void on_session_closed(Error) override {}
  std::string denied;
  model::Origin* origin = nullptr;  // announcements reach it, as the relay's handler does
  std::vector<std::string> announces;
};

// ---------------------------------------------------------------------------------------------
// FetchService and FetchResponder (ietf_fetch.h): FETCH answered from the track's cache on a uni
// stream of ours; FETCH_CANCEL.

// The peer's paths are the origin's; FETCH data streams are FakeStreams.
class FakeFetchContext final : public FakeHandlerContext, public FetchContext {
 public:
  explicit FakeFetchContext(wire::Version v)
      : FakeHandlerContext(v), origin_(model::OriginConfig{}, clock_, clock_) {}
  model::Origin& origin() override { return origin_; }
  SessionHandler& handler() override { return handler_; }
  std::string to_full(const std::string& peer_path) const override { return peer_path; }
  transport::Stream* open_uni() override {
    if (streams_left == 0) {
      return nullptr;
    }
    --streams_left;
    streams.push_back(std::make_unique<test::FakeStream>(3 + 4 * streams.size()));
    streams.back()->capacity = capacity;
    return streams.back().get();
  }
  bool accept_peer_request_id(uint64_t id) override {
    accepted_ids.push_back(id);
    return true;
  }
  DownstreamSubscription* downstream(uint64_t) const override { return nullptr; }
  void end_request(uint64_t request_id, bool reset) override {
    ended.push_back(std::to_string(request_id) + (reset ? " reset" : " fin"));
  }

  model::Origin origin_;
  FakeSessionHandler handler_;
  size_t streams_left = 16;
  size_t capacity = SIZE_MAX;  // of the streams opened from now on
  std::vector<std::unique_ptr<test::FakeStream>> streams;
  std::vector<uint64_t> accepted_ids;
  std::vector<std::string> ended;
};

// room/alice "video" live (a viewer keeps it) with groups 1..3 of frames "a".."f", two per group,
// and a FetchService in draft `v`.
struct FetchCase {
  explicit FetchCase(wire::Version v) : ctx(v), broadcast(ctx.origin_, "room/alice") {
    EXPECT_TRUE(viewer.subscribe(ctx.origin_, "room/alice", "video"));
    broadcast.write_group("video", 1, {"a", "b"});
    broadcast.write_group("video", 2, {"c", "d"});
    broadcast.write_group("video", 3, {"e", "f"});
    turn();
  }
  void turn() {
    for (int i = 0; i < 4; ++i) {
      ctx.clock_.advance(Duration::zero());
    }
  }
  wi::Fetch fetch(const std::string& body_hex) {
    return std::get<wi::Fetch>(from_peer(ctx.draft(), 0x16, body_hex));
  }
  FakeFetchContext ctx;
  testing::TestBroadcast broadcast;
  testing::FrameCollector viewer;
  FetchService svc{ctx};
};

// d16 §9.16 FETCH_HEADER (0x05, request id) and objects {group, object, payload} of one byte, every
// field written (flags 0x1C: subgroup 0, Object ID, Group ID), priority 128.
std::string fetch_stream16(int id, std::vector<std::tuple<int, int, char>> objects) {
  std::vector<uint8_t> out = {0x05, static_cast<uint8_t>(id)};
  for (auto [g, o, p] : objects) {
    out.insert(out.end(), {0x1c, static_cast<uint8_t>(g), static_cast<uint8_t>(o), 0x80, 0x01,
                           static_cast<uint8_t>(p)});
  }
  return hex_of(out);
}

TEST(IetfFetchService, Draft16StandaloneFetchByteExactThenFinAndTheRequestEnds) {
  FetchCase c(wire::Version::kTransport16);
  // FETCH id 2, standalone, Start {1, 0}, End {3, 0} (all of group 3), no parameters.
  c.svc.on_fetch(c.fetch(std::string("02 01 ") + kRoomAliceVideo + " 01 00 03 00 00"));
  EXPECT_EQ(c.ctx.accepted_ids, std::vector<uint64_t>{2});
  // FETCH_OK id 2, End Of Track 0, End {3, 2} (past the largest object, d16 §9.17), no parameters.
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(c.ctx.sent_hex(0), canon("18 00 05 02 00 03 02 00"));
  ASSERT_EQ(c.ctx.streams.size(), 1u);
  const test::FakeStream& s = *c.ctx.streams[0];
  EXPECT_EQ(hex_of(s.written()), fetch_stream16(2, {{1, 0, 'a'}, {1, 1, 'b'}, {2, 0, 'c'},
                                                    {2, 1, 'd'}, {3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(s.finished());
  EXPECT_FALSE(s.reset_code().has_value());
  EXPECT_TRUE(s.released());
  // The responder is over: its request ends with FIN (17+: the request stream too).
  EXPECT_EQ(c.ctx.ended, std::vector<std::string>{"2 fin"});
  c.turn();
  EXPECT_EQ(c.svc.active(), 0u);
  EXPECT_FALSE(c.ctx.is_closed());
}

TEST(IetfFetchService, Draft20StandaloneFetchUsesTheLocationFilterAndDeltas) {
  FetchCase c(wire::Version::kTransport20);
  // d20 §10.13: FETCH id 2, standalone, 1 parameter LOCATION_FILTER (0x21, length 4): StartGroup
  // 2, StartObject 1, EndGroupDelta 1, EndObject 0: {2, 1} to {3, 0} inclusive.
  c.svc.on_fetch(c.fetch(std::string("02 01 ") + kRoomAliceVideo + " 01 21 04 02 01 01 00"));
  // On its request stream, without a request id: End Of Track 0, End {3, 0} (the last object
  // covered), no parameters, then the Track Properties SUBSCRIBE_OK declares (d20 §10.14):
  // TIMESCALE (0x08) 1000, the fake track's milliseconds.
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(c.ctx.sent_hex(0), canon("18 00 07 00 03 00 00 08 83 e8"));
  ASSERT_EQ(c.ctx.streams.size(), 1u);
  // d20 §11.4.4: {2, 1} in full; {3, 0} a new group: Group ID Delta 0 (3 - 2 - 1), Object ID 0;
  // each with Properties (flag 0x20) {Timestamp (0x10): 1,000,000}, as a SUBGROUP stream stamps them.
  EXPECT_EQ(hex_of(c.ctx.streams[0]->written()),
            canon("05 02 3c 02 01 80 04 10 cf 42 40 01 64 3c 00 00 80 04 10 cf 42 40 01 65"));
  EXPECT_TRUE(c.ctx.streams[0]->finished());
  EXPECT_EQ(c.ctx.ended, std::vector<std::string>{"2 fin"});
  EXPECT_FALSE(c.ctx.is_closed());
}

// The FETCH refusals of each draft (d14 §9.16 FETCH_ERROR 0x17 codes; d15+ REQUEST_ERROR 0x05, d16
// §13.1.x / d20 the same codes), and that none opens a data stream.
TEST(IetfFetchService, RefusalsCarryTheDraftsCodes) {
  struct Want {
    wire::Version v;
    wi::MessageType type;
    uint64_t does_not_exist, invalid_range, invalid_joining, unauthorized;
  };
  for (const Want& w : {Want{wire::Version::kTransport14, wi::MessageType::kFetchError, 0x4, 0x5, 0x7, 0x1},
                        Want{wire::Version::kTransport20, wi::MessageType::kRequestError, 0x10, 0x11, 0x32, 0x1}}) {
    FetchCase c(w.v);
    c.ctx.handler_.denied = "room/carol";
    auto standalone = [&](uint64_t id, std::string peer_path, wi::Location start, wi::Location end) {
      wi::Fetch m;
      m.request_id = id;
      m.type = wi::FetchType::kStandalone;
      m.ns = wi::to_namespace(peer_path);
      m.track = "video";
      m.start = start;
      m.end = end;
      if (c.ctx.row().filter_fields) {
        m.filter = wi::Filter{wi::FilterType::kAbsoluteRange, start, end.group - start.group, 0,
                              end.object};
      }
      return m;
    };
    c.svc.on_fetch(standalone(2, "room/bob", {1, 0}, {3, 0}));    // no such broadcast
    c.svc.on_fetch(standalone(4, "room/carol", {1, 0}, {3, 0}));  // unauthorized
    c.svc.on_fetch(standalone(6, "room/alice", {9, 0}, {10, 0}));  // start past the largest {3, 1}
    wi::Fetch joining;
    joining.request_id = 8;
    joining.type = wi::FetchType::kRelativeJoining;
    joining.joining_request_id = 0x30;  // no such subscription
    joining.joining_start = 1;
    c.svc.on_fetch(joining);
    ASSERT_EQ(c.ctx.sent.size(), 4u) << "draft " << int{c.ctx.row().number};
    const std::vector<std::pair<uint64_t, uint64_t>> want = {
        {2, w.does_not_exist}, {4, w.unauthorized}, {6, w.invalid_range}, {8, w.invalid_joining}};
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& e = std::get<wi::RequestError>(c.ctx.sent[i]);
      EXPECT_EQ(e.type, w.type);
      EXPECT_EQ(e.request_id, want[i].first);
      EXPECT_EQ(e.error_code, want[i].second) << "draft " << int{c.ctx.row().number} << " #" << i;
    }
    EXPECT_TRUE(c.ctx.streams.empty());
    EXPECT_EQ(c.svc.active(), 0u);
    EXPECT_FALSE(c.ctx.is_closed());
  }
}

TEST(IetfFetchService, Draft16FetchCancelResetsAStreamStillBeingWritten) {
  FetchCase c(wire::Version::kTransport16);
  c.ctx.capacity = 0;  // the data stream takes nothing yet: the objects wait
  c.svc.on_fetch(c.fetch(std::string("02 01 ") + kRoomAliceVideo + " 01 00 03 00 00"));
  ASSERT_EQ(c.ctx.streams.size(), 1u);
  test::FakeStream& s = *c.ctx.streams[0];
  EXPECT_EQ(hex_of(s.written()), canon("05 02"));  // FETCH_HEADER only
  EXPECT_EQ(c.svc.active(), 1u);
  // FETCH_CANCEL (d16 §9.18): the stream is reset with CANCELLED (0x1), the request ends reset.
  c.svc.on_fetch_cancel(wi::FetchCancel{2});
  EXPECT_EQ(s.reset_code(), std::optional<uint64_t>(0x1));
  EXPECT_FALSE(s.finished());
  EXPECT_TRUE(s.released());
  EXPECT_EQ(c.ctx.ended, std::vector<std::string>{"2 reset"});
  c.turn();
  EXPECT_EQ(c.svc.active(), 0u);
  c.svc.on_fetch_cancel(wi::FetchCancel{2});  // over already: nothing
  EXPECT_EQ(c.ctx.ended.size(), 1u);
}

TEST(IetfFetchService, NoUniStreamWaitsForCreditThenServes) {
  FetchCase c(wire::Version::kTransport16);
  c.ctx.streams_left = 0;
  c.svc.on_fetch(c.fetch(std::string("02 01 ") + kRoomAliceVideo + " 03 00 03 00 00"));
  EXPECT_EQ(c.ctx.sent_hex(0), canon("18 00 05 02 00 03 02 00"));
  EXPECT_TRUE(c.ctx.streams.empty());
  c.ctx.streams_left = 1;
  c.svc.on_streams_available();
  ASSERT_EQ(c.ctx.streams.size(), 1u);
  EXPECT_EQ(hex_of(c.ctx.streams[0]->written()), fetch_stream16(2, {{3, 0, 'e'}, {3, 1, 'f'}}));
  EXPECT_TRUE(c.ctx.streams[0]->finished());
}

// ---------------------------------------------------------------------------------------------
// PublishService and its Hold (ietf_publish.h): the peer's PUBLISH fed into the origin as an
// UpstreamSubscription of the session, its namespace announced while it lasts.

// The session as PublishService and the adopted UpstreamSubscriptions see it: the peer's paths
// are the origin's, the context is the source of the peer's broadcasts (its
// track_source hands out the UpstreamSubscription of a track, as IetfSession::track_source).
class FakePublishContext final : public FakeHandlerContext,
                                 public PublishContext,
                                 public UpstreamContext,
                                 public model::BroadcastSource {
 public:
  explicit FakePublishContext(wire::Version v)
      : FakeHandlerContext(v), origin_(model::OriginConfig{}, clock_, clock_) {
    handler_.origin = &origin_;
  }
  // PublishContext
  model::Origin& origin() override { return origin_; }
  SessionHandler& handler() override { return handler_; }
  model::BroadcastSource& source() override { return *this; }
  bool is_client() const override { return client; }
  std::string to_full(const std::string& peer_path) const override { return peer_path; }
  bool accept_peer_request_id(uint64_t id) override {
    accepted_ids.push_back(id);
    return true;
  }
  UpstreamSubscription* upstream_by_alias(uint64_t alias) override {
    auto it = by_alias.find(alias);
    return it == by_alias.end() ? nullptr : it->second;
  }
  bool is_announced(const std::string& full) const override { return announced.count(full) != 0; }
  size_t announced_count() const override { return announced.size(); }
  bool admit_announce_change() override { return true; }
  UpstreamSubscription* adopt_published(const std::string& full, const std::string& name,
                                        uint64_t request_id, uint64_t alias,
                                        const std::string& properties) override {
    UpstreamSubscription& u = upstream(full, name);
    if (u.track() != nullptr || u.request_id()) {
      return nullptr;
    }
    u.adopt_publish(request_id, alias, properties);
    by_alias[alias] = &u;
    return &u;
  }
  void drop_published(UpstreamSubscription* u) override {
    u->drop_publish();
    forget_upstream(u);
  }
  void retry_held_subgroups() override { ++retries; }
  void on_control_message(wi::ControlMessage m) override { routed.push_back(std::move(m)); }
  // UpstreamContext
  std::optional<uint64_t> take_request_id() override { return std::nullopt; }
  std::optional<std::string> to_peer(const std::string& full) const override {
    return full;
  }
  void request_upstream(UpstreamSubscription*) override { ++subscribes; }
  void forget_upstream(UpstreamSubscription* u) override {
    for (auto it = by_alias.begin(); it != by_alias.end();) {
      it = it->second == u ? by_alias.erase(it) : std::next(it);
    }
  }
  // BroadcastSource
  model::TrackSource& track_source(const std::string& path, const std::string& name) override {
    return upstream(path, name);
  }

  UpstreamSubscription& upstream(const std::string& full, const std::string& name) {
    auto& u = upstreams_[{full, name}];
    if (!u) {
      u = std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), full, name);
    }
    return *u;
  }

  bool client = false;
  std::set<std::string> announced;  // PUBLISH_NAMESPACEd by the peer
  std::map<uint64_t, UpstreamSubscription*> by_alias;
  std::vector<uint64_t> accepted_ids;
  int retries = 0;
  int subscribes = 0;  // upstream SUBSCRIBEs asked for (none: a PUBLISH is the subscription)
  std::vector<wi::ControlMessage> routed;

 private:
  // Declared before the origin: its tracks stop their sources as it goes.
  std::map<std::pair<std::string, std::string>, std::unique_ptr<UpstreamSubscription>> upstreams_;

 public:
  model::Origin origin_;
  FakeSessionHandler handler_;
};

struct PublishCase {
  explicit PublishCase(wire::Version v) : ctx(v) {}
  wi::Publish publish(const std::string& body_hex) {
    return std::get<wi::Publish>(from_peer(ctx.draft(), 0x1d, body_hex));
  }
  FakePublishContext ctx;
  PublishService svc{ctx};
};

// d16 §9.13 PUBLISH id `id` of ["room","alice"] "video" under `alias`, 1 parameter FORWARD 1.
std::string publish16(const char* id, const char* alias) {
  return std::string(id) + " " + kRoomAliceVideo + " " + alias + " 01 10 01";
}

TEST(IetfPublishService, Draft16PublishOkByteExactFeedsTheOriginUntilTheTrackEnds) {
  PublishCase c(wire::Version::kTransport16);
  c.svc.on_publish(c.publish(publish16("00", "05")));
  EXPECT_EQ(c.ctx.accepted_ids, std::vector<uint64_t>{0});
  // PUBLISH_OK id 0, 3 parameters (delta-coded types): FORWARD 0x10 = 1, SUBSCRIBER_PRIORITY 0x20
  // = 128, SUBSCRIPTION_FILTER 0x21 = Next Group Start (length 1, 0x1).
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(c.ctx.sent_hex(0), canon("1e 00 0a 00 03 10 01 10 4080 01 01 01"));
  // The namespace became a broadcast of the session; its track is fed by the PUBLISH (request 0,
  // alias 5), no SUBSCRIBE of ours; held SUBGROUP streams are read again.
  EXPECT_EQ(c.ctx.handler_.announces, std::vector<std::string>{"+room/alice"});
  EXPECT_EQ(c.ctx.origin_.active_source("room/alice"), &c.ctx.source());
  UpstreamSubscription* u = c.ctx.upstream_by_alias(5);
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(u->request_id(), std::optional<uint64_t>(0));
  ASSERT_NE(u->track(), nullptr);
  EXPECT_EQ(c.ctx.subscribes, 0);
  EXPECT_EQ(c.ctx.retries, 1);
  EXPECT_EQ(c.svc.active(), 1u);
  // PUBLISH_DONE (the session routes it to the subscription) with Stream Count 0: after the quiet
  // grace the track ends; the Hold lets the PUBLISH go and the implicit announcement is withdrawn.
  u->on_publish_done(wi::PublishDone{0, 0x2, 0, "done"});
  c.ctx.clock_.advance(std::chrono::milliseconds(750));
  EXPECT_EQ(c.svc.active(), 0u);
  EXPECT_EQ(c.ctx.handler_.announces, (std::vector<std::string>{"+room/alice", "-room/alice"}));
  EXPECT_FALSE(c.ctx.origin_.is_active("room/alice"));
  // The track's stop: UNSUBSCRIBE 0 (d16 §9.6).
  ASSERT_EQ(c.ctx.sent.size(), 2u);
  EXPECT_EQ(c.ctx.sent_hex(1), canon("0a 00 01 00"));
  EXPECT_EQ(c.ctx.upstream_by_alias(5), nullptr);
  EXPECT_FALSE(c.ctx.is_closed());
}

TEST(IetfPublishService, Draft20PublishAnsweredWithAnEmptyRequestOkThenItsStreamEnds) {
  PublishCase c(wire::Version::kTransport20);
  c.ctx.announced.insert("room/alice");  // PUBLISH_NAMESPACEd: no implicit announcement
  c.ctx.origin_.announce("room/alice", &c.ctx.source());
  c.svc.on_publish(c.publish(publish16("02", "07")));
  // d20 §10.12 (#1834): REQUEST_OK on the PUBLISH's stream, no parameters, no Track Properties.
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(c.ctx.sent_hex(0), canon("07 00 01 00"));
  EXPECT_TRUE(c.ctx.handler_.announces.empty());
  EXPECT_EQ(c.svc.active(), 1u);
  // The request stream: PUBLISH_DONE goes to the session under the stream's request id, its
  // uncounted Stream Count (2^62-1, d17 §9.13) as it came (the session's on_publish_done reads it).
  EXPECT_TRUE(c.svc.on_stream_message(
      2, wi::PublishDone{0, 0x2, (uint64_t{1} << 62) - 1, "bye"}));
  ASSERT_EQ(c.ctx.routed.size(), 1u);
  EXPECT_EQ(std::get<wi::PublishDone>(c.ctx.routed[0]), (wi::PublishDone{2, 0x2, (uint64_t{1} << 62) - 1, "bye"}));
  PublishService::on_stream_closed(c.ctx, 2, true);  // after its PUBLISH_DONE: nothing more
  EXPECT_EQ(c.ctx.routed.size(), 1u);
  // Closed without one: the session hears a PUBLISH_DONE counting no streams.
  PublishService::on_stream_closed(c.ctx, 4, false);
  ASSERT_EQ(c.ctx.routed.size(), 2u);
  const auto& d = std::get<wi::PublishDone>(c.ctx.routed[1]);
  EXPECT_EQ(d.request_id, 4u);
  EXPECT_EQ(d.stream_count, 0u);
  // Anything else on the stream closes the session: PROTOCOL_VIOLATION.
  EXPECT_FALSE(c.svc.on_stream_message(2, wi::RequestOk{}));
  EXPECT_EQ(c.ctx.failed_code, std::optional<wi::TerminationCode>(wi::TerminationCode::kProtocolViolation));
}

// Refusals: d14 PUBLISH_ERROR (0x1F, d14 §9.15) and d15+ REQUEST_ERROR with the same codes; an
// alias in use closes the session with DUPLICATE_TRACK_ALIAS.
TEST(IetfPublishService, RefusalsCarryTheDraftsCodesAndAnAliasInUseClosesTheSession) {
  for (wire::Version v : {wire::Version::kTransport14, wire::Version::kTransport20}) {
    PublishCase c(v);
    const bool d14 = v == wire::Version::kTransport14;
    c.ctx.handler_.denied = "room/carol";
    auto pub = [&](uint64_t id, const std::string& peer_path, uint64_t alias) {
      wi::Publish m;
      m.request_id = id;
      m.ns = wi::to_namespace(peer_path);
      m.track = "video";
      m.track_alias = alias;
      m.group_order = 1;
      return m;
    };
    c.svc.on_publish(pub(0, "room/carol", 1));  // unauthorized: 0x1
    c.svc.on_publish(pub(2, "room/alice", 2));  // accepted
    c.svc.on_publish(pub(4, "room/alice", 3));  // the same track again: UNINTERESTED 0x4
    c.ctx.client = true;
    c.svc.on_publish(pub(6, "room/bob", 4));    // the client role takes none: NOT_SUPPORTED 0x3
    c.ctx.client = false;
    ASSERT_EQ(c.ctx.sent.size(), 4u);
    const std::vector<std::pair<uint64_t, uint64_t>> want = {{0, 0x1}, {4, 0x4}, {6, 0x3}};
    const size_t at[] = {0, 2, 3};
    for (size_t i = 0; i < want.size(); ++i) {
      const auto& e = std::get<wi::RequestError>(c.ctx.sent[at[i]]);
      EXPECT_EQ(e.type, d14 ? wi::MessageType::kPublishError : wi::MessageType::kRequestError);
      EXPECT_EQ(e.request_id, want[i].first);
      EXPECT_EQ(e.error_code, want[i].second) << "draft " << int{c.ctx.row().number} << " #" << i;
    }
    EXPECT_TRUE(std::holds_alternative<wi::PublishOk>(c.ctx.sent[1]));
    EXPECT_EQ(c.svc.active(), 1u);
    EXPECT_EQ(c.ctx.handler_.announces, std::vector<std::string>{"+room/alice"});  // refusals undone
    EXPECT_FALSE(c.ctx.is_closed());
    c.svc.on_publish(pub(8, "room/bob", 2));  // alias 2 is the accepted PUBLISH's
    EXPECT_EQ(c.ctx.failed_code,
              std::optional<wi::TerminationCode>(wi::TerminationCode::kDuplicateTrackAlias));
    EXPECT_EQ(c.ctx.sent.size(), 4u);
  }
}

// ---------------------------------------------------------------------------------------------
// DatagramReceiver (ietf_datagram.h): OBJECT_DATAGRAMs into the upstream track of their alias.

class FakeIngressContext final : public FakeHandlerContext, public IngressContext {
 public:
  explicit FakeIngressContext(wire::Version v) : FakeHandlerContext(v) {}
  bool admit_ingress(uint64_t n) override {
    ingress += n;
    return true;
  }
  model::Track* upstream_track(uint64_t a) override { return a == alias ? track : nullptr; }
  uint64_t alias = 9;
  model::Track* track = nullptr;
  uint64_t ingress = 0;
};

// room/alice "video" with a viewer, fed through alias 9 by a DatagramReceiver in draft `v`.
struct DatagramCase {
  explicit DatagramCase(wire::Version v)
      : ctx(v), origin(model::OriginConfig{}, ctx.clock_, ctx.clock_), broadcast(origin, "room/alice") {
    EXPECT_TRUE(viewer.subscribe(origin, "room/alice", "video"));
    ctx.track = broadcast.feed("video").track();
    EXPECT_NE(ctx.track, nullptr);
  }
  void datagram(std::string_view h) {
    const auto bytes = from_hex(h);
    r.on_datagram(std::span<const uint8_t>(bytes));
    for (int i = 0; i < 4; ++i) {
      ctx.clock_.advance(Duration::zero());
    }
  }
  FakeIngressContext ctx;
  model::Origin origin;
  testing::TestBroadcast broadcast;
  testing::FrameCollector viewer;
  DatagramReceiver r{ctx};
};

TEST(IetfDatagramReceiver, Draft16DatagramsBecomeGroupsAndWhatTheModelCannotCarryIsDropped) {
  DatagramCase c(wire::Version::kTransport16);
  // d16 §10.3.1: 0x0C Object ID 0, default priority: group 4 "hi", open.
  c.datagram("0c 09 04 6869");
  ASSERT_NE(c.viewer.group(4), nullptr);
  EXPECT_FALSE(c.viewer.group(4)->finished);
  // 0x00 Object ID 1, priority 0x80: "yo"; then status 0x20 at Object ID 2: End of Group (3).
  c.datagram("00 09 04 01 80 796f");
  c.datagram("20 09 04 02 80 03");
  EXPECT_EQ(c.viewer.group(4)->frames, (std::vector<std::string>{"hi", "yo"}));
  EXPECT_TRUE(c.viewer.group(4)->finished);
  // 0x0E END_OF_GROUP, Object ID 0, default priority: group 5 of one object.
  c.datagram("0e 09 05 7a");
  ASSERT_NE(c.viewer.group(5), nullptr);
  EXPECT_EQ(c.viewer.group(5)->frames, (std::vector<std::string>{"z"}));
  EXPECT_TRUE(c.viewer.group(5)->finished);
  EXPECT_EQ(c.r.accepted(), 4u);
  EXPECT_EQ(c.ctx.ingress, 5u);  // payload bytes, against --max-publisher-rate
  // Dropped, not half applied: an unknown alias; object 2 of group 6 that never began; extensions
  // other than a timestamp (0x0D: {0x0a: 1}).
  c.datagram("0c 07 06 61");
  c.datagram("00 09 06 02 80 61");
  c.datagram("0d 09 06 02 0a 01 61");
  EXPECT_EQ(c.r.dropped(), 3u);
  EXPECT_EQ(c.viewer.group(6), nullptr);
  EXPECT_FALSE(c.ctx.is_closed());
  // A type d16 lacks (0x10): PROTOCOL_VIOLATION.
  c.datagram("10 09 06 01 80 61");
  ASSERT_TRUE(c.ctx.failed_error.has_value());
  EXPECT_EQ(c.ctx.failed_error->code, ErrorCode::kProtocolViolation);
  // The session is closing: nothing more is read.
  c.datagram("0c 09 07 61");
  EXPECT_EQ(c.viewer.group(7), nullptr);
}

TEST(IetfDatagramReceiver, Draft20TimestampKeptAndPropertiesOnAStatusCloseTheSession) {
  DatagramCase c(wire::Version::kTransport20);
  // Group 100 is one byte in d20's leading-ones varints. 0x0F: PROPERTIES (a timestamp 0x10 = 5),
  // END_OF_GROUP, Object ID 0, default priority.
  c.datagram("0f 09 64 02 10 05 7a");
  ASSERT_NE(c.viewer.group(100), nullptr);
  EXPECT_EQ(c.viewer.group(100)->frames, (std::vector<std::string>{"z"}));
  EXPECT_TRUE(c.viewer.group(100)->finished);
  // The object keeps its block as it came, marked unreliable, with its timestamp.
  bool seen = false;
  c.ctx.track->for_each_group_from(0, [&](const model::GroupRef& g) {
    if (g->sequence() == 100 && g->objects().size() == 1) {
      const model::Object& o = g->objects()[0];
      seen = true;
      EXPECT_TRUE(o.unreliable);
      EXPECT_EQ(o.timestamp, 5u);
      EXPECT_EQ(to_hex(o.extensions.span()), canon("10 05"));
      EXPECT_EQ(o.extensions_draft, 20u);
    }
  });
  EXPECT_TRUE(seen);
  // A group begun but never ended is let go when the session closes: not finished by it.
  c.datagram("0c 09 65 6869");
  ASSERT_NE(c.viewer.group(101), nullptr);
  c.r.on_session_closed();
  c.datagram("08 09 65 01 61");  // object 1 of 101: its open group was let go, so dropped
  EXPECT_EQ(c.viewer.group(101)->frames, (std::vector<std::string>{"hi"}));
  EXPECT_FALSE(c.viewer.group(101)->finished);
  EXPECT_EQ(c.r.dropped(), 1u);
  // Properties on an End of Group status (d20 §11.3.1: "only Normal Objects can have
  // Properties"): PROTOCOL_VIOLATION.
  c.datagram("25 09 66 80 02 10 05 03");
  ASSERT_TRUE(c.ctx.failed_error.has_value());
  EXPECT_EQ(c.ctx.failed_error->code, ErrorCode::kProtocolViolation);
}

}  // namespace ietf_handlers2_test
}  // namespace moqd::session::ietf_detail
