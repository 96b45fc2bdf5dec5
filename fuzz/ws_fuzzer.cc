// Fuzzer for RFC 6455 (src/transport/websocket/ws_frame.h, ws_connection.h). The first input byte
// picks the mode (low 2 bits):
//   0 header: decode_frame_header() on the rest; an accepted header must re-encode to exactly the
//     bytes it came from (the decoder rejects non-minimal lengths), and unmasking the payload in
//     pieces must equal unmasking it whole.
//   1 close/utf-8: decode_close_payload() round trip, and incremental UTF-8 validation in pieces
//     must agree with is_valid_utf8().
//   2, 3 connection: a WsServerConnection is fed the rest in chunks (sizes from a generator seeded
//     by the second byte) through a counting pipe. /health gets a plain answer, anything else goes
//     through decide_upgrade(); an upgraded connection carries a MuxSession whose visitor reads
//     every stream. Nothing may crash whatever the bytes.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "base/clock.h"
#include "mux_harness.h"
#include "transport/websocket/mux_session.h"
#include "transport/websocket/ws_connection.h"
#include "transport/websocket/ws_frame.h"

namespace moqd::transport::websocket {
namespace {

using namespace std::chrono_literals;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "ws_fuzzer: %s\n", what);
  std::abort();
}

// Deterministic chunk sizes 1..64 (xorshift), so one input always splits the same way.
class ChunkSizes {
 public:
  explicit ChunkSizes(uint8_t seed) : state_(0x9e3779b9u ^ seed) {}
  size_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 17;
    state_ ^= state_ << 5;
    return 1 + state_ % 64;
  }

 private:
  uint32_t state_;
};

void header_round_trip(std::span<const uint8_t> in) {
  auto parsed = decode_frame_header(in);
  if (!parsed || !*parsed) {
    return;
  }
  const FrameHeader& h = (*parsed)->value;
  size_t used = (*parsed)->consumed;
  if (used < 2 || used > kMaxFrameHeaderSize || used > in.size()) {
    bug("header size out of range");
  }
  Bytes again = encode_frame_header(h);
  if (!std::equal(again.data(), again.data() + again.size(), in.begin(), in.begin() + used)) {
    bug("re-encoded header differs");
  }
  auto payload_in = in.subspan(used);
  std::vector<uint8_t> whole(payload_in.begin(), payload_in.end());
  std::vector<uint8_t> pieces = whole;
  apply_mask(whole, h.mask_key);
  ChunkSizes sizes(static_cast<uint8_t>(used));
  for (size_t off = 0; off < pieces.size();) {
    size_t n = std::min(sizes.next(), pieces.size() - off);
    apply_mask(std::span<uint8_t>(pieces).subspan(off, n), h.mask_key, off);
    off += n;
  }
  if (whole != pieces) {
    bug("piecewise unmasking differs");
  }
  apply_mask(whole, h.mask_key);
  if (!std::equal(whole.begin(), whole.end(), payload_in.begin(), payload_in.end())) {
    bug("masking twice is not the identity");
  }
}

void close_and_utf8(std::span<const uint8_t> in) {
  auto close = decode_close_payload(in);
  if (close && in.size() <= kMaxControlPayload) {
    std::string bytes = encode_close_payload(close->code, close->reason);
    auto again = decode_close_payload(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    bool empty_in = in.empty();
    if (!empty_in && (!again || again->code != close->code || again->reason != close->reason)) {
      bug("close payload round trip differs");
    }
  }
  bool whole = is_valid_utf8(in);
  Utf8Validator v;
  ChunkSizes sizes(in.empty() ? 0 : in[0]);
  bool ok = true;
  for (size_t off = 0; off < in.size() && ok;) {
    size_t n = std::min(sizes.next(), in.size() - off);
    ok = v.feed(in.subspan(off, n));
    off += n;
  }
  if (whole != (ok && v.is_complete())) {
    bug("incremental utf-8 validation disagrees");
  }
}

// The TCP side as the connection sees it: counts what is sent, remembers a close.
class CountingPipe final : public transport::Pipe {
 public:
  void send(Bytes data) override { buffered_ += data.size(); }
  size_t buffered() const override { return buffered_; }
  void close() override { closed_ = true; }
  void abort() override { closed_ = true; }
  bool closed() const { return closed_; }
  void drain() { buffered_ = 0; }

 private:
  size_t buffered_ = 0;
  bool closed_ = false;
};

RequestDecision answer(const HttpRequest& request) {
  if (request.path == "/health") {
    PlainResponse r;
    r.body = "ok\n";
    return r;
  }
  static const std::vector<std::string> acceptable = {"qmux-00.moq-lite-04", "qmux-00",
                                                      "webtransport.moql", "webtransport"};
  return decide_upgrade(request, acceptable);
}

void run_connection(std::span<const uint8_t> in) {
  if (in.empty()) {
    return;
  }
  ChunkSizes sizes(in[0]);
  in = in.subspan(1);
  ManualClock clock;
  CountingPipe pipe;
  fuzz::DrainingVisitor visitor(/*server=*/true);
  WsConfig config;
  config.max_message_size = 64 * 1024;
  WsServerConnection conn(pipe, clock, clock, config, answer);
  std::unique_ptr<MuxSession> mux;
  conn.set_open_callback([&] {
    const Subprotocol& sp = conn.subprotocol();
    mux = std::make_unique<MuxSession>(conn, clock, sp.framing, Role::kServer, sp.app_protocol,
                                       conn.target(), "fuzz");
    mux->set_visitor(&visitor);
    visitor.set_session(mux.get());
    conn.set_message_handler(mux.get());
  });
  size_t off = 0;
  while (off < in.size() && !pipe.closed()) {
    size_t n = std::min(sizes.next(), in.size() - off);
    conn.on_pipe_data(in.subspan(off, n));
    off += n;
    clock.advance(0ms);
    visitor.collect();
    if (n % 7 == 0) {
      pipe.drain();
      conn.on_pipe_writable();
    }
  }
  // The owner reports the end of the pipe, then lets every timer run out.
  conn.on_pipe_closed();
  clock.advance(30s);
  conn.set_message_handler(nullptr);
  mux.reset();
  visitor.collect();
}

}  // namespace
}  // namespace moqd::transport::websocket

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace moqd::transport::websocket;
  if (size == 0) {
    return 0;
  }
  std::span<const uint8_t> rest(data + 1, size - 1);
  switch (data[0] & 3) {
    case 0: header_round_trip(rest); break;
    case 1: close_and_utf8(rest); break;
    default: run_connection(rest); break;
  }
  return 0;
}
