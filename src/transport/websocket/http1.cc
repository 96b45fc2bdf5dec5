#include "transport/websocket/http1.h"

#include <algorithm>

namespace moqd::transport::websocket {
namespace {

constexpr std::string_view kHeadEnd = "\r\n\r\n";

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// RFC 9110 §5.6.2 tchar.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return true;
  }
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

// Field values: visible ASCII, obs-text, SP and HTAB (RFC 9110 §5.5).
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u == '\t' || u >= 0x20 ? u != 0x7f : false;
  });
}

bool is_target(std::string_view s) {
  return !s.empty() && s.front() == '/' && std::all_of(s.begin(), s.end(), [](char c) {
           auto u = static_cast<unsigned char>(c);
           return u > 0x20 && u < 0x7f;
         });
}

// "HTTP/1.x" -> x.
std::optional<int> parse_version(std::string_view v) {
  if (v.size() != 8 || v.substr(0, 7) != "HTTP/1." || v[7] < '0' || v[7] > '9') {
    return std::nullopt;
  }
  return v[7] - '0';
}

// Splits the head (without the final CRLFCRLF) into lines; a bare CR or LF is an error.
Result<std::vector<std::string_view>> split_lines(std::string_view head) {
  if (head.size() < kHeadEnd.size() || head.substr(head.size() - kHeadEnd.size()) != kHeadEnd) {
    return fail(ErrorCode::kDecode, "http head not terminated");
  }
  head.remove_suffix(kHeadEnd.size());
  std::vector<std::string_view> lines;
  while (true) {
    size_t eol = head.find("\r\n");
    std::string_view line = head.substr(0, eol);
    if (line.find_first_of("\r\n") != std::string_view::npos) {
      return fail(ErrorCode::kDecode, "bare CR or LF in http head");
    }
    lines.push_back(line);
    if (eol == std::string_view::npos) {
      return lines;
    }
    head.remove_prefix(eol + 2);
  }
}

Result<HttpHeaders> parse_fields(std::span<const std::string_view> lines) {
  if (lines.size() > kMaxHttpHeaders) {
    return fail(ErrorCode::kBoundsExceeded, "too many http headers");
  }
  HttpHeaders headers;
  headers.reserve(lines.size());
  for (std::string_view line : lines) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) {
      return fail(ErrorCode::kDecode, "http header without colon");
    }
    // A name with surrounding whitespace (including obs-fold lines) fails is_token.
    std::string_view name = line.substr(0, colon);
    std::string_view value = trim(line.substr(colon + 1));
    if (!is_token(name) || !is_field_value(value)) {
      return fail(ErrorCode::kDecode, "malformed http header");
    }
    headers.push_back(HttpHeader{std::string(name), std::string(value)});
  }
  return headers;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// RFC 9112 §6.3: no body is read, but a request whose framing a proxy in front of moqd could read
// differently (Content-Length values that disagree or are not digits, or Content-Length with
// Transfer-Encoding) is refused rather than answered.
Status check_body_framing(const HttpHeaders& headers) {
  bool has_length = false;
  std::string_view length;
  for (const auto& h : headers) {
    if (!iequals(h.name, "Content-Length")) {
      continue;
    }
    // A list ("5, 5") counts element by element; an empty value is malformed.
    std::string_view rest = h.value;
    do {
      size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      if (!all_digits(item) || (has_length && item != length)) {
        return fail(ErrorCode::kDecode, "conflicting or malformed http content-length");
      }
      has_length = true;
      length = item;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    } while (!rest.empty());
  }
  if (has_length && find_header(headers, "Transfer-Encoding")) {
    return fail(ErrorCode::kDecode, "http content-length with transfer-encoding");
  }
  return {};
}

Status parse_request_line(std::string_view line, HttpRequest& req) {
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(ErrorCode::kDecode, "malformed http request line");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  auto version = parse_version(line.substr(sp2 + 1));
  if (!is_token(method) || !is_target(target) || !version) {
    return fail(ErrorCode::kDecode, "malformed http request line");
  }
  size_t q = target.find('?');
  req.method = std::string(method);
  req.path = std::string(target.substr(0, q));
  req.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  req.minor_version = *version;
  return {};
}

Status parse_status_line(std::string_view line, HttpResponse& resp) {
  // HTTP/1.1 SP 3DIGIT SP reason (the reason may be empty, and the SP before it missing).
  if (line.size() < 12 || !parse_version(line.substr(0, 8)) || line[8] != ' ') {
    return fail(ErrorCode::kDecode, "malformed http status line");
  }
  std::string_view code = line.substr(9, 3);
  // RFC 9110 §15: a status below 100 is invalid, and "050" would be written back as "50".
  if (!std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      code[0] == '0' || (line.size() > 12 && line[12] != ' ')) {
    return fail(ErrorCode::kDecode, "malformed http status line");
  }
  std::string_view reason = line.size() > 12 ? line.substr(13) : std::string_view();
  if (!is_field_value(reason)) {
    return fail(ErrorCode::kDecode, "malformed http status line");
  }
  resp.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  resp.reason = std::string(reason);
  return {};
}

template <class T>
ParseResult<T> parse_prefix(std::span<const uint8_t> data, Result<T> (*parse)(std::string_view)) {
  std::string_view text(reinterpret_cast<const char*>(data.data()), data.size());
  size_t end = text.find(kHeadEnd);
  // A bare LF before the end (or anywhere, while there is none) is refused at once, as
  // HttpHeadReader does, instead of waiting for a CRLFCRLF that an LF-only client never sends.
  size_t scan = std::min(text.size(), end == std::string_view::npos ? text.size() : end + 2);
  for (size_t lf = text.find('\n'); lf < scan; lf = text.find('\n', lf + 1)) {
    if (lf == 0 || text[lf - 1] != '\r') {
      return tl::unexpected(Error{ErrorCode::kDecode, "bare LF in http head"});
    }
  }
  if (end == std::string_view::npos) {
    if (text.size() >= kMaxHttpHeadBytes) {
      return tl::unexpected(Error{ErrorCode::kBoundsExceeded, "http head too large"});
    }
    return std::nullopt;
  }
  size_t len = end + kHeadEnd.size();
  if (len > kMaxHttpHeadBytes) {
    return tl::unexpected(Error{ErrorCode::kBoundsExceeded, "http head too large"});
  }
  auto parsed = parse(text.substr(0, len));
  if (!parsed) {
    return tl::unexpected(parsed.error());
  }
  return Parsed<T>{std::move(*parsed), len};
}

void write_headers(std::string& out, const HttpHeaders& headers) {
  for (const auto& h : headers) {
    out += h.name;
    out += ": ";
    out += h.value;
    out += "\r\n";
  }
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::optional<std::string_view> find_header(const HttpHeaders& headers, std::string_view name) {
  for (const auto& h : headers) {
    if (iequals(h.name, name)) {
      return std::string_view(h.value);
    }
  }
  return std::nullopt;
}

std::vector<std::string_view> header_list(const HttpHeaders& headers, std::string_view name) {
  std::vector<std::string_view> out;
  for (const auto& h : headers) {
    if (!iequals(h.name, name)) {
      continue;
    }
    std::string_view rest = h.value;
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string_view item = trim(rest.substr(0, comma));
      if (!item.empty()) {
        out.push_back(item);
      }
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return out;
}

bool header_has_token(const HttpHeaders& headers, std::string_view name, std::string_view token) {
  auto items = header_list(headers, name);
  return std::any_of(items.begin(), items.end(), [&](std::string_view i) { return iequals(i, token); });
}

Result<HttpRequest> parse_http_request_head(std::string_view head) {
  auto lines = split_lines(head);
  if (!lines) {
    return tl::unexpected(lines.error());
  }
  HttpRequest req;
  if (auto s = parse_request_line(lines->front(), req); !s) {
    return tl::unexpected(s.error());
  }
  auto headers = parse_fields(std::span(*lines).subspan(1));
  if (!headers) {
    return tl::unexpected(headers.error());
  }
  if (auto framing = check_body_framing(*headers); !framing) {
    return tl::unexpected(framing.error());
  }
  req.headers = std::move(*headers);
  return req;
}

Result<HttpResponse> parse_http_response_head(std::string_view head) {
  auto lines = split_lines(head);
  if (!lines) {
    return tl::unexpected(lines.error());
  }
  HttpResponse resp;
  if (auto s = parse_status_line(lines->front(), resp); !s) {
    return tl::unexpected(s.error());
  }
  auto headers = parse_fields(std::span(*lines).subspan(1));
  if (!headers) {
    return tl::unexpected(headers.error());
  }
  resp.headers = std::move(*headers);
  return resp;
}

ParseResult<HttpRequest> parse_http_request(std::span<const uint8_t> data) {
  return parse_prefix<HttpRequest>(data, parse_http_request_head);
}

ParseResult<HttpResponse> parse_http_response(std::span<const uint8_t> data) {
  return parse_prefix<HttpResponse>(data, parse_http_response_head);
}

Result<size_t> HttpHeadReader::feed(std::span<const uint8_t> data) {
  size_t taken = 0;
  while (!complete_ && taken < data.size()) {
    if (head_.size() >= kMaxHttpHeadBytes) {
      return fail(ErrorCode::kBoundsExceeded, "http head too large");
    }
    char c = static_cast<char>(data[taken++]);
    if (c == '\n' && (head_.empty() || head_.back() != '\r')) {
      return fail(ErrorCode::kDecode, "bare LF in http head");
    }
    head_.push_back(c);
    complete_ = head_.size() >= kHeadEnd.size() &&
                std::string_view(head_).substr(head_.size() - kHeadEnd.size()) == kHeadEnd;
  }
  return taken;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 426: return "Upgrade Required";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

std::string write_http_response(const HttpResponse& response) {
  std::string out = "HTTP/1.1 " + std::to_string(response.status) + " ";
  out += response.reason.empty() ? http_reason(response.status) : response.reason;
  out += "\r\n";
  write_headers(out, response.headers);
  bool may_have_body = response.status >= 200 && response.status != 204 && response.status != 304;
  if (may_have_body && !response.header("Content-Length")) {
    out += "Content-Length: " + std::to_string(response.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += response.body;
  return out;
}

std::string write_http_request(std::string_view method, std::string_view target,
                               const HttpHeaders& headers) {
  std::string out;
  out.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  write_headers(out, headers);
  out += "\r\n";
  return out;
}

}  // namespace moqd::transport::websocket
