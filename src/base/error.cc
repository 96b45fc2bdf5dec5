#include "base/error.h"

namespace moqd {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancel: return "cancel";
    case ErrorCode::kRequiredExtension: return "required_extension";
    case ErrorCode::kOld: return "old";
    case ErrorCode::kTimeout: return "timeout";
    case ErrorCode::kTransport: return "transport";
    case ErrorCode::kDecode: return "decode";
    case ErrorCode::kUnauthorized: return "unauthorized";
    case ErrorCode::kVersion: return "version";
    case ErrorCode::kUnexpectedStream: return "unexpected_stream";
    case ErrorCode::kBoundsExceeded: return "bounds_exceeded";
    case ErrorCode::kDuplicate: return "duplicate";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kWrongSize: return "wrong_size";
    case ErrorCode::kProtocolViolation: return "protocol_violation";
    case ErrorCode::kUnexpectedMessage: return "unexpected_message";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kEncode: return "encode";
    case ErrorCode::kTooManyParameters: return "too_many_parameters";
    case ErrorCode::kInvalidRole: return "invalid_role";
    case ErrorCode::kUnknownAlpn: return "unknown_alpn";
    case ErrorCode::kDropped: return "dropped";
    case ErrorCode::kClosed: return "closed";
    case ErrorCode::kCacheFull: return "cache_full";
    case ErrorCode::kGoingAway: return "going_away";
  }
  return "unknown";
}

}  // namespace moqd
