#pragma once
// Doubles shared by the stateful fuzz targets (mux_fuzzer, ws_fuzzer): a MessageChannel that only
// counts what is sent, and a SessionVisitor that accepts every stream, reads and consumes
// everything, and lets the input drive the application side (open, write, finish, reset, stop,
// release) within the transport::Stream contract. Fuzz targets link only the libraries, so these
// live here rather than in tests/testing. Single-threaded.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "transport/transport.h"
#include "transport/websocket/message_channel.h"

namespace moqd::fuzz {

// Reads the fuzz input front to back; past the end every read yields 0.
class InputCursor {
 public:
  explicit InputCursor(std::span<const uint8_t> data) : data_(data) {}
  bool empty() const { return pos_ >= data_.size(); }
  uint8_t u8() { return empty() ? 0 : data_[pos_++]; }
  uint16_t u16() {
    uint16_t hi = u8();  // sequenced: the operands of | are evaluated in no fixed order
    return static_cast<uint16_t>((hi << 8) | u8());
  }
  std::span<const uint8_t> bytes(size_t n) {
    size_t take = std::min(n, data_.size() - pos_);
    auto out = data_.subspan(pos_, take);
    pos_ += take;
    return out;
  }
  std::span<const uint8_t> rest() { return bytes(data_.size() - pos_); }

 private:
  std::span<const uint8_t> data_;
  size_t pos_ = 0;
};

// A MessageChannel that drops what is sent but keeps buffered() honest until drain().
class CountingChannel final : public transport::websocket::MessageChannel {
 public:
  void send_message(std::span<const Bytes> parts) override {
    for (const Bytes& p : parts) {
      buffered_ += p.size();
    }
    ++messages_;
  }
  size_t buffered() const override { return buffered_; }
  void close(uint16_t code, std::string_view reason) override {
    if (!close_code_) {
      close_code_ = code;
      close_reason_ = std::string(reason);
    }
  }

  void drain() { buffered_ = 0; }
  std::optional<uint16_t> close_code() const { return close_code_; }
  const std::string& close_reason() const { return close_reason_; }

 private:
  size_t buffered_ = 0;
  size_t messages_ = 0;
  std::optional<uint16_t> close_code_;
  std::string close_reason_;
};

// Accepts every incoming stream and reads it dry. Stream pointers are dropped on release() and
// on_closed(), as the contract requires.
class DrainingVisitor final : public transport::SessionVisitor {
 public:
  explicit DrainingVisitor(bool server) : server_(server) {}

  void set_session(transport::Session* session) { session_ = session; }
  // When set, a stream whose receive side is done is released from inside its callback.
  void set_release_in_callback(bool on) { release_in_callback_ = on; }
  bool closed() const { return closed_; }

  void on_incoming_stream(transport::Stream& s) override { adopt(s); }
  void on_streams_available() override {}
  void on_closed(uint64_t, std::string_view) override {
    closed_ = true;
    for (auto& [id, e] : streams_) {
      e->stream = nullptr;
      graveyard_.push_back(std::move(e));
    }
    streams_.clear();
  }

  // One application action picked by `op`, with arguments from `in`.
  void act(uint8_t op, InputCursor& in) {
    if (closed_ || session_ == nullptr) {
      return;
    }
    switch (op % 9) {
      case 0: return open(false, in);
      case 1: return open(true, in);
      case 2: return with_stream(in, [&](Entry& e) { write(e, in.u16() % 20000); });
      case 3: return with_stream(in, [&](Entry& e) { finish(e); });
      case 4: return with_stream(in, [&](Entry& e) { reset(e, in.u8()); });
      case 5: return with_stream(in, [&](Entry& e) { stop(e, in.u8()); });
      case 6: return with_stream(in, [&](Entry& e) { release(e); });
      case 7: return with_stream(in, [&](Entry& e) { e.stream->set_send_order(in.u8()); });
      default: return session_->close(in.u8(), "fuzz close");
    }
  }

  // Frees visitors of streams released from inside their own callbacks.
  void collect() { graveyard_.clear(); }

 private:
  struct Entry final : transport::StreamVisitor {
    DrainingVisitor* owner = nullptr;
    transport::Stream* stream = nullptr;
    bool local = false;
    bool send_done = false;  // finished or reset by us
    bool recv_stopped = false;

    bool has_send() const { return !stream->is_uni() || local; }
    bool has_recv() const { return !stream->is_uni() || !local; }

    void on_readable() override { owner->drain(*this); }
    void on_writable() override {}
    void on_reset(uint64_t) override { owner->maybe_release(*this); }
    void on_stop_sending(uint64_t) override { send_done = true; }
  };

  template <class Fn>
  void with_stream(InputCursor& in, Fn fn) {
    uint8_t pick = in.u8();
    if (streams_.empty()) {
      return;
    }
    auto it = streams_.begin();
    std::advance(it, pick % streams_.size());
    fn(*it->second);
  }

  Entry& adopt(transport::Stream& s) {
    auto e = std::make_unique<Entry>();
    e->owner = this;
    e->stream = &s;
    e->local = transport::is_server_initiated(s.id()) == server_;
    s.set_visitor(e.get());
    Entry& ref = *e;
    streams_[s.id()] = std::move(e);
    return ref;
  }

  void open(bool uni, InputCursor& in) {
    transport::Stream* s = uni ? session_->open_uni() : session_->open_bidi();
    if (s == nullptr) {
      return;
    }
    Entry& e = adopt(*s);
    write(e, in.u8());
  }

  void drain(Entry& e) {
    if (!e.has_recv() || e.recv_stopped) {
      return;
    }
    auto p = e.stream->peek();
    e.stream->consume(p.size());
    maybe_release(e);
  }

  void maybe_release(Entry& e) {
    if (release_in_callback_ && e.stream->is_uni() && !e.local) {
      release(e);
    }
  }

  void write(Entry& e, size_t n) {
    if (!e.has_send() || e.send_done) {
      return;
    }
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = static_cast<uint8_t>(i);
    }
    e.stream->write(Bytes::from(v));
  }
  void finish(Entry& e) {
    if (e.has_send() && !e.send_done) {
      e.send_done = true;
      e.stream->finish();
    }
  }
  void reset(Entry& e, uint64_t code) {
    if (e.has_send() && !e.send_done) {
      e.send_done = true;
      e.stream->reset(code);
    }
  }
  void stop(Entry& e, uint64_t code) {
    if (e.has_recv() && !e.recv_stopped) {
      e.recv_stopped = true;
      e.stream->stop_sending(code);
    }
  }
  void release(Entry& e) {
    auto it = streams_.find(e.stream->id());
    e.stream->release();
    e.stream = nullptr;
    graveyard_.push_back(std::move(it->second));
    streams_.erase(it);
  }

  const bool server_;
  transport::Session* session_ = nullptr;
  bool release_in_callback_ = false;
  bool closed_ = false;
  std::map<transport::StreamId, std::unique_ptr<Entry>> streams_;
  std::vector<std::unique_ptr<Entry>> graveyard_;
};

}  // namespace moqd::fuzz
