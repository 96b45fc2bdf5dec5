// The IETF session's handlers one at a time, as quiche's moqt tests each stream kind: a handler of
// ietf_handlers.h on a fake stream, with a fake of its context (ietf_context.h) that records what
// the handler asked of the session. No IetfSession, transport or peer is involved.
#include "session/ietf_discovery.h"
#include "session/ietf_handlers.h"
#include "session/ietf_session_internal.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "base/codec.h"
#include "model/origin.h"
#include "testing/ietf_fakes.h"
#include "testing/session_fixture.h"

namespace moqd::session::ietf_detail {
namespace ietf_handlers_test {

namespace wi = wire::ietf;

// A stream whose peer side the test plays: bytes and FIN pushed in, what the handler wrote kept.
class FakeStream final : public transport::Stream {
 public:
  explicit FakeStream(transport::StreamId id) : id_(id) {}

  // The peer sends `hex` (and FIN); the handler hears of it.
  void push(std::string_view hex, bool fin = false) {
    auto b = from_hex(hex);
    in_.insert(in_.end(), b.begin(), b.end());
    peer_fin_ = peer_fin_ || fin;
    if (visitor_ != nullptr) {
      visitor_->on_readable();
    }
  }
  // The peer resets the stream, or asks us to stop sending on it.
  void peer_reset(uint64_t code) {
    if (visitor_ != nullptr) {
      visitor_->on_reset(code);
    }
  }
  void peer_stop_sending(uint64_t code) {
    if (visitor_ != nullptr) {
      visitor_->on_stop_sending(code);
    }
  }
  std::string written_hex() const { return to_hex(std::span<const uint8_t>(out_)); }

  transport::StreamId id() const override { return id_; }
  void set_visitor(transport::StreamVisitor* v) override { visitor_ = v; }
  std::span<const uint8_t> peek() const override { return std::span<const uint8_t>(in_); }
  void consume(size_t n) override { in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(n)); }
  bool is_fin_received() const override { return peer_fin_ && in_.empty(); }
  bool has_peer_fin() const override { return peer_fin_; }
  void stop_sending(uint64_t code) override { stop_sending_code = code; }
  size_t write_capacity() const override { return 1 << 20; }
  void write(Bytes data) override {
    auto s = data.span();
    out_.insert(out_.end(), s.begin(), s.end());
    if (hold) {
      queued += s.size();
    }
  }
  void finish() override { finished = true; }
  void reset(uint64_t code) override { reset_code = code; }
  size_t buffered() const override { return queued; }
  // The transport hands what `hold` kept queued to the network, and says so.
  void send_queued() {
    queued = 0;
    if (visitor_ != nullptr) {
      visitor_->on_sent();
    }
  }
  bool confirms_receipt() const override { return confirms; }
  bool receipt_pending() const override {
    return confirms && finished && !reset_code && !receipt_confirmed;
  }
  // The peer's transport confirms it has every byte and the FIN (qmux: the QX_PING answered).
  void confirm_receipt() {
    receipt_confirmed = true;
    if (visitor_ != nullptr) {
      visitor_->on_received();
    }
  }
  void set_send_order(uint64_t) override {}
  void release() override {
    released = true;
    visitor_ = nullptr;
  }

  bool finished = false;
  bool confirms = false;  // a transport that confirms receipt (qmux-01/02)
  bool receipt_confirmed = false;
  bool released = false;
  bool hold = false;  // written bytes stay queued (buffered()) until send_queued()
  size_t queued = 0;
  std::optional<uint64_t> reset_code;
  std::optional<uint64_t> stop_sending_code;

 private:
  transport::StreamId id_;
  transport::StreamVisitor* visitor_ = nullptr;
  std::vector<uint8_t> in_;
  bool peer_fin_ = false;
  std::vector<uint8_t> out_;
};

using testing::FakeHandlerContext;

// ---------------------------------------------------------------------------------------------
// SubgroupReader: a SUBGROUP stream of the peer's into the track of its alias.

class FakeSubgroupContext final : public FakeHandlerContext, public SubgroupContext {
 public:
  explicit FakeSubgroupContext(wire::Version v) : FakeHandlerContext(v) {}
  bool admit_ingress(uint64_t n) override {
    ingress += n;
    return true;
  }
  model::Track* upstream_track(uint64_t a) override { return a == alias ? track : nullptr; }
  bool hold_subgroup(SubgroupReader*, uint64_t) override { return false; }
  void upstream_reader(uint64_t a, bool started) override {
    readers.push_back(std::to_string(a) + (started ? " started" : " done"));
  }
  void on_subgroup_reader_done(SubgroupReader*) override { ++readers_done; }

  uint64_t alias = 9;
  model::Track* track = nullptr;
  uint64_t ingress = 0;
  std::vector<std::string> readers;
  int readers_done = 0;
};

// An origin with the broadcast room/alice and a viewer of its track "video", which the peer feeds.
struct Upstream {
  Upstream() : origin(model::OriginConfig{}, clock, clock), broadcast(origin, "room/alice") {
    EXPECT_TRUE(viewer.subscribe(origin, "room/alice", "video"));
  }
  model::Track* track() { return broadcast.feed("video").track(); }
  // Runs the track's deferred notifications (listeners hear of data on the next turn).
  void turn() {
    for (int i = 0; i < 4; ++i) {
      clock.advance(Duration::zero());
    }
  }

  ManualClock clock;
  model::Origin origin;
  testing::TestBroadcast broadcast;
  testing::FrameCollector viewer;
};

// A d16 SubgroupReader on a peer uni stream, alias 9 feeding room/alice "video".
struct SubgroupCase {
  SubgroupCase() { ctx.track = up.track(); }
  Upstream up;
  FakeSubgroupContext ctx{wire::Version::kTransport16};
  FakeStream s{3};
  SubgroupReader r{ctx, s};
};

TEST(IetfSubgroupReader, Draft16HeaderAndObjectsFillTheGroup) {
  SubgroupCase c;
  auto& [up, ctx, s, r] = c;
  ASSERT_NE(ctx.track, nullptr);
  // 0x18 alias 9 group 4 priority 0 | id delta 0, 3 "abc" | 0, 0 (empty) | 0, 1 "z" | FIN
  s.push("18 09 04 00 00 03 61 62 63 00 00 00 00 01 7a", true);
  up.turn();
  const auto* g = up.viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->frames, (std::vector<std::string>{"abc", "", "z"}));
  EXPECT_TRUE(g->finished);
  EXPECT_FALSE(ctx.is_closed());
  EXPECT_EQ(ctx.ingress, 4u);  // payload bytes, counted against --max-publisher-rate
  EXPECT_EQ(ctx.readers, (std::vector<std::string>{"9 started", "9 done"}));
  EXPECT_EQ(ctx.readers_done, 1);
  ASSERT_EQ(ctx.retired.size(), 1u);
  EXPECT_EQ(ctx.retired[0], &r);
  EXPECT_TRUE(s.released);
}

TEST(IetfSubgroupReader, HeaderCutShortByFinIsADecodeError) {
  SubgroupCase c;
  auto& [up, ctx, s, r] = c;
  s.push("18 09");  // type and alias; group and priority still to come
  EXPECT_FALSE(ctx.is_closed());
  s.push("", true);  // FIN: the header will never be whole
  ASSERT_TRUE(ctx.failed_error.has_value());
  EXPECT_EQ(ctx.failed_error->code, ErrorCode::kDecode);  // IetfSession::fail: PROTOCOL_VIOLATION
  EXPECT_TRUE(up.viewer.groups.empty());
}

TEST(IetfSubgroupReader, ObjectCutShortByFinAbortsTheGroup) {
  SubgroupCase c;
  auto& [up, ctx, s, r] = c;
  s.push("18 09 04 00 00 05 61 62", true);  // object of 5 bytes, 2 arrive, then FIN
  up.turn();
  const auto* g = up.viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->aborted);
  EXPECT_FALSE(g->finished);
  EXPECT_FALSE(ctx.is_closed());  // a cut group is the publisher's loss, not a violation
}

// A FIN inside an object's header (its first byte unread) used to leave the reader waiting for
// is_fin_received(), which stays false while bytes are unread: the group hung until the session
// ended.
TEST(IetfSubgroupReader, ObjectHeaderCutShortByFinAbortsTheGroupAndIsADecodeError) {
  SubgroupCase c;
  auto& [up, ctx, s, r] = c;
  // Object 0 "abc" whole, then object 1's delta and the first byte of a 2-byte length, then FIN.
  s.push("18 09 04 00 00 03 61 62 63 00 40", true);
  up.turn();
  const auto* g = up.viewer.group(4);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->aborted);
  EXPECT_FALSE(g->finished);
  ASSERT_TRUE(ctx.failed_error.has_value());
  EXPECT_EQ(ctx.failed_error->code, ErrorCode::kDecode);
}

TEST(IetfSubgroupReader, UnknownStreamTypeIsAProtocolViolation) {
  FakeSubgroupContext ctx(wire::Version::kTransport16);
  FakeStream s(3);
  SubgroupReader r(ctx, s);
  s.push("05 00");  // FETCH_HEADER: moqd sends no FETCH
  ASSERT_TRUE(ctx.failed_code.has_value());
  EXPECT_EQ(*ctx.failed_code, wi::TerminationCode::kProtocolViolation);
}

TEST(IetfSubgroupReader, UnknownAliasIsRefusedWithStopSending) {
  FakeSubgroupContext ctx(wire::Version::kTransport16);
  FakeStream s(3);
  SubgroupReader r(ctx, s);
  s.push("18 07 04 00 00 01 61");  // alias 7: no subscription, nothing outstanding
  EXPECT_FALSE(ctx.is_closed());
  ASSERT_TRUE(s.stop_sending_code.has_value());
  EXPECT_EQ(*s.stop_sending_code, static_cast<uint64_t>(ErrorCode::kCancel));
  EXPECT_EQ(ctx.retired.size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// DownstreamSubscription: the origin's track out to the peer, one SUBGROUP stream per group.

class FakeSubscriptionContext final : public FakeHandlerContext, public SubscriptionContext {
 public:
  explicit FakeSubscriptionContext(wire::Version v) : FakeHandlerContext(v) {}
  transport::Stream* open_uni() override {
    if (streams_left == 0) {
      return nullptr;
    }
    --streams_left;
    streams.push_back(std::make_unique<FakeStream>(3 + 4 * streams.size()));
    streams.back()->hold = hold_sent;
    streams.back()->confirms = confirms_receipt;
    return streams.back().get();
  }
  void wait_for_streams(DownstreamSubscription*) override { ++waits; }
  void forget_downstream(DownstreamSubscription* s) override { forgotten.push_back(s); }
  void await_unsubscribe(uint64_t request_id) override { awaited.push_back(request_id); }
  size_t max_datagram_size() const override { return 0; }
  bool send_datagram(std::span<const uint8_t>) override { return false; }
  DatagramSendStats& datagram_stats() override { return stats; }

  DatagramSendStats stats;
  size_t streams_left = 16;
  bool hold_sent = false;  // new streams keep what is written queued until send_queued()
  bool confirms_receipt = false;  // new streams confirm receipt (confirm_receipt())
  std::vector<std::unique_ptr<FakeStream>> streams;
  int waits = 0;
  std::vector<DownstreamSubscription*> forgotten;
  std::vector<uint64_t> awaited;
};

// Subscribes request `id` (priority 7) to room/alice "video", writes group 5 of {"hi", "there", ""}
// and returns the bytes of its SUBGROUP stream.
std::string serve_group(FakeSubscriptionContext& ctx, Upstream& up, uint64_t id) {
  model::Track* t = up.track();
  EXPECT_NE(t, nullptr);
  if (t == nullptr) {
    return "";
  }
  DownstreamSubscription sub(ctx, id, *t, 7, true);
  wi::SubscribeOk ok;
  ok.request_id = id;
  ok.track_alias = id;
  sub.begin(ok);
  EXPECT_EQ(ctx.sent.size(), 1u);
  EXPECT_TRUE(!ctx.sent.empty() && std::holds_alternative<wi::SubscribeOk>(ctx.sent[0]));
  up.broadcast.write_group("video", 5, {"hi", "there", ""});
  up.turn();
  EXPECT_EQ(ctx.streams.size(), 1u);
  if (ctx.streams.size() != 1) {
    return "";
  }
  EXPECT_TRUE(ctx.streams[0]->finished);
  std::string bytes = ctx.streams[0]->written_hex();
  // UNSUBSCRIBE: PUBLISH_DONE SUBSCRIPTION_ENDED (3) counting the one stream, and the handler ends.
  sub.unsubscribe();
  EXPECT_EQ(ctx.sent.size(), 2u);
  if (ctx.sent.size() == 2) {
    EXPECT_EQ(std::get<wi::PublishDone>(ctx.sent[1]),
              (wi::PublishDone{id, 0x3, 1, "unsubscribed"}));
  }
  EXPECT_EQ(ctx.forgotten, std::vector<DownstreamSubscription*>{&sub});
  EXPECT_EQ(ctx.retired.size(), 1u);
  return bytes;
}

TEST(IetfDownstreamSubscription, Draft16GroupIsOneSubgroupStreamByteExact) {
  Upstream up;
  FakeSubscriptionContext ctx(wire::Version::kTransport16);
  // 0x18 (priority, subgroup 0, end of group) alias 0 group 5 priority 7 | 00 02 "hi" |
  // 00 05 "there" | 00 00 00 (empty object, status 0)
  EXPECT_EQ(serve_group(ctx, up, 0), "18 00 05 07 00 02 68 69 00 05 74 68 65 72 65 00 00 00");
}

TEST(IetfDownstreamSubscription, Draft20GroupCarriesFirstObjectBitAndTimestamps) {
  Upstream up;
  FakeSubscriptionContext ctx(wire::Version::kTransport20);
  // The track's timestamps are in milliseconds (TestBroadcast): 17+ declares TIMESCALE and stamps
  // every object. 0x59: 0x18 with FIRST_OBJECT (0x40, d18+) and extensions (0x01); alias 2 group 5
  // priority 7 | per object: id delta 0, extensions length 4, Timestamp (0x10) 1,000,000 ms in
  // d18's leading-ones varint (cf 42 40), then length and payload ("hi", "there", empty + status 0).
  EXPECT_EQ(serve_group(ctx, up, 2),
            "59 02 05 07 00 04 10 cf 42 40 02 68 69 00 04 10 cf 42 40 05 74 68 65 72 65 "
            "00 04 10 cf 42 40 00 00");
  // SUBSCRIBE_OK's Track Properties: TIMESCALE (0x08) 1000, once.
  ASSERT_FALSE(ctx.sent.empty());
  const std::string& props = std::get<wi::SubscribeOk>(ctx.sent[0]).track_extensions;
  EXPECT_EQ(to_hex(std::span(reinterpret_cast<const uint8_t*>(props.data()), props.size())),
            "08 83 e8");
}

// d14-16 on a transport that does not confirm receipt (qmux-00, QUIC, WebTransport): the track's
// end waits for the finished group stream's on_sent(), then kSettle (20 ms), before PUBLISH_DONE;
// nothing polls buffered().
TEST(IetfDownstreamSubscription, Draft16PublishDoneWaitsForOnSentThenSettles) {
  Upstream up;
  FakeSubscriptionContext ctx(wire::Version::kTransport16);
  ctx.hold_sent = true;
  model::Track* t = up.track();
  ASSERT_NE(t, nullptr);
  DownstreamSubscription sub(ctx, 0, *t, 7, true);
  wi::SubscribeOk ok;
  sub.begin(ok);
  up.broadcast.write_group("video", 5, {"hi"});
  up.turn();
  ASSERT_EQ(ctx.streams.size(), 1u);
  FakeStream& g = *ctx.streams[0];
  EXPECT_TRUE(g.finished);
  EXPECT_GT(g.buffered(), 0u);
  EXPECT_FALSE(g.released);
  t->end(make_error(ErrorCode::kCancel, "publisher done"));
  up.turn();
  ctx.clock_.advance(std::chrono::milliseconds(100));
  EXPECT_EQ(ctx.sent.size(), 1u);  // SUBSCRIBE_OK only: the group's bytes are still queued
  g.send_queued();
  EXPECT_TRUE(g.released);
  EXPECT_EQ(ctx.sent.size(), 1u);  // kSettle has not passed
  ctx.clock_.advance(std::chrono::milliseconds(19));
  EXPECT_EQ(ctx.sent.size(), 1u);
  ctx.clock_.advance(std::chrono::milliseconds(1));
  ASSERT_EQ(ctx.sent.size(), 2u);
  EXPECT_EQ(std::get<wi::PublishDone>(ctx.sent[1]), (wi::PublishDone{0, 0x2, 1, "cancel"}));
}

// d14-16 on a transport that confirms receipt (qmux-01/02): the end waits past on_sent() until
// the peer has every finished group stream (on_received()), then PUBLISH_DONE goes at once, with
// no kSettle; a peer that never confirms gets it after kDrainBound (2 s).
TEST(IetfDownstreamSubscription, Draft16PublishDoneWaitsForReceiptWhereConfirmed) {
  for (bool confirm : {true, false}) {
    Upstream up;
    FakeSubscriptionContext ctx(wire::Version::kTransport16);
    ctx.hold_sent = true;
    ctx.confirms_receipt = true;
    model::Track* t = up.track();
    ASSERT_NE(t, nullptr);
    DownstreamSubscription sub(ctx, 0, *t, 7, true);
    sub.begin(wi::SubscribeOk{});
    up.broadcast.write_group("video", 5, {"hi"});
    up.broadcast.write_group("video", 6, {"ho"});
    up.turn();
    ASSERT_EQ(ctx.streams.size(), 2u);
    t->end(make_error(ErrorCode::kCancel, "publisher done"));
    up.turn();
    ctx.streams[0]->send_queued();
    ctx.streams[1]->send_queued();
    ctx.clock_.advance(std::chrono::milliseconds(100));
    EXPECT_EQ(ctx.sent.size(), 1u) << confirm;  // sent, but the peer may not have it yet
    EXPECT_FALSE(ctx.streams[0]->released);
    if (!confirm) {
      ctx.clock_.advance(std::chrono::milliseconds(1899));
      EXPECT_EQ(ctx.sent.size(), 1u);
      ctx.clock_.advance(std::chrono::milliseconds(1));
      ASSERT_EQ(ctx.sent.size(), 2u);  // kDrainBound: 2 s from the first wait
      continue;
    }
    ctx.streams[0]->confirm_receipt();
    EXPECT_TRUE(ctx.streams[0]->released);
    EXPECT_EQ(ctx.sent.size(), 1u);  // group 6 is not confirmed yet
    ctx.streams[1]->confirm_receipt();
    ASSERT_EQ(ctx.sent.size(), 2u);  // at once: no kSettle after a confirmed receipt
    EXPECT_EQ(std::get<wi::PublishDone>(ctx.sent[1]), (wi::PublishDone{0, 0x2, 2, "cancel"}));
  }
}

// d17+ waits for nothing at the end: a finished stream is released once sent, receipt or not.
TEST(IetfDownstreamSubscription, Draft17ReleasesSentStreamsWithoutReceipt) {
  Upstream up;
  FakeSubscriptionContext ctx(wire::Version::kTransport17);
  ctx.hold_sent = true;
  ctx.confirms_receipt = true;
  DownstreamSubscription sub(ctx, 0, *up.track(), 7, true);
  sub.begin(wi::SubscribeOk{});
  up.broadcast.write_group("video", 5, {"hi"});
  up.turn();
  ASSERT_EQ(ctx.streams.size(), 1u);
  EXPECT_FALSE(ctx.streams[0]->released);
  ctx.streams[0]->send_queued();
  EXPECT_TRUE(ctx.streams[0]->released);
}

TEST(IetfDownstreamSubscription, NoUniStreamWaitsForCredit) {
  Upstream up;
  FakeSubscriptionContext ctx(wire::Version::kTransport16);
  ctx.streams_left = 0;
  DownstreamSubscription sub(ctx, 0, *up.track(), 7, true);
  sub.begin(wi::SubscribeOk{});
  up.broadcast.write_group("video", 5, {"hi"});
  up.turn();
  EXPECT_GE(ctx.waits, 1);
  EXPECT_TRUE(sub.has_waiting_data());
  ctx.streams_left = 1;
  sub.pump();  // what IetfSession::on_streams_available does
  ASSERT_EQ(ctx.streams.size(), 1u);
  EXPECT_EQ(ctx.streams[0]->written_hex(), "18 00 05 07 00 02 68 69");
  EXPECT_TRUE(ctx.streams[0]->finished);
}

// What IetfSession::read_message does: the next message at the front of `stream` in `form`,
// consumed; nullopt while incomplete, or with `ctx` failing (it does not decode, or FIN cut it).
std::optional<wi::ControlMessage> read_one(FakeHandlerContext& ctx, transport::Stream& stream,
                                           wi::Peer form) {
  auto r = wi::decode_control(ctx.draft(), stream.peek(), ctx.limits(), form);
  if (!r || !r->has_value()) {
    if (!r || stream.has_peer_fin()) {
      ctx.fail(make_error(ErrorCode::kDecode, "read_message"));
    }
    return std::nullopt;
  }
  stream.consume((*r)->consumed);
  return std::move((*r)->value);
}

// ---------------------------------------------------------------------------------------------
// ControlReader (d14..16 control stream) and SetupStreamReader (17+): where control messages enter.

class FakeControlContext final : public FakeHandlerContext, public ControlContext {
 public:
  explicit FakeControlContext(wire::Version v) : FakeHandlerContext(v) {}
  bool is_admission_pending() const override { return false; }
  bool is_client() const override { return false; }
  wi::Peer peer_form() const override { return wi::Peer::kDraftText; }
  std::optional<wi::ControlMessage> read_message(transport::Stream& stream, wi::Peer form) override {
    return read_one(*this, stream, form);
  }
  void on_control_message(wi::ControlMessage m) override { messages.push_back(std::move(m)); }
  void on_control_setup(const wi::ClientSetup&) override { ++client_setups; }
  void on_server_setup(const wi::ControlMessage&) override { ++server_setups; }
  void on_peer_setup(const wi::Setup&) override { ++peer_setups; }
  void stop_namespace(uint64_t request_id) override { stopped_namespaces.push_back(request_id); }
  void forget_request(uint64_t request_id, RequestStream*) override {
    forgotten_requests.push_back(request_id);
  }
  void on_subgroup_stream(transport::Stream&) override { ++subgroup_streams; }
  void on_namespace_stream(transport::Stream&) override { ++namespace_streams; }
  bool on_publish_stream_message(uint64_t request_id, wi::ControlMessage m) override {
    publish_messages.emplace_back(request_id, std::move(m));
    return publish_message_ends;
  }
  void on_publish_stream_closed(uint64_t request_id, bool done) override {
    publish_closes.emplace_back(request_id, done);
  }

  std::vector<wi::ControlMessage> messages;
  int client_setups = 0;
  int server_setups = 0;
  int peer_setups = 0;
  std::vector<uint64_t> stopped_namespaces;
  std::vector<uint64_t> forgotten_requests;
  int subgroup_streams = 0;
  int namespace_streams = 0;
  // PublishService's stream hooks: what on_publish_stream_message answers (true: PUBLISH_DONE).
  bool publish_message_ends = true;
  std::vector<std::pair<uint64_t, wi::ControlMessage>> publish_messages;
  std::vector<std::pair<uint64_t, bool>> publish_closes;
};

// d16 CLIENT_SETUP as @moq/net writes it (versions d16, IMPLEMENTATION "moq-lite-js").
constexpr const char* kHandlersD16ClientSetup =
    "20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73";
// d16 PUBLISH_NAMESPACE request 0 ["room", "alice"], no parameters.
constexpr const char* kHandlersD16PublishNamespace =
    "06 00 0e 00 02 04 72 6f 6f 6d 05 61 6c 69 63 65 00";

// A ControlReader on the peer's control stream (bidi 0); `ready`: SETUP already completed.
struct ControlCase {
  ControlCase(wire::Version v, bool ready) : ctx(v) { ctx.ready = ready; }
  FakeControlContext ctx;
  FakeStream s{0};
  ControlReader r{ctx, s};
};

TEST(IetfControlReader, ClientSetupThenMessagesGoToTheSession) {
  ControlCase c(wire::Version::kTransport16, false);
  auto& [ctx, s, r] = c;
  s.push(kHandlersD16ClientSetup);
  EXPECT_EQ(ctx.client_setups, 1);
  EXPECT_TRUE(ctx.messages.empty());
  ctx.ready = true;  // what on_control_setup does in the session
  s.push(kHandlersD16PublishNamespace);
  ASSERT_EQ(ctx.messages.size(), 1u);
  const auto* p = std::get_if<wi::PublishNamespace>(&ctx.messages[0]);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->request_id, 0u);
  EXPECT_EQ(p->ns, (wi::TrackNamespace{"room", "alice"}));
  EXPECT_FALSE(ctx.is_closed());
}

TEST(IetfControlReader, FirstMessageOtherThanClientSetupIsAProtocolViolation) {
  ControlCase c(wire::Version::kTransport16, false);
  auto& [ctx, s, r] = c;
  s.push(kHandlersD16PublishNamespace);
  ASSERT_TRUE(ctx.failed_code.has_value());
  EXPECT_EQ(*ctx.failed_code, wi::TerminationCode::kProtocolViolation);
  EXPECT_EQ(ctx.failed_detail, "first message is not CLIENT_SETUP");
  EXPECT_TRUE(ctx.messages.empty());
}

TEST(IetfControlReader, Draft15UnsubscribeNamespaceAndTheStreamsEnd) {
  ControlCase c(wire::Version::kTransport15, true);
  auto& [ctx, s, r] = c;
  // d15 UNSUBSCRIBE_NAMESPACE (0x14, not in the codec): u16 length 1, request id 5.
  s.push("14 00 01 05");
  EXPECT_EQ(ctx.stopped_namespaces, std::vector<uint64_t>{5});
  EXPECT_FALSE(ctx.is_closed());
  s.push("", true);  // the control stream may not end
  ASSERT_TRUE(ctx.failed_code.has_value());
  EXPECT_EQ(*ctx.failed_code, wi::TerminationCode::kProtocolViolation);
  EXPECT_EQ(ctx.failed_detail, "control stream closed");
}

TEST(IetfSetupStreamReader, Draft17StreamEndingBeforeSetupIsAProtocolViolation) {
  FakeControlContext ctx(wire::Version::kTransport17);
  FakeStream s(2);
  SetupStreamReader r(ctx, s);
  s.push("", true);
  ASSERT_TRUE(ctx.failed_code.has_value());
  EXPECT_EQ(*ctx.failed_code, wi::TerminationCode::kProtocolViolation);
  EXPECT_EQ(ctx.failed_detail, "SETUP stream ended before SETUP");
  EXPECT_EQ(ctx.peer_setups, 0);
}

// ---------------------------------------------------------------------------------------------
// RequestStream (17+): one request's bidi stream after its first message, which the session read
// (IetfSession::on_request_stream) and dispatched before adopting the stream.

// `m` as the peer writes it in `v`.
std::vector<uint8_t> encoded(wire::Version v, const wi::ControlMessage& m) {
  std::vector<uint8_t> out;
  EXPECT_TRUE(wi::encode(v, m, out, wi::Peer::kDraftText));
  return out;
}

// A RequestStream of `kind` for request 4 on the peer's bidi stream 4, in draft 17.
struct RequestCase {
  explicit RequestCase(RequestStream::Kind kind, wire::Version v = wire::Version::kTransport17)
      : ctx(v), r(ctx, s, kind, 4) {}
  void push(const wi::ControlMessage& m, bool fin = false) {
    s.push(to_hex(std::span<const uint8_t>(encoded(ctx.draft(), m))), fin);
  }
  FakeControlContext ctx;
  FakeStream s{4};
  RequestStream r;
};

wi::Subscribe request_stream_subscribe() {
  wi::Subscribe m;
  m.request_id = 6;
  m.ns = {"room", "alice"};
  m.track = "video";
  return m;
}

TEST(IetfRequestStream, Draft17RequestUpdateOnAPeerSubscribeGoesToTheSessionWithItsId) {
  RequestCase c(RequestStream::Kind::kPeerSubscribe);
  wi::SubscribeUpdate u;
  u.request_id = 6;
  c.push(u);
  ASSERT_EQ(c.ctx.messages.size(), 1u);
  const auto* got = std::get_if<wi::SubscribeUpdate>(&c.ctx.messages[0]);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->existing_request_id, 4u);  // the stream's request, which 17 does not write
  EXPECT_FALSE(c.ctx.is_closed());
  EXPECT_FALSE(c.s.finished);
}

TEST(IetfRequestStream, Draft17SecondRequestOnARequestStreamIsAProtocolViolation) {
  RequestCase c(RequestStream::Kind::kPeerSubscribe);
  c.push(request_stream_subscribe());
  ASSERT_TRUE(c.ctx.failed_code.has_value());
  EXPECT_EQ(*c.ctx.failed_code, wi::TerminationCode::kProtocolViolation);
  EXPECT_EQ(c.ctx.failed_detail, "unexpected message on a request stream");
  EXPECT_TRUE(c.ctx.messages.empty());
}

TEST(IetfRequestStream, Draft17PeerClosingItsSubscribeStreamIsUnsubscribe) {
  RequestCase c(RequestStream::Kind::kPeerSubscribe);
  c.s.push("", true);  // FIN, no message after the SUBSCRIBE
  ASSERT_EQ(c.ctx.messages.size(), 1u);
  EXPECT_EQ(c.ctx.messages[0], wi::ControlMessage(wi::Unsubscribe{4}));
  EXPECT_TRUE(c.s.finished);
  EXPECT_TRUE(c.s.released);
  EXPECT_EQ(c.ctx.forgotten_requests, std::vector<uint64_t>{4});
  ASSERT_EQ(c.ctx.retired.size(), 1u);
  EXPECT_EQ(c.ctx.retired[0], &c.r);
  EXPECT_FALSE(c.ctx.is_closed());
}

TEST(IetfRequestStream, Draft17PublishDoneAndFinGoToThePublishHooks) {
  RequestCase c(RequestStream::Kind::kPeerPublish);
  c.push(wi::PublishDone{0, 2, 3, "bye"});
  ASSERT_EQ(c.ctx.publish_messages.size(), 1u);
  EXPECT_EQ(c.ctx.publish_messages[0].first, 4u);
  EXPECT_EQ(c.ctx.publish_messages[0].second, wi::ControlMessage(wi::PublishDone{0, 2, 3, "bye"}));
  EXPECT_TRUE(c.ctx.messages.empty());  // PublishService, not the session's handlers, decides
  c.s.push("", true);
  EXPECT_EQ(c.ctx.publish_closes, (std::vector<std::pair<uint64_t, bool>>{{4, true}}));
  EXPECT_TRUE(c.s.finished);
  EXPECT_EQ(c.ctx.forgotten_requests, std::vector<uint64_t>{4});
}

TEST(IetfRequestStream, Draft17PublishStreamResetBeforeAnyMessageClosesItNotDone) {
  RequestCase c(RequestStream::Kind::kPeerPublish);
  c.ctx.publish_message_ends = false;  // what PublishService answers to anything but PUBLISH_DONE
  c.push(request_stream_subscribe());
  ASSERT_EQ(c.ctx.publish_messages.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<wi::Subscribe>(c.ctx.publish_messages[0].second));
  c.s.peer_reset(0x1);
  EXPECT_EQ(c.ctx.publish_closes, (std::vector<std::pair<uint64_t, bool>>{{4, false}}));
}

TEST(IetfRequestStream, Draft19FetchFinIsNotACancelButStopSendingIs) {
  RequestCase c(RequestStream::Kind::kPeerFetch, wire::Version::kTransport19);
  c.s.push("", true);  // d19 §3.3.2: the requester's FIN
  EXPECT_TRUE(c.ctx.messages.empty());
  EXPECT_FALSE(c.s.finished);
  EXPECT_TRUE(c.ctx.forgotten_requests.empty());
  c.s.peer_stop_sending(0x1);
  ASSERT_EQ(c.ctx.messages.size(), 1u);
  EXPECT_EQ(c.ctx.messages[0], wi::ControlMessage(wi::FetchCancel{4}));
  EXPECT_EQ(c.ctx.forgotten_requests, std::vector<uint64_t>{4});
}

TEST(IetfRequestStream, Draft17OurSubscribeClosedBeforeAnAnswerIsARequestError) {
  RequestCase c(RequestStream::Kind::kOurSubscribe);
  c.s.push("", true);
  ASSERT_EQ(c.ctx.messages.size(), 1u);
  const auto* e = std::get_if<wi::RequestError>(&c.ctx.messages[0]);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->request_id, 4u);
  EXPECT_EQ(e->reason, "SUBSCRIBE stream closed");
}

TEST(IetfRequestStream, Draft17OurSubscribeAnsweredThenClosedIsPublishDone) {
  RequestCase c(RequestStream::Kind::kOurSubscribe);
  wi::SubscribeOk ok;
  ok.track_alias = 9;
  c.push(ok);
  ASSERT_EQ(c.ctx.messages.size(), 1u);
  const auto* got = std::get_if<wi::SubscribeOk>(&c.ctx.messages[0]);
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->request_id, 4u);
  EXPECT_EQ(got->track_alias, 9u);
  c.s.push("", true);
  ASSERT_EQ(c.ctx.messages.size(), 2u);
  EXPECT_EQ(c.ctx.messages[1],
            wi::ControlMessage(wi::PublishDone{4, 0, 0, "SUBSCRIBE stream closed"}));
}

TEST(IetfRequestStream, Draft17TrackStatusAnswerEndsTheStreamByteExact) {
  RequestCase c(RequestStream::Kind::kPeerTrackStatus);
  wi::RequestError e;
  e.request_id = 4;
  e.error_code = 0x10;
  e.reason = "x";
  c.r.send(e, false);  // TRACK_STATUS's answer is its last message
  EXPECT_EQ(c.s.written_hex(), to_hex(std::span<const uint8_t>(encoded(c.ctx.draft(), e))));
  EXPECT_TRUE(c.s.finished);
  EXPECT_EQ(c.ctx.forgotten_requests, std::vector<uint64_t>{4});
}

// PendingStream (ietf_session_internal.h): a peer stream whose kind its first bytes will tell.

TEST(IetfPendingStream, Draft17FinBeforeAnyMessageEndsTheStreamQuietly) {
  FakeControlContext ctx(wire::Version::kTransport17);
  FakeStream s(4);
  PendingStream p(ctx, s);
  s.push("", true);
  EXPECT_TRUE(s.released);
  ASSERT_EQ(ctx.retired.size(), 1u);
  EXPECT_EQ(ctx.retired[0], &p);
  EXPECT_EQ(ctx.namespace_streams, 0);
  EXPECT_FALSE(ctx.is_closed());
}

TEST(IetfPendingStream, BytesWaitForSetupThenTheStreamGoesToItsKind) {
  FakeControlContext ctx(wire::Version::kTransport16);
  ctx.ready = false;
  FakeStream bidi(4);
  PendingStream p(ctx, bidi);
  bidi.push("11");
  EXPECT_EQ(ctx.namespace_streams, 0);  // held until SETUP completes
  ctx.ready = true;
  p.on_ready();
  EXPECT_EQ(ctx.namespace_streams, 1);
  EXPECT_FALSE(bidi.released);  // handed over, not released
  FakeStream uni(3);
  PendingStream q(ctx, uni);
  uni.push("04");
  EXPECT_EQ(ctx.subgroup_streams, 1);
}


// ---------------------------------------------------------------------------------------------
// UpstreamSubscription (ietf_session_internal.h): the relay reading a track the peer publishes,
// as the model::TrackSource of that track.

// Our request ids, as the peer's MAX_REQUEST_ID allows them: `left` more, from `next`, by two.
struct RequestIds {
  std::optional<uint64_t> take() {
    if (left == 0) {
      return std::nullopt;
    }
    --left;
    uint64_t id = next;
    next += 2;
    return id;
  }
  uint64_t next;
  size_t left = 16;
};

class FakeUpstreamContext final : public FakeHandlerContext, public UpstreamContext {
 public:
  explicit FakeUpstreamContext(wire::Version v) : FakeHandlerContext(v) {}
  std::optional<uint64_t> take_request_id() override { return ids.take(); }
  std::optional<std::string> to_peer(const std::string& full) const override { return full; }
  // As IetfSession::request_upstream: the SUBSCRIBE goes now, or waits for MAX_REQUEST_ID.
  void request_upstream(UpstreamSubscription* u) override {
    if (!u->send_subscribe()) {
      ++blocked;
    }
  }
  void forget_upstream(UpstreamSubscription* u) override { forgotten.push_back(u); }

  RequestIds ids{2};
  int blocked = 0;
  std::vector<UpstreamSubscription*> forgotten;
};

// A Track Properties block holding TIMESCALE (0x08) = `units`, in the draft's varint form.
std::string timescale_property(const wi::Draft& d, uint64_t units) {
  std::vector<uint8_t> out;
  wi::write_varint(d.varint_form, 0x08, out);
  wi::write_varint(d.varint_form, units, out);
  return std::string(out.begin(), out.end());
}

// Hears how a track ended.
struct EndListener final : model::TrackListener {
  void on_track_data(model::Track&) override {}
  void on_track_ended(model::Track&, Error reason) override { ended = reason; }
  std::optional<Error> ended;
};

// An UpstreamSubscription of room/alice "video" in draft `v` as the source of its track (no
// linger); start() adds a listener, which starts it.
struct UpstreamCase {
  explicit UpstreamCase(wire::Version v)
      : ctx(v),
        track("room/alice", "video", model::CacheLimits{}, Duration::zero(), ctx.clock_, ctx.clock_) {
    track.set_source(&u);
  }
  void start() { track.add_listener(&listener); }
  std::string sent_hex(size_t i) const {
    return i < ctx.sent.size() ? to_hex(std::span<const uint8_t>(encoded(ctx.draft(), ctx.sent[i])))
                               : "";
  }
  bool ended_with(ErrorCode code) const { return listener.ended && listener.ended->code == code; }
  FakeUpstreamContext ctx;
  UpstreamSubscription u{ctx, "room/alice", "video"};
  EndListener listener;
  model::Track track;
};

TEST(IetfUpstreamSubscription, Draft16SubscribeByteExactThenOkThenUnsubscribeWhenTheTrackStops) {
  UpstreamCase c(wire::Version::kTransport16);
  c.start();
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  // 0x03 len 0x1c, request 2, ["room","alice"] "video", 3 parameters (delta-coded types):
  // FORWARD 0x10 = 1, SUBSCRIBER_PRIORITY 0x20 = 128, SUBSCRIPTION_FILTER 0x21 = {Largest Object
  // 0x2}; GROUP_ORDER absent: the publisher's (d16 §9.7, §9.2.2).
  EXPECT_EQ(c.sent_hex(0),
            "03 00 1c 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 03 10 01 10 40 80 "
            "01 01 02");
  EXPECT_EQ(c.u.request_id(), std::optional<uint64_t>(2));
  EXPECT_FALSE(c.track.properties().has_value());  // until SUBSCRIBE_OK
  // 17+ only: a TIMESCALE (0x08 = 90000) in d16's Track Extensions is not read.
  c.u.on_ok(9, timescale_property(c.ctx.row(), 90000));
  EXPECT_EQ(c.u.alias(), std::optional<uint64_t>(9));
  ASSERT_TRUE(c.track.properties().has_value());
  EXPECT_FALSE(c.track.properties()->timescale_known);
  // The last listener leaves: UNSUBSCRIBE, and the session no longer routes to it.
  c.track.remove_listener(&c.listener);
  c.ctx.clock_.advance(Duration::zero());
  ASSERT_EQ(c.ctx.sent.size(), 2u);
  EXPECT_EQ(c.sent_hex(1), "0a 00 01 02");
  EXPECT_EQ(c.ctx.forgotten, std::vector<UpstreamSubscription*>{&c.u});
  EXPECT_FALSE(c.u.request_id().has_value());
  EXPECT_FALSE(c.u.alias().has_value());
}

TEST(IetfUpstreamSubscription, Draft20SubscribeAsksForTheCurrentGroupAndOkGivesTheTimescale) {
  UpstreamCase c(wire::Version::kTransport20);
  c.start();
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  const auto& m = std::get<wi::Subscribe>(c.ctx.sent[0]);
  // d20: "0 0" would be Next Object; relative 1 is the current group from its first object.
  ASSERT_TRUE(m.filter.has_value());
  EXPECT_EQ(m.filter->type, wi::FilterType::kRelative);
  EXPECT_EQ(m.filter->relative_groups, 1u);
  // 0x03 len 0x1b, request 2, ["room","alice"] "video", 3 parameters typed per key (NET-0.3.md
  // §4.4): FORWARD 0x10 = byte 1, SUBSCRIBER_PRIORITY 0x20 = raw byte 128, SUBSCRIPTION_FILTER
  // 0x21 = length 1, relative 1 (§4.5, as @moq/net sends it).
  EXPECT_EQ(c.sent_hex(0),
            "03 00 1b 02 02 04 72 6f 6f 6d 05 61 6c 69 63 65 05 76 69 64 65 6f 03 10 01 10 80 01 "
            "01 01");
  // Track Properties: TIMESCALE (0x08) = 90000.
  c.u.on_ok(9, timescale_property(c.ctx.row(), 90000));
  ASSERT_TRUE(c.track.properties().has_value());
  EXPECT_TRUE(c.track.properties()->timescale_known);
  EXPECT_EQ(c.track.properties()->timescale, 90000u);
}

TEST(IetfUpstreamSubscription, SubscribeWaitsForARequestIdThenGoes) {
  UpstreamCase c(wire::Version::kTransport16);
  c.ctx.ids.left = 0;
  c.start();
  EXPECT_EQ(c.ctx.blocked, 1);
  EXPECT_TRUE(c.ctx.sent.empty());
  EXPECT_FALSE(c.u.request_id().has_value());
  c.ctx.ids.left = 1;  // MAX_REQUEST_ID: the session retries it
  EXPECT_TRUE(c.u.send_subscribe());
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(std::get<wi::Subscribe>(c.ctx.sent[0]).request_id, 2u);
  EXPECT_TRUE(c.u.send_subscribe());  // already sent: nothing more
  EXPECT_EQ(c.ctx.sent.size(), 1u);
}

TEST(IetfUpstreamSubscription, Draft16RequestErrorEndsTheTrackNotFound) {
  UpstreamCase c(wire::Version::kTransport16);
  c.start();
  wi::RequestError e;
  e.request_id = 2;
  e.error_code = 0x10;  // DOES_NOT_EXIST
  e.reason = "no such track";
  c.u.on_error(e);
  EXPECT_TRUE(c.track.is_ended());
  EXPECT_TRUE(c.ended_with(ErrorCode::kNotFound));
  EXPECT_EQ(c.ctx.forgotten, std::vector<UpstreamSubscription*>{&c.u});
}

// The peer refused our SUBSCRIBE: the request is over, so the track's end (stop_track) sends no
// UNSUBSCRIBE for it (d16 §9.5 / d20 §10.6: UNSUBSCRIBE names a live subscription); 14..16 it
// would go on the control stream, 17+ on the refused request's closed stream.
TEST(IetfUpstreamSubscription, RequestErrorSendsNoUnsubscribe) {
  for (wire::Version v : {wire::Version::kTransport16, wire::Version::kTransport20}) {
    UpstreamCase c(v);
    c.start();
    ASSERT_EQ(c.ctx.sent.size(), 1u);
    wi::RequestError e;
    e.request_id = 2;
    e.error_code = 0x10;  // DOES_NOT_EXIST
    c.u.on_error(e);
    c.ctx.clock_.advance(Duration::zero());
    EXPECT_TRUE(c.ended_with(ErrorCode::kNotFound));
    EXPECT_EQ(c.ctx.sent.size(), 1u) << "draft " << int{c.ctx.row().number};  // the SUBSCRIBE
    EXPECT_FALSE(c.u.request_id().has_value());
    EXPECT_EQ(c.ctx.forgotten, std::vector<UpstreamSubscription*>{&c.u});
  }
}

TEST(IetfUpstreamSubscription, PublishDoneEndsTheTrackOnceItsStreamCountWasRead) {
  UpstreamCase c(wire::Version::kTransport16);
  c.start();
  c.u.on_ok(9, "");
  c.u.on_reader_started();  // one stream still being read when PUBLISH_DONE comes
  c.u.on_publish_done(wi::PublishDone{2, kDoneTrackEnded, 2, "done"});
  c.u.on_reader_done();
  EXPECT_FALSE(c.track.is_ended());  // 1 of 2 streams
  c.u.on_reader_started();
  EXPECT_FALSE(c.track.is_ended());  // the second is still being read
  c.u.on_reader_done();
  EXPECT_TRUE(c.track.is_ended());
  EXPECT_TRUE(c.ended_with(ErrorCode::kCancel));
  // The track's stop_track: UNSUBSCRIBE of the ended request.
  ASSERT_EQ(c.ctx.sent.size(), 2u);
  EXPECT_EQ(c.ctx.sent[1], wi::ControlMessage(wi::Unsubscribe{2}));
}

TEST(IetfUpstreamSubscription, PublishDoneCountingNoStreamsEndsAfterAQuietGrace) {
  UpstreamCase c(wire::Version::kTransport16);
  c.start();
  c.u.on_ok(9, "");
  c.u.on_publish_done(wi::PublishDone{2, kDoneTrackEnded, 0, ""});  // @moq/net: 0, not counted
  c.ctx.clock_.advance(std::chrono::milliseconds(700));
  c.u.on_reader_started();  // a late stream restarts the grace
  c.u.on_reader_done();
  c.ctx.clock_.advance(std::chrono::milliseconds(749));
  EXPECT_FALSE(c.track.is_ended());
  c.ctx.clock_.advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(c.ended_with(ErrorCode::kCancel));
}

TEST(IetfUpstreamSubscription, PublishDoneWhoseStreamsNeverCameEndsAtTheLatest) {
  UpstreamCase c(wire::Version::kTransport16);
  c.start();
  c.u.on_ok(9, "");
  c.u.on_publish_done(wi::PublishDone{2, kDoneTrackEnded, 3, ""});
  c.ctx.clock_.advance(std::chrono::milliseconds(4999));
  EXPECT_FALSE(c.track.is_ended());
  c.ctx.clock_.advance(std::chrono::milliseconds(1));
  EXPECT_TRUE(c.ended_with(ErrorCode::kCancel));
}

TEST(IetfUpstreamSubscription, Draft17PublishedTrackStartsWithoutSubscribeAndUnsubscribesOnStop) {
  UpstreamCase c(wire::Version::kTransport17);
  c.u.adopt_publish(5, 7, {});
  c.start();
  EXPECT_TRUE(c.ctx.sent.empty());  // the peer's PUBLISH made the subscription
  EXPECT_EQ(c.u.request_id(), std::optional<uint64_t>(5));
  EXPECT_EQ(c.u.alias(), std::optional<uint64_t>(7));
  ASSERT_TRUE(c.track.properties().has_value());
  EXPECT_FALSE(c.track.properties()->timescale_known);
  c.track.end(make_error(ErrorCode::kCancel, "test"));
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(c.ctx.sent[0], wi::ControlMessage(wi::Unsubscribe{5}));
}

TEST(IetfUpstreamSubscription, SessionClosedEndsTheTrackClosed) {
  UpstreamCase c(wire::Version::kTransport16);
  c.start();
  c.ctx.failed_code = wi::TerminationCode::kProtocolViolation;  // the session is closing
  c.u.on_session_closed();
  EXPECT_TRUE(c.ended_with(ErrorCode::kClosed));
  EXPECT_EQ(c.ctx.sent.size(), 1u);  // no UNSUBSCRIBE on a closed session
}

// ---------------------------------------------------------------------------------------------
// NamespaceAnnouncer (ietf_session_internal.h) and NamespaceDiscovery (ietf_discovery.h): the
// peer's SUBSCRIBE_NAMESPACE answered from the origin, and ours (client role).

// A SessionHandler that hides `hidden` from the peer (Action::kSee) and records announcements.
class FakeSessionHandler final : public SessionHandler {
 public:
  bool authorize(Action action, std::string_view path, std::string_view) override {
    return !(action == Action::kSee && path == hidden);
  }
  void on_session_ready(wire::Version) override {}
  void on_peer_announce(const std::string& path, bool active, const model::Hops&,
                        model::BroadcastSource&) override {
    announces.push_back((active ? "+" : "-") + path);
  }
  void on_session_closed(Error) override {}
  std::string hidden;
  std::vector<std::string> announces;
};

// The session as the source of the peer's broadcasts (split horizon).
struct PeerSource final : model::BroadcastSource {
  model::TrackSource& track_source(const std::string&, const std::string&) override { return feed; }
  testing::TestBroadcast::Feed feed;
};

// The peer's paths are the origin's under "room/".
class FakeNamespaceContext final : public FakeHandlerContext, public NamespaceContext {
 public:
  explicit FakeNamespaceContext(wire::Version v)
      : FakeHandlerContext(v), origin_(model::OriginConfig{}, clock_, clock_) {}
  model::Origin& origin() override { return origin_; }
  SessionHandler& handler() override { return handler_; }
  model::BroadcastSource& source() override { return source_; }
  void count_namespace_listener(bool open) override { listeners += open ? 1 : -1; }
  bool cluster_negotiated() const override { return false; }
  uint64_t peer_relay_hops() const override { return 0; }
  std::string to_full(const std::string& peer_path) const override { return "room/" + peer_path; }
  std::optional<std::string> to_peer(const std::string& full) const override {
    if (full.rfind("room/", 0) != 0) {
      return std::nullopt;
    }
    return full.substr(5);
  }
  std::optional<uint64_t> take_request_id() override { return ids.take(); }
  wi::Peer peer_form() const override { return wi::Peer::kDraftText; }
  std::optional<wi::ControlMessage> read_message(transport::Stream& stream, wi::Peer form) override {
    return read_one(*this, stream, form);
  }
  void client_announce(const std::string& full) override { client.push_back("+" + full); }
  void client_withdraw(const std::string& full) override { client.push_back("-" + full); }
  void offer_track(const std::string& full, const std::string& name, bool) override {
    offered.push_back(full + "#" + name);
  }

  model::Origin origin_;
  FakeSessionHandler handler_;
  PeerSource source_;
  int listeners = 0;
  RequestIds ids{1};
  std::vector<std::string> client;
  std::vector<std::string> offered;  // offer_track calls: "full#name"
};

// The peer's SUBSCRIBE_NAMESPACE of ["alice"] (room/alice), answered on its own stream (16+) or,
// with `own` false, on the control stream.
struct AnnouncerCase {
  AnnouncerCase(wire::Version v, bool own, bool publish = false)
      : ctx(v), a(ctx, own ? &s : nullptr, "room/alice", 1, publish) {}
  FakeNamespaceContext ctx;
  FakeStream s{4};
  NamespaceAnnouncer a;
};

// room/alice/cam announced and withdrawn on a d16 or d20 SUBSCRIBE_NAMESPACE stream: what it wrote.
std::string announce_on_own_stream(wire::Version v) {
  AnnouncerCase c(v, true);
  testing::TestBroadcast before(c.ctx.origin_, "room/alice/cam");
  c.a.begin();  // what is already active is told at once
  EXPECT_EQ(c.ctx.listeners, 1);
  testing::TestBroadcast other(c.ctx.origin_, "room/bob/cam");  // outside the prefix
  before.unannounce();
  c.s.push("", true);  // the peer ends the request
  EXPECT_EQ(c.ctx.listeners, 0);
  EXPECT_TRUE(c.s.finished);
  EXPECT_EQ(c.ctx.retired, std::vector<Handler*>{&c.a});
  EXPECT_TRUE(c.ctx.sent.empty());
  return c.s.written_hex();
}

TEST(IetfNamespaceAnnouncer, Draft16NamespaceAndDoneOnTheRequestStreamByteExact) {
  // NAMESPACE 0x08 len 4, suffix ["cam"]; NAMESPACE_DONE 0x0e, the same (d16 §9.28, §9.29).
  EXPECT_EQ(announce_on_own_stream(wire::Version::kTransport16),
            "08 00 05 01 03 63 61 6d 0e 00 05 01 03 63 61 6d");
}

TEST(IetfNamespaceAnnouncer, Draft20NamespaceAndDoneOnTheRequestStreamByteExact) {
  EXPECT_EQ(announce_on_own_stream(wire::Version::kTransport20),
            "08 00 05 01 03 63 61 6d 0e 00 05 01 03 63 61 6d");
}

TEST(IetfNamespaceAnnouncer, Draft15NamespaceGoesOnTheControlStream) {
  AnnouncerCase c(wire::Version::kTransport15, false);
  c.a.begin();
  testing::TestBroadcast b(c.ctx.origin_, "room/alice/cam");
  b.unannounce();
  wi::Namespace n;
  n.suffix = {"cam"};
  ASSERT_EQ(c.ctx.sent.size(), 2u);
  EXPECT_EQ(c.ctx.sent[0], wi::ControlMessage(n));
  n.done = true;
  EXPECT_EQ(c.ctx.sent[1], wi::ControlMessage(n));
  EXPECT_TRUE(c.s.written_hex().empty());
}

TEST(IetfNamespaceAnnouncer, Draft14PublishNamespaceWithOurRequestIdThenDone) {
  AnnouncerCase c(wire::Version::kTransport14, false);
  c.a.begin();
  testing::TestBroadcast b(c.ctx.origin_, "room/alice/cam");
  b.unannounce();
  ASSERT_EQ(c.ctx.sent.size(), 2u);
  EXPECT_EQ(c.ctx.sent[0], wi::ControlMessage(wi::PublishNamespace{1, 0, {"alice", "cam"}, {}}));
  wi::PublishNamespaceDone d;
  d.ns = {"alice", "cam"};
  d.request_id = 1;
  EXPECT_EQ(c.ctx.sent[1], wi::ControlMessage(d));
  // 0x06 len, request 1, ["alice","cam"], no parameters (d14 §9.23); 0x09 ["alice","cam"] (§9.25).
  EXPECT_EQ(to_hex(std::span<const uint8_t>(encoded(c.ctx.draft(), c.ctx.sent[0]))),
            "06 00 0d 01 02 05 61 6c 69 63 65 03 63 61 6d 00");
  EXPECT_EQ(to_hex(std::span<const uint8_t>(encoded(c.ctx.draft(), c.ctx.sent[1]))),
            "09 00 0b 02 05 61 6c 69 63 65 03 63 61 6d");
}

TEST(IetfNamespaceAnnouncer, Draft14NoRequestIdLeftLeavesTheNamespaceUntoldUntilItComesAgain) {
  AnnouncerCase c(wire::Version::kTransport14, false);
  c.ctx.ids.left = 0;
  c.a.begin();
  {
    testing::TestBroadcast b(c.ctx.origin_, "room/alice/cam");
  }
  EXPECT_TRUE(c.ctx.sent.empty());  // nor a DONE for what was never told
  c.ctx.ids.left = 1;
  testing::TestBroadcast again(c.ctx.origin_, "room/alice/cam");
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<wi::PublishNamespace>(c.ctx.sent[0]));
}

TEST(IetfNamespaceAnnouncer, Draft16PublishModeAnnouncesWithPublishNamespace) {
  AnnouncerCase c(wire::Version::kTransport16, false, true);
  c.a.begin();
  testing::TestBroadcast b(c.ctx.origin_, "room/alice/cam");
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  EXPECT_EQ(c.ctx.sent[0], wi::ControlMessage(wi::PublishNamespace{1, 0, {"alice", "cam"}, {}}));
}

TEST(IetfNamespaceAnnouncer, HiddenPathsThePeersOwnAndUnmappedOnesAreNotTold) {
  AnnouncerCase c(wire::Version::kTransport16, true);
  c.ctx.handler_.hidden = "room/alice/secret";
  c.a.begin();
  testing::TestBroadcast secret(c.ctx.origin_, "room/alice/secret");  // not authorized to see
  c.ctx.origin_.announce("room/alice/own", &c.ctx.source_);            // the peer's own
  EXPECT_TRUE(c.s.written_hex().empty());
  c.ctx.origin_.unannounce("room/alice/own", &c.ctx.source_);
  testing::TestBroadcast cam(c.ctx.origin_, "room/alice/cam");
  EXPECT_EQ(c.s.written_hex(), "08 00 05 01 03 63 61 6d");
}

TEST(IetfNamespaceAnnouncer, PeerResetEndsItWithoutAFin) {
  AnnouncerCase c(wire::Version::kTransport16, true);
  c.a.begin();
  c.s.peer_reset(0);
  EXPECT_EQ(c.ctx.listeners, 0);
  EXPECT_FALSE(c.s.finished);
  EXPECT_TRUE(c.s.released);
  EXPECT_EQ(c.ctx.retired, std::vector<Handler*>{&c.a});
  testing::TestBroadcast b(c.ctx.origin_, "room/alice/cam");  // no longer listening
  EXPECT_TRUE(c.s.written_hex().empty());
}

// Our SUBSCRIBE_NAMESPACE, request 2, of ["alice"] in draft `v`, on stream 0 (or the control
// stream when `own` is false).
struct DiscoveryCase {
  DiscoveryCase(wire::Version v, bool own) : ctx(v), d(ctx, 2, {"alice"}) {
    d.begin(own ? &s : nullptr);
  }
  void push(const wi::ControlMessage& m, bool fin = false) {
    s.push(to_hex(std::span<const uint8_t>(encoded(ctx.draft(), m))), fin);
  }
  static wi::Namespace ns(const char* suffix, bool done = false) {
    wi::Namespace n;
    n.suffix = {suffix};
    n.done = done;
    return n;
  }
  FakeNamespaceContext ctx;
  FakeStream s{0};
  NamespaceDiscovery d;
};

TEST(IetfNamespaceDiscovery, Draft16SubscribeNamespaceByteExactThenNamespacesThenFin) {
  DiscoveryCase c(wire::Version::kTransport16, true);
  // 0x11 len, request 2, ["alice"], Subscribe Options 1 (NAMESPACE), no parameters (d16 §9.25).
  EXPECT_EQ(c.s.written_hex(), "11 00 0a 02 01 05 61 6c 69 63 65 01 00");
  wi::RequestOk ok;
  ok.request_id = 2;
  c.push(ok);
  c.push(DiscoveryCase::ns("cam"));
  c.push(DiscoveryCase::ns("cam"));  // a repeat: told once
  c.push(DiscoveryCase::ns("mic"));
  c.push(DiscoveryCase::ns("cam", true));
  c.push(DiscoveryCase::ns("nope", true));  // the end of one never told: ignored
  EXPECT_EQ(c.ctx.client,
            (std::vector<std::string>{"+room/alice/cam", "+room/alice/mic", "-room/alice/cam"}));
  EXPECT_FALSE(c.ctx.is_closed());
  // The relay ends the request: what it told of and did not withdraw is gone.
  c.s.push("", true);
  EXPECT_EQ(c.ctx.handler_.announces, std::vector<std::string>{"-room/alice/mic"});
  EXPECT_EQ(c.ctx.retired, std::vector<Handler*>{&c.d});
}

TEST(IetfNamespaceDiscovery, Draft17And20SubscribeNamespaceByteExact) {
  // d17: 0x11 with the Required Request ID Delta (0) after the request id (d17 §9.25).
  DiscoveryCase d17(wire::Version::kTransport17, true);
  EXPECT_EQ(d17.s.written_hex(), "11 00 0b 02 00 01 05 61 6c 69 63 65 01 00");
  // d18+: SUBSCRIBE_NAMESPACE is 0x50, with no delta and no Subscribe Options (SUBSCRIBE_TRACKS
  // is its own type).
  DiscoveryCase d20(wire::Version::kTransport20, true);
  EXPECT_EQ(d20.s.written_hex(), "50 00 09 02 01 05 61 6c 69 63 65 00");
}

TEST(IetfNamespaceDiscovery, Draft15RequestGoesOnTheControlStreamAndAnswersComeFromTheSession) {
  DiscoveryCase c(wire::Version::kTransport15, false);
  ASSERT_EQ(c.ctx.sent.size(), 1u);
  const auto& m = std::get<wi::SubscribeNamespace>(c.ctx.sent[0]);
  EXPECT_EQ(m.request_id, 2u);
  EXPECT_EQ(m.prefix, wi::TrackNamespace{"alice"});
  EXPECT_TRUE(c.s.written_hex().empty());
  c.d.on_namespace(DiscoveryCase::ns("cam"));
  EXPECT_EQ(c.ctx.client, std::vector<std::string>{"+room/alice/cam"});
  // The session ends: every namespace told of is withdrawn.
  c.d.on_session_closed();
  EXPECT_EQ(c.ctx.handler_.announces, std::vector<std::string>{"-room/alice/cam"});
}

TEST(IetfNamespaceDiscovery, Draft16RequestErrorIsNotAFailureButAnotherMessageIs) {
  DiscoveryCase c(wire::Version::kTransport16, true);
  wi::RequestError e;
  e.request_id = 2;
  e.error_code = 0x1;  // UNAUTHORIZED
  e.reason = "no";
  c.push(e);
  EXPECT_FALSE(c.ctx.is_closed());
  c.push(wi::Unsubscribe{2});
  ASSERT_TRUE(c.ctx.failed_code.has_value());
  EXPECT_EQ(*c.ctx.failed_code, wi::TerminationCode::kProtocolViolation);
  EXPECT_EQ(c.ctx.failed_detail, "unexpected message on a SUBSCRIBE_NAMESPACE stream");
}

TEST(IetfNamespaceDiscovery, Draft16TooManyNamespacesIsTooManyRequests) {
  DiscoveryCase c(wire::Version::kTransport16, true);
  c.ctx.config_.limits.max_received_announced_paths = 1;
  c.push(DiscoveryCase::ns("cam"));
  c.push(DiscoveryCase::ns("mic"));
  ASSERT_TRUE(c.ctx.failed_code.has_value());
  EXPECT_EQ(*c.ctx.failed_code, wi::TerminationCode::kTooManyRequests);
  EXPECT_EQ(c.ctx.client, std::vector<std::string>{"+room/alice/cam"});
}

TEST(IetfNamespaceDiscovery, Draft16ResetWithdrawsWhatItToldOf) {
  DiscoveryCase c(wire::Version::kTransport16, true);
  c.push(DiscoveryCase::ns("cam"));
  c.s.peer_reset(0);
  EXPECT_EQ(c.ctx.handler_.announces, std::vector<std::string>{"-room/alice/cam"});
  EXPECT_EQ(c.ctx.retired, std::vector<Handler*>{&c.d});
  EXPECT_TRUE(c.s.released);
}

}  // namespace ietf_handlers_test
}  // namespace moqd::session::ietf_detail
