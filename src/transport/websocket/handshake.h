#pragma once
// The WebSocket opening handshake (RFC 6455 §4) as pure functions: checking an upgrade request,
// choosing the stream-multiplexing subprotocol, building the 101 and the client's request, and
// checking the 101 on the client side. Any thread.
#include "transport/websocket/message_channel.h"
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "transport/websocket/http1.h"
#include "transport/websocket/message_channel.h"  // Framing

namespace moqd::transport::websocket {

// base64(SHA-1(key + the RFC 6455 GUID)).
std::string websocket_accept(std::string_view key);

// The multiplexer framing a subprotocol selects.

struct Subprotocol {
  std::string token;  // echoed in Sec-WebSocket-Protocol, e.g. "qmux-00" or "webtransport.moql"
  Framing framing = Framing::kQmux00;
  std::string app_protocol;  // after "qmux-00." / "webtransport."; empty when unprefixed
};

// Parses one token: "qmux-NN" or "webtransport", optionally followed by ".<app protocol>", for a
// framing this transport implements; nullopt for anything else.
std::optional<Subprotocol> parse_subprotocol(std::string_view token);
// Picks from the request's Sec-WebSocket-Protocol offers (all header lines) by the server's
// preference: the first token of `acceptable` (most preferred first) that was offered and whose
// framing is implemented. The caller decides which app protocols are acceptable; this layer knows
// only framings. Error (kUnsupported) when no offer is acceptable.
Result<Subprotocol> select_subprotocol(const HttpRequest& request,
                                       std::span<const std::string> acceptable);
// The request's offers, joined with ", " (for logs).
std::string offered_subprotocols(const HttpRequest& request);

// Whether the request asks for a WebSocket upgrade at all (Upgrade: websocket), so a router can
// tell upgrades from plain GETs before validating them.
bool is_websocket_upgrade(const HttpRequest& request);

// Why an upgrade request is refused: the HTTP status to answer (400, or 426 for a version other
// than 13) and a detail for logs.
struct UpgradeRefusal {
  int status = 400;
  const char* detail = "";
};
// Checks RFC 6455 §4.2.1: GET, HTTP/1.1, Upgrade: websocket, Connection containing "upgrade",
// Sec-WebSocket-Version 13, and a Sec-WebSocket-Key that decodes to 16 bytes.
tl::expected<void, UpgradeRefusal> validate_upgrade(const HttpRequest& request);

// The 101 for a validated request, selecting `subprotocol` (omitted when empty).
std::string write_upgrade_response(const HttpRequest& request, std::string_view subprotocol);

// A fresh random Sec-WebSocket-Key (16 random bytes, base64).
std::string make_websocket_key();
// The client's upgrade request for `target` ("/path?query") on `host` ("example.com:443").
std::string write_upgrade_request(std::string_view host, std::string_view target,
                                  std::string_view key,
                                  std::span<const std::string> protocols);
// Checks the server's answer to write_upgrade_request: 101, Upgrade, Connection, the accept value
// for `key`, and a subprotocol from `offered` (required when anything was offered). Returns the
// selected subprotocol ("" when none was offered). Errors carry a detail for logs.
Result<std::string> validate_upgrade_response(const HttpResponse& response, std::string_view key,
                                              std::span<const std::string> offered);

}  // namespace moqd::transport::websocket
