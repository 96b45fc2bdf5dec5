#pragma once
// Recording visitors for transport tests: a StreamVisitor that reads a stream as it arrives and
// remembers what happened to it, and a SessionVisitor that adopts every incoming stream with one
// and remembers datagrams, stream credit and the close. For tests of any transport::Session
// (QUIC, WebTransport); single-threaded; test only.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "transport/transport.h"

namespace moqd::test {

struct StreamRecorder : transport::StreamVisitor {
  explicit StreamRecorder(transport::Stream* s) : stream(s) {}
  void on_readable() override {
    ++readable;
    if (consume) {
      drain();
    }
  }
  // Takes everything buffered now.
  void drain() {
    if (stream == nullptr) {
      return;
    }
    auto p = stream->peek();
    data.append(reinterpret_cast<const char*>(p.data()), p.size());
    stream->consume(p.size());
    fin = fin || stream->is_fin_received();
  }
  void on_writable() override { ++writable; }
  void on_reset(uint64_t code) override { reset = code; }
  void on_stop_sending(uint64_t code) override { stop = code; }
  void on_sent() override {
    ++sent;
    sent_buffered.push_back(stream != nullptr ? stream->buffered() : 0);
  }

  transport::Stream* stream;  // null once the session closed
  bool consume = true;        // false: leave the bytes in the stream (drain() takes them)
  int readable = 0;
  int writable = 0;
  int sent = 0;
  std::vector<size_t> sent_buffered;  // buffered() at each on_sent()
  std::string data;
  bool fin = false;
  std::optional<uint64_t> reset;
  std::optional<uint64_t> stop;
};

struct SessionRecorder : transport::SessionVisitor {
  void on_incoming_stream(transport::Stream& s) override {
    incoming.push_back(std::make_unique<StreamRecorder>(&s));
    incoming.back()->consume = consume_new;
    s.set_visitor(incoming.back().get());
  }
  void on_streams_available() override { ++streams_available; }
  void on_datagram(std::span<const uint8_t> payload) override {
    datagrams.emplace_back(reinterpret_cast<const char*>(payload.data()), payload.size());
  }
  void on_closed(uint64_t c, std::string_view r) override {
    if (in_call != nullptr && *in_call) {
      closed_in_call = true;
    }
    ++closed;
    code = c;
    reason = std::string(r);
    for (auto& in : incoming) {
      in->stream = nullptr;
    }
  }
  // The recorder of the incoming stream `id`, or null.
  StreamRecorder* find(transport::StreamId id) {
    for (auto& in : incoming) {
      if (in->stream != nullptr && in->stream->id() == id) {
        return in.get();
      }
    }
    return nullptr;
  }

  std::vector<std::unique_ptr<StreamRecorder>> incoming;
  std::vector<std::string> datagrams;
  bool consume_new = true;  // the consume flag of new incoming streams' recorders
  int streams_available = 0;
  int closed = 0;
  uint64_t code = 0;
  std::string reason;
  const bool* in_call = nullptr;  // set while the test is inside a session call
  bool closed_in_call = false;    // on_closed came while *in_call was true (a contract breach)
};

}  // namespace moqd::test
