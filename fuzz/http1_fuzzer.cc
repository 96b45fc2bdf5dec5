// Fuzzer for HTTP/1.1 heads (src/transport/websocket/http1.h). The first input byte picks request
// or response (bit 0) and seeds the chunk sizes (the rest). The rest is parsed whole with
// parse_http_request/response and fed to an HttpHeadReader in chunks: both must find the same
// head and agree on whether it parses. A head that parses is written back with
// write_http_request/response and must parse to the same message.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "transport/websocket/http1.h"

namespace moqd::transport::websocket {
namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "http1_fuzzer: %s\n", what);
  std::abort();
}

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

bool same_headers(const HttpHeaders& a, const HttpHeaders& b, size_t n) {
  if (a.size() < n || b.size() < n) {
    return false;
  }
  for (size_t i = 0; i < n; ++i) {
    if (a[i].name != b[i].name || a[i].value != b[i].value) {
      return false;
    }
  }
  return true;
}

// The head as an HttpHeadReader collects it from chunks of 1..32 bytes; nullopt when it fails or
// never completes.
std::optional<std::string> read_head(std::span<const uint8_t> in, uint8_t seed) {
  HttpHeadReader reader;
  uint32_t state = 0x2545f491u ^ seed;
  size_t off = 0;
  while (off < in.size() && !reader.is_complete()) {
    state = state * 1664525u + 1013904223u;
    size_t n = std::min<size_t>(1 + (state >> 24) % 32, in.size() - off);
    auto taken = reader.feed(in.subspan(off, n));
    if (!taken) {
      return std::nullopt;
    }
    if (*taken > n || (*taken < n && !reader.is_complete())) {
      bug("reader took a wrong number of bytes");
    }
    off += *taken;
  }
  if (!reader.is_complete()) {
    return std::nullopt;
  }
  return std::string(reader.head());
}

void request(std::span<const uint8_t> in, uint8_t seed) {
  auto whole = parse_http_request(in);
  auto head = read_head(in, seed);
  if (!whole || !*whole) {
    return;
  }
  if (!head || head->size() != (*whole)->consumed) {
    bug("reader and parser disagree on the end of the request head");
  }
  if (!parse_http_request_head(*head)) {
    bug("head parses in the buffer but not on its own");
  }
  const HttpRequest& r = (*whole)->value;
  std::string written = write_http_request(r.method, r.target(), r.headers);
  auto again = parse_http_request(as_bytes(written));
  if (!again || !*again || (*again)->consumed != written.size()) {
    bug("written request does not parse");
  }
  const HttpRequest& r2 = (*again)->value;
  if (r2.method != r.method || r2.path != r.path || r2.query != r.query ||
      r2.headers.size() != r.headers.size() || !same_headers(r.headers, r2.headers, r.headers.size())) {
    bug("request round trip differs");
  }
}

void response(std::span<const uint8_t> in, uint8_t seed) {
  auto whole = parse_http_response(in);
  auto head = read_head(in, seed);
  if (!whole || !*whole) {
    return;
  }
  if (!head || head->size() != (*whole)->consumed) {
    bug("reader and parser disagree on the end of the response head");
  }
  if (!parse_http_response_head(*head)) {
    bug("head parses in the buffer but not on its own");
  }
  const HttpResponse& r = (*whole)->value;
  // The writer may add Content-Length and a reason phrase, which can push a head that was at a
  // limit past it; such heads are not round-tripped.
  if (r.headers.size() >= kMaxHttpHeaders) {
    return;
  }
  std::string written = write_http_response(r);
  if (written.size() > kMaxHttpHeadBytes) {
    return;
  }
  auto again = parse_http_response(as_bytes(written));
  if (!again || !*again || (*again)->consumed != written.size()) {
    bug("written response does not parse");
  }
  const HttpResponse& r2 = (*again)->value;
  // The writer may add Content-Length after the parsed headers.
  if (r2.status != r.status || !same_headers(r.headers, r2.headers, r.headers.size())) {
    bug("response round trip differs");
  }
}

}  // namespace
}  // namespace moqd::transport::websocket

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace moqd::transport::websocket;
  if (size == 0) {
    return 0;
  }
  std::span<const uint8_t> rest(data + 1, size - 1);
  if (data[0] & 1) {
    response(rest, data[0]);
  } else {
    request(rest, data[0]);
  }
  return 0;
}
