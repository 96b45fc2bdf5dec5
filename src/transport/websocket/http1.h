#pragma once
// Sans-I/O HTTP/1.1 message heads (RFC 9112), just enough for the WebSocket upgrade and small
// plain responses such as GET /health: a request parser (server side), a response parser (client
// side), an accumulator that finds the end of a head in a byte stream, and writers. No bodies are
// parsed. Pure functions and one small class; any thread.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/codec.h"
#include "base/error.h"

namespace moqd::transport::websocket {

// Bytes of a request or response head, start line through the blank line.
inline constexpr size_t kMaxHttpHeadBytes = 16 * 1024;
// Header fields per head.
inline constexpr size_t kMaxHttpHeaders = 64;

struct HttpHeader {
  std::string name;  // as received; compare with iequals()
  std::string value;  // leading and trailing whitespace removed
};

using HttpHeaders = std::vector<HttpHeader>;

// Value of the first header named `name` (case-insensitive), or nullopt.
std::optional<std::string_view> find_header(const HttpHeaders& headers, std::string_view name);
// Every comma-separated element of every header named `name`, trimmed, empty ones dropped
// (RFC 9110 §5.6.1 lists), in order of appearance.
std::vector<std::string_view> header_list(const HttpHeaders& headers, std::string_view name);
// True when header_list(name) holds `token` (case-insensitive), e.g. Connection: keep-alive, Upgrade.
bool header_has_token(const HttpHeaders& headers, std::string_view name, std::string_view token);
bool iequals(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;  // case-sensitive, e.g. "GET"
  std::string path;  // origin-form, starts with '/'; not percent-decoded
  std::string query;  // after '?', without it; empty when none
  int minor_version = 1;  // HTTP/1.<minor>
  HttpHeaders headers;

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
  // "/path?query", or "/path" when the query is empty.
  std::string target() const { return query.empty() ? path : path + "?" + query; }
};

struct HttpResponse {
  int status = 200;
  std::string reason;  // empty: the writer uses the standard phrase
  HttpHeaders headers;
  std::string body;  // ignored by the parser (heads only)

  std::optional<std::string_view> header(std::string_view name) const {
    return find_header(headers, name);
  }
};

// Parses one complete head, `head` ending in "\r\n\r\n". Errors (ErrorCode::kDecode, or
// kBoundsExceeded for too many headers) on anything malformed: bad start line, bare LF, obsolete
// line folding, whitespace before a colon, control characters; for requests, Content-Length values
// that are not digits or disagree, and Content-Length with Transfer-Encoding (RFC 9112 §6.3).
Result<HttpRequest> parse_http_request_head(std::string_view head);
Result<HttpResponse> parse_http_response_head(std::string_view head);

// The same from the front of a byte buffer: nullopt until "\r\n\r\n" has arrived, then the
// message and the head's length. More than kMaxHttpHeadBytes without the end is an error
// (kBoundsExceeded); a bare LF is an error (kDecode) as soon as it is seen. Rescans from the start
// on each call; stream users want HttpHeadReader.
ParseResult<HttpRequest> parse_http_request(std::span<const uint8_t> data);
ParseResult<HttpResponse> parse_http_response(std::span<const uint8_t> data);

// Collects a head from a byte stream, scanning each byte once. Takes bytes only up to the end of
// the head, so what follows it (WebSocket frames after a 101) stays with the caller.
class HttpHeadReader {
 public:
  // Consumes bytes from the front of `data`; returns how many it took. Error (kBoundsExceeded)
  // once the head passes kMaxHttpHeadBytes without ending, (kDecode) at a bare LF, so an LF-only
  // client is answered at once. A no-op once complete.
  Result<size_t> feed(std::span<const uint8_t> data);
  bool is_complete() const { return complete_; }
  // The head so far; when complete, including the final "\r\n\r\n".
  std::string_view head() const { return head_; }

 private:
  std::string head_;
  bool complete_ = false;
};

// The standard reason phrase for the statuses moqd uses; "Unknown" otherwise.
std::string_view http_reason(int status);

// "HTTP/1.1 <status> <reason>\r\n" + headers + "\r\n" + body. Adds Content-Length for statuses
// that may carry a body (not 1xx, 204, 304) unless the headers already have one.
std::string write_http_response(const HttpResponse& response);
// "<method> <target> HTTP/1.1\r\n" + headers + "\r\n".
std::string write_http_request(std::string_view method, std::string_view target,
                               const HttpHeaders& headers);

}  // namespace moqd::transport::websocket
