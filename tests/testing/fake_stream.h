#pragma once
// A transport::Stream with no transport behind it, for tests of one stream handler: the test puts
// the peer's bytes (and FIN, RESET_STREAM, STOP_SENDING) into it and reads back what the handler
// wrote, finished, reset or stopped. Nothing is delivered by itself: receive() and the on_*
// helpers call the visitor synchronously, as a transport would from its loop. Flow control is
// whatever the test sets (write_capacity). Single-threaded; test only.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "transport/transport.h"

namespace moqd::test {

class FakeStream final : public transport::Stream {
 public:
  // `id` follows QUIC's numbering (transport::is_uni tells a uni stream from a bidi one).
  explicit FakeStream(transport::StreamId id) : id_(id) {}

  // --- the peer's side ---
  // Appends the peer's `bytes` (and FIN after them when `fin`), then tells the visitor.
  void receive(std::span<const uint8_t> bytes, bool fin = false) {
    in_.insert(in_.end(), bytes.begin(), bytes.end());
    peer_fin_ = peer_fin_ || fin;
    if (visitor_ != nullptr) {
      visitor_->on_readable();
    }
  }
  void receive(const std::vector<uint8_t>& bytes, bool fin = false) {
    receive(std::span<const uint8_t>(bytes), fin);
  }
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

  // --- what the handler did ---
  const std::vector<uint8_t>& written() const { return out_; }
  bool finished() const { return finished_; }
  std::optional<uint64_t> reset_code() const { return reset_; }
  std::optional<uint64_t> stop_sending_code() const { return stop_; }
  bool released() const { return released_; }
  std::optional<uint64_t> send_order() const { return order_; }
  transport::StreamVisitor* visitor() const { return visitor_; }
  // write() calls so far (a default write_pair() is two), i.e. the Bytes a transport would queue.
  size_t writes() const { return writes_; }
  // Received bytes the handler has not consumed.
  size_t unread() const { return in_.size(); }
  // What write_capacity() answers (default: unbounded).
  size_t capacity = SIZE_MAX;

  // --- transport::Stream ---
  transport::StreamId id() const override { return id_; }
  void set_visitor(transport::StreamVisitor* visitor) override { visitor_ = visitor; }
  std::span<const uint8_t> peek() const override { return in_; }
  void consume(size_t n) override {
    in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(std::min(n, in_.size())));
  }
  bool is_fin_received() const override { return peer_fin_ && in_.empty(); }
  bool has_peer_fin() const override { return peer_fin_; }
  void stop_sending(uint64_t code) override { stop_ = code; }
  size_t write_capacity() const override { return capacity; }
  void write(Bytes data) override {
    ++writes_;
    auto s = data.span();
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void finish() override { finished_ = true; }
  void reset(uint64_t code) override { reset_ = code; }
  size_t buffered() const override { return 0; }
  void set_send_order(uint64_t order) override { order_ = order; }
  void release() override {
    released_ = true;
    visitor_ = nullptr;
  }

 private:
  transport::StreamId id_;
  transport::StreamVisitor* visitor_ = nullptr;
  std::vector<uint8_t> in_;
  std::vector<uint8_t> out_;
  size_t writes_ = 0;
  bool peer_fin_ = false;
  bool finished_ = false;
  bool released_ = false;
  std::optional<uint64_t> reset_;
  std::optional<uint64_t> stop_;
  std::optional<uint64_t> order_;
};

}  // namespace moqd::test
