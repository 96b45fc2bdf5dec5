// Fuzzer for the HTTP/3 and WebTransport codecs (src/transport/webtransport/h3.h). The first
// input byte picks the codec; the rest is its input. Decoders must never crash, must stay within
// their input, and what they accept must survive our own encoders: a mismatch aborts.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "transport/webtransport/h3.h"

namespace moqd::transport::webtransport {
namespace {

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "h3_fuzzer: %s\n", what);
  std::abort();
}

// Frames back to back, as on a control stream, with a small limit so kExcessiveLoad is reached.
void frames(std::span<const uint8_t> in) {
  while (!in.empty()) {
    auto f = parse_frame(in, 64);
    if (!f || !f->has_value()) {
      return;
    }
    const Parsed<Frame>& p = **f;
    if (p.consumed == 0 || p.consumed > in.size() || p.value.payload.size() > 64) {
      bug("frame consumed out of range");
    }
    std::vector<uint8_t> out;
    Writer w(out);
    write_frame(w, p.value.type, p.value.payload);
    auto again = parse_frame(out, 64);
    if (!again || !again->has_value() || (*again)->consumed != out.size() ||
        (*again)->value.type != p.value.type) {
      bug("re-encoded frame differs");
    }
    in = in.subspan(p.consumed);
  }
}

void settings(std::span<const uint8_t> in) {
  auto s = parse_settings(in);
  if (!s) {
    return;
  }
  (void)summarize(*s);
  std::vector<uint8_t> out;
  Writer w(out);
  for (const Setting& one : *s) {
    if (one.id > kMaxVarint || one.value > kMaxVarint) {
      bug("setting out of varint range");
    }
    w.varint(one.id);
    w.varint(one.value);
  }
  auto again = parse_settings(out);
  if (!again || again->size() != s->size()) {
    bug("re-encoded settings differ");
  }
}

bool close_round_trips(const CloseSession& close) {
  std::vector<uint8_t> frame = close_session_data_frame(close.code, close.reason);
  auto f = parse_frame(frame, 4096);
  if (!f || !f->has_value() || (*f)->value.type != kFrameData) {
    return false;
  }
  auto c = parse_capsule((*f)->value.payload, 4096);
  if (!c || !c->has_value() || (*c)->value.type != kCapsuleCloseSession) {
    return false;
  }
  auto again = parse_close_session((*c)->value.value);
  return again && again->code == close.code && again->reason == close.reason;
}

void capsules(std::span<const uint8_t> in) {
  while (!in.empty()) {
    auto c = parse_capsule(in, 2048);
    if (!c || !c->has_value()) {
      return;
    }
    const Parsed<Capsule>& p = **c;
    if (p.consumed == 0 || p.consumed > in.size()) {
      bug("capsule consumed out of range");
    }
    auto close = parse_close_session(p.value.value);
    if (close && !close_round_trips(*close)) {
      bug("close capsule round trip differs");
    }
    in = in.subspan(p.consumed);
  }
}

void datagram(std::span<const uint8_t> in) {
  auto d = parse_datagram(in);
  if (!d) {
    return;
  }
  std::vector<uint8_t> out;
  Writer w(out);
  write_datagram(w, d->session_id, d->payload);
  auto again = parse_datagram(out);
  if (!again || again->session_id != d->session_id ||
      again->payload.size() != d->payload.size()) {
    bug("datagram round trip differs");
  }
}

void protocol_list(std::string_view in) {
  auto list = parse_protocol_list(in);
  if (!list) {
    return;
  }
  std::string joined;
  for (const std::string& p : *list) {
    joined += joined.empty() ? "" : ", ";
    joined += protocol_header_value(p);
  }
  if (parse_protocol_list(joined) != list) {
    bug("protocol list round trip differs");
  }
}

// NUL-separated name, value, name, value, ...
void connect(std::string_view in) {
  HeaderList headers;
  while (!in.empty() && headers.size() < 64) {
    size_t n = in.find('\0');
    std::string_view name = in.substr(0, n);
    in = n == std::string_view::npos ? std::string_view() : in.substr(n + 1);
    size_t v = in.find('\0');
    std::string_view value = in.substr(0, v);
    in = v == std::string_view::npos ? std::string_view() : in.substr(v + 1);
    headers.push_back(HeaderField{std::string(name), std::string(value)});
  }
  auto req = parse_connect(headers);
  if (req && (req->authority.empty() || req->path.empty() || req->path.front() != '/')) {
    bug("accepted a request without authority or path");
  }
  if (!req && (req.error().reason == nullptr || (req.error().status != 400 &&
                                                 req.error().status != 405))) {
    bug("refusal without reason or with an odd status");
  }
}

void run(uint8_t selector, std::span<const uint8_t> in) {
  std::string_view text(reinterpret_cast<const char*>(in.data()), in.size());
  switch (selector % 6) {
    case 0: return frames(in);
    case 1: return settings(in);
    case 2: return capsules(in);
    case 3: return datagram(in);
    case 4: return protocol_list(text);
    default: return connect(text);
  }
}

}  // namespace
}  // namespace moqd::transport::webtransport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  moqd::transport::webtransport::run(data[0], std::span<const uint8_t>(data + 1, size - 1));
  return 0;
}
