#pragma once
// The seam between WebSocket (RFC 6455 messages over a byte pipe) and the stream multiplexer that
// runs on top of it (qmux-00 or the legacy "webtransport" framing). A MessageChannel carries whole
// binary messages in both directions. One worker thread.
#include <cstdint>
#include <span>
#include <string_view>

#include "base/bytes.h"

namespace moqd::transport::websocket {

// How streams are framed inside WebSocket messages: draft-ietf-quic-qmux-00, -01 or -02
// (protocol/NET-0.3.md §2), or the legacy "webtransport" framing of @moq/web-transport-ws
// (protocol/README.md §4).
enum class Framing { kQmux00, kQmux01, kQmux02, kWebTransport };

// QUIC frames, varint types and flow control (every qmux draft).
inline bool is_qmux(Framing f) { return f != Framing::kWebTransport; }
// A message is a record of one or more frames (qmux-01 and later); else exactly one frame.
inline bool has_records(Framing f) { return f == Framing::kQmux01 || f == Framing::kQmux02; }
// "qmux-00", "qmux-01", "qmux-02", "webtransport".
inline std::string_view framing_name(Framing f) {
  switch (f) {
    case Framing::kQmux00: return "qmux-00";
    case Framing::kQmux01: return "qmux-01";
    case Framing::kQmux02: return "qmux-02";
    case Framing::kWebTransport: break;
  }
  return "webtransport";
}

// The sending half, implemented by the WebSocket connection.
class MessageChannel {
 public:
  virtual ~MessageChannel() = default;
  // Sends one binary message made of `parts` concatenated, without copying them.
  virtual void send_message(std::span<const Bytes> parts) = 0;
  // Bytes queued but not yet accepted by the socket (for pacing).
  virtual size_t buffered() const = 0;
  // Starts the close handshake (close frame with `code` and `reason`), then closes the pipe.
  virtual void close(uint16_t code, std::string_view reason) = 0;
};

// The receiving half, implemented by the multiplexer.
class MessageHandler {
 public:
  virtual ~MessageHandler() = default;
  // One complete binary message (continuation frames already joined). Text messages are not
  // delivered. The span is valid only during the call.
  virtual void on_message(std::span<const uint8_t> message) = 0;
  // buffered() fell below the low-water mark.
  virtual void on_channel_writable() = 0;
  // The channel is gone (close handshake done, peer vanished, or protocol error). Final.
  virtual void on_channel_closed(uint16_t code, std::string_view reason) = 0;
};

}  // namespace moqd::transport::websocket
