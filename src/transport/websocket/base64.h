#pragma once
// Standard base64 (RFC 4648 §4, with padding) for the WebSocket handshake's Sec-WebSocket-Key and
// Sec-WebSocket-Accept. Pure functions; any thread.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace moqd::transport::websocket {

std::string base64_encode(std::span<const uint8_t> data);
// Strict: the length must be a multiple of 4, padding only at the end, no whitespace, and the
// unused bits of the last symbol must be zero. Returns nullopt on anything else.
std::optional<std::vector<uint8_t>> base64_decode(std::string_view text);

}  // namespace moqd::transport::websocket
