#pragma once
// SimNetwork: a deterministic datagram network for QUIC tests. Endpoints are UDP addresses
// (127.0.0.1:port); a datagram sent by one is delivered to the endpoint at its destination
// address after the link's delay plus a random jitter (so later packets can overtake earlier
// ones), unless the link drops it. Randomness comes from one seeded generator and time from a
// ManualClock, so a run repeats exactly; delivery happens from the clock's timers, never inside
// send_packet(). Single-threaded; for tests.
#include <ngtcp2/ngtcp2.h>
#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "base/clock.h"
#include "transport/quic/connection.h"

namespace moqd::test {

// Conditions of one direction of a link.
struct SimLinkConfig {
  Duration delay{0};   // one-way base delay
  Duration jitter{0};  // extra delay, uniform in [0, jitter); reorders packets
  double loss = 0;     // probability that a datagram is dropped, 0..1
};

class SimNetwork {
 public:
  // Receives the datagrams addressed to an endpoint; `path.local` is the endpoint's address.
  using Receiver = std::function<void(const ngtcp2_path& path, std::span<const uint8_t> pkt)>;

  // One address on the network. Sending through it is what a connection's PacketSink does.
  class Endpoint final : public transport::quic::PacketSink {
   public:
    void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) override;
    std::span<uint8_t> packet_buffer(size_t len) override {
      ++buffers_;
      return PacketSink::packet_buffer(len);
    }
    void set_receiver(Receiver receiver) { receiver_ = std::move(receiver); }
    // Applies to datagrams this endpoint sends from now on.
    void set_link(const SimLinkConfig& link) { link_ = link; }
    const sockaddr_in& addr() const { return addr_; }
    // A path from this endpoint to `peer` (pointers into both endpoints).
    ngtcp2_path path_to(const Endpoint& peer) const;
    uint64_t sent() const { return sent_; }
    // packet_buffer() calls: one per ngtcp2 write call of the connection's write loop.
    uint64_t buffers() const { return buffers_; }
    uint64_t dropped() const { return dropped_; }
    uint64_t received() const { return received_; }
    // Bytes of the datagrams counted by sent() (dropped ones included) and received().
    uint64_t bytes_sent() const { return bytes_sent_; }
    uint64_t bytes_received() const { return bytes_received_; }

   private:
    friend class SimNetwork;
    SimNetwork* net_ = nullptr;
    sockaddr_in addr_{};
    Receiver receiver_;
    SimLinkConfig link_;
    uint64_t sent_ = 0;
    uint64_t buffers_ = 0;
    uint64_t dropped_ = 0;
    uint64_t received_ = 0;
    uint64_t bytes_sent_ = 0;
    uint64_t bytes_received_ = 0;
  };

  SimNetwork(ManualClock& clock, uint64_t seed) : clock_(clock), rng_(seed) {}
  ~SimNetwork();
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  // A new endpoint at 127.0.0.1:`port`. The network owns it.
  Endpoint& add_endpoint(uint16_t port);
  // Datagrams sent and not yet delivered or dropped.
  size_t in_flight() const { return timers_.size(); }

 private:
  void transmit(Endpoint& from, const sockaddr_in& to, std::span<const uint8_t> pkt);
  void deliver(uint64_t key, uint16_t from_port, uint16_t to_port, const std::vector<uint8_t>& pkt);
  double uniform();

  ManualClock& clock_;
  std::mt19937_64 rng_;
  std::map<uint16_t, std::unique_ptr<Endpoint>> endpoints_;
  std::map<uint64_t, TimerId> timers_;  // in-flight datagrams
  uint64_t next_key_ = 1;
};

}  // namespace moqd::test
