#pragma once
// RFC 6455 §5 frame codec, sans-I/O: frame headers in and out, masking, close payloads. The
// connection (ws_connection.h) streams payloads itself, so decoding stops at the header. Pure
// functions; any thread.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/bytes.h"
#include "base/codec.h"

namespace moqd::transport::websocket {

enum class Opcode : uint8_t {
  kContinuation = 0x0,
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xa,
};

inline bool is_control(Opcode op) { return (static_cast<uint8_t>(op) & 0x8) != 0; }

// Close status codes (RFC 6455 §7.4.1).
inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseGoingAway = 1001;
inline constexpr uint16_t kCloseProtocolError = 1002;
inline constexpr uint16_t kCloseUnsupportedData = 1003;
inline constexpr uint16_t kCloseNoStatus = 1005;  // never sent; reported when a close had no code
inline constexpr uint16_t kCloseAbnormal = 1006;  // never sent; reported when the pipe just ended
inline constexpr uint16_t kCloseInvalidPayload = 1007;
inline constexpr uint16_t kClosePolicy = 1008;
inline constexpr uint16_t kCloseTooBig = 1009;
inline constexpr uint16_t kCloseInternalError = 1011;

// Payload bytes a control frame may carry (RFC 6455 §5.5).
inline constexpr size_t kMaxControlPayload = 125;
// The longest frame header: 2 + 8 (64-bit length) + 4 (masking key).
inline constexpr size_t kMaxFrameHeaderSize = 14;

using MaskKey = std::array<uint8_t, 4>;

struct FrameHeader {
  bool fin = true;
  Opcode opcode = Opcode::kBinary;
  bool masked = false;
  MaskKey mask_key{};  // meaningful when masked
  uint64_t payload_size = 0;
};

// Decodes a header from the front of `data`: nullopt until the whole header is there, else the
// header and its size. Errors (ErrorCode::kProtocolViolation, WebSocket close 1002) for reserved
// bits set, an unknown opcode, a fragmented or over-long control frame, a 64-bit length with the
// top bit set, or a non-minimal length encoding.
ParseResult<FrameHeader> decode_frame_header(std::span<const uint8_t> data);

// Writes the header into `out` and returns its size (2 to 14 bytes).
size_t encode_frame_header(const FrameHeader& header, std::span<uint8_t, kMaxFrameHeaderSize> out);
// The header as its own buffer, for zero-copy sends of the payload after it.
Bytes encode_frame_header(const FrameHeader& header);

// XORs `data` with the key in place. `offset` is the position of data[0] within the frame's
// payload, so a payload can be unmasked piece by piece as it arrives.
void apply_mask(std::span<uint8_t> data, const MaskKey& key, uint64_t offset = 0);

// A whole frame (header + payload) in one buffer; masks a copy of the payload when `mask_key` is
// set. For control frames and for the client, whose sends must be masked anyway.
Bytes encode_frame(Opcode opcode, std::span<const uint8_t> payload, bool fin = true,
                   const MaskKey* mask_key = nullptr);

// The payload of a close frame (RFC 6455 §5.5.1): a 2-byte code then UTF-8 reason, cut to fit
// kMaxControlPayload.
std::string encode_close_payload(uint16_t code, std::string_view reason);

struct ClosePayload {
  uint16_t code = kCloseNoStatus;  // kCloseNoStatus when the payload was empty
  std::string_view reason;  // views the input
};
// Errors for a 1-byte payload, a code that may not be sent on the wire, or a non-UTF-8 reason.
Result<ClosePayload> decode_close_payload(std::span<const uint8_t> payload);

// Whether `code` may appear in a close frame (RFC 6455 §7.4).
bool is_valid_close_code(uint16_t code);

// Incremental UTF-8 validation (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), so a text
// message can be checked as its fragments arrive.
class Utf8Validator {
 public:
  // False as soon as the bytes so far cannot be the start of valid UTF-8.
  bool feed(std::span<const uint8_t> data);
  // True when the bytes so far are valid and end on a character boundary.
  bool is_complete() const { return ok_ && need_ == 0; }
  void reset() { *this = Utf8Validator(); }

 private:
  bool ok_ = true;
  int need_ = 0;  // continuation bytes still expected
  uint8_t lo_ = 0x80;  // allowed range of the next continuation byte
  uint8_t hi_ = 0xbf;
};

bool is_valid_utf8(std::span<const uint8_t> data);

}  // namespace moqd::transport::websocket
