// The MoQ-level acceptance check of issue 4: a client-role and a server-role Session, each with
// its own Origin, over two QUIC Connections (real TLS, self-signed certificate) on a SimNetwork
// with 50 ms one-way delay, jitter that reorders, and 5% loss both ways; everything on one
// ManualClock, so a run repeats exactly. The client publishes a broadcast, the server discovers
// and subscribes to it, and every group must arrive complete and without a gap.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/clock.h"
#include "model/origin.h"
#include "session/config.h"
#include "session/session.h"
#include "testing/quic_pair.h"
#include "testing/session_fixture.h"
#include "testing/sim_network.h"
#include "transport/quic/connection.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
using moqd::testing::pattern_bytes;
using test::QuicPair;
using test::SimLinkConfig;
using transport::quic::Connection;
using namespace std::chrono_literals;

constexpr uint64_t kGroups = 50;
constexpr uint64_t kBigGroup = 20;  // its middle frame is 200 KiB

// One ALPN the client offers, and the version both sessions must settle on.
struct AlpnCase {
  const char* name;
  const char* alpn;
  wire::Version version;
};

void PrintTo(const AlpnCase& c, std::ostream* os) { *os << c.name; }

// One endpoint's MoQ side: its origin, handler and (once the pair's handshake completes) its
// Session on the pair's connection.
struct Side {
  Side(Role role, ManualClock& clock) : clock(clock), origin({}, clock, clock), handler(origin) {
    config.role = role;
  }

  void on_handshake_completed(Connection& c) {
    session = std::make_unique<Session>(c, config, origin, handler, clock, clock);
    session->start();
  }

  ManualClock& clock;
  SessionConfig config;
  model::Origin origin;
  RecordingHandler handler;
  std::unique_ptr<Session> session;  // last: it leaves the origin before the origin goes
};

// Frame `f` of group `g`: the first two of each group 10-20 KiB, the third small.
std::string frame_bytes(uint64_t g, int f) {
  if (g == kBigGroup && f == 1) {
    return pattern_bytes(200 * 1024, 0xb1);
  }
  size_t n = f == 2 ? 300 + g * 7
                    : 10 * 1024 + (g * 997 + static_cast<size_t>(f) * 4099) % (10 * 1024);
  return pattern_bytes(n, static_cast<uint8_t>(g * 3 + static_cast<uint64_t>(f)));
}

std::vector<std::string> group_frames(uint64_t g) {
  return {frame_bytes(g, 0), frame_bytes(g, 1), frame_bytes(g, 2)};
}

class QuicSessionTest : public ::testing::TestWithParam<AlpnCase> {
 protected:
  QuicSessionTest() {
    pair_.set_links(SimLinkConfig{50ms, 10ms, 0.05});
    pair_.server_alpns = {"moq-lite-04", "moq-lite-03", "moql"};
    pair_.client_alpns = {GetParam().alpn};
    pair_.tick = 2ms;
    pair_.flush_each_tick = true;
    pair_.server.on_handshake = [this](Connection& c) { server_.on_handshake_completed(c); };
    pair_.client.on_handshake = [this](Connection& c) { client_.on_handshake_completed(c); };
  }

  // The client connects; the server's connection is made from the first Initial it receives.
  void connect() { pair_.start(); }
  // Moves the clock in 2 ms steps, flushing both connections after each, until `done` holds or
  // `limit` of simulated time passes.
  bool run_until(const std::function<bool()>& done, Duration limit = 20s) {
    return pair_.run_until(done, limit);
  }
  void run_for(Duration d) { pair_.run_for(d); }

  bool both_ready() const {
    return server_.session != nullptr && client_.session != nullptr &&
           server_.session->is_ready() && client_.session->is_ready();
  }
  void expect_both_up() {
    EXPECT_FALSE(server_.handler.is_closed());
    EXPECT_FALSE(client_.handler.is_closed());
    EXPECT_FALSE(pair_.server.conn->is_closed());
    EXPECT_FALSE(pair_.client.conn->is_closed());
  }

  // Declaration order matters: the sessions leave the pair's connections before those go.
  QuicPair pair_{4242};
  Side server_{Role::kServer, pair_.clock()};
  Side client_{Role::kClient, pair_.clock()};
};

// "moql" goes through SETUP, where both sides settle on lite-02.
INSTANTIATE_TEST_SUITE_P(
    Alpns, QuicSessionTest,
    ::testing::Values(AlpnCase{"Lite04", "moq-lite-04", wire::Version::kLite04},
                      AlpnCase{"Moql", "moql", wire::Version::kLite02}),
    [](const auto& info) { return std::string(info.param.name); });

TEST_P(QuicSessionTest, LossyNetworkDeliversEveryGroupWithoutGap) {
  connect();
  ASSERT_TRUE(run_until([&] { return both_ready(); }));
  EXPECT_EQ(pair_.server.conn->protocol(), GetParam().alpn);
  ASSERT_TRUE(server_.handler.ready_version.has_value());
  ASSERT_TRUE(client_.handler.ready_version.has_value());
  EXPECT_EQ(*server_.handler.ready_version, GetParam().version);
  EXPECT_EQ(*client_.handler.ready_version, GetParam().version);

  TestBroadcast alice(client_.origin, "alice");
  ASSERT_TRUE(run_until([&] { return server_.origin.is_active("alice"); }));
  FrameCollector sub;
  ASSERT_TRUE(sub.subscribe(server_.origin, "alice", "video"));
  ASSERT_TRUE(run_until([&] { return alice.feed("video").track() != nullptr; }));

  for (uint64_t g = 0; g < kGroups; ++g) {
    ASSERT_TRUE(alice.write_group("video", g, group_frames(g))) << "group " << g;
    run_for(40ms);
  }
  ASSERT_TRUE(run_until([&] { return sub.finished_sequences().size() == kGroups; }, 60s))
      << "finished " << sub.finished_sequences().size() << " of " << kGroups;

  std::vector<uint64_t> want(kGroups);
  for (uint64_t g = 0; g < kGroups; ++g) {
    want[g] = g;
  }
  std::vector<uint64_t> got = sub.finished_sequences();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  EXPECT_TRUE(sub.aborted_sequences().empty());
  for (uint64_t g = 0; g < kGroups; ++g) {
    const FrameCollector::Received* r = sub.group(g);
    ASSERT_NE(r, nullptr) << "group " << g;
    ASSERT_EQ(r->frames.size(), 3u) << "group " << g;
    for (int f = 0; f < 3; ++f) {
      EXPECT_TRUE(r->frames[static_cast<size_t>(f)] == frame_bytes(g, f))
          << "group " << g << " frame " << f;
    }
  }
  EXPECT_FALSE(sub.ended);
  EXPECT_GT(pair_.server_endpoint().dropped(), 0u);
  EXPECT_GT(pair_.client_endpoint().dropped(), 0u);
  expect_both_up();
}

}  // namespace
}  // namespace moqd::session
