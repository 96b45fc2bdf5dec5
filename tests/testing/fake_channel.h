#pragma once
// FakeChannelPair: two in-memory MessageChannels wired back to back, for testing stream
// multiplexers without sockets. Nothing moves until the test calls deliver(), so a channel's
// buffered() is the bytes its peer has not yet been handed, which gives real back-pressure.
// Single-threaded; test only.
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "transport/websocket/message_channel.h"

namespace moqd::testing {

class FakeChannel final : public transport::websocket::MessageChannel {
 public:
  // Joins the parts into one message and queues it for the peer (after close(): dropped).
  void send_message(std::span<const Bytes> parts) override;
  size_t buffered() const override { return buffered_; }
  // Records the close; the pair completes the handshake on its next deliver().
  void close(uint16_t code, std::string_view reason) override;

  // The multiplexer on this end (receives on_channel_writable / on_channel_closed).
  void set_handler(transport::websocket::MessageHandler* handler) { handler_ = handler; }
  // on_channel_writable() fires when buffered() falls below this after being at or above it.
  void set_low_water(size_t bytes) { low_water_ = bytes; }

  // Every message sent so far, in order (kept after delivery).
  const std::vector<std::vector<uint8_t>>& sent() const { return sent_; }
  bool is_closed() const { return close_code_.has_value(); }
  std::optional<uint16_t> close_code() const { return close_code_; }
  const std::string& close_reason() const { return close_reason_; }

 private:
  friend class FakeChannelPair;

  transport::websocket::MessageHandler* handler_ = nullptr;
  std::deque<std::vector<uint8_t>> outbox_;
  std::vector<std::vector<uint8_t>> sent_;
  size_t buffered_ = 0;
  size_t low_water_ = 64 * 1024;
  bool above_low_water_ = false;
  std::optional<uint16_t> close_code_;
  std::string close_reason_;
  bool closed_notified_ = false;
};

class FakeChannelPair {
 public:
  FakeChannel& a() { return a_; }
  FakeChannel& b() { return b_; }
  // Hands up to `max` queued messages to each side's peer handler, alternating directions, then
  // completes pending closes once their side's outbox is empty (both handlers get
  // on_channel_closed with the closer's code). Returns how many messages moved.
  size_t deliver(size_t max = SIZE_MAX);
  // Both sides have been told the channel is closed.
  bool is_closed() const { return a_.closed_notified_ && b_.closed_notified_; }

 private:
  bool deliver_one(FakeChannel& from, FakeChannel& to);
  void complete_close(FakeChannel& closer, FakeChannel& other);

  FakeChannel a_;
  FakeChannel b_;
};

}  // namespace moqd::testing
