#include "transport/websocket/mux_frames.h"

#include <vector>

#include "base/codec.h"

namespace moqd::transport::websocket {
namespace {

// Frame types shared by both framings (legacy uses them as raw bytes).
constexpr uint64_t kResetStream = 0x04;
constexpr uint64_t kStopSending = 0x05;
constexpr uint64_t kStreamBase = 0x08;
constexpr uint64_t kStreamFin = 0x01;
constexpr uint64_t kStreamLen = 0x02;
constexpr uint64_t kStreamOff = 0x04;
constexpr uint64_t kMaxData = 0x10;
constexpr uint64_t kMaxStreamData = 0x11;
constexpr uint64_t kMaxStreamsBidi = 0x12;
constexpr uint64_t kMaxStreamsUni = 0x13;
constexpr uint64_t kConnectionClose = 0x1c;
constexpr uint64_t kApplicationClose = 0x1d;
constexpr uint64_t kPadding = 0x00;
constexpr uint64_t kDataBlocked = 0x14;
constexpr uint64_t kStreamDataBlocked = 0x15;
constexpr uint64_t kStreamsBlockedBidi = 0x16;
constexpr uint64_t kStreamsBlockedUni = 0x17;
constexpr uint64_t kResetStreamAt = 0x24;        // qmux-02
constexpr uint64_t kDatagram = 0x30;             // qmux-01/02, to the end of the record
constexpr uint64_t kDatagramWithLength = 0x31;   // qmux-01/02
constexpr uint64_t kPingRequest = 0x348c67529ef8c7bdULL;   // qmux-01/02
constexpr uint64_t kPingResponse = 0x348c67529ef8c7beULL;  // qmux-01/02

// Transport parameter ids (RFC 9000 §18.2).
constexpr uint64_t kParamMaxData = 0x04;
constexpr uint64_t kParamBidiLocal = 0x05;
constexpr uint64_t kParamBidiRemote = 0x06;
constexpr uint64_t kParamUni = 0x07;
constexpr uint64_t kParamStreamsBidi = 0x08;
constexpr uint64_t kParamStreamsUni = 0x09;

Result<MuxFrame> truncated() { return fail(ErrorCode::kDecode, "truncated mux frame"); }

Result<MuxFrame> finish(Reader& r, MuxFrame f) {
  if (!r.ok()) {
    return truncated();
  }
  f.size = r.consumed();
  return f;
}

// §4.4: type byte, id, then the rest of the message.
Result<MuxFrame> decode_legacy(Reader& r) {
  MuxFrame f;
  uint8_t type = *r.u8();
  switch (type) {
    case kStreamBase:
    case kStreamBase | kStreamFin:
      f.kind = FrameKind::kStream;
      f.fin = (type & kStreamFin) != 0;
      f.stream_id = r.varint().value_or(0);
      f.data = *r.bytes(r.remaining());
      return finish(r, f);
    case kResetStream:
    case kStopSending:
      f.kind = type == kResetStream ? FrameKind::kResetStream : FrameKind::kStopSending;
      f.stream_id = r.varint().value_or(0);
      f.code = r.varint().value_or(0);
      return finish(r, f);
    case kApplicationClose:
      f.kind = FrameKind::kClose;
      f.code = r.varint().value_or(0);
      f.data = *r.bytes(r.remaining());
      return finish(r, f);
    default:
      return fail(ErrorCode::kProtocolViolation, "unknown legacy frame type");
  }
}

Result<MuxFrame> decode_qmux_stream(Reader& r, uint64_t type) {
  MuxFrame f;
  f.kind = FrameKind::kStream;
  f.fin = (type & kStreamFin) != 0;
  f.stream_id = r.varint().value_or(0);
  if ((type & kStreamOff) != 0) {
    f.has_offset = true;
    f.value = r.varint().value_or(0);  // MuxSession checks it continues the stream
  }
  if ((type & kStreamLen) != 0) {
    uint64_t len = r.varint().value_or(0);
    if (r.ok() && len > r.remaining()) {
      return truncated();
    }
    f.data = r.bytes(static_cast<size_t>(len)).value_or(std::span<const uint8_t>());
  } else {
    f.data = *r.bytes(r.remaining());
  }
  return finish(r, f);
}

// Reads `len (i)` and that many bytes into f.data; false when they do not fit.
bool read_reason(Reader& r, MuxFrame& f) {
  uint64_t len = r.varint().value_or(0);
  if (!r.ok() || len > r.remaining()) {
    return false;
  }
  f.data = *r.bytes(static_cast<size_t>(len));
  return true;
}

// CONNECTION_CLOSE (0x1c): code, frame_type, reason, in every layout.
Result<MuxFrame> decode_connection_close(Reader& r) {
  MuxFrame f;
  f.kind = FrameKind::kClose;
  f.code = r.varint().value_or(0);
  r.varint();
  if (!read_reason(r, f)) {
    return truncated();
  }
  return finish(r, f);
}

// APPLICATION_CLOSE (0x1d) in either CloseLayout (see decode_frame).
Result<MuxFrame> decode_application_close(Reader& r) {
  MuxFrame f;
  f.kind = FrameKind::kClose;
  f.code = r.varint().value_or(0);
  if (!r.ok()) {
    return truncated();
  }
  Reader rfc = r;
  MuxFrame a = f;
  const bool rfc_fits = read_reason(rfc, a);
  if (rfc_fits && rfc.empty()) {
    r = rfc;
    return finish(r, a);
  }
  Reader old = r;
  MuxFrame b = f;
  old.varint();  // frame_type
  if (old.ok() && read_reason(old, b) && (old.empty() || !rfc_fits)) {
    r = old;
    return finish(r, b);
  }
  if (rfc_fits) {
    r = rfc;
    return finish(r, a);
  }
  return truncated();
}

bool is_known_param(uint64_t id) { return id >= kParamMaxData && id <= kParamStreamsUni; }

// Stores a known parameter; unknown ids are skipped.
bool store_param(TransportParameters& p, uint64_t id, uint64_t v) {
  switch (id) {
    case kParamMaxData: p.initial_max_data = v; return true;
    case kParamBidiLocal: p.initial_max_stream_data_bidi_local = v; return true;
    case kParamBidiRemote: p.initial_max_stream_data_bidi_remote = v; return true;
    case kParamUni: p.initial_max_stream_data_uni = v; return true;
    case kParamStreamsBidi: p.initial_max_streams_bidi = v; return true;
    case kParamStreamsUni: p.initial_max_streams_uni = v; return true;
    default: return false;
  }
}

Result<MuxFrame> decode_transport_parameters(Reader& r) {
  MuxFrame f;
  f.kind = FrameKind::kTransportParameters;
  uint64_t len = r.varint().value_or(0);
  if (!r.ok() || len > r.remaining()) {
    return truncated();
  }
  Reader params(*r.bytes(static_cast<size_t>(len)));
  while (!params.empty()) {
    uint64_t id = params.varint().value_or(0);
    uint64_t value_len = params.varint().value_or(0);
    if (!params.ok() || value_len > params.remaining()) {
      return truncated();
    }
    Reader value(*params.bytes(static_cast<size_t>(value_len)));
    if (!is_known_param(id)) {
      continue;  // e.g. max_idle_timeout, max_record_size, reset_stream_at (an empty value)
    }
    uint64_t v = value.varint().value_or(0);
    if (!value.ok() || !value.empty()) {
      return fail(ErrorCode::kDecode, "malformed transport parameter");
    }
    store_param(f.params, id, v);
  }
  return finish(r, f);
}

// §4.5, NET-0.3.md §2.2.
Result<MuxFrame> decode_qmux(Framing framing, Reader& r) {
  auto type_or = r.varint();
  if (!type_or) {
    return truncated();
  }
  uint64_t type = *type_or;
  MuxFrame f;
  if (type >= kStreamBase && type <= (kStreamBase | 0x07)) {
    return decode_qmux_stream(r, type);
  }
  switch (type) {
    case kResetStream:
    case kResetStreamAt:
      f.kind = FrameKind::kResetStream;
      f.stream_id = r.varint().value_or(0);
      f.code = r.varint().value_or(0);
      f.value = r.varint().value_or(0);  // final size: not validated (0.0.6 sends 0)
      if (type == kResetStreamAt) {
        r.varint();  // reliable size: treated as a plain reset
        if (framing != Framing::kQmux02) {
          return fail(ErrorCode::kProtocolViolation, "RESET_STREAM_AT before qmux-02");
        }
      }
      return finish(r, f);
    case kStopSending:
      f.kind = FrameKind::kStopSending;
      f.stream_id = r.varint().value_or(0);
      f.code = r.varint().value_or(0);
      return finish(r, f);
    case kConnectionClose:
      return decode_connection_close(r);
    case kApplicationClose:
      return decode_application_close(r);
    case kPadding:
      return finish(r, f);
    case kDataBlocked:
    case kStreamsBlockedBidi:
    case kStreamsBlockedUni:
      r.varint();
      return finish(r, f);
    case kStreamDataBlocked:
      r.varint();
      r.varint();
      return finish(r, f);
    case kMaxData:
    case kMaxStreamsBidi:
    case kMaxStreamsUni:
      f.kind = type == kMaxData          ? FrameKind::kMaxData
               : type == kMaxStreamsBidi ? FrameKind::kMaxStreamsBidi
                                         : FrameKind::kMaxStreamsUni;
      f.value = r.varint().value_or(0);
      return finish(r, f);
    case kMaxStreamData:
      f.kind = FrameKind::kMaxStreamData;
      f.stream_id = r.varint().value_or(0);
      f.value = r.varint().value_or(0);
      return finish(r, f);
    case kTransportParametersType:
      return decode_transport_parameters(r);
    default:
      break;
  }
  if (!has_records(framing)) {
    f.size = r.consumed() + r.remaining();  // qmux-00: anything else is ignored, one per message
    return f;
  }
  switch (type) {
    case kDatagram:
      r.bytes(r.remaining());
      return finish(r, f);
    case kDatagramWithLength: {
      uint64_t len = r.varint().value_or(0);
      if (!r.ok() || len > r.remaining()) {
        return truncated();
      }
      r.bytes(static_cast<size_t>(len));
      return finish(r, f);
    }
    case kPingRequest:
    case kPingResponse:
      f.kind = type == kPingRequest ? FrameKind::kPing : FrameKind::kPingResponse;
      f.value = r.varint().value_or(0);
      return finish(r, f);
    default:
      // A record's next frame cannot be found after a type of unknown length.
      return fail(ErrorCode::kProtocolViolation, "unknown qmux frame type");
  }
}

class FrameWriter {
 public:
  FrameWriter() : w_(buf_) {}
  Writer& operator*() { return w_; }
  Writer* operator->() { return &w_; }
  Bytes take() { return Bytes::from(buf_); }

 private:
  std::vector<uint8_t> buf_;
  Writer w_;
};

void write_type(Writer& w, Framing framing, uint64_t type) {
  if (is_qmux(framing)) {
    w.varint(type);
  } else {
    w.u8(static_cast<uint8_t>(type));
  }
}

void write_param(Writer& w, uint64_t id, uint64_t value) {
  if (value == 0) {
    return;
  }
  w.varint(id);
  w.varint(varint_size(value));
  w.varint(value);
}

}  // namespace

Result<MuxFrame> decode_frame(Framing framing, std::span<const uint8_t> message) {
  if (message.empty()) {
    return truncated();
  }
  Reader r(message);
  if (framing == Framing::kWebTransport) {
    return decode_legacy(r);
  }
  return decode_qmux(framing, r);
}

Bytes encode_stream_header(Framing framing, StreamId id, size_t payload_len, bool fin) {
  FrameWriter w;
  uint64_t fin_bit = fin ? kStreamFin : 0;
  if (is_qmux(framing)) {
    w->varint(kStreamBase | kStreamLen | fin_bit);
    w->varint(id);
    w->varint(payload_len);
  } else {
    w->u8(static_cast<uint8_t>(kStreamBase | fin_bit));
    w->varint(id);
  }
  return w.take();
}

Bytes encode_reset_stream(Framing framing, StreamId id, uint64_t code, uint64_t final_size) {
  FrameWriter w;
  write_type(*w, framing, kResetStream);
  w->varint(id);
  w->varint(code);
  if (is_qmux(framing)) {
    w->varint(final_size);
  }
  return w.take();
}

Bytes encode_stop_sending(Framing framing, StreamId id, uint64_t code) {
  FrameWriter w;
  write_type(*w, framing, kStopSending);
  w->varint(id);
  w->varint(code);
  return w.take();
}

Bytes encode_close(Framing framing, uint64_t code, std::string_view reason, CloseLayout layout) {
  FrameWriter w;
  write_type(*w, framing, kApplicationClose);
  w->varint(code);
  if (is_qmux(framing)) {
    if (layout == CloseLayout::kWithFrameType) {
      w->varint(0);  // frame_type
    }
    w->string(reason);
  } else {
    w->bytes(reason);
  }
  return w.take();
}

Bytes encode_ping_response(uint64_t sequence) {
  FrameWriter w;
  w->varint(kPingResponse);
  w->varint(sequence);
  return w.take();
}

Bytes encode_ping_request(uint64_t sequence) {
  FrameWriter w;
  w->varint(kPingRequest);
  w->varint(sequence);
  return w.take();
}

Bytes encode_max_data(uint64_t max) {
  FrameWriter w;
  w->varint(kMaxData);
  w->varint(max);
  return w.take();
}

Bytes encode_max_stream_data(StreamId id, uint64_t max) {
  FrameWriter w;
  w->varint(kMaxStreamData);
  w->varint(id);
  w->varint(max);
  return w.take();
}

Bytes encode_max_streams(bool uni, uint64_t max) {
  FrameWriter w;
  w->varint(uni ? kMaxStreamsUni : kMaxStreamsBidi);
  w->varint(max);
  return w.take();
}

Bytes encode_transport_parameters(const TransportParameters& p) {
  std::vector<uint8_t> body;
  Writer b(body);
  write_param(b, kParamMaxData, p.initial_max_data);
  write_param(b, kParamBidiLocal, p.initial_max_stream_data_bidi_local);
  write_param(b, kParamBidiRemote, p.initial_max_stream_data_bidi_remote);
  write_param(b, kParamUni, p.initial_max_stream_data_uni);
  write_param(b, kParamStreamsBidi, p.initial_max_streams_bidi);
  write_param(b, kParamStreamsUni, p.initial_max_streams_uni);
  FrameWriter w;
  w->varint(kTransportParametersType);
  w->varint(body.size());
  w->bytes(body);
  return w.take();
}

}  // namespace moqd::transport::websocket
