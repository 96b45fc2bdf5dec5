#pragma once
// QuicPair: a client and a server transport::quic::Connection joined by a SimNetwork on a
// ManualClock, for tests of whatever runs on top of QUIC. The server connection is made from the
// first Initial; each side's handshake callback decides who becomes the connection's visitor.
// Deterministic (seeded network, manual time); single-threaded; test only.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "testing/sim_network.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"

namespace moqd::test {

class QuicPair {
 public:
  // Called when a side's handshake completes (set the connection's visitor there).
  using HandshakeHook = std::function<void(transport::quic::Connection&)>;

  // One endpoint's connection and lifecycle.
  struct Side final : transport::quic::ConnectionObserver {
    void on_handshake_completed(transport::quic::Connection& c) override;
    void on_done(transport::quic::Connection&) override { ++done; }

    HandshakeHook on_handshake;
    std::unique_ptr<transport::quic::Connection> conn;
    bool handshake = false;
    int done = 0;
  };

  explicit QuicPair(uint64_t seed = 42);
  ~QuicPair();
  QuicPair(const QuicPair&) = delete;
  QuicPair& operator=(const QuicPair&) = delete;

  // Starts the client's handshake; the server accepts its first Initial. Fails the test when
  // the client connection cannot be made.
  void start(transport::quic::ConnectionConfig server_config = {},
             transport::quic::ConnectionConfig client_config = {});
  // start(), then runs until both handshakes complete; false when they do not within 10 s.
  bool handshake(transport::quic::ConnectionConfig server_config = {},
                 transport::quic::ConnectionConfig client_config = {});
  // Advances the clock in 1 ms steps until `done` holds or `limit` of simulated time passes.
  bool run_until(const std::function<bool()>& done, Duration limit = std::chrono::seconds(10));
  void set_links(const SimLinkConfig& link);

  ManualClock& clock() { return clock_; }
  const transport::quic::Certificate& certificate() const { return *cert_; }

  std::vector<std::string> server_alpns{"moq-lite-04"};
  std::vector<std::string> client_alpns{"moq-lite-04"};
  Side server;
  Side client;

 private:
  transport::quic::ConnectionContext context(SimNetwork::Endpoint& ep, Side& side);
  void new_cid(ngtcp2_cid* cid, uint8_t* token);

  ManualClock clock_;
  SimNetwork net_;
  SimNetwork::Endpoint& server_ep_;
  SimNetwork::Endpoint& client_ep_;
  std::unique_ptr<transport::quic::Certificate> cert_;
  uint64_t next_cid_ = 1;
};

}  // namespace moqd::test
