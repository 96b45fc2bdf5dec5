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
#include "testing/session_fixture.h"
#include "testing/sim_network.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"
#include "transport/quic/tls.h"

namespace moqd::session {
namespace {

using moqd::testing::FrameCollector;
using moqd::testing::RecordingHandler;
using moqd::testing::TestBroadcast;
using moqd::testing::pattern_bytes;
using test::SimLinkConfig;
using test::SimNetwork;
using transport::quic::Certificate;
using transport::quic::Connection;
using transport::quic::ConnectionContext;
using transport::quic::TlsFactory;
using namespace std::chrono_literals;

constexpr uint16_t kServerPort = 4443;
constexpr uint16_t kClientPort = 40000;
constexpr uint64_t kGroups = 50;
constexpr uint64_t kBigGroup = 20;  // its middle frame is 200 KiB

// One ALPN the client offers, and the version both sessions must settle on.
struct AlpnCase {
  const char* name;
  const char* alpn;
  wire::Version version;
};

void PrintTo(const AlpnCase& c, std::ostream* os) { *os << c.name; }

// One endpoint: its origin, handler, connection and (once the handshake completes) its Session.
struct Side final : transport::quic::ConnectionObserver {
  Side(Role role, ManualClock& clock) : clock(clock), origin({}, clock, clock), handler(origin) {
    config.role = role;
  }
  ~Side() override {
    // The session leaves the transport and the origin before either goes.
    session.reset();
    conn.reset();
  }

  void on_handshake_completed(Connection& c) override {
    session = std::make_unique<Session>(c, config, origin, handler, clock, clock);
    session->start();
  }
  void on_done(Connection&) override { ++done; }

  ManualClock& clock;
  SessionConfig config;
  model::Origin origin;
  RecordingHandler handler;
  std::unique_ptr<Connection> conn;
  std::unique_ptr<Session> session;
  int done = 0;
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
  void SetUp() override {
    auto cert = Certificate::generate_self_signed();
    ASSERT_TRUE(cert);
    cert_ = std::move(*cert);
    SimLinkConfig link{50ms, 10ms, 0.05};
    server_ep_.set_link(link);
    client_ep_.set_link(link);
  }

  ConnectionContext context(SimNetwork::Endpoint& ep, Side& side) {
    return ConnectionContext{ep, clock_, clock_,
                             [this](ngtcp2_cid* cid, uint8_t* token) { new_cid(cid, token); },
                             &side};
  }

  void new_cid(ngtcp2_cid* cid, uint8_t* token) {
    cid->datalen = 16;
    for (size_t i = 0; i < cid->datalen; ++i) {
      cid->data[i] = static_cast<uint8_t>(next_cid_ >> (8 * (i % 8)));
    }
    cid->data[0] = static_cast<uint8_t>(next_cid_++);
    for (size_t i = 0; i < NGTCP2_STATELESS_RESET_TOKENLEN; ++i) {
      token[i] = static_cast<uint8_t>(i ^ next_cid_);
    }
  }

  // The client connects; the server's connection is made from the first Initial it receives.
  void connect() {
    server_ep_.set_receiver([this](const ngtcp2_path& path, std::span<const uint8_t> pkt) {
      if (server_.conn == nullptr) {
        TlsFactory tls = [this](ngtcp2_crypto_conn_ref* ref) {
          return transport::quic::make_server_session(*cert_, server_alpns_, ref);
        };
        auto c = Connection::accept(path, pkt, tls, context(server_ep_, server_));
        if (!c) {
          return;
        }
        server_.conn = std::move(*c);
      }
      if (!server_.conn->is_done()) {
        (void)server_.conn->on_packet(path, pkt);
      }
    });
    client_ep_.set_receiver([this](const ngtcp2_path& path, std::span<const uint8_t> pkt) {
      if (client_.conn != nullptr && !client_.conn->is_done()) {
        (void)client_.conn->on_packet(path, pkt);
      }
    });
    std::vector<std::string> client_alpns{GetParam().alpn};
    TlsFactory tls = [this, client_alpns](ngtcp2_crypto_conn_ref* ref) {
      return transport::quic::make_client_session(
          "localhost", client_alpns,
          transport::quic::Verification{transport::quic::VerifyMode::kFingerprint, {},
                                        cert_->sha256()},
          ref);
    };
    auto c = Connection::connect(client_ep_.path_to(server_ep_), tls, context(client_ep_, client_));
    ASSERT_TRUE(c);
    client_.conn = std::move(*c);
  }

  // Moves the clock in 2 ms steps, flushing both connections after each, until `done` holds or
  // `limit` of simulated time passes.
  bool run_until(const std::function<bool()>& done, Duration limit = 20s) {
    Instant end = clock_.now() + limit;
    while (!done()) {
      if (clock_.now() >= end) {
        return false;
      }
      step();
    }
    return true;
  }
  void run_for(Duration d) {
    Instant end = clock_.now() + d;
    run_until([&] { return clock_.now() >= end; }, d + 1s);
  }
  void step() {
    clock_.advance(2ms);
    for (Side* s : {&server_, &client_}) {
      if (s->conn != nullptr && !s->conn->is_done()) {
        s->conn->flush();
      }
    }
  }

  bool both_ready() const {
    return server_.session != nullptr && client_.session != nullptr &&
           server_.session->is_ready() && client_.session->is_ready();
  }
  void expect_both_up() {
    EXPECT_FALSE(server_.handler.is_closed());
    EXPECT_FALSE(client_.handler.is_closed());
    EXPECT_FALSE(server_.conn->is_closed());
    EXPECT_FALSE(client_.conn->is_closed());
  }

  // Declaration order matters: the sides (sessions, connections) go before the network and the
  // clock they reference.
  ManualClock clock_;
  SimNetwork net_{clock_, 4242};
  SimNetwork::Endpoint& server_ep_ = net_.add_endpoint(kServerPort);
  SimNetwork::Endpoint& client_ep_ = net_.add_endpoint(kClientPort);
  std::unique_ptr<Certificate> cert_;
  std::vector<std::string> server_alpns_{"moq-lite-04", "moq-lite-03", "moql"};
  uint64_t next_cid_ = 1;
  Side server_{Role::kServer, clock_};
  Side client_{Role::kClient, clock_};
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
  EXPECT_EQ(server_.conn->protocol(), GetParam().alpn);
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
  EXPECT_GT(server_ep_.dropped(), 0u);
  EXPECT_GT(client_ep_.dropped(), 0u);
  expect_both_up();
}

}  // namespace
}  // namespace moqd::session
