#pragma once
// An in-memory QUIC connection for the stateful fuzz targets (wt_server_fuzzer under a
// WebTransport server, ietf_session_fuzzer under an IETF MoQ session): a transport::Session whose peer is the fuzz input. It keeps the transport.h contract strictly and
// aborts when its user breaks it: events are queued and delivered only by deliver() (the fuzzer's
// loop), never from inside a call the user made; a released stream, and every stream once
// on_closed() has returned, is poisoned rather than freed, so any later call on it aborts; after
// close() only on_closed() is delivered, once. Single-threaded; fuzz targets only.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "transport/transport.h"

namespace moqd::fuzz {

[[noreturn]] inline void contract_bug(const char* what) {
  std::fprintf(stderr, "wt_harness: contract broken: %s\n", what);
  std::abort();
}

class FakeQuic;

// One QUIC stream of FakeQuic. Owned by its FakeQuic for the whole run (released ones too).
class FakeQuicStream final : public transport::Stream {
 public:
  // Bytes write() takes before write_capacity() reports 0 (the queue is emptied by flush()).
  static constexpr size_t kQueueLimit = 4096;

  FakeQuicStream(FakeQuic& conn, transport::StreamId id, bool local)
      : conn_(conn), id_(id), local_(local) {}

  bool local() const { return local_; }
  bool has_send() const { return !transport::is_uni(id_) || local_; }
  bool has_recv() const { return !transport::is_uni(id_) || !local_; }
  bool released() const { return released_; }
  bool dead() const { return released_ || poisoned_; }
  void poison() { poisoned_ = true; }
  transport::StreamVisitor* visitor() const { return dead() ? nullptr : visitor_; }

  // --- the peer's side, driven by the fuzzer ---
  // False when the bytes went nowhere (our receive side is stopped or already ended).
  bool peer_data(std::span<const uint8_t> data) {
    if (!has_recv() || peer_fin_ || peer_reset_ || stop_sent_ || dead()) {
      return false;
    }
    recv_.insert(recv_.end(), data.begin(), data.end());
    return true;
  }
  bool peer_finish() {
    if (!has_recv() || peer_fin_ || peer_reset_ || dead()) {
      return false;
    }
    peer_fin_ = true;
    return !stop_sent_;
  }
  bool peer_reset() {
    if (!has_recv() || peer_reset_ || dead() || (peer_fin_ && recv_.empty())) {
      return false;
    }
    peer_reset_ = true;
    recv_.clear();
    return true;
  }
  // The peer's STOP_SENDING: like QUIC, our send side is reset at once. False when moot.
  bool peer_stop_sending() {
    if (!has_send() || send_done_ || dead()) {
      return false;
    }
    send_done_ = true;
    queued_ = 0;
    return true;
  }
  // The network took everything queued. True when write_capacity() rises from 0.
  bool flush() {
    bool was_full = queued_ >= kQueueLimit;
    queued_ = 0;
    return was_full && !send_done_ && !dead();
  }
  size_t written() const { return written_; }
  // The id, for the fake itself: no contract check.
  transport::StreamId raw_id() const { return id_; }

  // --- transport::Stream ---
  transport::StreamId id() const override {
    check();
    return id_;
  }
  void set_visitor(transport::StreamVisitor* visitor) override {
    check();
    visitor_ = visitor;
  }
  std::span<const uint8_t> peek() const override {
    check();
    return recv_;
  }
  void consume(size_t n) override {
    check_recv("consume");
    if (n > recv_.size()) {
      contract_bug("consume() past peek()");
    }
    recv_.erase(recv_.begin(), recv_.begin() + static_cast<ptrdiff_t>(n));
  }
  bool is_fin_received() const override {
    check();
    return peer_fin_ && recv_.empty();
  }
  bool has_peer_fin() const override {
    check();
    return peer_fin_;
  }
  void stop_sending(uint64_t) override {
    check_recv("stop_sending");
    stop_sent_ = true;
    recv_.clear();
  }
  size_t write_capacity() const override {
    check();
    if (!has_send() || send_done_ || closing()) {
      return 0;
    }
    return queued_ >= kQueueLimit ? 0 : kQueueLimit - queued_;
  }
  void write(Bytes data) override {
    check_send("write");
    if (!send_done_ && !closing()) {
      queued_ += data.size();
      written_ += data.size();
    }
  }
  void finish() override {
    check_send("finish");
    send_done_ = true;
  }
  void reset(uint64_t) override {
    check_send("reset");
    send_done_ = true;
    queued_ = 0;
  }
  size_t buffered() const override {
    check();
    return queued_;
  }
  void set_send_order(uint64_t) override { check(); }
  void release() override {
    check();
    if (has_send() && !send_done_) {
      reset(0);
    }
    if (has_recv() && !stop_sent_ && !is_fin_received()) {
      stop_sending(0);
    }
    released_ = true;
    visitor_ = nullptr;
  }

 private:
  bool closing() const;
  void check() const {
    if (released_) {
      contract_bug("stream used after release()");
    }
    if (poisoned_) {
      contract_bug("stream used after on_closed() returned");
    }
  }
  void check_send(const char* what) const {
    check();
    if (!has_send()) {
      std::fprintf(stderr, "wt_harness: %s on a stream without a send side\n", what);
      contract_bug("send call on a receive-only stream");
    }
  }
  void check_recv(const char* what) const {
    check();
    if (!has_recv()) {
      std::fprintf(stderr, "wt_harness: %s on a stream without a receive side\n", what);
      contract_bug("receive call on a send-only stream");
    }
  }

  FakeQuic& conn_;
  const transport::StreamId id_;
  const bool local_;
  transport::StreamVisitor* visitor_ = nullptr;
  std::vector<uint8_t> recv_;
  bool peer_fin_ = false;
  bool peer_reset_ = false;
  bool stop_sent_ = false;
  bool send_done_ = false;  // finished, reset, or stopped by the peer
  size_t queued_ = 0;
  size_t written_ = 0;
  bool released_ = false;
  bool poisoned_ = false;
};

// The QUIC connection, server side: peer (client) streams are 0, 4, .. and 2, 6, ..; ours are
// 1, 5, .. and 3, 7, ...
class FakeQuic final : public transport::Session {
 public:
  // Peer streams of each direction the fuzzer may open.
  static constexpr size_t kMaxPeerStreams = 24;

  struct Limits {
    uint64_t local_bidi = 0;  // streams of each kind we may open (the peer's MAX_STREAMS)
    uint64_t local_uni = 0;
    size_t max_datagram = 0;  // 0: the peer takes no datagrams
  };
  explicit FakeQuic(Limits limits) : limits_(limits) {}

  // --- the fuzzer's side ---
  bool is_closing() const { return closing_; }
  bool closed_delivered() const { return closed_delivered_; }
  bool has_events() const { return !events_.empty(); }
  size_t datagrams_sent() const { return datagrams_sent_; }
  // Once closing: the code and reason of the first close, and whether our side (close()) made it.
  uint64_t close_code() const { return close_code_; }
  const std::string& close_reason() const { return close_reason_; }
  bool closed_by_us() const { return closed_by_us_; }
  const std::vector<FakeQuicStream*>& peer_streams() const { return peer_; }
  const std::vector<FakeQuicStream*>& all_streams() const { return order_; }

  // A new peer stream, its first bytes and maybe its FIN, all in one event batch. Null when
  // the connection is closing or kMaxPeerStreams is reached.
  FakeQuicStream* peer_open(bool uni, std::span<const uint8_t> data, bool fin) {
    uint64_t& n = uni ? peer_uni_ : peer_bidi_;
    if (closing_ || n >= kMaxPeerStreams) {
      return nullptr;
    }
    transport::StreamId id = 4 * n++ + (uni ? 2 : 0);
    FakeQuicStream& s = add(id, false);
    push({Event::kIncoming, id});
    peer_data(s, data);
    if (fin) {
      peer_finish(s);
    }
    return &s;
  }
  void peer_data(FakeQuicStream& s, std::span<const uint8_t> data) {
    if (!closing_ && !data.empty() && s.peer_data(data)) {
      push({Event::kReadable, s.raw_id()});
    }
  }
  void peer_finish(FakeQuicStream& s) {
    if (!closing_ && s.peer_finish()) {
      push({Event::kReadable, s.raw_id()});
    }
  }
  void peer_reset(FakeQuicStream& s, uint64_t code) {
    if (!closing_ && s.peer_reset()) {
      push({Event::kReset, s.raw_id(), code});
    }
  }
  void peer_stop_sending(FakeQuicStream& s, uint64_t code) {
    if (!closing_ && s.peer_stop_sending()) {
      push({Event::kStopSending, s.raw_id(), code});
    }
  }
  void peer_datagram(std::span<const uint8_t> payload) {
    if (!closing_) {
      datagrams_.emplace_back(payload.begin(), payload.end());
      push({Event::kDatagram, 0});
    }
  }
  // MAX_STREAMS from the peer.
  void peer_raise_limits(uint64_t bidi, uint64_t uni) {
    if (!closing_) {
      limits_.local_bidi += bidi;
      limits_.local_uni += uni;
      push({Event::kStreamsAvailable, 0});
    }
  }
  // The network drained every send queue.
  void flush() {
    for (FakeQuicStream* s : order_) {
      if (s->flush() && !closing_) {
        push({Event::kWritable, s->raw_id()});
      }
    }
  }
  // CONNECTION_CLOSE from the peer, or the idle timeout.
  void peer_close(uint64_t code) { enter_closing(code, "peer closed"); }

  // Delivers every queued event, as the loop would after a packet. Events raised meanwhile are
  // delivered in the same call.
  void deliver() {
    while (!events_.empty()) {
      Event e = events_.front();
      events_.pop_front();
      deliver_one(e);
    }
  }

  // --- transport::Session ---
  void set_visitor(transport::SessionVisitor* visitor) override { visitor_ = visitor; }
  transport::Stream* open_bidi() override { return open(false); }
  transport::Stream* open_uni() override { return open(true); }
  void close(uint64_t code, std::string_view reason) override {
    if (!closing_) {
      closed_by_us_ = true;
    }
    enter_closing(code, reason);
  }
  std::string_view protocol() const override { return "h3"; }
  std::string_view path() const override { return "/"; }
  std::string_view peer() const override { return "fuzz:443"; }
  std::string_view kind() const override { return "quic"; }
  uint64_t bytes_sent() const override { return 0; }
  size_t unsent_bytes() const override {
    size_t n = 0;
    for (const FakeQuicStream* s : order_) {
      n += s->dead() ? 0 : s->buffered();
    }
    return n;
  }
  size_t max_datagram_size() const override { return closing_ ? 0 : limits_.max_datagram; }
  bool send_datagram(std::span<const uint8_t> payload) override {
    if (closing_ || payload.size() > limits_.max_datagram) {
      return false;
    }
    ++datagrams_sent_;
    return true;
  }

 private:
  struct Event {
    enum Kind {
      kIncoming,
      kReadable,
      kWritable,
      kReset,
      kStopSending,
      kDatagram,
      kStreamsAvailable,
      kClosed
    };
    Kind kind;
    transport::StreamId id = 0;
    uint64_t code = 0;
  };

  FakeQuicStream& add(transport::StreamId id, bool local) {
    streams_.push_back(std::make_unique<FakeQuicStream>(*this, id, local));
    FakeQuicStream& s = *streams_.back();
    order_.push_back(&s);
    if (!local) {
      peer_.push_back(&s);
    }
    return s;
  }
  FakeQuicStream* find(transport::StreamId id) {
    for (FakeQuicStream* s : order_) {
      if (!s->dead() && s->raw_id() == id) {
        return s;
      }
    }
    return nullptr;
  }
  transport::Stream* open(bool uni) {
    uint64_t& n = uni ? local_uni_ : local_bidi_;
    if (closing_ || n >= (uni ? limits_.local_uni : limits_.local_bidi)) {
      return nullptr;
    }
    return &add(4 * n++ + (uni ? 3 : 1), true);
  }
  void push(Event e) { events_.push_back(e); }
  void enter_closing(uint64_t code, std::string_view reason) {
    if (closing_) {
      return;
    }
    closing_ = true;
    close_code_ = code;
    close_reason_ = std::string(reason);
    events_.clear();  // nothing but on_closed() is delivered after a close
    datagrams_.clear();
    push({Event::kClosed, 0});
  }
  void deliver_one(const Event& e);

  Limits limits_;
  transport::SessionVisitor* visitor_ = nullptr;
  std::vector<std::unique_ptr<FakeQuicStream>> streams_;
  std::vector<FakeQuicStream*> order_;  // every stream, in creation order
  std::vector<FakeQuicStream*> peer_;
  std::deque<Event> events_;
  std::deque<std::vector<uint8_t>> datagrams_;
  uint64_t peer_bidi_ = 0;
  uint64_t peer_uni_ = 0;
  uint64_t local_bidi_ = 0;
  uint64_t local_uni_ = 0;
  size_t datagrams_sent_ = 0;
  bool closing_ = false;
  bool closed_delivered_ = false;
  bool closed_by_us_ = false;
  uint64_t close_code_ = 0;
  std::string close_reason_;
};

inline bool FakeQuicStream::closing() const {
  return conn_.is_closing();
}

inline void FakeQuic::deliver_one(const Event& e) {
  switch (e.kind) {
    case Event::kClosed: {
      if (closed_delivered_) {
        contract_bug("on_closed() twice");
      }
      closed_delivered_ = true;
      if (visitor_ != nullptr) {
        visitor_->on_closed(close_code_, close_reason_);
      }
      for (FakeQuicStream* s : order_) {
        s->poison();
      }
      return;
    }
    case Event::kDatagram: {
      if (datagrams_.empty()) {
        return;
      }
      std::vector<uint8_t> d = std::move(datagrams_.front());
      datagrams_.pop_front();
      if (visitor_ != nullptr) {
        visitor_->on_datagram(d);
      }
      return;
    }
    case Event::kStreamsAvailable:
      if (visitor_ != nullptr) {
        visitor_->on_streams_available();
      }
      return;
    default:
      break;
  }
  FakeQuicStream* s = find(e.id);
  if (s == nullptr) {
    return;
  }
  if (e.kind == Event::kIncoming) {
    if (visitor_ != nullptr) {
      visitor_->on_incoming_stream(*s);
    }
    return;
  }
  transport::StreamVisitor* v = s->visitor();
  if (v == nullptr) {
    return;
  }
  switch (e.kind) {
    case Event::kReadable:
      return v->on_readable();
    case Event::kWritable:
      return v->on_writable();
    case Event::kReset:
      return v->on_reset(e.code);
    case Event::kStopSending:
      return v->on_stop_sending(e.code);
    default:
      return;
  }
}

}  // namespace moqd::fuzz
