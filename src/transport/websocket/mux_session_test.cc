#include "transport/websocket/mux_session.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/codec.h"
#include "testing/fake_channel.h"

namespace moqd::transport::websocket {
namespace {

using moqd::testing::FakeChannel;
using moqd::testing::FakeChannelPair;
using namespace std::chrono_literals;

// Records one stream's events; reads everything on on_readable() unless told not to.
class RecordingStream : public StreamVisitor {
 public:
  explicit RecordingStream(Stream& s) : stream(&s) { s.set_visitor(this); }
  void on_readable() override {
    ++readable;
    if (auto_read) {
      drain();
    }
  }
  void on_writable() override { ++writable; }
  void on_reset(uint64_t code) override { reset_code = code; }
  void on_stop_sending(uint64_t code) override { stop_code = code; }
  void on_sent() override {
    ++sent;
    sent_buffered.push_back(stream->buffered());
  }
  void on_received() override { ++received; }
  void drain() {
    auto p = stream->peek();
    data.append(reinterpret_cast<const char*>(p.data()), p.size());
    stream->consume(p.size());
    fin = stream->is_fin_received();
  }

  Stream* stream;
  bool auto_read = true;
  std::string data;
  bool fin = false;
  int readable = 0;
  int writable = 0;
  int sent = 0;
  int received = 0;
  std::vector<size_t> sent_buffered;  // buffered() at each on_sent()
  std::optional<uint64_t> reset_code;
  std::optional<uint64_t> stop_code;
};

class RecordingSession : public SessionVisitor {
 public:
  void on_incoming_stream(Stream& s) override {
    incoming.push_back(std::make_unique<RecordingStream>(s));
    incoming.back()->auto_read = auto_read;
  }
  void on_streams_available() override { ++available; }
  void on_closed(uint64_t c, std::string_view r) override {
    ++closed;
    code = c;
    reason = std::string(r);
  }

  bool auto_read = true;
  std::vector<std::unique_ptr<RecordingStream>> incoming;
  int available = 0;
  int closed = 0;
  uint64_t code = 0;
  std::string reason;
};

Bytes pattern(size_t n, uint8_t seed = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>(i * 7 + seed);
  }
  return Bytes::from(v);
}

std::vector<MuxFrame> stream_frames(Framing framing, const FakeChannel& ch) {
  std::vector<MuxFrame> out;
  for (const auto& m : ch.sent()) {
    auto f = decode_frame(framing, m);
    if (f && f->kind == FrameKind::kStream) {
      out.push_back(*f);
    }
  }
  return out;
}

std::string framing_test_name(const ::testing::TestParamInfo<Framing>& info) {
  switch (info.param) {
    case Framing::kQmux00: return "Qmux00";
    case Framing::kQmux01: return "Qmux01";
    case Framing::kQmux02: return "Qmux02";
    case Framing::kWebTransport: break;
  }
  return "WebTransport";
}

// A client and a server MuxSession back to back over a FakeChannelPair (a = server side).
class MuxPairTest : public ::testing::TestWithParam<Framing> {
 protected:
  bool qmux() const { return is_qmux(GetParam()); }

  void start(MuxConfig server_config = {}, MuxConfig client_config = {}) {
    server_ = std::make_unique<MuxSession>(pipe_.a(), clock_, GetParam(), Role::kServer, "",
                                           "/room", "client", server_config);
    client_ = std::make_unique<MuxSession>(pipe_.b(), clock_, GetParam(), Role::kClient, "",
                                           "/room", "server", client_config);
    pipe_.a().set_handler(server_.get());
    pipe_.b().set_handler(client_.get());
    server_->set_visitor(&sv_);
    client_->set_visitor(&cv_);
    run();
  }

  // Runs timers and moves messages until nothing is left to do.
  void run() {
    for (int i = 0; i < 100'000; ++i) {
      clock_.advance(0us);
      if (pipe_.deliver() == 0 && clock_.pending_timers() == 0) {
        return;
      }
    }
    FAIL() << "did not settle";
  }

  ManualClock clock_;
  FakeChannelPair pipe_;
  RecordingSession sv_;
  RecordingSession cv_;
  std::unique_ptr<MuxSession> server_;
  std::unique_ptr<MuxSession> client_;
};

INSTANTIATE_TEST_SUITE_P(Framings, MuxPairTest,
                         ::testing::Values(Framing::kQmux00, Framing::kQmux01, Framing::kQmux02,
                                           Framing::kWebTransport),
                         framing_test_name);

// Flow control and stream limits exist only in qmux-00; the legacy framing has neither.
class MuxPairQmuxTest : public MuxPairTest {};
INSTANTIATE_TEST_SUITE_P(Qmux, MuxPairQmuxTest,
                         ::testing::Values(Framing::kQmux00, Framing::kQmux01, Framing::kQmux02),
                         framing_test_name);

TEST_P(MuxPairTest, TransportParametersAreTheFirstMessage) {
  start();
  if (qmux()) {
    ASSERT_FALSE(pipe_.a().sent().empty());
    EXPECT_EQ(to_hex(std::span(pipe_.a().sent()[0]).first(8)), "ff 51 53 30 0d 0a 0d 0a");
    EXPECT_EQ(server_->kind(), "websocket/" + std::string(framing_name(GetParam())));
  } else {
    EXPECT_TRUE(pipe_.a().sent().empty());
    EXPECT_EQ(server_->kind(), "websocket/webtransport");
  }
  EXPECT_EQ(server_->path(), "/room");
}

TEST_P(MuxPairTest, BidiStreamsBothWays) {
  start();
  Stream* c = client_->open_bidi();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->id(), 0u);
  RecordingStream cr(*c);
  c->write(Bytes::copy("hello"));
  c->finish();
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  RecordingStream& sr = *sv_.incoming[0];
  EXPECT_EQ(sr.stream->id(), 0u);
  EXPECT_EQ(sr.data, "hello");
  EXPECT_TRUE(sr.fin);
  sr.stream->write(Bytes::copy("world"));
  sr.stream->finish();
  run();
  EXPECT_EQ(cr.data, "world");
  EXPECT_TRUE(cr.fin);

  Stream* s = server_->open_bidi();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->id(), 1u);
  s->write(Bytes::copy("x"));
  run();
  ASSERT_EQ(cv_.incoming.size(), 1u);
  EXPECT_EQ(cv_.incoming[0]->stream->id(), 1u);
  EXPECT_EQ(cv_.incoming[0]->data, "x");
}

TEST_P(MuxPairTest, UniStreamsBothWays) {
  start();
  Stream* c = client_->open_uni();
  Stream* s = server_->open_uni();
  ASSERT_NE(c, nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(c->id(), 2u);
  EXPECT_EQ(s->id(), 3u);
  EXPECT_TRUE(c->is_uni());
  c->write(Bytes::copy("up"));
  c->finish();
  s->write(Bytes::copy("down"));
  s->finish();
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  ASSERT_EQ(cv_.incoming.size(), 1u);
  EXPECT_EQ(sv_.incoming[0]->data, "up");
  EXPECT_TRUE(sv_.incoming[0]->fin);
  EXPECT_EQ(cv_.incoming[0]->data, "down");
  EXPECT_TRUE(cv_.incoming[0]->fin);
  EXPECT_EQ(sv_.incoming[0]->stream->write_capacity(), 0u);  // no send side on a peer uni
}

TEST_P(MuxPairTest, OneMebibyteIsSplitIntoBoundedFrames) {
  start();
  Stream* c = client_->open_uni();
  Bytes payload = pattern(1 << 20);
  c->write(payload);
  c->finish();
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_TRUE(sv_.incoming[0]->fin);
  EXPECT_EQ(sv_.incoming[0]->data, std::string(payload.view()));
  auto frames = stream_frames(GetParam(), pipe_.b());
  size_t total = 0;
  for (const auto& f : frames) {
    EXPECT_LE(f.data.size(), kMaxStreamPayload);
    total += f.data.size();
  }
  EXPECT_EQ(total, size_t{1} << 20);
  EXPECT_EQ(frames.size(), (total + kMaxStreamPayload - 1) / kMaxStreamPayload);
  EXPECT_TRUE(frames.back().fin);
}

TEST_P(MuxPairTest, FinWithoutData) {
  start();
  Stream* c = client_->open_uni();
  c->finish();
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_TRUE(sv_.incoming[0]->fin);
  EXPECT_EQ(sv_.incoming[0]->data, "");
}

// A reader whose message is cut short by FIN must learn of the FIN with the bytes still unread:
// is_fin_received() waits for them to be consumed, has_peer_fin() does not.
TEST_P(MuxPairTest, PeerFinIsReportedWhileBytesAreUnread) {
  start();
  sv_.auto_read = false;
  Stream* c = client_->open_uni();
  c->write(Bytes::copy("\x40"));  // the first byte of a two-byte varint
  c->finish();
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  Stream* in = sv_.incoming[0]->stream;
  EXPECT_GE(sv_.incoming[0]->readable, 1);
  EXPECT_EQ(in->peek().size(), 1u);
  EXPECT_TRUE(in->has_peer_fin());
  EXPECT_FALSE(in->is_fin_received());
  in->consume(1);
  EXPECT_TRUE(in->is_fin_received());
}

// on_sent(): once every queued byte, and the FIN, is written to the connection; again for a
// FIN that follows alone; not for a reset stream.
TEST_P(MuxPairTest, OnSentFiresWhenTheQueueIsWritten) {
  start();
  Stream* c = client_->open_uni();
  RecordingStream cr(*c);
  c->write(pattern(200'000));
  EXPECT_GT(c->buffered(), 0u);
  EXPECT_EQ(cr.sent, 0);
  run();
  EXPECT_EQ(cr.sent, 1);
  EXPECT_EQ(cr.sent_buffered, std::vector<size_t>{0});
  c->finish();
  run();
  EXPECT_EQ(cr.sent, 2);
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_TRUE(sv_.incoming[0]->fin);
  EXPECT_EQ(sv_.incoming[0]->data.size(), 200'000u);

  Stream* r = client_->open_uni();
  RecordingStream rr(*r);
  r->write(pattern(10));
  r->reset(3);
  run();
  EXPECT_EQ(rr.sent, 0);
}

// on_received(): qmux-01/02 confirm a finished stream's receipt with a QX_PING sent after its FIN
// (the peer answers it after handling every frame before it); receipt_pending() holds until
// then. qmux-00 and the legacy framing have no QX_PING: nothing is confirmed.
TEST_P(MuxPairTest, OnReceivedFiresOnceThePeerAnsweredAPingAfterTheFin) {
  start();
  const bool confirms = GetParam() == Framing::kQmux01 || GetParam() == Framing::kQmux02;
  Stream* c = client_->open_uni();
  RecordingStream cr(*c);
  EXPECT_EQ(c->confirms_receipt(), confirms);
  c->write(pattern(100'000));
  run();
  EXPECT_FALSE(c->receipt_pending());  // not finished
  EXPECT_EQ(cr.received, 0);
  c->finish();
  EXPECT_EQ(c->receipt_pending(), confirms);
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_TRUE(sv_.incoming[0]->fin);
  EXPECT_EQ(cr.received, confirms ? 1 : 0);
  EXPECT_FALSE(c->receipt_pending());

  Stream* r = client_->open_uni();
  RecordingStream rr(*r);
  r->write(pattern(10));
  r->finish();
  r->reset(3);
  EXPECT_FALSE(r->receipt_pending());
  run();
  EXPECT_EQ(rr.received, 0);
}

TEST_P(MuxPairTest, ResetReachesPeer) {
  start();
  Stream* c = client_->open_bidi();
  c->write(Bytes::copy("partial"));
  run();
  c->reset(7);
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_EQ(sv_.incoming[0]->reset_code, 7u);
  EXPECT_FALSE(sv_.incoming[0]->stream->is_fin_received());
  EXPECT_EQ(c->write_capacity(), 0u);
}

TEST_P(MuxPairTest, StopSendingMakesPeerResetItsSendSide) {
  start();
  Stream* c = client_->open_bidi();
  RecordingStream cr(*c);
  c->write(Bytes::copy("a"));
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  sv_.incoming[0]->stream->stop_sending(9);
  run();
  EXPECT_EQ(cr.stop_code, 9u);
  EXPECT_EQ(c->write_capacity(), 0u);
  EXPECT_EQ(sv_.incoming[0]->reset_code, 9u);
}

TEST_P(MuxPairTest, SendOrderHigherFirst) {
  start();
  Stream* low = client_->open_uni();
  Stream* high = client_->open_uni();
  Stream* mid = client_->open_uni();
  low->set_send_order(1);
  high->set_send_order(5);
  mid->set_send_order(3);
  for (Stream* s : {low, high, mid}) {
    s->write(pattern(3 * kMaxStreamPayload));
  }
  size_t before = pipe_.b().sent().size();
  run();
  std::vector<StreamId> ids;
  for (size_t i = before; i < pipe_.b().sent().size(); ++i) {
    auto f = decode_frame(GetParam(), pipe_.b().sent()[i]);
    ASSERT_TRUE(f);
    if (f->kind == FrameKind::kStream) {
      ids.push_back(f->stream_id);
    }
  }
  std::vector<StreamId> want = {high->id(), high->id(), high->id(), mid->id(),
                                mid->id(),  mid->id(),  low->id(),  low->id(),
                                low->id()};
  EXPECT_EQ(ids, want);
}

TEST_P(MuxPairTest, EqualSendOrderSharesRoundRobin) {
  start();
  Stream* a = client_->open_uni();
  Stream* b = client_->open_uni();
  a->write(pattern(2 * kMaxStreamPayload));
  b->write(pattern(2 * kMaxStreamPayload));
  run();
  auto frames = stream_frames(GetParam(), pipe_.b());
  std::vector<StreamId> ids;
  for (size_t i = 0; i < frames.size(); ++i) {
    ids.push_back(frames[i].stream_id);
  }
  EXPECT_EQ(ids, (std::vector<StreamId>{a->id(), b->id(), a->id(), b->id()}));
}

TEST_P(MuxPairTest, WritableFiresAfterQueueDrains) {
  MuxConfig config;
  config.stream_queue_target = 64 * 1024;
  start({}, config);
  Stream* c = client_->open_uni();
  RecordingStream cr(*c);
  EXPECT_EQ(c->write_capacity(), 64u * 1024);
  c->write(pattern(100 * 1024));
  EXPECT_EQ(c->write_capacity(), 0u);
  EXPECT_EQ(c->buffered(), 100u * 1024);
  EXPECT_EQ(cr.writable, 0);  // never from inside write()
  run();
  EXPECT_EQ(cr.writable, 1);
  EXPECT_EQ(c->buffered(), 0u);
  EXPECT_EQ(c->write_capacity(), 64u * 1024);
}

TEST_P(MuxPairTest, SessionSendBufferBoundsQueuedBytesAcrossStreams) {
  MuxConfig config;
  config.stream_queue_target = 64 * 1024;
  config.send_buffer = 100 * 1024;
  start({}, config);
  Stream* a = client_->open_uni();
  Stream* b = client_->open_uni();
  RecordingStream ar(*a);
  RecordingStream br(*b);
  a->write(pattern(60 * 1024));
  EXPECT_EQ(client_->unsent_bytes(), 60u * 1024);
  EXPECT_EQ(b->write_capacity(), 40u * 1024);  // the session's room, not the stream's 64 KiB
  b->write(pattern(40 * 1024));
  EXPECT_EQ(b->write_capacity(), 0u);
  EXPECT_EQ(a->write_capacity(), 0u);
  uint64_t sent_before = client_->bytes_sent();
  run();
  EXPECT_EQ(client_->unsent_bytes(), 0u);
  EXPECT_EQ(client_->bytes_sent() - sent_before, 100u * 1024);
  // Both streams were told they may write again.
  EXPECT_GE(ar.writable, 1);
  EXPECT_GE(br.writable, 1);
  EXPECT_EQ(b->write_capacity(), 64u * 1024);
}

TEST_P(MuxPairTest, ChannelHighWaterPausesSchedulerUntilWritable) {
  MuxConfig config;
  config.channel_high_water = 64 * 1024;
  start({}, config);
  pipe_.b().set_low_water(32 * 1024);
  Stream* c = client_->open_uni();
  c->write(pattern(256 * 1024));
  clock_.advance(0us);
  EXPECT_LT(pipe_.b().buffered(), 64u * 1024 + kMaxStreamPayload + 16);
  EXPECT_GT(c->buffered(), 128u * 1024);
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_EQ(sv_.incoming[0]->data.size(), 256u * 1024);
}

TEST_P(MuxPairTest, CloseNotifiesBothSidesOnce) {
  start();
  Stream* c = client_->open_bidi();
  c->write(Bytes::copy("x"));
  run();
  client_->close(5, "bye");
  EXPECT_EQ(cv_.closed, 0);  // never from inside close()
  EXPECT_EQ(client_->open_uni(), nullptr);
  run();
  EXPECT_EQ(cv_.closed, 1);
  EXPECT_EQ(cv_.code, 5u);
  EXPECT_EQ(sv_.closed, 1);
  EXPECT_EQ(sv_.code, 5u);
  EXPECT_EQ(sv_.reason, "bye");
  EXPECT_TRUE(pipe_.is_closed());
  EXPECT_EQ(server_->stream_count(), 0u);
  server_.reset();
  client_.reset();
  EXPECT_EQ(sv_.closed, 1);
  EXPECT_EQ(cv_.closed, 1);
}

TEST_P(MuxPairTest, PlainWebSocketCloseEndsSession) {
  start();
  pipe_.b().close(1000, "");
  run();
  EXPECT_EQ(sv_.closed, 1);
  EXPECT_EQ(sv_.code, 0u);
  EXPECT_EQ(cv_.closed, 1);
}

TEST_P(MuxPairTest, ReleaseStillDeliversFinishedData) {
  start();
  Stream* c = client_->open_uni();
  c->write(pattern(50'000));
  c->finish();
  c->release();
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  EXPECT_EQ(sv_.incoming[0]->data.size(), 50'000u);
  EXPECT_TRUE(sv_.incoming[0]->fin);
  EXPECT_EQ(client_->stream_count(), 0u);
  sv_.incoming[0]->stream->release();
  run();
  EXPECT_EQ(server_->stream_count(), 0u);
}

TEST_P(MuxPairTest, ReleaseUnfinishedResetsAndStops) {
  start();
  Stream* c = client_->open_bidi();
  RecordingStream cr(*c);
  c->write(Bytes::copy("x"));
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  sv_.incoming[0]->stream->release();
  run();
  EXPECT_EQ(cr.reset_code, 0u);
  EXPECT_EQ(cr.stop_code, 0u);
}

TEST_P(MuxPairQmuxTest, FlowControlStallsUntilReaderConsumes) {
  MuxConfig server_config;
  server_config.max_stream_data = 64 * 1024;
  server_config.max_data = 1 << 20;
  start(server_config);
  sv_.auto_read = false;
  Stream* c = client_->open_uni();
  c->write(pattern(256 * 1024));
  run();
  ASSERT_EQ(sv_.incoming.size(), 1u);
  RecordingStream& sr = *sv_.incoming[0];
  EXPECT_EQ(sr.stream->peek().size(), 64u * 1024);
  EXPECT_EQ(c->buffered(), 192u * 1024);
  for (int i = 0; i < 10 && sr.data.size() < 256u * 1024; ++i) {
    sr.drain();
    run();
  }
  EXPECT_EQ(sr.data, std::string(pattern(256 * 1024).view()));
  EXPECT_EQ(c->buffered(), 0u);
}

TEST_P(MuxPairQmuxTest, ConnectionCreditStallsAcrossStreams) {
  MuxConfig server_config;
  server_config.max_data = 100 * 1024;
  start(server_config);
  sv_.auto_read = false;
  Stream* a = client_->open_uni();
  Stream* b = client_->open_uni();
  a->write(pattern(80 * 1024));
  b->write(pattern(80 * 1024));
  run();
  ASSERT_EQ(sv_.incoming.size(), 2u);
  EXPECT_EQ(sv_.incoming[0]->stream->peek().size() + sv_.incoming[1]->stream->peek().size(),
            100u * 1024);
  for (int i = 0; i < 10; ++i) {
    sv_.incoming[0]->drain();
    sv_.incoming[1]->drain();
    run();
  }
  EXPECT_EQ(sv_.incoming[0]->data.size(), 80u * 1024);
  EXPECT_EQ(sv_.incoming[1]->data.size(), 80u * 1024);
}

// When connection credit runs out, the stream whose turn it was goes first once MAX_DATA arrives,
// instead of queueing behind every other ready stream of its order.
TEST_P(MuxPairQmuxTest, StreamStoppedByConnectionCreditKeepsItsTurn) {
  MuxConfig server_config;
  server_config.max_data = kMaxStreamPayload + kMaxStreamPayload / 2;
  start(server_config);
  sv_.auto_read = false;
  Stream* a = client_->open_uni();
  Stream* b = client_->open_uni();
  a->write(pattern(2 * kMaxStreamPayload));
  b->write(pattern(2 * kMaxStreamPayload));
  run();
  size_t before = stream_frames(GetParam(), pipe_.b()).size();
  ASSERT_EQ(sv_.incoming.size(), 2u);
  // a sent a whole frame, b the half the credit allowed; then a's turn found no credit.
  EXPECT_EQ(sv_.incoming[0]->stream->peek().size() + sv_.incoming[1]->stream->peek().size(),
            kMaxStreamPayload + kMaxStreamPayload / 2);
  sv_.incoming[0]->drain();
  sv_.incoming[1]->drain();
  run();
  auto frames = stream_frames(GetParam(), pipe_.b());
  ASSERT_GT(frames.size(), before);
  EXPECT_EQ(frames[before].stream_id, a->id());
}

TEST_P(MuxPairQmuxTest, UniStreamLimitBlocksThenStreamsAvailable) {
  MuxConfig server_config;
  server_config.max_streams_uni = 2;
  start(server_config);
  Stream* s1 = client_->open_uni();
  Stream* s2 = client_->open_uni();
  ASSERT_NE(s1, nullptr);
  ASSERT_NE(s2, nullptr);
  EXPECT_EQ(client_->open_uni(), nullptr);
  EXPECT_NE(client_->open_bidi(), nullptr);  // bidi has its own limit
  s1->write(Bytes::copy("g0"));
  s1->finish();
  s1->release();
  run();
  EXPECT_EQ(cv_.available, 1);
  Stream* s3 = client_->open_uni();
  ASSERT_NE(s3, nullptr);
  EXPECT_EQ(s3->id(), 10u);
  s2->finish();
  s3->finish();
  run();
  // One stream per group: each finished group lets the publisher open the next.
  for (int group = 0; group < 20; ++group) {
    Stream* g = client_->open_uni();
    if (g == nullptr) {
      run();
      g = client_->open_uni();
    }
    ASSERT_NE(g, nullptr) << group;
    g->write(Bytes::copy("data"));
    g->finish();
    g->release();
    run();
  }
  EXPECT_EQ(sv_.closed, 0);
}

TEST_P(MuxPairQmuxTest, ServerCannotOpenBeforeClientParameters) {
  server_ = std::make_unique<MuxSession>(pipe_.a(), clock_, GetParam(), Role::kServer, "", "/",
                                         "c", MuxConfig{});
  server_->set_visitor(&sv_);
  pipe_.a().set_handler(server_.get());
  EXPECT_EQ(server_->open_bidi(), nullptr);
  client_ = std::make_unique<MuxSession>(pipe_.b(), clock_, GetParam(), Role::kClient, "", "/",
                                         "s", MuxConfig{});
  client_->set_visitor(&cv_);
  pipe_.b().set_handler(client_.get());
  run();
  EXPECT_EQ(sv_.available, 1);
  EXPECT_NE(server_->open_bidi(), nullptr);
}

// A server MuxSession fed raw peer frames by hand.
class MuxServerTest : public ::testing::TestWithParam<Framing> {
 protected:
  void start(MuxConfig config = {}) {
    session_ = std::make_unique<MuxSession>(channel_, clock_, GetParam(), Role::kServer, "", "/",
                                            "peer", config);
    session_->set_visitor(&visitor_);
    if (is_qmux(GetParam())) {
      TransportParameters p;
      p.initial_max_data = 1 << 20;
      p.initial_max_stream_data_bidi_local = 1 << 16;
      p.initial_max_stream_data_bidi_remote = 1 << 16;
      p.initial_max_stream_data_uni = 1 << 16;
      p.initial_max_streams_bidi = 10;
      p.initial_max_streams_uni = 10;
      feed(encode_transport_parameters(p).span());
    }
  }
  void feed(std::span<const uint8_t> message) { session_->on_message(message); }
  void feed_hex(std::string_view hex) {
    auto bytes = from_hex(hex);
    feed(bytes);
  }
  Bytes stream_frame(StreamId id, size_t len, bool fin = false) {
    std::vector<uint8_t> m;
    Bytes header = encode_stream_header(GetParam(), id, len, fin);
    m.insert(m.end(), header.data(), header.data() + header.size());
    m.resize(m.size() + len, 0x55);
    return Bytes::from(m);
  }
  // The close code in the last message we sent, if it is a close frame.
  std::optional<uint64_t> sent_close_code() {
    if (channel_.sent().empty()) {
      return std::nullopt;
    }
    auto f = decode_frame(GetParam(), channel_.sent().back());
    if (!f || f->kind != FrameKind::kClose) {
      return std::nullopt;
    }
    return f->code;
  }
  void expect_protocol_close() {
    EXPECT_EQ(sent_close_code(), kMuxProtocolError);
    EXPECT_EQ(channel_.close_code(), 1002);
    EXPECT_EQ(visitor_.closed, 1);
    EXPECT_EQ(visitor_.code, kMuxProtocolError);
  }

  ManualClock clock_;
  FakeChannel channel_;
  RecordingSession visitor_;
  std::unique_ptr<MuxSession> session_;
};

INSTANTIATE_TEST_SUITE_P(Framings, MuxServerTest,
                         ::testing::Values(Framing::kQmux00, Framing::kQmux01, Framing::kQmux02,
                                           Framing::kWebTransport),
                         framing_test_name);

// Flow control and stream limits exist only in qmux-00; the legacy framing has neither.
class MuxServerQmuxTest : public MuxServerTest {};
INSTANTIATE_TEST_SUITE_P(Qmux, MuxServerQmuxTest,
                         ::testing::Values(Framing::kQmux00, Framing::kQmux01, Framing::kQmux02),
                         framing_test_name);

TEST_P(MuxServerTest, ClientTranscriptOpensStreamZero) {
  start();
  feed_hex(is_qmux(GetParam()) ? "0a 00 01 20" : "08 00 20");
  ASSERT_EQ(visitor_.incoming.size(), 1u);
  EXPECT_EQ(visitor_.incoming[0]->stream->id(), 0u);
  EXPECT_EQ(visitor_.incoming[0]->data, " ");
}

TEST_P(MuxServerTest, ClientCloseFixtureEndsSession) {
  start();
  if (is_qmux(GetParam())) {
    feed_hex("1d 00 00 00");
  } else {
    feed_hex("1d 00");
  }
  EXPECT_EQ(visitor_.closed, 1);
  EXPECT_EQ(visitor_.code, 0u);
  EXPECT_EQ(channel_.close_code(), 1000);
  feed(stream_frame(0, 1).span());  // dropped after close
  EXPECT_TRUE(visitor_.incoming.empty());
}

TEST_P(MuxServerTest, NewPeerIdOpensLowerIdsInOrder) {
  start();
  feed(stream_frame(8, 1).span());
  ASSERT_EQ(visitor_.incoming.size(), 3u);
  EXPECT_EQ(visitor_.incoming[0]->stream->id(), 0u);
  EXPECT_EQ(visitor_.incoming[1]->stream->id(), 4u);
  EXPECT_EQ(visitor_.incoming[2]->stream->id(), 8u);
  EXPECT_EQ(visitor_.incoming[2]->data.size(), 1u);
}

TEST_P(MuxServerTest, FramesForClosedStreamsAreIgnored) {
  start();
  feed(stream_frame(2, 3, true).span());
  ASSERT_EQ(visitor_.incoming.size(), 1u);
  visitor_.incoming[0]->stream->release();
  clock_.advance(0us);
  EXPECT_EQ(session_->stream_count(), 0u);
  feed(stream_frame(2, 3).span());
  EXPECT_EQ(visitor_.incoming.size(), 1u);
  EXPECT_EQ(visitor_.closed, 0);
}

TEST_P(MuxServerTest, FrameOnOurUniStreamIsProtocolError) {
  start();
  Stream* s = session_->open_uni();
  ASSERT_NE(s, nullptr);
  feed(stream_frame(s->id(), 1).span());
  expect_protocol_close();
}

TEST_P(MuxServerTest, FrameForStreamWeNeverOpenedIsProtocolError) {
  start();
  feed(stream_frame(5, 1).span());
  expect_protocol_close();
}

TEST_P(MuxServerTest, StopSendingOnPeerUniIsProtocolError) {
  start();
  feed(encode_stop_sending(GetParam(), 2, 0).span());
  expect_protocol_close();
}

TEST_P(MuxServerTest, UndecodableFrameIsProtocolError) {
  start();
  feed_hex(is_qmux(GetParam()) ? "11 01" : "42 00");
  expect_protocol_close();
}

// A STREAM frame that carries OFF must continue its stream exactly: a repeated or skipped offset
// would otherwise corrupt the stream silently. (Every qmux-00 writer, moqd and @moq/qmux, omits
// OFF and sends in order, so a frame without it continues the stream.)
TEST_P(MuxServerQmuxTest, StreamFrameOffsetMustContinueTheStream) {
  start();
  feed_hex("0e 00 00 02 61 62");  // OFF|LEN, stream 0, offset 0, "ab"
  feed_hex("0e 00 02 01 63");     // offset 2, "c": continues
  feed_hex("0a 00 01 64");        // no OFF, "d": continues
  ASSERT_EQ(visitor_.incoming.size(), 1u);
  EXPECT_EQ(visitor_.incoming[0]->data, "abcd");
  EXPECT_EQ(visitor_.closed, 0);
  feed_hex("0e 00 02 01 63");  // offset 2 again: a repeat
  expect_protocol_close();
  EXPECT_EQ(visitor_.incoming[0]->data, "abcd");
}

TEST_P(MuxServerQmuxTest, StreamFrameSkippingAheadIsProtocolError) {
  start();
  feed_hex("0e 00 00 02 61 62");
  feed_hex("0e 00 05 01 63");  // offset 5: three bytes skipped
  expect_protocol_close();
  ASSERT_EQ(visitor_.incoming.size(), 1u);
  EXPECT_EQ(visitor_.incoming[0]->data, "ab");
}

TEST_P(MuxServerQmuxTest, DataPastStreamCreditClosesSession) {
  MuxConfig config;
  config.max_stream_data = 100;
  start(config);
  visitor_.auto_read = false;
  feed(stream_frame(0, 100).span());
  EXPECT_EQ(visitor_.closed, 0);
  feed(stream_frame(0, 1).span());
  expect_protocol_close();
}

TEST_P(MuxServerQmuxTest, DataPastConnectionCreditClosesSession) {
  MuxConfig config;
  config.max_data = 150;
  start(config);
  visitor_.auto_read = false;
  feed(stream_frame(0, 100).span());
  feed(stream_frame(2, 51).span());
  expect_protocol_close();
}

// Both framings bound what a peer can make us buffer unread: qmux by its credit, the legacy
// framing (no flow control) by the same window.
TEST_P(MuxServerTest, UnreadBytesPastTheConnectionWindowCloseSession) {
  MuxConfig config;
  config.max_data = 150;
  start(config);
  visitor_.auto_read = false;
  feed(stream_frame(0, 100).span());
  feed(stream_frame(4, 50).span());
  EXPECT_EQ(visitor_.closed, 0);
  feed(stream_frame(8, 1).span());
  expect_protocol_close();
}

TEST_P(MuxServerTest, ConsumedBytesDoNotCountAgainstTheWindow) {
  MuxConfig config;
  config.max_data = 150;
  start(config);
  for (int i = 0; i < 10; ++i) {
    feed(stream_frame(0, 100).span());
  }
  EXPECT_EQ(visitor_.closed, 0);
}

TEST_P(MuxServerQmuxTest, StreamsPastLimitCloseSession) {
  MuxConfig config;
  config.max_streams_uni = 2;
  start(config);
  feed(stream_frame(6, 1).span());  // index 1
  EXPECT_EQ(visitor_.closed, 0);
  feed(stream_frame(10, 1).span());  // index 2
  expect_protocol_close();
}

TEST_P(MuxServerQmuxTest, GrantsStreamAndConnectionCreditAsDataIsConsumed) {
  MuxConfig config;
  config.max_stream_data = 100;
  config.max_data = 200;
  start(config);
  feed(stream_frame(0, 49).span());
  size_t before = channel_.sent().size();
  visitor_.incoming[0]->drain();
  EXPECT_EQ(channel_.sent().size(), before);  // under half a window
  feed(stream_frame(0, 51).span());
  std::vector<FrameKind> kinds;
  for (size_t i = before; i < channel_.sent().size(); ++i) {
    kinds.push_back(decode_frame(GetParam(), channel_.sent()[i])->kind);
  }
  EXPECT_EQ(kinds, (std::vector<FrameKind>{FrameKind::kMaxStreamData, FrameKind::kMaxData}));
  auto msd = decode_frame(GetParam(), channel_.sent()[before]);
  EXPECT_EQ(msd->value, 200u);
  feed(stream_frame(0, 100).span());  // within the raised limit
  EXPECT_EQ(visitor_.closed, 0);
}

TEST_P(MuxServerTest, ChannelClosedReportsOnce) {
  start();
  session_->on_channel_closed(1006, "gone");
  EXPECT_EQ(visitor_.closed, 1);
  EXPECT_EQ(visitor_.code, 1006u);
  session_->close(0, "");
  clock_.advance(0us);
  session_.reset();
  EXPECT_EQ(visitor_.closed, 1);
}

// Found by fuzz/mux_fuzzer (out of memory): one STREAM frame naming client bidi index ~86 million
// made the legacy framing, which had no stream limit, open every lower index first.
TEST_P(MuxServerTest, HugePeerStreamIdClosesInsteadOfOpeningEveryLowerId) {
  start();
  feed_hex(is_qmux(GetParam()) ? "0a 94 94 94 94 01 20" : "08 94 94 94 94 20");
  expect_protocol_close();
  EXPECT_TRUE(visitor_.incoming.empty());
  EXPECT_EQ(session_->stream_count(), 0u);
}

// The peer stream window slides as streams finish, in both framings, so a long session that opens
// one uni stream per group never hits the limit, while a jump past the window still closes.
TEST_P(MuxServerTest, PeerStreamWindowSlidesAsStreamsFinish) {
  MuxConfig config;
  config.max_streams_uni = 2;
  start(config);
  feed(stream_frame(2, 1, true).span());   // index 0
  feed(stream_frame(6, 1, true).span());   // index 1
  feed(stream_frame(10, 1, true).span());  // index 2: allowed, 0 and 1 are done
  feed(stream_frame(14, 1, true).span());  // index 3
  EXPECT_EQ(visitor_.closed, 0);
  EXPECT_EQ(visitor_.incoming.size(), 4u);
  feed(stream_frame(26, 1).span());  // index 6: past the window of 2 open at once
  expect_protocol_close();
}

// --- each @moq/qmux version's normal session, from captures (mux_frames_test.cc) ------------

struct ClientCapture {
  const char* who;
  Framing framing;
  std::vector<std::string_view> messages;  // transport parameters, "hi" + FIN on bidi 0, close
};

const ClientCapture kClientCaptures[] = {
    {"0.0.6 qmux-00", Framing::kQmux00,
     {"ff 51 53 30 0d 0a 0d 0a 20 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 04 00 00 07 04 80 "
      "04 00 00 08 02 40 64 09 02 40 64",
      "0a 00 02 68 69", "0b 00 00", "1d 00 00 03 62 79 65"}},
    {"0.1.3 qmux-01", Framing::kQmux01,
     {"ff 51 53 30 0d 0a 0d 0a 31 01 04 80 00 75 30 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 "
      "04 00 00 07 04 80 04 00 00 08 02 40 64 09 02 40 64 c5 71 c5 94 29 cd 08 45 02 7f fe",
      "0a 00 02 68 69", "0b 00 00", "1d 00 00 03 62 79 65"}},
    {"0.3.3 qmux-02", Framing::kQmux02,
     {"ff 51 53 30 0d 0a 0d 0a 37 01 04 80 00 75 30 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 "
      "04 00 00 07 04 80 04 00 00 08 02 40 64 09 02 40 64 20 02 7f fe c5 71 c5 94 29 cd 08 45 02 "
      "7f fe 1d 00",
      "0e 00 00 02 68 69", "0f 00 02 00", "1d 00 03 62 79 65"}},
    {"0.3.3 qmux-00", Framing::kQmux00,
     {"ff 51 53 30 0d 0a 0d 0a 31 01 04 80 00 75 30 04 04 80 10 00 00 05 04 80 04 00 00 06 04 80 "
      "04 00 00 07 04 80 04 00 00 08 02 40 64 09 02 40 64 c5 71 c5 94 29 cd 08 45 02 7f fe",
      "0e 00 00 02 68 69", "0f 00 02 00", "1d 00 03 62 79 65"}},
};

class MuxCaptureTest : public ::testing::Test {
 protected:
  void start(Framing framing) {
    session_ = std::make_unique<MuxSession>(channel_, clock_, framing, Role::kServer, "", "/",
                                            "peer");
    session_->set_visitor(&visitor_);
  }
  void feed_hex(std::string_view hex) {
    auto bytes = from_hex(hex);
    session_->on_message(bytes);
  }
  std::string last_sent() { return to_hex(channel_.sent().back()); }

  ManualClock clock_;
  FakeChannel channel_;
  RecordingSession visitor_;
  std::unique_ptr<MuxSession> session_;
};

TEST_F(MuxCaptureTest, EachVersionsNormalCloseEndsTheSessionWithCodeZeroAndItsReason) {
  for (const auto& c : kClientCaptures) {
    SCOPED_TRACE(c.who);
    channel_ = FakeChannel();
    visitor_ = RecordingSession();
    start(c.framing);
    for (auto m : c.messages) {
      feed_hex(m);
    }
    ASSERT_EQ(visitor_.incoming.size(), 1u);
    EXPECT_EQ(visitor_.incoming[0]->data, "hi");
    EXPECT_TRUE(visitor_.incoming[0]->fin);
    EXPECT_EQ(visitor_.closed, 1);
    EXPECT_EQ(visitor_.code, 0u);
    EXPECT_EQ(visitor_.reason, "bye");
    EXPECT_EQ(channel_.close_code(), 1000);
    session_.reset();
  }
}

TEST_F(MuxCaptureTest, OurCloseReachesEachVersionWithItsReason) {
  // Written in the layout the version reads (seen against the packages, mux_frames_test.cc):
  // 0.0.6/0.1.3 with a frame type, 0.3.3 without; 0.3.3 is told apart on qmux-00/01 by the
  // offsets in its STREAM frames.
  const std::string with_type = "1d 00 00 03 62 79 65";
  const std::string rfc = "1d 00 03 62 79 65";
  for (const auto& c : kClientCaptures) {
    SCOPED_TRACE(c.who);
    channel_ = FakeChannel();
    start(c.framing);
    feed_hex(c.messages[0]);
    feed_hex(c.messages[1]);
    session_->close(0, "bye");
    const bool is_033 = std::string_view(c.who).starts_with("0.3.3");
    EXPECT_EQ(last_sent(), is_033 ? rfc : with_type);
    EXPECT_EQ(channel_.close_code(), 1000);
    EXPECT_EQ(channel_.close_reason(), "bye");
    session_.reset();
  }
}

TEST_F(MuxCaptureTest, AnswersPingRequestsWithTheirSequence) {
  start(Framing::kQmux02);
  feed_hex("f4 8c 67 52 9e f8 c7 bd 2a");
  EXPECT_EQ(last_sent(), "f4 8c 67 52 9e f8 c7 be 2a");
  EXPECT_EQ(visitor_.closed, 0);
}

// A finished stream someone still holds gets a QX_PING after its FIN; only the response to that
// sequence (or a later one) confirms it: one for a sequence never sent confirms nothing.
TEST_F(MuxCaptureTest, APingAfterTheFinConfirmsReceiptOnlyWithItsResponse) {
  start(Framing::kQmux02);
  feed_hex(kClientCaptures[2].messages[0]);  // @moq/qmux 0.3.3's transport parameters
  Stream* s = session_->open_uni();
  ASSERT_NE(s, nullptr);
  RecordingStream sr(*s);
  s->write(Bytes::copy("hi"));
  s->finish();
  clock_.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(sr.sent, 1);
  EXPECT_EQ(last_sent(), "f4 8c 67 52 9e f8 c7 bd 00");  // QX_PING request 0, after the FIN
  EXPECT_TRUE(s->receipt_pending());
  feed_hex("f4 8c 67 52 9e f8 c7 be 05");  // a response to a request never sent
  EXPECT_TRUE(s->receipt_pending());
  EXPECT_EQ(sr.received, 0);
  feed_hex("f4 8c 67 52 9e f8 c7 be 00");
  EXPECT_FALSE(s->receipt_pending());
  EXPECT_EQ(sr.received, 1);
  EXPECT_EQ(visitor_.closed, 0);
}

TEST_F(MuxCaptureTest, ARecordsFramesAreAllHandled) {
  start(Framing::kQmux01);
  // Transport parameters, then one record: "a" on bidi 0, PADDING, "b" + FIN on bidi 4.
  feed_hex("ff 51 53 30 0d 0a 0d 0a 08 08 02 40 64 09 02 40 64");
  feed_hex("0a 00 01 61 00 0b 04 01 62");
  ASSERT_EQ(visitor_.incoming.size(), 2u);
  EXPECT_EQ(visitor_.incoming[0]->data, "a");
  EXPECT_EQ(visitor_.incoming[1]->data, "b");
  EXPECT_TRUE(visitor_.incoming[1]->fin);
  // In qmux-00 the same message is one frame: the rest is ignored.
  session_.reset();
  channel_ = FakeChannel();
  visitor_ = RecordingSession();
  start(Framing::kQmux00);
  feed_hex("0a 00 01 61 00 0b 04 01 62");
  ASSERT_EQ(visitor_.incoming.size(), 1u);
  EXPECT_EQ(visitor_.incoming[0]->data, "a");
}

TEST_F(MuxCaptureTest, UnknownFrameTypeInARecordIsAProtocolError) {
  start(Framing::kQmux02);
  feed_hex("0a 00 01 61 21 00");
  EXPECT_EQ(visitor_.closed, 1);
  EXPECT_EQ(visitor_.code, kMuxProtocolError);
}

}  // namespace
}  // namespace moqd::transport::websocket
