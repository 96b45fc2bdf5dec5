// Fuzzer for the stream multiplexer (src/transport/websocket/mux_frames.h, mux_session.h). The
// first input byte picks the framing (bits 0 and 2: qmux-00, webtransport, qmux-01, qmux-02) and
// the mode (bit 1):
//   decode: the rest is one message (in qmux-01/02 a record, decoded frame by frame); whatever
//           decode_frame() accepts must take 1..n bytes, and re-encoded must decode to the same
//           frame.
//   session: the rest drives a server-role MuxSession over a counting channel. Each record is an op
//           byte: ops 0..9 deliver a message whose length follows (1 byte, or 2 when op bit 4 is
//           set); 10 drains the channel and reports it writable; 11 advances the clock; 12..15 are
//           application actions (open, write, finish, reset, stop, release, close). Every peer
//           input must be answered with an error or a close, never a crash.
#include <cstdio>
#include <cstdlib>

#include "base/clock.h"
#include "mux_harness.h"
#include "transport/websocket/mux_frames.h"
#include "transport/websocket/mux_session.h"

namespace moqd::transport::websocket {
namespace {

using namespace std::chrono_literals;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "mux_fuzzer: %s\n", what);
  std::abort();
}

bool same_bytes(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end());
}

// The encoder's message for `f`, or nullopt when the framing has no encoder for its kind.
std::optional<std::vector<uint8_t>> reencode(Framing framing, const MuxFrame& f) {
  Bytes b;
  switch (f.kind) {
    case FrameKind::kStream: {
      Bytes h = encode_stream_header(framing, f.stream_id, f.data.size(), f.fin);
      std::vector<uint8_t> v(h.data(), h.data() + h.size());
      v.insert(v.end(), f.data.begin(), f.data.end());
      return v;
    }
    case FrameKind::kResetStream: b = encode_reset_stream(framing, f.stream_id, f.code, f.value); break;
    case FrameKind::kStopSending: b = encode_stop_sending(framing, f.stream_id, f.code); break;
    case FrameKind::kClose:
      b = encode_close(framing, f.code,
                       std::string_view(reinterpret_cast<const char*>(f.data.data()), f.data.size()),
                       CloseLayout::kRfc9000);
      break;
    case FrameKind::kMaxData: b = encode_max_data(f.value); break;
    case FrameKind::kMaxStreamData: b = encode_max_stream_data(f.stream_id, f.value); break;
    case FrameKind::kMaxStreamsBidi: b = encode_max_streams(false, f.value); break;
    case FrameKind::kMaxStreamsUni: b = encode_max_streams(true, f.value); break;
    case FrameKind::kTransportParameters: b = encode_transport_parameters(f.params); break;
    case FrameKind::kPing: b = encode_ping_request(f.value); break;
    case FrameKind::kPingResponse: b = encode_ping_response(f.value); break;
    case FrameKind::kIgnored: return std::nullopt;
  }
  return std::vector<uint8_t>(b.data(), b.data() + b.size());
}

void decode_one(Framing framing, const MuxFrame& first_frame);

void decode_round_trip(Framing framing, std::span<const uint8_t> message) {
  while (!message.empty()) {
    auto f = decode_frame(framing, message);
    if (!f) {
      return;
    }
    if (f->size == 0 || f->size > message.size()) {
      bug("frame size outside the message");
    }
    decode_one(framing, *f);
    if (!has_records(framing)) {
      return;
    }
    message = message.subspan(f->size);
  }
}

void decode_one(Framing framing, const MuxFrame& first_frame) {
  const MuxFrame* first = &first_frame;
  auto bytes = reencode(framing, *first);
  if (!bytes) {
    return;
  }
  auto second = decode_frame(framing, *bytes);
  if (!second) {
    bug("re-encoded frame does not decode");
  }
  const MuxFrame& a = *first;
  const MuxFrame& b = *second;
  if (a.kind != b.kind || a.stream_id != b.stream_id || a.code != b.code || a.fin != b.fin ||
      !same_bytes(a.data, b.data) || !(a.params == b.params)) {
    bug("re-decoded frame differs");
  }
  // The STREAM offset is not re-encoded, nor the final size in the legacy framing.
  bool value_kept = a.kind != FrameKind::kStream &&
                    !(a.kind == FrameKind::kResetStream && framing == Framing::kWebTransport);
  if (value_kept && a.value != b.value) {
    bug("re-decoded value differs");
  }
  auto again = reencode(framing, b);
  if (!again || *again != *bytes) {
    bug("encoding is not deterministic");
  }
}

void run_session(Framing framing, fuzz::InputCursor& in) {
  ManualClock clock;
  fuzz::CountingChannel channel;
  fuzz::DrainingVisitor visitor(/*server=*/true);
  MuxConfig config;
  // Small limits so stream-count and flow-control edges are reachable with short inputs.
  config.max_data = 4096;
  config.max_stream_data = 1024;
  config.max_streams_bidi = 4;
  config.max_streams_uni = 4;
  config.stream_queue_target = 2048;
  config.channel_high_water = 4096;
  auto session = std::make_unique<MuxSession>(channel, clock, framing, Role::kServer, "", "/fuzz",
                                              "fuzz", config);
  session->set_visitor(&visitor);
  visitor.set_session(session.get());
  visitor.set_release_in_callback(in.u8() & 1);
  bool channel_closed = false;
  while (!in.empty() && !channel_closed) {
    uint8_t op = in.u8();
    uint8_t kind = op & 0x0f;
    if (kind < 10) {
      size_t len = (op & 0x10) ? in.u16() : in.u8();
      session->on_message(in.bytes(len));
    } else if (kind == 10) {
      channel.drain();
      session->on_channel_writable();
    } else if (kind == 11) {
      clock.advance(std::chrono::milliseconds(in.u8()));
    } else {
      visitor.act(in.u8(), in);
    }
    clock.advance(0ms);  // the loop runs deferred work between events
    visitor.collect();
    if (channel.close_code()) {
      // The WebSocket finishes its close handshake later, from the loop.
      session->on_channel_closed(*channel.close_code(), channel.close_reason());
      channel_closed = true;
    }
  }
  if (!channel_closed) {
    session->on_channel_closed(1006, "fuzz input ended");
  }
  clock.advance(1s);
  session.reset();
  visitor.collect();
}

}  // namespace
}  // namespace moqd::transport::websocket

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace moqd::transport::websocket;
  if (size == 0) {
    return 0;
  }
  constexpr Framing kFramings[] = {Framing::kQmux00, Framing::kWebTransport, Framing::kQmux01,
                                   Framing::kQmux02};
  Framing framing = kFramings[(data[0] & 1) | ((data[0] >> 1) & 2)];
  std::span<const uint8_t> rest(data + 1, size - 1);
  if ((data[0] & 2) == 0) {
    decode_round_trip(framing, rest);
  } else {
    moqd::fuzz::InputCursor in(rest);
    run_session(framing, in);
  }
  return 0;
}
