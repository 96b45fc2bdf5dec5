#pragma once
// Typed errors shared by every layer. ErrorCode values are the moq-lite wire codes (the same numbers
// moq-dev's relay uses), so an Error maps onto RESET_STREAM, STOP_SENDING and session-close codes
// without a translation table. Transport-level codes (WebSocket close codes, qmux 1002) live in
// their own layer.
#include <cstdint>
#include <string_view>

#include <tl/expected.hpp>

namespace moqd {

enum class ErrorCode : uint32_t {
  kCancel = 0,
  kRequiredExtension = 1,
  kOld = 2,  // the group was dropped because the subscriber fell behind
  kTimeout = 3,  // also: a reader made no progress for --stall-timeout
  kTransport = 4,
  kDecode = 5,
  kUnauthorized = 6,
  kVersion = 9,
  kUnexpectedStream = 10,
  kBoundsExceeded = 11,
  kDuplicate = 12,
  kNotFound = 13,
  kWrongSize = 14,
  kProtocolViolation = 15,
  kUnexpectedMessage = 16,
  kUnsupported = 17,
  kEncode = 18,
  kTooManyParameters = 19,
  kInvalidRole = 20,
  kUnknownAlpn = 21,
  kDropped = 24,
  kClosed = 25,
  kCacheFull = 26,
  kGoingAway = 27,  // moqd is draining (SIGTERM)
};

// Name of a code for logs ("decode", "not_found", ...). Never null.
const char* error_code_name(ErrorCode code);

// An error: a wire code plus a static, human-readable detail for logs. Cheap to copy; never
// allocates.
struct Error {
  ErrorCode code = ErrorCode::kProtocolViolation;
  const char* detail = "";

  friend bool operator==(const Error& a, const Error& b) { return a.code == b.code; }
};

inline Error make_error(ErrorCode code, const char* detail) { return Error{code, detail}; }

template <class T, class E = Error>
using Result = tl::expected<T, E>;

using Status = Result<void>;

inline tl::unexpected<Error> fail(ErrorCode code, const char* detail) {
  return tl::unexpected<Error>(Error{code, detail});
}

}  // namespace moqd
