// Turn slices (EventLoop::TurnSlice) with real QUIC connections: the servers' write passes are the
// loop's turn work, as in the relay, while each connection's packets, clock and timers stay on its
// own deterministic QuicPair (ManualClock and SimNetwork, frozen while the loop runs). Slices are
// bounded in items only (an hour's time bound), so the tests count work, not wall time.
#include <sys/eventfd.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/turn.h"
#include "runtime/event_loop.h"
#include "testing/quic_pair.h"
#include "testing/stream_recorder.h"
#include "transport/quic/connection.h"

namespace moqd::runtime {
namespace quic_slice_test {

using namespace std::chrono_literals;

constexpr size_t kViewers = 64;          // the burst's viewers
constexpr size_t kSlice = 8;             // items per slice
constexpr size_t kFrameSize = 4166;      // one fanout-1k frame
constexpr size_t kBystanderSize = 120;   // the bystander track's small frame

// A server connection's timers stay on its pair's ManualClock; its turn work (the write pass) goes
// to `loop` when set, as a relay worker's does, else to the clock (handshake, delivery). On the
// loop, `after_pass` runs right after the connection's pass, within the same slice.
class LoopTurns final : public Timers, private TurnWork {
 public:
  TimerId schedule(Duration delay, std::function<void()> fn) override {
    return clock->schedule(delay, std::move(fn));
  }
  void cancel(TimerId id) override { clock->cancel(id); }
  void at_turn_end(TurnWork& w) override {
    if (loop == nullptr) {
      clock->at_turn_end(w);
      return;
    }
    queue_.push(w);
    loop->at_turn_end(*this);
  }
  ManualClock* clock = nullptr;
  EventLoop* loop = nullptr;
  std::function<void()> after_pass;

 private:
  void run_turn_work() override {
    queue_.run();
    if (after_pass) {
      after_pass();
    }
  }
  TurnQueue queue_;
};

// One viewer: a server connection (the relay's side) and its client, each pair its own network.
struct Viewer {
  explicit Viewer(uint64_t seed) : pair(seed) {
    turns.clock = &pair.clock();
    pair.server_timers = &turns;
    pair.server.on_handshake = [this](transport::quic::Connection& c) {
      c.set_visitor(&server_session);
    };
    pair.client.on_handshake = [this](transport::quic::Connection& c) {
      c.set_visitor(&client_session);
    };
  }
  uint64_t sent() { return pair.server_endpoint().sent(); }
  // The data the client has received on the server's stream.
  std::string received() {
    auto* in = client_session.find(stream->id());
    return in == nullptr ? std::string() : in->data;
  }

  // Before pair: they outlive its connections.
  test::SessionRecorder server_session;
  test::SessionRecorder client_session;
  LoopTurns turns;
  test::QuicPair pair;
  transport::Stream* stream = nullptr;
  uint64_t sent_before = 0;  // server datagrams sent before the burst
};

struct Task final : TurnWork {
  void run_turn_work() override { fn(); }
  std::function<void()> fn;
};

// The bystander's publisher socket: readable once the test writes to it.
struct PacketFd final : IoHandler {
  PacketFd() : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~PacketFd() override { ::close(fd); }
  void on_io(uint32_t) override {
    uint64_t v;
    if (::read(fd, &v, sizeof v) == static_cast<ssize_t>(sizeof v) && on_packet) {
      on_packet();
    }
  }
  void arrive() const {
    uint64_t one = 1;
    ASSERT_EQ(::write(fd, &one, sizeof one), static_cast<ssize_t>(sizeof one));
  }
  int fd;
  std::function<void()> on_packet;
};

class QuicSliceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    loop_.set_turn_slice({kSlice, std::chrono::hours(1)});
    for (size_t i = 0; i <= kViewers; ++i) {  // the last one is the bystander's viewer
      viewers_.push_back(std::make_unique<Viewer>(100 + i));
      Viewer& v = *viewers_.back();
      ASSERT_TRUE(v.pair.handshake());
      v.pair.run_for(200ms);  // handshake ACKs and timers settled
      v.stream = v.pair.server.conn->open_uni();
      ASSERT_NE(v.stream, nullptr);
      v.turns.loop = &loop_;
      v.sent_before = v.sent();
    }
  }
  // Viewers of the burst whose server has sent a datagram since the burst began.
  size_t burst_served() {
    size_t n = 0;
    for (size_t i = 0; i < kViewers; ++i) {
      n += viewers_[i]->sent() > viewers_[i]->sent_before ? 1 : 0;
    }
    return n;
  }
  Viewer& bystander() { return *viewers_.back(); }
  // Every client has what its server wrote: back on each pair's clock, which runs the rest.
  void deliver_all(const std::string& burst_frame, const std::string& bystander_frame) {
    for (size_t i = 0; i <= kViewers; ++i) {
      Viewer& v = *viewers_[i];
      v.turns.loop = nullptr;
      const std::string& want = i < kViewers ? burst_frame : bystander_frame;
      ASSERT_TRUE(v.pair.run_until([&] { return v.received().size() >= want.size(); }))
          << "viewer " << i;
      EXPECT_EQ(v.received(), want) << "viewer " << i;
    }
  }

  EventLoop loop_;  // before the viewers: their connections may be queued on it
  std::vector<std::unique_ptr<Viewer>> viewers_;
};

TEST_F(QuicSliceTest, ABystandersFrameLeavesWithinTwoSlicesOfABurstToManyViewers) {
  const std::string burst_frame = test::pattern(kFrameSize, 1);
  const std::string bystander_frame = test::pattern(kBystanderSize, 2);
  // The track's publisher: its object readies every viewer's write pass.
  Task publisher;
  publisher.fn = [&] {
    for (size_t i = 0; i < kViewers; ++i) {
      viewers_[i]->stream->write(Bytes::copy(std::string_view(burst_frame)));
    }
  };
  PacketFd packet;
  packet.on_packet = [&] {
    bystander().stream->write(Bytes::copy(std::string_view(bystander_frame)));
  };
  ASSERT_TRUE(loop_.add(packet.fd, EPOLLIN, &packet));
  const uint64_t cut_before = loop_.turn_slices_cut();

  loop_.at_turn_end(publisher);
  loop_.run_once(1s);  // the burst's first turn
  const size_t served_first_turn = burst_served();
  EXPECT_GE(served_first_turn, 1u);
  EXPECT_LE(served_first_turn, 2 * kSlice);  // this turn's slice, then the backlog's
  // The bystander's packet arrives while most of the burst is still to be written.
  packet.arrive();
  size_t turns = 0;
  size_t served_when_bystander_left = SIZE_MAX;  // counted right after its write pass
  size_t turns_when_bystander_left = 0;
  auto bystander_left = [&] { return bystander().sent() > bystander().sent_before; };
  bystander().turns.after_pass = [&] {
    if (served_when_bystander_left == SIZE_MAX && bystander_left()) {
      served_when_bystander_left = burst_served();
    }
  };
  while ((burst_served() < kViewers || !bystander_left()) && turns < 100) {
    loop_.run_once(1s);  // never waits: the backlog keeps it busy
    ++turns;
    if (turns_when_bystander_left == 0 && bystander_left()) {
      turns_when_bystander_left = turns;
    }
  }
  ASSERT_EQ(burst_served(), kViewers);
  ASSERT_NE(served_when_bystander_left, SIZE_MAX) << "the bystander's frame never left";
  EXPECT_EQ(turns_when_bystander_left, 1u);  // it left in the turn that read its packet
  // Its connection's write pass ran first in the turn that read its packet: no more of the burst
  // was written between the packet's arrival and the bystander's frame leaving (in the relay, the
  // packet waits at most for the rest of the slice running when it arrives).
  EXPECT_EQ(served_when_bystander_left, served_first_turn);
  EXPECT_LT(served_when_bystander_left, kViewers / 2);
  // The burst took a slice of the backlog per turn.
  EXPECT_GE(turns, (kViewers - 2 * kSlice) / kSlice - 1);
  EXPECT_GE(loop_.turn_slices_cut() - cut_before, (kViewers - 2 * kSlice) / kSlice - 1);
  loop_.remove(packet.fd);
  loop_.run_once(0ms);
  deliver_all(burst_frame, bystander_frame);
}

}  // namespace quic_slice_test
}  // namespace moqd::runtime
