// The IETF session's client role (drafts 14..16), on a fake transport: a client-role session made
// by make_session() on a MuxSession whose protocol is the draft's ALPN (or the SETUP path for 14),
// and a RawPeer relay that speaks the wire by hand. The handshake bytes are checked exactly; the
// rest is decoded with wire/ietf.h.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "base/codec.h"
#include "session/ietf_session.h"
#include "testing/session_fixture.h"
#include "wire/ietf.h"

namespace moqd::session {
namespace {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
using transport::websocket::MuxSession;
namespace wi = wire::ietf;
namespace ws = transport::websocket;

std::string hex_of(const std::string& s) {
  return to_hex(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

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
  void on_track_ended(model::Track&, Error) override { ended = true; }
  bool ended = false;
};

class ClientFixture {
 public:
  ClientFixture(std::string protocol, wire::Version draft, std::optional<std::string> discover)
      : draft_(draft), origin_(model::OriginConfig{}, clock_, clock_), handler_(origin_) {
    relay_mux_ = std::make_unique<MuxSession>(channels_.a(), clock_, ws::Framing::kQmux00,
                                              ws::Role::kServer, protocol, "/", "client",
                                              ws::MuxConfig{});
    client_mux_ = std::make_unique<MuxSession>(channels_.b(), clock_, ws::Framing::kQmux00,
                                               ws::Role::kClient, protocol, "/", "server",
                                               ws::MuxConfig{});
    channels_.a().set_handler(relay_mux_.get());
    channels_.b().set_handler(client_mux_.get());
    relay_ = std::make_unique<RawPeer>(*relay_mux_);
    relay_mux_->set_visitor(relay_.get());
    SessionConfig sc;
    sc.role = Role::kClient;
    sc.versions = wire::VersionSet::none();
    sc.versions.add(draft);
    sc.discover_prefix = std::move(discover);
    session_ = make_session(*client_mux_, sc, origin_, handler_, clock_, clock_);
  }
  ~ClientFixture() {
    session_.reset();
    relay_mux_->set_visitor(nullptr);
    client_mux_->set_visitor(nullptr);
    channels_.a().set_handler(nullptr);
    channels_.b().set_handler(nullptr);
    client_mux_.reset();
    relay_mux_.reset();
    relay_.reset();
  }
  void start() {
    session_->start();
    pump();
  }
  void pump() {
    int quiet = 0;
    for (int i = 0; i < 100000 && quiet < 2; ++i) {
      clock_.advance(Duration::zero());
      quiet = channels_.deliver() == 0 ? quiet + 1 : 0;
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
  testing::FakeChannelPair channels_;
  model::Origin origin_;
  RecordingHandler handler_;
  std::unique_ptr<MuxSession> relay_mux_;
  std::unique_ptr<MuxSession> client_mux_;
  std::unique_ptr<RawPeer> relay_;
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

// A namespace the relay ends while the client still receives one of its tracks stays in the
// client's origin (its groups are not cut off) until the subscription ends with PUBLISH_DONE.
TEST(IetfClientTest, AWithdrawnNamespaceOutlivesItsSubscriptionUntilPublishDone) {
  ClientFixture f("moqt-16", wire::Version::kTransport16, std::string("room"));
  f.start();
  f.server_setup();
  RawStream& ns = *f.relay_->incoming.at(1);
  ns.write(encoded(f.draft_, wi::Namespace{false, {"alice"}}));
  f.pump();
  model::Track* t = f.origin_.track("room/alice", "video");
  ASSERT_NE(t, nullptr);
  Holder holder;
  t->add_listener(&holder);
  f.control().data.clear();
  f.pump();
  auto out = messages(f.draft_, f.control().data);
  ASSERT_EQ(out.size(), 1u);
  const auto* sub = std::get_if<wi::Subscribe>(&out[0]);
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->request_id, 2u);  // after SUBSCRIBE_NAMESPACE's 0
  ns.write(encoded(f.draft_, wi::Namespace{true, {"alice"}}));
  f.pump();
  EXPECT_TRUE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(holder.ended);
  f.send(f.control(), wi::PublishDone{sub->request_id, 2, 0, "done"});
  f.advance(std::chrono::milliseconds(300));  // PUBLISH_DONE's grace for streams in flight
  EXPECT_TRUE(holder.ended);
  EXPECT_FALSE(f.origin_.is_active("room/alice"));
  EXPECT_FALSE(f.handler_.is_closed());
}

}  // namespace
}  // namespace moqd::session
