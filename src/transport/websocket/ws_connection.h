#pragma once
// WebSocket connections (RFC 6455) over a transport::Pipe, sans-I/O: WsServerConnection answers
// the HTTP/1.1 request that opens a TCP connection (a plain response such as GET /health, or the
// upgrade), WsClientConnection (for the `moq` CLI) sends the upgrade. Once open, both carry whole
// binary messages for the stream multiplexer through the MessageChannel seam.
//
// Ownership and thread: the pipe's owner (the TCP connection, or a test) owns the connection and
// the pipe, on one worker thread, and routes the pipe's events to it. Destroy the connection after
// the pipe has closed, never from inside one of its callbacks. Timers hold a raw `this` and are
// cancelled by the destructor.
#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "transport/transport.h"
#include "transport/websocket/handshake.h"
#include "transport/websocket/http1.h"
#include "transport/websocket/message_channel.h"
#include "transport/websocket/ws_frame.h"

namespace moqd::transport::websocket {

struct WsConfig {
  // Largest message accepted, all fragments together, in bytes. Default 1 MiB plus room for the
  // multiplexer's own frame header; larger messages close the connection with 1009.
  size_t max_message_size = (size_t{1} << 20) + 4096;
  // Time allowed for the whole upgrade exchange (server: the complete request, against slowloris;
  // client: the 101). Default 10 s.
  Duration upgrade_timeout = std::chrono::seconds(10);
  // Time to wait for the peer's close frame after sending ours before dropping the pipe. Default 5 s.
  Duration close_timeout = std::chrono::seconds(5);
};

// The open-connection half shared by server and client: frame reading, message assembly, control
// frames, the close handshake and sending. Servers require masked frames from the peer and send
// unmasked ones; clients the reverse.
//
// Contract for the MessageHandler: on_message() only while open; on_channel_closed() exactly once,
// from a pipe event or a timer, never from inside a call the handler makes; after it, nothing.
class WsConnection : public transport::PipeHandler, public MessageChannel {
 public:
  ~WsConnection() override;
  WsConnection(const WsConnection&) = delete;
  WsConnection& operator=(const WsConnection&) = delete;

  // Receiver of messages and channel events; may be null (messages are then dropped).
  void set_message_handler(MessageHandler* handler) { handler_ = handler; }
  // True between the completed upgrade and the start of the close handshake.
  bool is_open() const { return phase_ == Phase::kOpen; }
  bool is_closed() const { return phase_ == Phase::kClosed; }
  // When the connection object was made, for session age in logs.
  Instant created_at() const { return created_at_; }

  // MessageChannel. Sends are dropped unless is_open().
  void send_message(std::span<const Bytes> parts) override;
  size_t buffered() const override { return pipe_.buffered(); }
  void close(uint16_t code, std::string_view reason) override;

  // transport::PipeHandler.
  void on_pipe_data(std::span<const uint8_t> data) final;
  void on_pipe_writable() final;
  void on_pipe_closed() final;

 protected:
  enum class Role { kServer, kClient };
  WsConnection(Role role, transport::Pipe& pipe, Timers& timers, const Clock& clock,
               const WsConfig& config);

  // Consumes handshake bytes while the connection is not yet open; returns what it did not use
  // (frames that followed the handshake in the same read).
  virtual std::span<const uint8_t> on_handshake_data(std::span<const uint8_t> data) = 0;
  // The handshake is done: cancels the upgrade timer, and frames are read from now on.
  void open();
  // Ends the connection before it opened: closes the pipe (after what was sent) and reports.
  void end_handshake(uint16_t code, std::string_view reason);
  void start_upgrade_timer(std::function<void()> on_expiry);

  transport::Pipe& pipe_;
  Timers& timers_;
  const WsConfig config_;

 private:
  enum class Phase { kHandshake, kOpen, kClosing, kClosed };

  void read_frames(std::span<const uint8_t> data);
  std::span<const uint8_t> read_header(std::span<const uint8_t> data);
  std::span<const uint8_t> read_payload(std::span<const uint8_t> data);
  void begin_frame(const FrameHeader& header);
  void end_frame();
  void end_message();
  void on_control_frame();
  void on_close_frame();
  void send_frame(Opcode opcode, std::span<const uint8_t> payload);
  // Protocol error by the peer: our close frame with `code`, then the pipe goes (RFC 6455 §7.1.7).
  void fail(uint16_t code, const char* reason);
  // Reports on_channel_closed() once and stops every timer.
  void finish(uint16_t code, std::string_view reason);

  const Role role_;
  const Instant created_at_;
  MessageHandler* handler_ = nullptr;
  Phase phase_ = Phase::kHandshake;
  TimerId upgrade_timer_ = 0;
  TimerId close_timer_ = 0;
  TimerId report_timer_ = 0;
  bool reported_ = false;

  std::array<uint8_t, kMaxFrameHeaderSize> header_buf_{};
  size_t header_len_ = 0;
  bool in_frame_ = false;  // a header was read; its payload is arriving
  FrameHeader frame_;
  uint64_t frame_received_ = 0;
  std::vector<uint8_t> control_;
  bool in_message_ = false;  // a data message is started and not yet finished
  Opcode message_opcode_ = Opcode::kBinary;
  std::vector<uint8_t> message_;
  Utf8Validator utf8_;
};

// --- server ---

// A complete plain HTTP response. The connection adds Content-Type, Content-Length,
// Access-Control-Allow-Origin: * and Connection: close, then closes after sending it.
struct PlainResponse {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  HttpHeaders extra_headers;
};

// Upgrade to WebSocket, echoing this subprotocol (from select_subprotocol()).
struct AcceptUpgrade {
  Subprotocol subprotocol;
};

using RequestDecision = std::variant<PlainResponse, AcceptUpgrade>;
// Decides what to do with the connection's request; called once, from on_pipe_data(). May call
// set_message_handler() on the connection.
using RequestHandler = std::function<RequestDecision(const HttpRequest&)>;

// The decision for a request that should become a WebSocket: AcceptUpgrade with the subprotocol
// select_subprotocol(request, acceptable) picks, or 400/426 when the request is not a valid upgrade
// or offers nothing acceptable.
RequestDecision decide_upgrade(const HttpRequest& request, std::span<const std::string> acceptable);

// One HTTP request, then either a plain response and close, or WebSocket. A request that does not
// parse gets 400 (431 when too large); one that does not complete within upgrade_timeout gets 408
// and the pipe is closed.
class WsServerConnection final : public WsConnection {
 public:
  WsServerConnection(transport::Pipe& pipe, Timers& timers, const Clock& clock, WsConfig config,
                     RequestHandler handler);

  // Called once the 101 is queued and before any frame is read, so the owner can build the
  // multiplexer and set the message handler here.
  void set_open_callback(std::function<void()> fn) { on_open_ = std::move(fn); }
  // Called when a plain HTTP response is sent (status, and why), e.g. to log refusals.
  void set_response_callback(std::function<void(int status, const char* reason)> fn) {
    on_response_ = std::move(fn);
  }

  // The request, once it has arrived (empty before).
  const HttpRequest& request() const { return request_; }
  // "/path?query", as the client sent it.
  std::string target() const { return request_.target(); }
  // The subprotocol selected by the upgrade; empty token before it.
  const Subprotocol& subprotocol() const { return subprotocol_; }

 private:
  std::span<const uint8_t> on_handshake_data(std::span<const uint8_t> data) override;
  void on_request();
  void upgrade(const Subprotocol& subprotocol);
  void respond_and_close(const PlainResponse& response, const char* reason);

  RequestHandler request_handler_;
  std::function<void()> on_open_;
  std::function<void(int, const char*)> on_response_;
  HttpHeadReader head_;
  HttpRequest request_;
  Subprotocol subprotocol_;
};

// --- client ---

struct WsClientConfig {
  std::string host;  // Host header, e.g. "localhost:4443"
  std::string target = "/";  // path and query
  // Offered in Sec-WebSocket-Protocol, in preference order.
  std::vector<std::string> protocols = {"qmux-00", "webtransport"};
  WsConfig ws;
};

// The `moq` CLI's side: sends the upgrade request on start(), checks the 101 (status, accept key,
// a subprotocol it offered), then carries messages with masked frames. A failed handshake closes
// the pipe and reports on_channel_closed(1002, detail).
class WsClientConnection final : public WsConnection {
 public:
  WsClientConnection(transport::Pipe& pipe, Timers& timers, const Clock& clock,
                     WsClientConfig config);

  // Sends the request and starts the upgrade timer. Call once.
  void start();
  // Called once the 101 is accepted, with the selected subprotocol, before any message.
  void set_open_callback(std::function<void(std::string_view subprotocol)> fn) {
    on_open_ = std::move(fn);
  }
  const std::string& subprotocol() const { return subprotocol_; }

 private:
  std::span<const uint8_t> on_handshake_data(std::span<const uint8_t> data) override;
  void on_response();

  WsClientConfig client_config_;
  std::function<void(std::string_view)> on_open_;
  std::string key_;
  HttpHeadReader head_;
  std::string subprotocol_;
};

}  // namespace moqd::transport::websocket
