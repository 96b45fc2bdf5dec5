#include "transport/quic/connection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/turn.h"
#include "testing/quic_pair.h"
#include "testing/sim_network.h"
#include "testing/stream_recorder.h"
#include "transport/quic/lazy_keys.h"

namespace moqd::transport::quic {
namespace {

using namespace std::chrono_literals;
using test::QuicPair;
using test::SimLinkConfig;
using test::SimNetwork;

constexpr uint16_t kClientPort = 40000;  // QuicPair's client port

using test::pattern;

using test::SessionRecorder;
using test::StreamRecorder;

// A side's timers and turn work on the pair's clock, except that while `held` its turn work waits:
// one loop turn held open across several timers and packets, ended by release(). Counts the
// timers of this side that fired.
class HeldTurns final : public Timers, private TurnWork {
 public:
  explicit HeldTurns(ManualClock& clock) : clock_(clock) {}
  TimerId schedule(Duration delay, std::function<void()> fn) override {
    return clock_.schedule(delay, [this, fn = std::move(fn)] {
      ++fired;
      fn();
    });
  }
  void cancel(TimerId id) override { clock_.cancel(id); }
  void at_turn_end(TurnWork& w) override {
    queue_.push(w);
    if (!held) {
      clock_.at_turn_end(*this);
    }
  }
  void release() {
    held = false;
    queue_.run();
  }
  bool held = false;
  int fired = 0;

 private:
  void run_turn_work() override {
    if (!held) {
      queue_.run();
    }
  }
  ManualClock& clock_;
  TurnQueue queue_;
};

class QuicConnectionTest : public ::testing::Test {
 protected:
  QuicConnectionTest() {
    pair_.server_alpns = {"moq-lite-03", "moq-lite-04"};
    pair_.client_alpns = {"moq-lite-04", "moql"};
    server_.on_handshake = [this](Connection& c) { c.set_visitor(&server_session_); };
    client_.on_handshake = [this](Connection& c) { c.set_visitor(&client_session_); };
  }

  void start(Connection::Config server_config = {}, Connection::Config client_config = {}) {
    pair_.start(server_config, client_config);
  }
  void handshake(Connection::Config server_config = {}, Connection::Config client_config = {}) {
    ASSERT_TRUE(pair_.handshake(server_config, client_config));
  }
  bool run_until(const std::function<bool()>& done, Duration limit = 10s) {
    return pair_.run_until(done, limit);
  }
  void set_links(const SimLinkConfig& link) { pair_.set_links(link); }

  // Traffic both ways on the client's uni stream `up` and the server's `down`: each exchange()
  // writes 5,000 and 7,000 more bytes of pattern and runs until each side has read all that was
  // written so far, byte-exact.
  struct TwoWay {
    QuicConnectionTest& test;
    Stream* up;
    Stream* down;
    std::string sent_up, sent_down;

    bool exchange() {
      std::string a = pattern(5000, static_cast<uint32_t>(sent_up.size()));
      std::string b = pattern(7000, static_cast<uint32_t>(sent_down.size()));
      up->write(Bytes::copy(a));
      down->write(Bytes::copy(b));
      sent_up += a;
      sent_down += b;
      return test.run_until([&] {
        auto* in = test.server_session_.find(up->id());
        auto* out = test.client_session_.find(down->id());
        return in && out && in->data == sent_up && out->data == sent_down;
      });
    }
  };

  // Before pair_: each connection's destructor reports on_closed to its recorder, and cancels
  // its timers on server_turns_ when a test set it.
  std::optional<HeldTurns> server_turns_;
  SessionRecorder server_session_;
  SessionRecorder client_session_;
  QuicPair pair_;
  // The pair's parts, under the names the tests use.
  QuicPair::Side& server_ = pair_.server;
  QuicPair::Side& client_ = pair_.client;
  ManualClock& clock_ = pair_.clock();
  SimNetwork::Endpoint& server_ep_ = pair_.server_endpoint();
  SimNetwork::Endpoint& client_ep_ = pair_.client_endpoint();
};

TEST_F(QuicConnectionTest, HandshakeCompletesAndSelectsAlpn) {
  handshake();
  EXPECT_EQ(client_.conn->protocol(), "moq-lite-04");
  EXPECT_EQ(server_.conn->protocol(), "moq-lite-04");
  EXPECT_EQ(server_.conn->kind(), "quic");
  EXPECT_EQ(server_.conn->peer(), "127.0.0.1:40000");
  EXPECT_EQ(client_.conn->peer(), "127.0.0.1:4443");
  EXPECT_EQ(server_.conn->path(), "/");
}

TEST_F(QuicConnectionTest, AlpnMismatchFailsHandshake) {
  pair_.client_alpns = {"h3"};
  start();
  ASSERT_TRUE(run_until([&] { return client_.done > 0; }));
  EXPECT_FALSE(client_.handshake);
  EXPECT_FALSE(server_.handshake);
  EXPECT_TRUE(client_.conn->is_done());
}

// on_sent(): fires once a write's bytes have all been sent, and again once a later FIN is; never
// while bytes are queued.
TEST_F(QuicConnectionTest, OnSentFiresWhenTheQueueIsSent) {
  handshake();
  Stream* s = client_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  StreamRecorder r(s);
  s->set_visitor(&r);
  s->write(Bytes::copy(std::string(100'000, 'a')));
  EXPECT_GT(s->buffered(), 0u);
  ASSERT_TRUE(run_until([&] { return r.sent > 0; }));
  EXPECT_EQ(r.sent, 1);
  EXPECT_EQ(r.sent_buffered, std::vector<size_t>{0});
  s->finish();
  ASSERT_TRUE(run_until([&] { return r.sent > 1; }));
  EXPECT_EQ(r.sent, 2);  // the FIN, alone
  ASSERT_TRUE(run_until([&] {
    auto* in = server_session_.find(s->id());
    return in != nullptr && in->fin;
  }));
  EXPECT_EQ(server_session_.find(s->id())->data.size(), 100'000u);
  pair_.run_for(std::chrono::milliseconds(100));
  EXPECT_EQ(r.sent, 2);
  s->set_visitor(nullptr);
}

// The write loop asks ngtcp2 for one packet per call: the last data queued, with room left in its
// packet, goes out in that call, and one more call finds nothing; no call only closes a packet.
TEST_F(QuicConnectionTest, TheLastQueuedDataIsWrittenWithoutAnExtraCall) {
  handshake();
  pair_.run_for(200ms);  // handshake ACKs and timers settled
  Stream* s = server_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::copy(pattern(1000, 7)));  // one packet, with room left
  uint64_t asked = server_ep_.buffers();
  uint64_t sent = server_ep_.sent();
  server_.conn->flush();
  EXPECT_EQ(server_ep_.sent() - sent, 1u);
  EXPECT_EQ(server_ep_.buffers() - asked, 2u);  // the packet, then "nothing more"
  ASSERT_TRUE(run_until([&] {
    auto* in = client_session_.find(s->id());
    return in != nullptr && in->data.size() == 1000;
  }));
  EXPECT_EQ(client_session_.find(s->id())->data, pattern(1000, 7));
}

// ngtcp2 wants a write pass after handle_expiry and after every packet read; a timer that fires in
// the same loop turn as packets shares their pass (at the turn's end) instead of running its own.
TEST_F(QuicConnectionTest, AnExpiryAndThePacketsOfItsTurnShareOneWritePass) {
  server_turns_.emplace(clock_);
  pair_.server_timers = &*server_turns_;
  handshake();
  pair_.run_for(200ms);  // handshake ACKs and timers settled
  Stream* s = server_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::copy(pattern(20000, 5)));  // more than one send quantum: pacing, then ACKs
  server_.conn->flush();
  uint64_t passes = server_.conn->write_passes();
  uint64_t received = server_ep_.received();
  int fired = server_turns_->fired;
  server_turns_->held = true;
  pair_.run_for(30ms);  // one server turn: its timer falls due and the client's ACKs arrive
  EXPECT_GT(server_turns_->fired, fired);
  EXPECT_GT(server_ep_.received(), received);
  EXPECT_EQ(server_.conn->write_passes(), passes);  // nothing ran its pass inside the turn
  server_turns_->release();
  EXPECT_EQ(server_.conn->write_passes(), passes + 1);  // the turn's end: one pass for all
  ASSERT_TRUE(run_until([&] {
    auto* in = client_session_.find(s->id());
    return in != nullptr && in->data.size() == 20000;
  }));
  EXPECT_EQ(client_session_.find(s->id())->data, pattern(20000, 5));
}

// Under loss, retransmissions ride the loss and PTO timers' passes: every group still arrives,
// and none later than a bound that a pass skipped or delayed past its timer would break (the last
// groups have no later writes or ACKs to carry their retransmissions).
TEST_F(QuicConnectionTest, LossyNetworkDeliversEveryGroupInTime) {
  set_links(SimLinkConfig{20ms, 5ms, 0.1});
  handshake({}, {});
  constexpr int kGroups = 60;
  constexpr size_t kGroupSize = 6 * 1024;
  std::vector<Instant> published;
  std::vector<std::optional<Instant>> arrived(kGroups);
  std::function<void()> publish = [&] {
    Stream* s = server_.conn->open_uni();
    ASSERT_NE(s, nullptr);
    s->write(Bytes::copy(pattern(kGroupSize, static_cast<uint32_t>(published.size()))));
    s->finish();
    s->release();
    published.push_back(clock_.now());
    if (published.size() < static_cast<size_t>(kGroups)) {
      clock_.schedule(33ms, publish);
    }
  };
  publish();
  ASSERT_TRUE(run_until(
      [&] {
        int complete = 0;
        for (int g = 0; g < kGroups; ++g) {
          StreamRecorder* in = client_session_.find(static_cast<StreamId>(3 + 4 * g));
          if (!arrived[g] && in != nullptr && in->fin) {
            arrived[g] = clock_.now();
          }
          complete += arrived[g] ? 1 : 0;
        }
        return complete == kGroups;
      },
      30s));
  Duration worst{};
  for (int g = 0; g < kGroups; ++g) {
    StreamRecorder* in = client_session_.find(static_cast<StreamId>(3 + 4 * g));
    ASSERT_NE(in, nullptr) << "group " << g;
    EXPECT_TRUE(in->data == pattern(kGroupSize, static_cast<uint32_t>(g))) << "group " << g;
    worst = std::max(worst, *arrived[g] - published[g]);
  }
  EXPECT_GT(client_ep_.dropped() + server_ep_.dropped(), 0u);
  EXPECT_LT(worst, 1s) << "worst group latency "
                       << std::chrono::duration_cast<std::chrono::milliseconds>(worst).count()
                       << " ms";
}

// A frame every 33 ms on one stream, acknowledged as Chromium does (every 10 packets or 25 ms): each
// frame's pass sends it and ngtcp2 then sets a pacing deadline, which is all that is left to wait
// for. The timer is armed without it (Connection::arm_expiry), so no expiry wakes the connection
// only to write nothing, and a frame costs at most two passes (its own and its acknowledgement's,
// each ending in one call that writes nothing) and the calls that write its packets.
TEST_F(QuicConnectionTest, AFrameCostsNoWakeUpThatWritesNothing) {
  set_links(SimLinkConfig{10ms, 0ms, 0});
  Connection::Config viewer;
  viewer.ack_thresh = 10;
  handshake({}, viewer);
  pair_.run_for(500ms);  // handshake, first ACKs, PMTUD settled
  Stream* s = server_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  constexpr int kFrames = 60;
  constexpr size_t kFrame = 4166;
  const Connection::WriteStats before = server_.conn->write_stats();
  const uint64_t sent = server_ep_.sent();
  for (int f = 0; f < kFrames; ++f) {
    s->write(Bytes::copy(pattern(kFrame, static_cast<uint32_t>(f))));
    pair_.run_for(33ms);
  }
  pair_.run_for(300ms);  // the last frames acknowledged
  ASSERT_TRUE(run_until([&] {
    auto* in = client_session_.find(s->id());
    return in != nullptr && in->data.size() == kFrames * kFrame;
  }));
  const Connection::WriteStats& after = server_.conn->write_stats();
  const uint64_t wakeups = after.expiry_wakeups - before.expiry_wakeups;
  const uint64_t empty_after_expiry =
      after.empty_passes_after_expiry - before.empty_passes_after_expiry;
  const uint64_t calls = after.write_calls - before.write_calls;
  const uint64_t packets = server_ep_.sent() - sent;
  // Seeded and simulated, so exact: 30 wake-ups, each sending one small packet, the ACK-delay
  // answer to a viewer's PING (ngtcp2 puts a PING in an ACK-only packet once it has sent only
  // ACKs for an RTT); 360 calls, 210 packets. With the pacing deadline in the timer: 120
  // wake-ups, 90 of them writing nothing, 450 calls.
  EXPECT_EQ(empty_after_expiry, 0u) << wakeups << " expiry wake-ups";
  EXPECT_LE(wakeups, static_cast<uint64_t>(kFrames) / 2) << "expiry wake-ups";
  // Per frame: 3 packets and the call that ends their pass, the acknowledgement's pass (one call),
  // and every other frame a wake-up's pass (an ACK and one call).
  EXPECT_LE(calls, static_cast<uint64_t>(kFrames) * 6) << "write calls, " << packets << " packets";
  EXPECT_EQ(client_session_.find(s->id())->data.size(), kFrames * kFrame);
}

// The other side of AFrameCostsNoWakeUpThatWritesNothing: a frame whose packets are all lost, with
// nothing else queued and nothing coming back from the peer, is still sent again from the timer
// (loss detection, PTO): leaving the pacing deadline out of the timer leaves every other deadline
// in.
TEST_F(QuicConnectionTest, ALostFrameIsResentWithNothingElseQueued) {
  set_links(SimLinkConfig{10ms, 0ms, 0});
  handshake();
  pair_.run_for(500ms);
  Stream* s = server_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  server_ep_.set_link(SimLinkConfig{10ms, 0ms, 1.0});  // this pass's packets are all dropped
  s->write(Bytes::copy(pattern(3000, 9)));
  s->finish();
  const uint64_t wakeups = server_.conn->write_stats().expiry_wakeups;
  const uint64_t idle = server_.conn->write_stats().idle_passes;
  server_.conn->flush();
  server_ep_.set_link(SimLinkConfig{10ms, 0ms, 0});
  EXPECT_EQ(s->buffered(), 0u);      // nothing of ours left to send
  EXPECT_EQ(server_.conn->write_stats().idle_passes, idle + 1);  // and the pass ended idle
  EXPECT_GT(server_ep_.dropped(), 0u);
  const Instant lost_at = clock_.now();
  ASSERT_TRUE(run_until(
      [&] {
        auto* in = client_session_.find(s->id());
        return in != nullptr && in->fin;
      },
      2s));
  EXPECT_EQ(client_session_.find(s->id())->data, pattern(3000, 9));
  EXPECT_GT(server_.conn->write_stats().expiry_wakeups, wakeups);  // resent from the timer
  EXPECT_LT(clock_.now() - lost_at, 500ms);  // a PTO or two, not the idle timeout
}

TEST_F(QuicConnectionTest, BidiStreamEchoesWithFin) {
  handshake();
  Stream* s = client_.conn->open_bidi();
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->id(), 0u);
  StreamRecorder reply(s);
  s->set_visitor(&reply);
  s->write(Bytes::copy(std::string_view("hello")));
  s->finish();
  ASSERT_TRUE(run_until([&] {
    auto* in = server_session_.find(0);
    return in != nullptr && in->fin;
  }));
  StreamRecorder* in = server_session_.find(0);
  EXPECT_EQ(in->data, "hello");
  EXPECT_TRUE(in->stream->has_peer_fin());
  in->stream->write(Bytes::copy(std::string_view("world")));
  in->stream->finish();
  ASSERT_TRUE(run_until([&] { return reply.fin; }));
  EXPECT_EQ(reply.data, "world");
}

TEST_F(QuicConnectionTest, UniStreamsBothWays) {
  handshake();
  Stream* up = client_.conn->open_uni();
  Stream* down = server_.conn->open_uni();
  ASSERT_NE(up, nullptr);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(up->id(), 2u);
  EXPECT_EQ(down->id(), 3u);
  up->write(Bytes::copy(std::string_view("from client")));
  up->finish();
  down->write(Bytes::copy(std::string_view("from server")));
  down->finish();
  ASSERT_TRUE(run_until([&] {
    auto* a = server_session_.find(2);
    auto* b = client_session_.find(3);
    return a != nullptr && a->fin && b != nullptr && b->fin;
  }));
  EXPECT_EQ(server_session_.find(2)->data, "from client");
  EXPECT_EQ(client_session_.find(3)->data, "from server");
}

TEST_F(QuicConnectionTest, OneMebibyteArrivesByteExact) {
  handshake();
  const std::string payload = pattern(1 << 20, 7);
  Stream* s = client_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  for (size_t off = 0; off < payload.size(); off += 50'000) {
    s->write(Bytes::copy(std::string_view(payload).substr(off, 50'000)));
  }
  s->finish();
  ASSERT_TRUE(run_until([&] {
    auto* in = server_session_.find(s->id());
    return in != nullptr && in->fin;
  }));
  EXPECT_TRUE(server_session_.find(s->id())->data == payload);
  EXPECT_EQ(client_.conn->bytes_sent(), payload.size());
  EXPECT_EQ(client_.conn->unsent_bytes(), 0u);
}

// write_pair is write(first) then write(second): byte-exact and in order, an empty half skipped
// (never queued), the bytes counted once each, and buffers freed once acknowledged.
TEST_F(QuicConnectionTest, WritePairQueuesBothInOrderAndSkipsAnEmptyHalf) {
  handshake();
  const int64_t baseline = Bytes::live_buffers();
  Stream* s = client_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  auto* qs = static_cast<QuicStream*>(s);
  std::string expected;
  for (uint32_t i = 0; i < 300; ++i) {
    std::string header = pattern(1 + i % 3, i);
    std::string payload = pattern(16, 1000 + i);
    s->write_pair(Bytes::copy(std::string_view(header)), Bytes::copy(std::string_view(payload)));
    expected += header + payload;
  }
  s->write_pair(Bytes(), Bytes::copy(std::string_view("tail")));
  s->write_pair(Bytes::copy(std::string_view("head")), Bytes());
  s->write_pair(Bytes(), Bytes());
  expected += "tailhead";
  EXPECT_EQ(qs->held_buffers(), 602u);  // 300 pairs and two halves; no empty buffer queued
  EXPECT_EQ(s->buffered(), expected.size());
  ASSERT_TRUE(run_until([&] {
    auto* in = server_session_.find(s->id());
    return in != nullptr && in->data.size() == expected.size();
  }));
  EXPECT_TRUE(server_session_.find(s->id())->data == expected);
  EXPECT_EQ(client_.conn->bytes_sent(), expected.size());
  ASSERT_TRUE(run_until([&] { return Bytes::live_buffers() == baseline + 1; }));
  EXPECT_EQ(qs->held_buffers(), 0u);
  s->finish();
  s->write_pair(Bytes::copy(std::string_view("late")), Bytes::copy(std::string_view("r")));
  EXPECT_EQ(s->buffered(), 0u);  // nothing is taken after FIN
}

// The acceptance check at the transport level: 100 groups over a lossy, reordering,
// 50 ms network arrive complete and in full.
TEST_F(QuicConnectionTest, LossyNetworkDeliversEveryGroupWithoutGap) {
  set_links(SimLinkConfig{50ms, 10ms, 0.05});
  handshake({}, {});
  constexpr int kGroups = 100;
  constexpr size_t kGroupSize = 10 * 1024;
  int sent = 0;
  std::function<void()> publish = [&] {
    Stream* s = server_.conn->open_uni();
    ASSERT_NE(s, nullptr);
    s->write(Bytes::copy(pattern(kGroupSize, static_cast<uint32_t>(sent))));
    s->finish();
    s->release();
    if (++sent < kGroups) {
      clock_.schedule(20ms, publish);
    }
  };
  publish();
  ASSERT_TRUE(run_until(
      [&] {
        int complete = 0;
        for (auto& in : client_session_.incoming) {
          complete += in->fin ? 1 : 0;
        }
        return complete == kGroups;
      },
      60s));
  ASSERT_EQ(client_session_.incoming.size(), static_cast<size_t>(kGroups));
  for (int g = 0; g < kGroups; ++g) {
    // Streams may open out of order under loss; group g went out on server uni stream g.
    StreamRecorder* in = client_session_.find(static_cast<StreamId>(3 + 4 * g));
    ASSERT_NE(in, nullptr) << "group " << g;
    EXPECT_TRUE(in->data == pattern(kGroupSize, static_cast<uint32_t>(g))) << "group " << g;
    EXPECT_FALSE(in->reset.has_value());
  }
  EXPECT_GT(client_ep_.dropped() + server_ep_.dropped(), 0u);
  EXPECT_EQ(client_session_.closed, 0);
}

TEST_F(QuicConnectionTest, TheServerFreesItsTlsSessionAfterTheHandshakeAndKeysStillUpdate) {
  handshake();
  ASSERT_TRUE(run_until([&] { return !server_.conn->holds_tls(); }));
  EXPECT_TRUE(client_.conn->holds_tls());  // a client may still be sent session tickets
  auto ts = [&] {
    return static_cast<ngtcp2_tstamp>(clock_.now().time_since_epoch().count()) *
           NGTCP2_MICROSECONDS;
  };
  Stream* up = client_.conn->open_uni();
  Stream* down = server_.conn->open_uni();
  ASSERT_TRUE(up && down);
  TwoWay traffic{*this, up, down};
  // 1-RTT keeps working without the server's TLS session, through a key update from each side.
  for (Connection* initiator : {client_.conn.get(), server_.conn.get()}) {
    pair_.run_for(1s);   // an update waits three PTOs after the last...
    ASSERT_TRUE(traffic.exchange());  // ...and for the next keys, derived as packets are written
    ASSERT_EQ(ngtcp2_conn_initiate_key_update(initiator->native(), ts()), 0);
    ASSERT_TRUE(traffic.exchange());
  }
  EXPECT_EQ(server_session_.closed, 0);
  EXPECT_EQ(client_session_.closed, 0);
}

// The next 1-RTT keys' GnuTLS contexts (prepared for a key update that may never come) are made
// only when a packet uses them: none after the handshake and data both ways, and the ones a key
// update needs once it happens, after which data still arrives byte-exact both ways.
TEST_F(QuicConnectionTest, NextKeyContextsAreMadeOnlyWhenAKeyUpdateUsesThem) {
  LazyKeyCounts start = lazy_key_counts();
  handshake();
  Stream* up = client_.conn->open_uni();
  Stream* down = server_.conn->open_uni();
  ASSERT_TRUE(up && down);
  TwoWay traffic{*this, up, down};
  pair_.run_for(1s);
  ASSERT_TRUE(traffic.exchange());
  LazyKeyCounts confirmed = lazy_key_counts();
  EXPECT_GE(confirmed.deferred - start.deferred, 4u);  // rx and tx, at each end
  EXPECT_EQ(confirmed.created, start.created);
  auto ts = static_cast<ngtcp2_tstamp>(clock_.now().time_since_epoch().count()) * NGTCP2_MICROSECONDS;
  ASSERT_EQ(ngtcp2_conn_initiate_key_update(client_.conn->native(), ts), 0);
  ASSERT_TRUE(traffic.exchange());
  EXPECT_GE(lazy_key_counts().created - start.created, 4u);  // both directions at both ends
  EXPECT_EQ(server_session_.closed, 0);
  EXPECT_EQ(client_session_.closed, 0);
}

TEST_F(QuicConnectionTest, PostHandshakeCryptoDataClosesAServerThatFreedItsTls) {
  handshake();
  ASSERT_TRUE(run_until([&] { return !server_.conn->holds_tls(); }));
  static const uint8_t kTlsMessage[] = {0x04, 0x00, 0x00, 0x00};  // an empty NewSessionTicket
  ASSERT_EQ(ngtcp2_conn_submit_crypto_data(client_.conn->native(), NGTCP2_ENCRYPTION_LEVEL_1RTT,
                                           kTlsMessage, sizeof kTlsMessage),
            0);
  client_.conn->flush();
  ASSERT_TRUE(run_until([&] { return server_session_.closed == 1; }));
  EXPECT_TRUE(run_until([&] { return client_session_.closed == 1; }));
}

TEST_F(QuicConnectionTest, SendBuffersReleasedOnceAcked) {
  set_links(SimLinkConfig{20ms, 0ms, 0});
  handshake();
  const int64_t baseline = Bytes::live_buffers();
  Stream* s = client_.conn->open_uni();
  auto* qs = static_cast<QuicStream*>(s);
  for (int i = 0; i < 20; ++i) {
    s->write(Bytes::copy(pattern(4000, static_cast<uint32_t>(i))));
  }
  clock_.advance(1ms);
  EXPECT_EQ(qs->held_buffers(), 20u);  // handed to ngtcp2, none acknowledged yet
  ASSERT_TRUE(run_until([&] {
    auto* in = server_session_.find(s->id());
    return in != nullptr && in->data.size() == 80'000;
  }));
  // The stream stays open (no FIN): only acknowledgements can free its buffers. What stays is the
  // receiving stream's one buffer (its bytes all read, kept for the next ones).
  ASSERT_TRUE(run_until([&] { return Bytes::live_buffers() == baseline + 1; }));
  EXPECT_EQ(qs->held_buffers(), 0u);
}

TEST_F(QuicConnectionTest, UnackedStreamDataLastsUntilTheAcknowledgement) {
  set_links(SimLinkConfig{20ms, 0ms, 0});
  handshake();
  EXPECT_FALSE(client_.conn->has_unacked_stream_data());
  Stream* s = client_.conn->open_uni();
  s->write(Bytes::copy(pattern(30'000, 1)));
  s->finish();
  EXPECT_TRUE(client_.conn->has_unacked_stream_data());  // not even sent yet
  ASSERT_TRUE(run_until([&] { return client_.conn->unsent_bytes() == 0; }));
  // Packed into packets, which is all unsent_bytes() tells: the acknowledgements are 40 ms away.
  EXPECT_TRUE(client_.conn->has_unacked_stream_data());
  ASSERT_TRUE(run_until([&] { return !client_.conn->has_unacked_stream_data(); }));
  auto* in = server_session_.find(s->id());
  ASSERT_NE(in, nullptr);
  EXPECT_TRUE(in->data == pattern(30'000, 1));
  EXPECT_TRUE(in->fin);
}

TEST_F(QuicConnectionTest, NoUnackedStreamDataMeansThePeerHasEverythingDespiteLoss) {
  set_links(SimLinkConfig{10ms, 5ms, 0.3});
  handshake();
  std::vector<Stream*> streams;
  for (uint32_t i = 0; i < 4; ++i) {
    streams.push_back(client_.conn->open_uni());
    streams.back()->write(Bytes::copy(pattern(20'000, i)));
    streams.back()->finish();
  }
  // Checked at the first tick it turns false: nothing left for a retransmission to carry.
  ASSERT_TRUE(run_until([&] { return !client_.conn->has_unacked_stream_data(); }, 60s));
  for (uint32_t i = 0; i < 4; ++i) {
    auto* in = server_session_.find(streams[i]->id());
    ASSERT_NE(in, nullptr) << "stream " << i;
    EXPECT_TRUE(in->data == pattern(20'000, i)) << "stream " << i;
    EXPECT_TRUE(in->fin) << "stream " << i;
  }
  EXPECT_GT(client_ep_.dropped() + server_ep_.dropped(), 0u);
}

TEST_F(QuicConnectionTest, ResetStreamOwesNothing) {
  set_links(SimLinkConfig{20ms, 0ms, 0});
  handshake();
  Stream* s = client_.conn->open_uni();
  s->write(Bytes::copy(pattern(30'000, 2)));
  clock_.advance(1ms);
  EXPECT_TRUE(client_.conn->has_unacked_stream_data());
  s->reset(7);
  EXPECT_FALSE(client_.conn->has_unacked_stream_data());
}

TEST_F(QuicConnectionTest, SendBuffersReleasedAfterReset) {
  set_links(SimLinkConfig{20ms, 0ms, 0.2});
  handshake();
  const int64_t baseline = Bytes::live_buffers();
  Stream* s = client_.conn->open_uni();
  const StreamId id = s->id();
  for (int i = 0; i < 40; ++i) {
    s->write(Bytes::copy(pattern(4000, static_cast<uint32_t>(i))));
  }
  clock_.advance(5ms);
  s->reset(7);
  s->release();
  ASSERT_TRUE(run_until([&] {
    auto* in = server_session_.find(id);
    return in != nullptr && in->reset.has_value();
  }));
  EXPECT_EQ(*server_session_.find(id)->reset, 7u);
  ASSERT_TRUE(run_until([&] { return Bytes::live_buffers() == baseline; }));
  ASSERT_TRUE(run_until([&] { return client_.conn->stream_count() == 0; }));
}

TEST_F(QuicConnectionTest, SendBuffersReleasedOnCloseAndPeerSeesCodeOnce) {
  set_links(SimLinkConfig{20ms, 0ms, 0});
  handshake();
  const int64_t baseline = Bytes::live_buffers();
  Stream* s = client_.conn->open_uni();
  for (int i = 0; i < 20; ++i) {
    s->write(Bytes::copy(pattern(4000, static_cast<uint32_t>(i))));
  }
  clock_.advance(2ms);
  EXPECT_GT(Bytes::live_buffers(), baseline);
  client_.conn->close(0x10, "bye");
  EXPECT_EQ(client_session_.closed, 0);  // not re-entrantly
  ASSERT_TRUE(run_until([&] { return server_session_.closed > 0 && client_session_.closed > 0; }));
  EXPECT_EQ(Bytes::live_buffers(), baseline);
  EXPECT_EQ(client_session_.code, 0x10u);
  EXPECT_EQ(server_session_.code, 0x10u);
  EXPECT_EQ(server_session_.reason, "bye");
  ASSERT_TRUE(run_until([&] { return client_.done > 0 && server_.done > 0; }));
  clock_.advance(5s);
  EXPECT_EQ(client_session_.closed, 1);
  EXPECT_EQ(server_session_.closed, 1);
  EXPECT_EQ(client_.done, 1);
  EXPECT_EQ(server_.done, 1);
}

TEST_F(QuicConnectionTest, ServerCloseReachesClient) {
  handshake();
  server_.conn->close(3, "going away");
  ASSERT_TRUE(run_until([&] { return client_session_.closed > 0; }));
  EXPECT_EQ(client_session_.code, 3u);
  EXPECT_EQ(client_session_.reason, "going away");
  EXPECT_EQ(client_.conn->open_uni(), nullptr);
  clock_.advance(5s);
  EXPECT_EQ(client_session_.closed, 1);
  EXPECT_EQ(server_session_.closed, 1);
}

// close_without_error says NO_ERROR in a transport CONNECTION_CLOSE (type 0x1c), never the
// application's code: QUIC stacks such as Chromium's read any application close as an error.
TEST_F(QuicConnectionTest, CloseWithoutErrorSendsTransportNoError) {
  handshake();
  server_.conn->close_without_error(0x100, "session over");
  EXPECT_EQ(server_session_.closed, 0);  // not re-entrantly
  ASSERT_TRUE(run_until([&] { return client_session_.closed > 0 && server_session_.closed > 0; }));
  EXPECT_EQ(client_session_.code, 0u);
  EXPECT_EQ(client_session_.reason, "session over");
  EXPECT_EQ(server_session_.code, 0u);
  const ngtcp2_ccerr* received = ngtcp2_conn_get_ccerr(client_.conn->native());
  EXPECT_EQ(received->type, NGTCP2_CCERR_TYPE_TRANSPORT);
  EXPECT_EQ(received->error_code, static_cast<uint64_t>(NGTCP2_NO_ERROR));
  EXPECT_EQ(client_.conn->open_uni(), nullptr);
  clock_.advance(5s);
  EXPECT_EQ(client_session_.closed, 1);
  EXPECT_EQ(server_session_.closed, 1);
}

TEST_F(QuicConnectionTest, IdleTimeoutClosesBothSides) {
  Connection::Config config;
  config.idle_timeout = 2s;
  handshake(config, config);
  ASSERT_TRUE(run_until([&] { return client_.done > 0 && server_.done > 0; }, 10s));
  EXPECT_EQ(client_session_.closed, 1);
  EXPECT_EQ(server_session_.closed, 1);
  EXPECT_EQ(client_session_.code, static_cast<uint64_t>(ErrorCode::kTimeout));
  EXPECT_EQ(client_session_.reason, "idle timeout");
}

TEST_F(QuicConnectionTest, StopSendingResetsSenderUniStream) {
  handshake();
  Stream* s = client_.conn->open_uni();
  StreamRecorder sender(s);
  s->set_visitor(&sender);
  s->write(Bytes::copy(std::string_view("first")));
  ASSERT_TRUE(run_until([&] { return server_session_.find(s->id()) != nullptr; }));
  server_session_.find(s->id())->stream->stop_sending(9);
  // ngtcp2 1.11 has no recv_stop_sending callback (1.24 has): the connection reports STOP_SENDING
  // from stream_close, once the RESET_STREAM it caused is acked.
  ASSERT_TRUE(run_until([&] { return sender.stop.has_value(); }));
  EXPECT_EQ(*sender.stop, 9u);
  EXPECT_EQ(s->write_capacity(), 0u);
}

TEST_F(QuicConnectionTest, FlowControlStallsUntilConsumed) {
  Connection::Config server_config;
  server_config.max_stream_data = 16 * 1024;
  server_config.max_stream_window = 16 * 1024;
  handshake(server_config, {});
  server_session_.consume_new = false;
  Stream* s = client_.conn->open_uni();
  s->write(Bytes::copy(pattern(100'000, 1)));
  s->finish();
  ASSERT_TRUE(run_until([&] { return server_session_.find(s->id()) != nullptr; }));
  StreamRecorder* in = server_session_.find(s->id());
  clock_.advance(1s);
  EXPECT_LE(in->stream->peek().size(), 16u * 1024);
  EXPECT_GT(client_.conn->unsent_bytes(), 0u);
  in->consume = true;
  in->drain();
  ASSERT_TRUE(run_until([&] {
    in->drain();
    return in->fin;
  }));
  EXPECT_TRUE(in->data == pattern(100'000, 1));
}

TEST_F(QuicConnectionTest, StreamLimitThenStreamsAvailable) {
  Connection::Config server_config;
  server_config.max_streams_uni = 2;
  handshake(server_config, {});
  Stream* a = client_.conn->open_uni();
  Stream* b = client_.conn->open_uni();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(client_.conn->open_uni(), nullptr);
  a->finish();
  a->release();
  ASSERT_TRUE(run_until([&] { return client_session_.streams_available > 0; }));
  EXPECT_NE(client_.conn->open_uni(), nullptr);
}

// ngtcp2 closes peer uni streams but never raises MAX_STREAMS by itself: the connection must
// return their credit, or a publisher stalls after max_streams_uni groups.
TEST_F(QuicConnectionTest, PeerUniStreamsAreCreditedBeyondTheLimit) {
  Connection::Config server_config;
  server_config.max_streams_uni = 3;
  handshake(server_config, {});
  for (int i = 0; i < 20; ++i) {
    Stream* s = nullptr;
    ASSERT_TRUE(run_until([&] { return (s = client_.conn->open_uni()) != nullptr; })) << i;
    s->write(Bytes::copy(std::string_view("g")));
    s->finish();
    s->release();
  }
  ASSERT_TRUE(run_until([&] {
    int fins = 0;
    for (auto& in : server_session_.incoming) {
      fins += in->fin ? 1 : 0;
    }
    return fins == 20;
  }));
}

// ngtcp2 1.x closes a peer's uni stream itself once its FIN or RESET_STREAM is in (0.12 never
// did, and moqd closed it by hand): released by the application, it is freed.
TEST_F(QuicConnectionTest, FinishedPeerUniStreamIsFreedOnRelease) {
  handshake();
  Stream* s = client_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::copy(std::string_view("g")));
  s->finish();
  ASSERT_TRUE(run_until([&] {
    return !server_session_.incoming.empty() && server_session_.incoming[0]->fin;
  }));
  EXPECT_EQ(server_.conn->stream_count(), 1u);
  server_session_.incoming[0]->stream->release();
  ASSERT_TRUE(run_until([&] { return server_.conn->stream_count() == 0; }));
}

TEST_F(QuicConnectionTest, ResetPeerUniStreamIsFreedOnRelease) {
  handshake();
  Stream* s = client_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::copy(std::string_view("g")));
  ASSERT_TRUE(run_until([&] { return !server_session_.incoming.empty(); }));
  s->reset(7);
  ASSERT_TRUE(run_until([&] { return server_session_.incoming[0]->reset.has_value(); }));
  EXPECT_EQ(*server_session_.incoming[0]->reset, 7u);
  server_session_.incoming[0]->stream->release();
  ASSERT_TRUE(run_until([&] { return server_.conn->stream_count() == 0; }));
}

// A server's transport parameters must carry original_dcid with original_dcid_present set: 1.11
// asserts on it in ngtcp2_conn_server_new, and the client checks it against its first DCID.
TEST_F(QuicConnectionTest, ServerSendsOriginalDcid) {
  handshake();
  const ngtcp2_transport_params* server = ngtcp2_conn_get_remote_transport_params(
      client_.conn->native());
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(server->original_dcid_present);
  EXPECT_FALSE(server->retry_scid_present);
  const ngtcp2_transport_params* client = ngtcp2_conn_get_remote_transport_params(
      server_.conn->native());
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->original_dcid_present);  // a client never sends it
}

// --- RFC 9221 datagrams ---

bool send_datagram(Connection& c, std::string_view payload) {
  return c.send_datagram({reinterpret_cast<const uint8_t*>(payload.data()), payload.size()});
}

TEST_F(QuicConnectionTest, DatagramsBothWaysArriveByteExact) {
  handshake();
  const size_t max = client_.conn->max_datagram_size();
  ASSERT_EQ(server_.conn->max_datagram_size(), max);  // same settings both ways
  std::vector<std::string> up;
  std::vector<std::string> down;
  for (size_t n : {size_t{0}, size_t{1}, size_t{100}, size_t{1000}, max}) {
    up.push_back(pattern(n, static_cast<uint32_t>(n)));
    down.push_back(pattern(n, static_cast<uint32_t>(n + 1)));
    ASSERT_TRUE(send_datagram(*client_.conn, up.back())) << n;
    ASSERT_TRUE(send_datagram(*server_.conn, down.back())) << n;
  }
  ASSERT_TRUE(run_until([&] {
    return server_session_.datagrams.size() == up.size() &&
           client_session_.datagrams.size() == down.size();
  }));
  EXPECT_EQ(server_session_.datagrams, up);
  EXPECT_EQ(client_session_.datagrams, down);
  EXPECT_EQ(client_.conn->queued_datagrams(), 0u);
  EXPECT_EQ(client_session_.closed + server_session_.closed, 0);
}

TEST_F(QuicConnectionTest, MaxDatagramSizeIsZeroUntilHandshakeCompletes) {
  start();
  EXPECT_EQ(client_.conn->max_datagram_size(), 0u);
  EXPECT_FALSE(send_datagram(*client_.conn, "early"));
  ASSERT_TRUE(run_until([&] { return client_.handshake && server_.handshake; }));
  // One datagram fits a packet: over 1000 bytes even at QUIC's 1200-byte minimum path.
  EXPECT_GT(client_.conn->max_datagram_size(), 1000u);
  EXPECT_GT(server_.conn->max_datagram_size(), 1000u);
  EXPECT_LT(client_.conn->max_datagram_size(), 1452u);
  client_.conn->close(0, "bye");
  EXPECT_EQ(client_.conn->max_datagram_size(), 0u);
  EXPECT_FALSE(send_datagram(*client_.conn, "late"));
}

TEST_F(QuicConnectionTest, OversizedDatagramIsRefused) {
  handshake();
  const size_t max = client_.conn->max_datagram_size();
  EXPECT_FALSE(send_datagram(*client_.conn, pattern(max + 1, 1)));
  EXPECT_FALSE(send_datagram(*client_.conn, pattern(60000, 1)));
  EXPECT_EQ(client_.conn->queued_datagrams(), 0u);
  ASSERT_TRUE(send_datagram(*client_.conn, pattern(max, 2)));
  ASSERT_TRUE(run_until([&] { return server_session_.datagrams.size() == 1; }));
  EXPECT_TRUE(server_session_.datagrams[0] == pattern(max, 2));
}

// The peer's max_datagram_frame_size bounds the whole frame: type byte, length varint, payload.
TEST_F(QuicConnectionTest, PeerFrameSizeLimitsDatagramSize) {
  Connection::Config small;
  small.max_datagram_frame_size = 100;
  handshake({}, small);
  EXPECT_EQ(server_.conn->max_datagram_size(), 97u);  // 1 + 2 + 97 = 100
  EXPECT_GT(client_.conn->max_datagram_size(), 1000u);
  EXPECT_FALSE(send_datagram(*server_.conn, pattern(98, 1)));
  ASSERT_TRUE(send_datagram(*server_.conn, pattern(97, 1)));
  ASSERT_TRUE(run_until([&] { return client_session_.datagrams.size() == 1; }));
  EXPECT_TRUE(client_session_.datagrams[0] == pattern(97, 1));
}

TEST_F(QuicConnectionTest, DatagramsDisabledOnOneSide) {
  Connection::Config off;
  off.max_datagram_frame_size = 0;
  handshake(off, {});
  EXPECT_EQ(client_.conn->max_datagram_size(), 0u);
  EXPECT_FALSE(send_datagram(*client_.conn, "x"));
  // The server did not offer to receive, but the client did: the server may still send.
  ASSERT_GT(server_.conn->max_datagram_size(), 1000u);
  ASSERT_TRUE(send_datagram(*server_.conn, "down"));
  ASSERT_TRUE(run_until([&] { return client_session_.datagrams.size() == 1; }));
  EXPECT_EQ(client_session_.datagrams[0], "down");
  EXPECT_EQ(client_session_.closed + server_session_.closed, 0);
}

// Datagrams go ahead of queued stream data: they arrive while a congestion-limited bulk
// transfer is in flight, not after it.
TEST_F(QuicConnectionTest, DatagramsFlowAlongsideBulkTransfer) {
  set_links(SimLinkConfig{10ms, 0ms, 0});
  Connection::Config big;  // neither flow control nor the send queue limits the transfer
  big.max_data = big.max_stream_data = big.stream_queue_target = big.send_buffer = 8 << 20;
  handshake(big, big);
  const std::string payload = pattern(4 << 20, 3);
  Stream* s = client_.conn->open_uni();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::copy(payload));
  s->finish();
  constexpr int kDatagrams = 50;
  int sent = 0;
  std::function<void()> tick = [&] {
    ASSERT_TRUE(send_datagram(*client_.conn, "dgram " + std::to_string(sent)));
    if (++sent < kDatagrams) {
      clock_.schedule(2ms, tick);
    }
  };
  tick();
  const Instant begin = clock_.now();
  size_t received_before_fin = 0;
  ASSERT_TRUE(run_until(
      [&] {
        auto* in = server_session_.find(s->id());
        if (in == nullptr || !in->fin) {
          received_before_fin = server_session_.datagrams.size();
          return false;
        }
        return server_session_.datagrams.size() == kDatagrams;
      },
      30s));
  EXPECT_GT(clock_.now() - begin, 120ms);  // the transfer outlasts the 100 ms of datagrams
  EXPECT_TRUE(server_session_.find(s->id())->data == payload);
  for (int i = 0; i < kDatagrams; ++i) {
    EXPECT_EQ(server_session_.datagrams[static_cast<size_t>(i)], "dgram " + std::to_string(i));
  }
  EXPECT_EQ(received_before_fin, static_cast<size_t>(kDatagrams));
}

TEST_F(QuicConnectionTest, SendQueueIsBounded) {
  Connection::Config cfg;
  cfg.datagram_queue = 4;
  handshake({}, cfg);
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(send_datagram(*client_.conn, "q" + std::to_string(i)));
  }
  EXPECT_FALSE(send_datagram(*client_.conn, "q4"));
  EXPECT_EQ(client_.conn->queued_datagrams(), 4u);
  client_.conn->flush();
  EXPECT_EQ(client_.conn->queued_datagrams(), 0u);
  EXPECT_TRUE(send_datagram(*client_.conn, "q5"));
  ASSERT_TRUE(run_until([&] { return server_session_.datagrams.size() == 5; }));
}

TEST_F(QuicConnectionTest, SendQueueIsBoundedInBytes) {
  Connection::Config cfg;
  cfg.datagram_queue_bytes = 2500;
  handshake({}, cfg);
  EXPECT_TRUE(send_datagram(*client_.conn, pattern(1000, 1)));
  EXPECT_TRUE(send_datagram(*client_.conn, pattern(1000, 2)));
  EXPECT_FALSE(send_datagram(*client_.conn, pattern(1000, 3)));
  EXPECT_TRUE(send_datagram(*client_.conn, pattern(500, 4)));
}

// Ten small datagrams coalesce into one packet; a receiver that queues four between deliveries
// drops the other six instead of growing without bound.
TEST_F(QuicConnectionTest, ReceiveQueueDropsPastItsBound) {
  Connection::Config cfg;
  cfg.datagram_queue = 4;
  handshake(cfg, {});
  const uint64_t packets_before = client_ep_.sent();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(send_datagram(*client_.conn, "d" + std::to_string(i)));
  }
  client_.conn->flush();
  EXPECT_EQ(client_ep_.sent(), packets_before + 1);
  ASSERT_TRUE(run_until([&] { return !server_session_.datagrams.empty(); }));
  (void)run_until([] { return false; }, 100ms);  // let anything else arrive
  EXPECT_EQ(server_session_.datagrams, (std::vector<std::string>{"d0", "d1", "d2", "d3"}));
  EXPECT_EQ(server_.conn->datagrams_dropped_on_receive(), 6u);
  EXPECT_EQ(server_session_.closed, 0);
}

// Stateless Retry: the pair's server receiver plays the endpoint's part (QuicEndpoint::accept).
class QuicRetryTest : public QuicConnectionTest {
 protected:
  QuicRetryTest() { pair_.retry.enabled = true; }

  // A token-less client Initial as the server sees it, and the path it came on.
  void first_initial(std::vector<uint8_t>& pkt, ngtcp2_path& path) {
    server_ep_.set_receiver([&](const ngtcp2_path& p, std::span<const uint8_t> in) {
      if (pkt.empty()) {
        pkt.assign(in.begin(), in.end());
        path = p;
      }
    });
    ASSERT_TRUE(run_until([&] { return !pkt.empty(); }));
  }
};

TEST_F(QuicRetryTest, ClientFollowsRetryAndHandshakeCompletes) {
  start();
  ASSERT_TRUE(run_until([&] { return client_.handshake && server_.handshake; }));
  EXPECT_EQ(pair_.retry.retries_sent, 1);
  EXPECT_EQ(pair_.retry.invalid_tokens, 0);
  EXPECT_EQ(client_.conn->protocol(), "moq-lite-04");
  Stream* s = client_.conn->open_bidi();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::copy("after retry"));
  s->finish();
  ASSERT_TRUE(run_until([&] {
    return !server_session_.incoming.empty() && server_session_.incoming[0]->fin;
  }));
  EXPECT_EQ(server_session_.incoming[0]->data, "after retry");
  const ngtcp2_transport_params* params = ngtcp2_conn_get_remote_transport_params(
      client_.conn->native());
  ASSERT_NE(params, nullptr);
  EXPECT_TRUE(params->original_dcid_present);
  EXPECT_TRUE(params->retry_scid_present);
}

// A Retry token validates the client's address (RFC 9000 §8.1), so the server may send past three
// times what it received. ngtcp2 1.11 counts the token only with its length and
// NGTCP2_TOKEN_TYPE_RETRY; a bare settings.token is ignored silently. The server here hears
// nothing after the Initial carrying the token, so only the validated address lets its
// retransmitted flight pass the limit.
TEST_F(QuicRetryTest, RetryTokenLiftsTheAmplificationLimit) {
  pair_.retry.deaf_after_accept = true;
  SimLinkConfig link;
  link.delay = 10ms;  // one exchange per step or so, so that the Retry is counted apart
  set_links(link);
  start();
  ASSERT_TRUE(run_until([&] { return pair_.retry.retries_sent == 1; }));
  ASSERT_EQ(server_.conn, nullptr);
  uint64_t received_before = server_ep_.bytes_received();
  uint64_t sent_before = server_ep_.bytes_sent();
  ASSERT_TRUE(run_until([&] { return server_.conn != nullptr; }));
  uint64_t received = server_ep_.bytes_received() - received_before;
  (void)run_until([] { return false; }, 8s);  // within the 10 s handshake timeout
  EXPECT_FALSE(server_.conn->is_closed());
  uint64_t sent = server_ep_.bytes_sent() - sent_before;
  EXPECT_GT(sent, 3 * received) << "sent " << sent << " after receiving " << received;
}

// Without retry_scid / original_dcid from the token, the client must refuse the server
// (RFC 9000 §7.3): the transport parameters are what binds the Retry to the handshake.
TEST_F(QuicRetryTest, ClientRejectsServerThatOmitsRetryParams) {
  pair_.retry.pass_retry_info = false;
  start();
  ASSERT_TRUE(run_until([&] { return client_.conn->is_closed(); }, 1s));  // not by timeout
  EXPECT_FALSE(client_.handshake);
  EXPECT_EQ(pair_.retry.retries_sent, 1);
}

TEST_F(QuicRetryTest, TamperedTokenGetsInvalidTokenClose) {
  pair_.retry.tamper_token = true;
  start();
  ASSERT_TRUE(run_until([&] { return client_.conn->is_closed(); }, 1s));  // not by timeout
  EXPECT_FALSE(client_.handshake);
  EXPECT_EQ(server_.conn, nullptr);
  EXPECT_EQ(pair_.retry.retries_sent, 1);
  EXPECT_GE(pair_.retry.invalid_tokens, 1);
}

TEST_F(QuicRetryTest, TokenBindsAddressDcidAndLifetime) {
  start();
  std::vector<uint8_t> pkt;
  ngtcp2_path path{};
  first_initial(pkt, path);
  ngtcp2_pkt_hd hd;
  ASSERT_EQ(ngtcp2_accept(&hd, pkt.data(), pkt.size()), 0);
  EXPECT_FALSE(has_retry_token(hd));
  ngtcp2_cid scid;
  uint8_t reset[NGTCP2_STATELESS_RESET_TOKENLEN];
  pair_.new_cid(&scid, reset);
  Instant issued = clock_.now();
  uint8_t out[kStatelessPacketBufferSize];
  // Pull the token back out of our own Retry, as the client would.
  ngtcp2_pkt_hd retry_hd;
  auto n = write_retry(path, hd, scid, issued, out);
  ASSERT_TRUE(n);
  ngtcp2_ssize header = ngtcp2_pkt_decode_hd_long(&retry_hd, out, *n);
  ASSERT_GT(header, 0);
  ASSERT_EQ(retry_hd.type, NGTCP2_PKT_RETRY);
  EXPECT_TRUE(ngtcp2_cid_eq(&retry_hd.dcid, &hd.scid));
  EXPECT_TRUE(ngtcp2_cid_eq(&retry_hd.scid, &scid));
  EXPECT_LT(*n, pkt.size());  // a Retry never amplifies
  // The token sits between the header and the 16-byte Retry Integrity Tag (RFC 9000 §17.2.5).
  constexpr size_t kRetryTagLen = 16;
  ASSERT_GT(*n, static_cast<size_t>(header) + kRetryTagLen);
  std::vector<uint8_t> token(out + header, out + *n - kRetryTagLen);

  ngtcp2_pkt_hd again = hd;  // the client's next Initial: DCID = our Retry SCID, with the token
  again.dcid = scid;
  again.token = token.data();
  again.tokenlen = token.size();
  ASSERT_TRUE(has_retry_token(again));
  auto info = verify_retry_token(path, again, issued + 9s);
  ASSERT_TRUE(info);
  EXPECT_TRUE(ngtcp2_cid_eq(&info->original_dcid, &hd.dcid));
  EXPECT_TRUE(ngtcp2_cid_eq(&info->retry_scid, &scid));

  EXPECT_FALSE(verify_retry_token(path, again, issued + kRetryTokenLifetime + 1s));
  ngtcp2_pkt_hd wrong_dcid = again;
  wrong_dcid.dcid = hd.dcid;
  EXPECT_FALSE(verify_retry_token(path, wrong_dcid, issued));
  SimNetwork::Endpoint& another_client = pair_.network().add_endpoint(kClientPort + 1);
  ngtcp2_path other = server_ep_.path_to(another_client);
  EXPECT_FALSE(verify_retry_token(other, again, issued));
  token.back() ^= 1;
  EXPECT_FALSE(verify_retry_token(path, again, issued));
}

}  // namespace
}  // namespace moqd::transport::quic
