#include "transport/websocket/ws_connection.h"

#include <algorithm>
#include <cstdlib>

#include <gnutls/crypto.h>

namespace moqd::transport::websocket {
namespace {

// A message buffer grown past this is released after delivery, so idle connections stay small.
constexpr size_t kKeptMessageCapacity = 64 * 1024;

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

MaskKey random_mask_key() {
  MaskKey key{};
  if (gnutls_rnd(GNUTLS_RND_NONCE, key.data(), key.size()) != 0) {
    std::abort();  // the system RNG failing is not survivable
  }
  return key;
}

}  // namespace

WsConnection::WsConnection(Role role, transport::Pipe& pipe, Timers& timers, const Clock& clock,
                           const WsConfig& config)
    : pipe_(pipe), timers_(timers), config_(config), role_(role), created_at_(clock.now()) {}

WsConnection::~WsConnection() {
  timers_.cancel(upgrade_timer_);
  timers_.cancel(close_timer_);
  timers_.cancel(report_timer_);
}

void WsConnection::start_upgrade_timer(std::function<void()> on_expiry) {
  upgrade_timer_ = timers_.schedule(config_.upgrade_timeout, [this, fn = std::move(on_expiry)] {
    upgrade_timer_ = 0;
    if (phase_ == Phase::kHandshake) {
      fn();
    }
  });
}

void WsConnection::open() {
  timers_.cancel(upgrade_timer_);
  upgrade_timer_ = 0;
  phase_ = Phase::kOpen;
}

void WsConnection::end_handshake(uint16_t code, std::string_view reason) {
  pipe_.close();
  finish(code, reason);
}

void WsConnection::send_message(std::span<const Bytes> parts) {
  if (phase_ != Phase::kOpen) {
    return;
  }
  FrameHeader h;
  h.opcode = Opcode::kBinary;
  for (const Bytes& p : parts) {
    h.payload_size += p.size();
  }
  if (role_ == Role::kServer) {
    pipe_.send(encode_frame_header(h));
    for (const Bytes& p : parts) {
      if (!p.empty()) {
        pipe_.send(p);
      }
    }
    return;
  }
  // RFC 6455 §5.3: every client frame is masked, so the payload is copied once.
  std::vector<uint8_t> payload;
  payload.reserve(h.payload_size);
  for (const Bytes& p : parts) {
    payload.insert(payload.end(), p.data(), p.data() + p.size());
  }
  send_frame(Opcode::kBinary, payload);
}

void WsConnection::send_frame(Opcode opcode, std::span<const uint8_t> payload) {
  if (role_ == Role::kClient) {
    MaskKey key = random_mask_key();
    pipe_.send(encode_frame(opcode, payload, true, &key));
  } else {
    pipe_.send(encode_frame(opcode, payload));
  }
}

void WsConnection::close(uint16_t code, std::string_view reason) {
  switch (phase_) {
    case Phase::kHandshake:
      pipe_.close();
      phase_ = Phase::kClosed;
      // Reported from the loop: the caller must not be called back from inside close().
      report_timer_ = timers_.schedule(Duration::zero(), [this, code, r = std::string(reason)] {
        report_timer_ = 0;
        finish(code, r);
      });
      return;
    case Phase::kOpen:
      send_frame(Opcode::kClose, as_bytes(encode_close_payload(code, reason)));
      phase_ = Phase::kClosing;
      close_timer_ = timers_.schedule(config_.close_timeout, [this, code] {
        close_timer_ = 0;
        pipe_.close();
        finish(code, "close handshake timed out");
      });
      return;
    case Phase::kClosing:
    case Phase::kClosed:
      return;
  }
}

void WsConnection::on_pipe_data(std::span<const uint8_t> data) {
  if (phase_ == Phase::kHandshake) {
    data = on_handshake_data(data);
  }
  if (phase_ == Phase::kOpen || phase_ == Phase::kClosing) {
    read_frames(data);
  }
}

void WsConnection::on_pipe_writable() {
  if (phase_ == Phase::kOpen && handler_ != nullptr) {
    handler_->on_channel_writable();
  }
}

void WsConnection::on_pipe_closed() {
  phase_ = Phase::kClosed;
  finish(kCloseAbnormal, "connection lost");
}

void WsConnection::fail(uint16_t code, const char* reason) {
  if (phase_ == Phase::kOpen) {
    send_frame(Opcode::kClose, as_bytes(encode_close_payload(code, reason)));
  }
  pipe_.close();
  finish(code, reason);
}

void WsConnection::finish(uint16_t code, std::string_view reason) {
  phase_ = Phase::kClosed;
  if (reported_) {
    return;
  }
  reported_ = true;
  timers_.cancel(upgrade_timer_);
  timers_.cancel(close_timer_);
  timers_.cancel(report_timer_);
  upgrade_timer_ = close_timer_ = report_timer_ = 0;
  if (handler_ != nullptr) {
    handler_->on_channel_closed(code, reason);
  }
}

// --- reading frames (RFC 6455 §5) ---

void WsConnection::read_frames(std::span<const uint8_t> data) {
  while (!data.empty() && (phase_ == Phase::kOpen || phase_ == Phase::kClosing)) {
    data = in_frame_ ? read_payload(data) : read_header(data);
  }
}

std::span<const uint8_t> WsConnection::read_header(std::span<const uint8_t> data) {
  size_t take = std::min(header_buf_.size() - header_len_, data.size());
  std::copy_n(data.begin(), take, header_buf_.begin() + static_cast<std::ptrdiff_t>(header_len_));
  auto parsed = decode_frame_header(std::span<const uint8_t>(header_buf_.data(), header_len_ + take));
  if (!parsed) {
    fail(kCloseProtocolError, parsed.error().detail);
    return {};
  }
  if (!*parsed) {
    header_len_ += take;
    return data.subspan(take);
  }
  size_t used = (*parsed)->consumed - header_len_;
  header_len_ = 0;
  begin_frame((*parsed)->value);
  return data.subspan(used);
}

void WsConnection::begin_frame(const FrameHeader& header) {
  bool want_masked = role_ == Role::kServer;
  if (header.masked != want_masked) {
    // RFC 6455 §5.1: clients mask every frame, servers none.
    return fail(kCloseProtocolError, want_masked ? "unmasked client frame" : "masked server frame");
  }
  bool control = is_control(header.opcode);
  bool continuation = header.opcode == Opcode::kContinuation;
  if (!control && continuation != in_message_) {
    return fail(kCloseProtocolError, "unexpected websocket continuation state");
  }
  if (!control && header.payload_size > config_.max_message_size - message_.size()) {
    return fail(kCloseTooBig, "websocket message too large");
  }
  if (!control && !continuation) {
    in_message_ = true;
    message_opcode_ = header.opcode;
    utf8_.reset();
  }
  frame_ = header;
  frame_received_ = 0;
  in_frame_ = true;
  if (header.payload_size == 0) {
    end_frame();
  }
}

std::span<const uint8_t> WsConnection::read_payload(std::span<const uint8_t> data) {
  size_t take = static_cast<size_t>(
      std::min<uint64_t>(frame_.payload_size - frame_received_, data.size()));
  std::vector<uint8_t>& dest = is_control(frame_.opcode) ? control_ : message_;
  size_t start = dest.size();
  dest.insert(dest.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(take));
  auto fresh = std::span<uint8_t>(dest).subspan(start);
  apply_mask(fresh, frame_.mask_key, frame_received_);
  frame_received_ += take;
  if (!is_control(frame_.opcode) && message_opcode_ == Opcode::kText && !utf8_.feed(fresh)) {
    fail(kCloseInvalidPayload, "text message not utf-8");
    return {};
  }
  if (frame_received_ == frame_.payload_size) {
    end_frame();
  }
  return data.subspan(take);
}

void WsConnection::end_frame() {
  in_frame_ = false;
  if (is_control(frame_.opcode)) {
    on_control_frame();
    control_.clear();
  } else if (frame_.fin) {
    end_message();
  }
}

void WsConnection::end_message() {
  in_message_ = false;
  if (message_opcode_ == Opcode::kText) {
    // Text is not part of the multiplexer's protocol: validated, then dropped.
    if (!utf8_.is_complete()) {
      return fail(kCloseInvalidPayload, "text message not utf-8");
    }
  } else if (phase_ == Phase::kOpen && handler_ != nullptr) {
    handler_->on_message(message_);
  }
  message_.clear();
  if (message_.capacity() > kKeptMessageCapacity) {
    message_.shrink_to_fit();
  }
}

void WsConnection::on_control_frame() {
  switch (frame_.opcode) {
    case Opcode::kPing:
      if (phase_ == Phase::kOpen) {
        send_frame(Opcode::kPong, control_);
      }
      return;
    case Opcode::kClose:
      return on_close_frame();
    default:
      return;  // pong: nothing to do, we send no pings
  }
}

// RFC 6455 §5.5.1 and §7: answer a close with a close (unless it answers ours), then the pipe goes;
// the server closes TCP first.
void WsConnection::on_close_frame() {
  auto payload = decode_close_payload(control_);
  if (!payload) {
    uint16_t code = payload.error().code == ErrorCode::kDecode ? kCloseInvalidPayload
                                                                 : kCloseProtocolError;
    return fail(code, payload.error().detail);
  }
  std::string reason(payload->reason);
  if (phase_ == Phase::kOpen) {
    std::string echo = payload->code == kCloseNoStatus ? "" : encode_close_payload(payload->code, "");
    send_frame(Opcode::kClose, as_bytes(echo));
  }
  pipe_.close();
  finish(payload->code, reason);
}

// --- server ---

namespace {

PlainResponse refusal(int status, std::string body) {
  PlainResponse r;
  r.status = status;
  r.body = std::move(body);
  if (status == 426) {
    r.extra_headers.push_back({"Sec-WebSocket-Version", "13"});
  }
  return r;
}

}  // namespace

RequestDecision decide_upgrade(const HttpRequest& request, std::span<const std::string> acceptable) {
  if (auto valid = validate_upgrade(request); !valid) {
    return refusal(valid.error().status, valid.error().detail);
  }
  auto subprotocol = select_subprotocol(request, acceptable);
  if (!subprotocol) {
    return refusal(400, subprotocol.error().detail);
  }
  return AcceptUpgrade{std::move(*subprotocol)};
}

WsServerConnection::WsServerConnection(transport::Pipe& pipe, Timers& timers, const Clock& clock,
                                       WsConfig config, RequestHandler handler)
    : WsConnection(Role::kServer, pipe, timers, clock, config),
      request_handler_(std::move(handler)) {
  start_upgrade_timer([this] {
    respond_and_close(refusal(408, "request timeout"), "http request timed out");
  });
}

std::span<const uint8_t> WsServerConnection::on_handshake_data(std::span<const uint8_t> data) {
  auto taken = head_.feed(data);
  if (!taken) {
    bool too_large = taken.error().code == ErrorCode::kBoundsExceeded;
    respond_and_close(too_large ? refusal(431, "request head too large") : refusal(400, "bad request"),
                      taken.error().detail);
    return {};
  }
  if (head_.is_complete()) {
    on_request();
  }
  return data.subspan(*taken);
}

void WsServerConnection::on_request() {
  auto parsed = parse_http_request_head(head_.head());
  if (!parsed) {
    return respond_and_close(refusal(400, "bad request"), parsed.error().detail);
  }
  request_ = std::move(*parsed);
  RequestDecision decision = request_handler_(request_);
  if (auto* plain = std::get_if<PlainResponse>(&decision)) {
    return respond_and_close(*plain, "plain http response");
  }
  // The handler chose to upgrade; the request must still be a valid one.
  if (auto valid = validate_upgrade(request_); !valid) {
    return respond_and_close(refusal(valid.error().status, valid.error().detail),
                             valid.error().detail);
  }
  upgrade(std::get<AcceptUpgrade>(decision).subprotocol);
}

void WsServerConnection::upgrade(const Subprotocol& subprotocol) {
  subprotocol_ = subprotocol;
  pipe_.send(Bytes::copy(write_upgrade_response(request_, subprotocol_.token)));
  open();
  if (on_open_) {
    on_open_();
  }
}

void WsServerConnection::respond_and_close(const PlainResponse& plain, const char* reason) {
  HttpResponse resp;
  resp.status = plain.status;
  resp.body = plain.body;
  resp.headers = {
      {"Content-Type", plain.content_type},
      {"Access-Control-Allow-Origin", "*"},
      {"Connection", "close"},
  };
  resp.headers.insert(resp.headers.end(), plain.extra_headers.begin(), plain.extra_headers.end());
  pipe_.send(Bytes::copy(write_http_response(resp)));
  if (on_response_) {
    on_response_(plain.status, reason);
  }
  end_handshake(kCloseNormal, reason);
}

// --- client ---

WsClientConnection::WsClientConnection(transport::Pipe& pipe, Timers& timers, const Clock& clock,
                                       WsClientConfig config)
    : WsConnection(Role::kClient, pipe, timers, clock, config.ws),
      client_config_(std::move(config)) {}

void WsClientConnection::start() {
  key_ = make_websocket_key();
  pipe_.send(Bytes::copy(write_upgrade_request(client_config_.host, client_config_.target, key_,
                                               client_config_.protocols)));
  start_upgrade_timer([this] { end_handshake(kCloseAbnormal, "websocket upgrade timed out"); });
}

std::span<const uint8_t> WsClientConnection::on_handshake_data(std::span<const uint8_t> data) {
  if (key_.empty()) {
    end_handshake(kCloseProtocolError, "data before the upgrade request");
    return {};
  }
  auto taken = head_.feed(data);
  if (!taken) {
    end_handshake(kCloseProtocolError, taken.error().detail);
    return {};
  }
  if (head_.is_complete()) {
    on_response();
  }
  return data.subspan(*taken);
}

void WsClientConnection::on_response() {
  auto parsed = parse_http_response_head(head_.head());
  if (!parsed) {
    return end_handshake(kCloseProtocolError, parsed.error().detail);
  }
  auto selected = validate_upgrade_response(*parsed, key_, client_config_.protocols);
  if (!selected) {
    return end_handshake(kCloseProtocolError, selected.error().detail);
  }
  subprotocol_ = std::move(*selected);
  open();
  if (on_open_) {
    on_open_(subprotocol_);
  }
}

}  // namespace moqd::transport::websocket
