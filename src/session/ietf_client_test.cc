// The IETF session's client role (drafts 14..20), on a fake transport: a client-role session made
// by make_session() on a MuxSession whose protocol is the draft's ALPN (or the SETUP path for 14),
// and a RawPeer relay that speaks the wire by hand. The handshake bytes are checked exactly; the
// rest is decoded with wire/ietf.h.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/codec.h"
#include "session/ietf_session.h"
#include "testing/ietf_fixture.h"
#include "testing/mux_pair.h"
#include "testing/session_fixture.h"
#include "wire/ietf.h"

namespace moqd::session {
namespace {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
namespace wi = wire::ietf;

using testing::hex_of;

// Every whole control message in `data`.
std::vector<wi::ControlMessage> messages(wire::Version v, const std::string& data) {
  std::vector<wi::ControlMessage> out;
  std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(data.data()), data.size());
  while (!in.empty()) {
    auto r = wi::decode_control(v, in, wi::Limits{});
    if (!r || !r->has_value()) {
      ADD_FAILURE() << "undecodable control bytes: " << to_hex(in);
      break;
    }
    out.push_back((*r)->value);
    in = in.subspan((*r)->consumed);
  }
  return out;
}

std::vector<uint8_t> encoded(wire::Version v, const wi::ControlMessage& m) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(wi::encode(v, m, out));
  return out;
}

// A model::TrackListener that keeps a track alive and records its end.
struct Holder final : model::TrackListener {
  void on_track_data(model::Track&) override {}
  void on_track_ended(model::Track& t, Error) override {
    ended = true;
    largest_at_end = t.largest_sequence();  // the track may be gone once it has ended
  }
  bool ended = false;
  std::optional<uint64_t> largest_at_end;
};

class ClientFixture {
 public:
  ClientFixture(std::string protocol, wire::Version draft, std::optional<std::string> discover)
      : draft_(draft),
        origin_(model::OriginConfig{}, clock_, clock_),
        handler_(origin_),
        muxes_(clock_, protocol) {
    relay_ = std::make_unique<RawPeer>(muxes_.server());
    muxes_.server().set_visitor(relay_.get());
    SessionConfig sc;
    sc.role = Role::kClient;
    sc.versions = wire::VersionSet::none();
    sc.versions.add(draft);
    sc.discover_prefix = std::move(discover);
    session_ = make_session(muxes_.client(), sc, origin_, handler_, clock_, clock_);
  }
  ~ClientFixture() { session_.reset(); }  // then muxes_ goes, then relay_
  void start() {
    session_->start();
    pump();
  }
  void pump() {
    int quiet = 0;
    for (int i = 0; i < 100000 && quiet < 2; ++i) {
      clock_.advance(Duration::zero());
      quiet = muxes_.channels().deliver() == 0 ? quiet + 1 : 0;
    }
  }
  void advance(Duration d) {
    constexpr Duration kStep = std::chrono::milliseconds(10);
    for (; d > Duration::zero(); d -= kStep) {
      clock_.advance(std::min(d, kStep));
      pump();
    }
  }
  // The control stream the client opened (the relay's first incoming stream).
  RawStream& control() { return *relay_->incoming.at(0); }
  void send(RawStream& s, const wi::ControlMessage& m) {
    s.write(encoded(draft_, m));
    pump();
  }
  // SERVER_SETUP granting request ids below 1024 (d14: selecting `version`).
  void server_setup(uint64_t version = 0) {
    wi::ServerSetup s;
    s.version = version != 0 ? version : static_cast<uint64_t>(draft_);
    s.params.push_back(wi::Parameter{wi::kSetupMaxRequestId, 1024, {}});
    control().data.clear();
    send(control(), s);
  }

  wire::Version draft_;
  ManualClock clock_;
  model::Origin origin_;
  RecordingHandler handler_;
  std::unique_ptr<RawPeer> relay_;  // the relay side's visitor: outlives muxes_
  testing::MuxPair muxes_;          // server: the relay (relay_); client: session_
  std::unique_ptr<MoqSession> session_;
};

TEST(IetfClientTest, Draft16ClientSetupThenReadyOnServerSetup) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::nullopt);
  ASSERT_NE(dynamic_cast<IetfSession*>(f.session_.get()), nullptr);
  f.start();
  ASSERT_EQ(f.relay_->incoming.size(), 1u);
  // CLIENT_SETUP: one parameter, MaxRequestId (delta 2) = 1025 (the relay's ids are odd from 1).
  EXPECT_EQ(hex_of(f.control().data), "20 00 04 01 02 44 01");
  EXPECT_FALSE(f.session_->is_ready());
  f.server_setup();
  ASSERT_TRUE(f.handler_.ready_version.has_value());
  EXPECT_EQ(*f.handler_.ready_version, wire::Version::kTransport16);
  EXPECT_TRUE(f.session_->is_ready());
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST(IetfClientTest, Draft14OffersOnlyItsVersionOnTheSetupPath) {
  ClientFixture f("", wire::Version::kTransport14, std::nullopt);
  ASSERT_NE(dynamic_cast<IetfSession*>(f.session_.get()), nullptr);
  f.start();
  ASSERT_EQ(f.relay_->incoming.size(), 1u);
  // Versions [0xff00000e], then MaxRequestId 1025 (no delta coding in d14).
  EXPECT_EQ(hex_of(f.control().data), "20 00 0d 01 c0 00 00 00 ff 00 00 0e 01 02 44 01");
  f.server_setup();
  EXPECT_EQ(f.handler_.ready_version, wire::Version::kTransport14);
}

TEST(IetfClientTest, Draft14ServerSelectingAnotherVersionFailsNegotiation) {
  ClientFixture f("", wire::Version::kTransport14, std::nullopt);
  f.start();
  f.server_setup(static_cast<uint64_t>(wire::Version::kLite02));
  EXPECT_FALSE(f.handler_.ready_version.has_value());
  ASSERT_TRUE(f.relay_->closed_code.has_value());
  EXPECT_EQ(*f.relay_->closed_code, 0x15u);  // VERSION_NEGOTIATION_FAILED
}

TEST(IetfClientTest, FirstMessageOtherThanServerSetupIsAViolation) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::nullopt);
  f.start();
  f.send(f.control(), wi::ClientSetup{});
  EXPECT_FALSE(f.handler_.ready_version.has_value());
  ASSERT_TRUE(f.relay_->closed_code.has_value());
  EXPECT_EQ(*f.relay_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
}

TEST(IetfClientTest, PublishesTheOriginsBroadcastsAndServesTheRelaysSubscribe) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::nullopt);
  TestBroadcast b(f.origin_, "room/alice");
  f.start();
  f.server_setup();
  // PUBLISH_NAMESPACE id 0 ["room","alice"], no params: the bytes moqd's relay role reads.
  EXPECT_EQ(hex_of(f.control().data), "06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00");
  f.control().data.clear();
  f.send(f.control(), wi::RequestOk{wi::MessageType::kRequestOk, 0, {}, {}});
  // The relay subscribes with its first (odd) request id; the client serves it.
  wi::Subscribe s;
  s.request_id = 1;
  s.ns = {"room", "alice"};
  s.track = "video";
  f.send(f.control(), s);
  auto out = messages(f.draft_, f.control().data);
  ASSERT_EQ(out.size(), 1u);
  const auto* ok = std::get_if<wi::SubscribeOk>(&out[0]);
  ASSERT_NE(ok, nullptr);
  EXPECT_EQ(ok->request_id, 1u);
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 0, {"hi"});
  f.pump();
  ASSERT_EQ(f.relay_->incoming.size(), 2u);  // the control stream, then one SUBGROUP stream
  EXPECT_TRUE(f.relay_->incoming[1]->fin);
  // The broadcast ends: d16 PUBLISH_NAMESPACE_DONE names request 0.
  f.control().data.clear();
  b.unannounce();
  f.pump();
  bool done = false;
  for (const auto& m : messages(f.draft_, f.control().data)) {
    if (const auto* d = std::get_if<wi::PublishNamespaceDone>(&m)) {
      EXPECT_EQ(d->request_id, 0u);
      done = true;
    }
  }
  EXPECT_TRUE(done);
  EXPECT_FALSE(f.handler_.is_closed());
}

// A track that ends is served until the relay answers PUBLISH_DONE with UNSUBSCRIBE (it has read
// every stream): `moq pub` waits on subscription_count() before closing.
TEST(IetfClientTest, AnEndedSubscriptionCountsUntilTheRelayUnsubscribes) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::nullopt);
  TestBroadcast b(f.origin_, "room/alice");
  f.start();
  f.server_setup();
  wi::Subscribe s;
  s.request_id = 1;
  s.ns = {"room", "alice"};
  s.track = "video";
  f.send(f.control(), s);
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 0, {"hi"});
  f.control().data.clear();
  b.feed("video").track()->end(make_error(ErrorCode::kClosed, "publisher done"));
  // PUBLISH_DONE waits a few 1 ms polls after the last group stream is sent (d14-16).
  f.advance(std::chrono::milliseconds(20));
  auto out = messages(f.draft_, f.control().data);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_NE(std::get_if<wi::PublishDone>(&out[0]), nullptr);
  EXPECT_EQ(f.session_->subscription_count(), 1u);
  f.send(f.control(), wi::Unsubscribe{1});
  EXPECT_EQ(f.session_->subscription_count(), 0u);
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST(IetfClientTest, AnEvenRequestIdFromTheRelayIsInvalid) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::nullopt);
  f.start();
  f.server_setup();
  wi::Subscribe s;
  s.request_id = 0;  // a client's id
  s.ns = {"room"};
  s.track = "video";
  f.send(f.control(), s);
  ASSERT_TRUE(f.relay_->closed_code.has_value());
  EXPECT_EQ(*f.relay_->closed_code, 0x4u);  // INVALID_REQUEST_ID
}

TEST(IetfClientTest, Draft16DiscoveryOnItsOwnStream) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::string("room"));
  f.start();
  f.server_setup();
  ASSERT_EQ(f.relay_->incoming.size(), 2u);
  RawStream& ns = *f.relay_->incoming[1];
  // SUBSCRIBE_NAMESPACE id 0 ["room"], options 1 (NAMESPACE only), no params.
  EXPECT_EQ(hex_of(ns.data), "11 00 09 00 01 04 72 6f 6f 6d 01 00");
  ns.write(encoded(f.draft_, wi::RequestOk{wi::MessageType::kRequestOk, 0, {}, {}}));
  ns.write(encoded(f.draft_, wi::Namespace{false, {"alice"}}));
  f.pump();
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  ns.write(encoded(f.draft_, wi::Namespace{true, {"alice"}}));
  f.pump();
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST(IetfClientTest, Draft15DiscoveryOnTheControlStream) {
  ClientFixture f("moqt-15", wire::Version::kTransport15, std::string("room"));
  f.start();
  f.server_setup();
  auto out = messages(f.draft_, f.control().data);
  ASSERT_EQ(out.size(), 1u);
  const auto* sn = std::get_if<wi::SubscribeNamespace>(&out[0]);
  ASSERT_NE(sn, nullptr);
  EXPECT_EQ(sn->prefix, (wi::TrackNamespace{"room"}));
  f.send(f.control(), wi::RequestOk{wi::MessageType::kRequestOk, sn->request_id, {}, {}});
  f.send(f.control(), wi::Namespace{false, {"bob"}});
  EXPECT_TRUE(f.origin_.is_active("room/bob"));
  f.send(f.control(), wi::Namespace{true, {"bob"}});
  EXPECT_FALSE(f.origin_.is_active("room/bob"));
}

// Named apart: the unity build compiles other session tests into this TU.
namespace client_publish_done {

// The client's subscription to room/alice's track "video": `t` is that track in the client's
// origin, `holder` listens to it, `sub` is the SUBSCRIBE the client sent.
struct AliceSubscription {
  Holder holder;
  model::Track* t = nullptr;
  wi::Subscribe sub;
};

// The d16 client `f` started; the relay announces room/alice and the client subscribes to its
// track "video" (the only message on the control stream after the announcement); with `accept`,
// the relay answers SUBSCRIBE_OK, track alias 9.
void subscribe_to_alice(ClientFixture& f, AliceSubscription& a, bool accept = false) {
  f.start();
  f.server_setup();
  RawStream& ns = *f.relay_->incoming.at(1);
  ns.write(encoded(f.draft_, wi::Namespace{false, {"alice"}}));
  f.pump();
  a.t = f.origin_.track("room/alice", "video");
  ASSERT_NE(a.t, nullptr);
  a.t->add_listener(&a.holder);
  f.control().data.clear();
  f.pump();
  auto out = messages(f.draft_, f.control().data);
  ASSERT_EQ(out.size(), 1u);
  const auto* s = std::get_if<wi::Subscribe>(&out[0]);
  ASSERT_NE(s, nullptr);
  a.sub = *s;
  if (accept) {
    wi::SubscribeOk ok;
    ok.request_id = a.sub.request_id;
    ok.track_alias = 9;
    f.send(f.control(), ok);
  }
}

// A SUBGROUP stream's bytes for alias 9, group `group`: its header and one object "abc".
std::vector<uint8_t> group_stream(const ClientFixture& f, uint64_t group) {
  wi::SubgroupHeader h;
  h.type = wi::subgroup_type(false, false, true, true);
  h.track_alias = 9;
  h.group = group;
  h.publisher_priority = 1;
  wi::ObjectHeader oh;
  oh.payload_length = 3;
  std::vector<uint8_t> bytes;
  wi::encode(f.draft_, h, bytes);
  wi::encode_object(f.draft_, h, oh, bytes);
  bytes.insert(bytes.end(), {'a', 'b', 'c'});
  return bytes;
}

// The relay opens `u`, a SUBGROUP stream of group `group` (group_stream), left unfinished.
void open_group(ClientFixture& f, uint64_t group, transport::Stream*& u) {
  u = f.muxes_.server().open_uni();
  ASSERT_NE(u, nullptr);
  u->write(Bytes::from(group_stream(f, group)));
}

// A namespace the relay ends while the client still receives one of its tracks stays in the
// client's origin (its groups are not cut off) until the subscription ends with PUBLISH_DONE.
TEST(IetfClientTest, AWithdrawnNamespaceOutlivesItsSubscriptionUntilPublishDone) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::string("room"));
  AliceSubscription a;
  ASSERT_NO_FATAL_FAILURE(subscribe_to_alice(f, a));
  EXPECT_EQ(a.sub.request_id, 2u);  // after SUBSCRIBE_NAMESPACE's 0
  f.relay_->incoming.at(1)->write(encoded(f.draft_, wi::Namespace{true, {"alice"}}));
  f.pump();
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(a.holder.ended);
  f.send(f.control(), wi::PublishDone{a.sub.request_id, 2, 0, "done"});
  f.advance(std::chrono::milliseconds(800));  // PUBLISH_DONE's grace for streams in flight
  EXPECT_TRUE(a.holder.ended);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(f.handler_.is_closed());
}

// PUBLISH_DONE with Stream Count 0 (what @moq/net writes) right after its last groups: streams
// that arrive after it, 400 ms apart, still reach the track (the quiet grace restarts with each);
// the track ends once none has come for the grace.
TEST(IetfClientTest, PublishDoneWithoutStreamCountWaitsWhileStreamsArrive) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::string("room"));
  AliceSubscription a;
  ASSERT_NO_FATAL_FAILURE(subscribe_to_alice(f, a, /*accept=*/true));
  const uint64_t rid = a.sub.request_id;
  f.send(f.control(), wi::PublishDone{rid, 2, 0, "done"});
  for (uint64_t group = 1; group <= 3; ++group) {
    f.advance(std::chrono::milliseconds(400));
    ASSERT_FALSE(a.holder.ended) << "before group " << group;
    transport::Stream* u = nullptr;
    ASSERT_NO_FATAL_FAILURE(open_group(f, group, u));
    u->finish();
    f.pump();
    ASSERT_EQ(a.t->largest_sequence(), std::optional<uint64_t>(group));
  }
  f.advance(std::chrono::milliseconds(400));
  EXPECT_FALSE(a.holder.ended);
  f.advance(std::chrono::milliseconds(500));
  EXPECT_TRUE(a.holder.ended);
  EXPECT_FALSE(f.handler_.is_closed());
}

// PUBLISH_DONE with Stream Count 2^62-1 (d16 §9.15, d18 §10.11: the publisher "is unable to set
// Stream Count to the exact number of streams"): no count to wait for. The track ends once the
// stream still open has finished and none has come for the quiet grace (750 ms), not at the 5 s
// bound that a count never reached would take.
TEST(IetfClientTest, PublishDoneWithUnknownStreamCountEndsOnceStreamsAreDone) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::string("room"));
  AliceSubscription a;
  ASSERT_NO_FATAL_FAILURE(subscribe_to_alice(f, a, /*accept=*/true));
  const uint64_t rid = a.sub.request_id;
  // Group 1's stream: one object, not finished yet.
  transport::Stream* u = nullptr;
  ASSERT_NO_FATAL_FAILURE(open_group(f, 1, u));
  f.pump();
  // PUBLISH_DONE TRACK_ENDED, Stream Count 2^62-1: QUIC varint ff ff ff ff ff ff ff ff.
  const std::vector<uint8_t> done =
      encoded(f.draft_, wi::PublishDone{rid, 2, (uint64_t{1} << 62) - 1, ""});
  ASSERT_EQ(rid, 2u);
  EXPECT_EQ(to_hex(done), "0b 00 0b 02 02 ff ff ff ff ff ff ff ff 00");
  f.control().write(done);
  f.pump();
  f.advance(std::chrono::milliseconds(1000));
  EXPECT_FALSE(a.holder.ended);  // the open stream is waited for
  u->finish();
  f.pump();
  EXPECT_FALSE(a.holder.ended);  // a stream sent just before PUBLISH_DONE may still be on its way
  f.advance(std::chrono::milliseconds(800));
  EXPECT_TRUE(a.holder.ended);  // 1.8 s after PUBLISH_DONE; the old wait was the 5 s bound
  EXPECT_EQ(a.holder.largest_at_end, std::optional<uint64_t>(1));
  EXPECT_FALSE(f.handler_.is_closed());
}

}  // namespace client_publish_done

// --- drafts 17 to 20: SETUP on uni streams, a bidi stream per request, ids even from 0 ---

// Named apart from ietf_session_test.cc's d17: the unity build compiles both in one TU.
namespace client_d17 {

std::vector<uint8_t> bytes_of(const std::string& hex_text) { return from_hex(hex_text); }

class ClientRequestStreamsTest : public testing::IetfRequestStreamsTest {
 protected:
  // A request's id field: d17 adds the Required Request ID Delta (0).
  std::string id(const char* v) const { return d17() ? std::string(v) + " 00" : std::string(v); }
  // `type length(16) body` for a body of hex bytes (types below 0x40).
  static std::string msg(const char* type, const std::string& body_hex) {
    const size_t n = bytes_of(body_hex).size();
    char b[16];
    std::snprintf(b, sizeof b, "%s 00 %02zx", type, n);
    return body_hex.empty() ? std::string(b) : std::string(b) + " " + body_hex;
  }
  // The relay's SETUP (no options) on a uni stream of its own, kept open (GOAWAY goes there).
  transport::Stream* relay_setup(ClientFixture& f) {
    transport::Stream* u = f.muxes_.server().open_uni();
    EXPECT_NE(u, nullptr);
    if (u != nullptr) {
      u->write(Bytes::from(bytes_of("af 00 00 00")));
    }
    f.pump();
    return u;
  }
  // Incoming stream `i` of the relay, as bytes in hex.
  static std::string in(ClientFixture& f, size_t i) {
    return hex_of(f.relay_->incoming.at(i)->data);
  }
  // SUBSCRIBE ["room","alice"] "video" as moqd's relay role writes it, with request id `rid`.
  std::vector<uint8_t> subscribe(uint8_t rid) const {
    wi::Subscribe s;
    s.request_id = rid;
    s.ns = {"room", "alice"};
    s.track = "video";
    s.subscriber_priority = 7;
    s.forward = true;
    s.filter = wi::Filter{wi::FilterType::kLargestObject, {}, 0};
    if (GetParam().number == 20) {
      s.filter->type = wi::FilterType::kRelative;
      s.filter->relative_groups = 1;
    }
    return encoded(GetParam().version, s);
  }
};

TEST_P(ClientRequestStreamsTest, SetupOnAUniStreamAndNoRequestBeforeTheRelaysSetup) {
  ClientFixture f(GetParam().alpn, GetParam().version, std::string("room"));
  TestBroadcast b(f.origin_, "room/alice");
  f.start();
  // Our SETUP alone, on our first (uni) stream, no options, kept open: no control stream, and the
  // PUBLISH_NAMESPACE and SUBSCRIBE_NAMESPACE wait for the relay's SETUP.
  ASSERT_EQ(f.relay_->incoming.size(), 1u);
  EXPECT_TRUE(f.relay_->incoming[0]->stream->is_uni());
  EXPECT_EQ(in(f, 0), "af 00 00 00");
  EXPECT_FALSE(f.relay_->incoming[0]->fin);
  EXPECT_FALSE(f.session_->is_ready());
  relay_setup(f);
  ASSERT_TRUE(f.handler_.ready_version.has_value());
  EXPECT_EQ(*f.handler_.ready_version, GetParam().version);
  // Then each request on its own bidi stream, ids 0 and 2.
  ASSERT_EQ(f.relay_->incoming.size(), 3u);
  EXPECT_FALSE(f.relay_->incoming[1]->stream->is_uni());
  EXPECT_FALSE(f.relay_->incoming[2]->stream->is_uni());
  EXPECT_EQ(in(f, 0), "af 00 00 00");  // nothing more on the SETUP stream
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST_P(ClientRequestStreamsTest, PublishNamespaceOnItsStreamServesTheRelaysSubscribeUntilItCloses) {
  ClientFixture f(GetParam().alpn, GetParam().version, std::nullopt);
  TestBroadcast b(f.origin_, "room/alice");
  f.start();
  relay_setup(f);
  ASSERT_EQ(f.relay_->incoming.size(), 2u);
  RawStream& pn = *f.relay_->incoming[1];
  // PUBLISH_NAMESPACE id 0 ["room","alice"], no params.
  EXPECT_EQ(hex_of(pn.data), msg("06", id("00") + " 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00"));
  pn.write(bytes_of("07 00 01 00"));  // REQUEST_OK: no request id (17+), no params
  f.pump();
  // The relay subscribes on a bidi stream of its own with its first (odd) id; answered there.
  RawStream* r = f.relay_->open_bidi(subscribe(1));
  ASSERT_NE(r, nullptr);
  f.pump();
  // SUBSCRIBE_OK (no request id in 17+): alias 1 (the request id), no params, Track Properties
  // {TIMESCALE: 1000}.
  EXPECT_EQ(hex_of(r->data), "04 00 05 01 00 08 83 e8");
  ASSERT_NE(b.feed("video").track(), nullptr);
  b.write_group("video", 0, {"hi"});
  f.pump();
  ASSERT_EQ(f.relay_->incoming.size(), 3u);
  const RawStream& g = *f.relay_->incoming[2];
  // SUBGROUP: 17 type 0x19, 18+ with FIRST_OBJECT 0x59; alias 1, group 0, priority 7, "hi"
  // with {Timestamp: 1000000}, its arrival millisecond.
  EXPECT_EQ(hex_of(g.data), std::string(d17() ? "19" : "59") + " 01 00 07 00 04 10 cf 42 40 02 68 69");
  EXPECT_TRUE(g.fin);
  // The track ends: PUBLISH_DONE on the request's stream, which stays open (the relay closing it
  // is its UNSUBSCRIBE), and the subscription counts until then.
  r->data.clear();
  b.feed("video").track()->end(make_error(ErrorCode::kClosed, "publisher done"));
  f.pump();
  ASSERT_GE(r->data.size(), 3u);
  EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x0b);  // PUBLISH_DONE
  EXPECT_FALSE(r->fin);
  EXPECT_EQ(f.session_->subscription_count(), 1u);
  r->stream->finish();
  f.pump();
  EXPECT_TRUE(r->fin);
  EXPECT_EQ(f.session_->subscription_count(), 0u);
  // The broadcast ends: we close the PUBLISH_NAMESPACE stream (17 has no _DONE).
  EXPECT_FALSE(pn.fin);
  b.unannounce();
  f.pump();
  EXPECT_TRUE(pn.fin);
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST_P(ClientRequestStreamsTest, AnEvenRequestIdFromTheRelayIsInvalid) {
  ClientFixture f(GetParam().alpn, GetParam().version, std::nullopt);
  f.start();
  relay_setup(f);
  f.relay_->open_bidi(subscribe(2));  // a client's id
  f.pump();
  ASSERT_TRUE(f.relay_->closed_code.has_value());
  EXPECT_EQ(*f.relay_->closed_code, 0x4u);  // INVALID_REQUEST_ID
}

TEST_P(ClientRequestStreamsTest, DiscoveryThenSubscribeOnItsOwnStreamAndTheGroupsItCarries) {
  ClientFixture f(GetParam().alpn, GetParam().version, std::string("room"));
  f.start();
  relay_setup(f);
  ASSERT_EQ(f.relay_->incoming.size(), 2u);
  RawStream& ns = *f.relay_->incoming[1];
  // 17: SUBSCRIBE_NAMESPACE 0x11 with Subscribe Options 1 (NAMESPACE only); 18+: 0x50 without.
  if (d17()) {
    EXPECT_EQ(hex_of(ns.data), msg("11", "00 00 01 04 72 6f 6f 6d 01 00"));
  } else {
    EXPECT_EQ(hex_of(ns.data), msg("50", "00 01 04 72 6f 6f 6d 00"));
  }
  ns.write(bytes_of("07 00 01 00"));                                   // REQUEST_OK
  ns.write(bytes_of(msg("08", "01 05 61 6c 69 63 65")));               // NAMESPACE ["alice"]
  f.pump();
  ASSERT_TRUE(f.origin_.is_active("room/alice"));
  testing::FrameCollector viewer;
  ASSERT_TRUE(viewer.subscribe(f.origin_, "room/alice", "video"));
  f.pump();
  // Our SUBSCRIBE on a new bidi stream, the next even id (2).
  ASSERT_EQ(f.relay_->incoming.size(), 3u);
  RawStream& up = *f.relay_->incoming[2];
  auto out = messages(GetParam().version, up.data);
  ASSERT_EQ(out.size(), 1u);
  const auto* sub = std::get_if<wi::Subscribe>(&out[0]);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->request_id, 2u);
  EXPECT_EQ(sub->track, "video");
  // SUBSCRIBE_OK alias 9, then a SUBGROUP stream of the relay's for alias 9.
  up.write(bytes_of("04 00 02 09 00"));
  transport::Stream* u = f.muxes_.server().open_uni();
  ASSERT_NE(u, nullptr);
  // Alias 9, group 4, priority 0: "abc" and an empty object.
  const std::string type = d17() ? "18" : "58";
  u->write(Bytes::from(bytes_of(type + " 09 04 00 00 03 61 62 63 00 00 00")));
  u->finish();
  f.pump();
  const auto* g = viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->frames, (std::vector<std::string>{"abc", ""}));
  EXPECT_TRUE(g->finished);
  // PUBLISH_DONE and FIN from the relay: the track ends.
  up.write(bytes_of("0b 00 05 02 01 02 4f 4b"));
  up.stream->finish();
  f.advance(std::chrono::milliseconds(300));
  EXPECT_TRUE(viewer.ended);
  // NAMESPACE_DONE: the broadcast goes away.
  ns.write(bytes_of(msg("0e", "01 05 61 6c 69 63 65")));
  f.pump();
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(f.handler_.is_closed());
}

TEST_P(ClientRequestStreamsTest, GoawayOnTheRelaysSetupStreamReachesTheHandler) {
  ClientFixture f(GetParam().alpn, GetParam().version, std::nullopt);
  f.start();
  transport::Stream* u = relay_setup(f);
  ASSERT_NE(u, nullptr);
  std::vector<uint8_t> g = encoded(GetParam().version, wi::Goaway{"https://other/", 0});
  u->write(Bytes::from(g));
  f.pump();
  ASSERT_EQ(f.handler_.goaways.size(), 1u);
  EXPECT_EQ(f.handler_.goaways[0], "https://other/");
  EXPECT_FALSE(f.relay_->closed_code.has_value());
}

TEST_P(ClientRequestStreamsTest, ARefusedPublishNamespaceLeavesTheSessionUp) {
  ClientFixture f(GetParam().alpn, GetParam().version, std::nullopt);
  TestBroadcast b(f.origin_, "room/alice");
  f.start();
  relay_setup(f);
  RawStream& pn = *f.relay_->incoming.at(1);
  // REQUEST_ERROR UNAUTHORIZED (0x1), retry interval 0, "no", then FIN.
  wi::RequestError e;
  e.error_code = 1;
  e.reason = "no";
  pn.write(encoded(GetParam().version, e));
  pn.stream->finish();
  f.pump();
  EXPECT_TRUE(pn.fin);
  EXPECT_FALSE(f.relay_->closed_code.has_value());
  // Anything but an answer on it is a violation.
  ClientFixture f2(GetParam().alpn, GetParam().version, std::nullopt);
  TestBroadcast b2(f2.origin_, "room/alice");
  f2.start();
  relay_setup(f2);
  f2.relay_->incoming.at(1)->write(subscribe(1));
  f2.pump();
  ASSERT_TRUE(f2.relay_->closed_code.has_value());
  EXPECT_EQ(*f2.relay_->closed_code, 0x3u);  // PROTOCOL_VIOLATION
}

INSTANTIATE_TEST_SUITE_P(Drafts, ClientRequestStreamsTest, testing::request_stream_drafts(),
                         testing::request_stream_draft_name);

}  // namespace client_d17

}  // namespace
}  // namespace moqd::session
