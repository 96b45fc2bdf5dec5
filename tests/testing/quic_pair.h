#pragma once
// QuicPair: a client and a server transport::quic::Connection joined by a SimNetwork on a
// ManualClock, for tests of whatever runs on top of QUIC. The server connection is made from the
// first Initial (after a stateless Retry when `retry.enabled`); each side's handshake callback
// decides who becomes the connection's visitor, which must outlive the pair (declare it first) or
// detach itself when destroyed. Deterministic (seeded network, manual time); single-threaded;
// test only.
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "testing/sim_network.h"
#include "transport/quic/certificate.h"
#include "transport/quic/connection.h"

namespace moqd::test {

// `n` bytes of a reproducible pseudo-random pattern (an LCG from `seed`): payloads that tests
// compare byte-exact at the far end.
inline std::string pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

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

  // Stateless Retry (RFC 9000 §8.1.2) played by the server's receiver, as the endpoint in front
  // of Connection::accept() would: a token-less Initial gets a Retry, a valid token is accepted
  // with its RetryInfo, an invalid one gets an Initial CONNECTION_CLOSE with INVALID_TOKEN.
  struct Retry {
    bool enabled = false;
    bool tamper_token = false;    // flips the token's last byte before it is checked
    bool pass_retry_info = true;  // false: accepts without the token's RetryInfo, as a bad server
    // true: once it has accepted, the server hears nothing more from the client (to see what
    // the server sends on the strength of the token alone: the anti-amplification limit).
    bool deaf_after_accept = false;
    int retries_sent = 0;
    int invalid_tokens = 0;
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
  // Advances the clock a `tick` at a time until `done` holds or `limit` of simulated time passes.
  bool run_until(const std::function<bool()>& done, Duration limit = std::chrono::seconds(10));
  // Advances the clock a `tick` at a time for `d`.
  void run_for(Duration d);
  void set_links(const SimLinkConfig& link);
  // The pair's CID generator: deterministic, never repeats within a pair.
  void new_cid(ngtcp2_cid* cid, uint8_t* token);

  ManualClock& clock() { return clock_; }
  const transport::quic::Certificate& certificate() const { return *cert_; }
  // For packet counters, or to take over a side's receiver.
  SimNetwork& network() { return net_; }
  SimNetwork::Endpoint& server_endpoint() { return server_ep_; }
  SimNetwork::Endpoint& client_endpoint() { return client_ep_; }

  std::vector<std::string> server_alpns{"moq-lite-04"};
  std::vector<std::string> client_alpns{"moq-lite-04"};
  // Simulated time run_until() and run_for() advance per step. With `flush_each_tick`, every
  // step also flushes both live connections, for code that writes to streams outside the
  // connections' own callbacks (a Session fed by an Origin).
  Duration tick = std::chrono::milliseconds(1);
  bool flush_each_tick = false;
  // The server connection's timers and turn work, when not the clock's (set before start(); it
  // must outlive the pair's connections): to hold a server's loop turn open across timers and
  // packets.
  Timers* server_timers = nullptr;
  Retry retry;
  Side server;
  Side client;

 private:
  transport::quic::ConnectionContext context(SimNetwork::Endpoint& ep, Side& side);
  void on_server_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt,
                        const transport::quic::ConnectionConfig& config);
  void on_server_packet_with_retry(const ngtcp2_path& path, std::span<const uint8_t> in,
                                   const transport::quic::ConnectionConfig& config);
  void accept_server(const ngtcp2_path& path, std::span<const uint8_t> pkt,
                     const transport::quic::ConnectionConfig& config,
                     const std::optional<transport::quic::RetryInfo>& info = {});
  void step();

  ManualClock clock_;
  SimNetwork net_;
  SimNetwork::Endpoint& server_ep_;
  SimNetwork::Endpoint& client_ep_;
  std::unique_ptr<transport::quic::Certificate> cert_;
  uint64_t next_cid_ = 1;
};

}  // namespace moqd::test
