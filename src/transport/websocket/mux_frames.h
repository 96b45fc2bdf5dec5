#pragma once
// Codecs for the stream-multiplexing framings carried in WebSocket binary messages: qmux-00,
// qmux-01 and qmux-02 (varint frame types, QUIC flow control; protocol/NET-0.3.md §2) and the
// legacy "webtransport" framing (1-byte types, no flow control; protocol/README.md §4). In qmux-00
// and legacy a message holds one frame and bytes after it are ignored; in qmux-01/02 a message is
// a record of frames back to back, decoded one at a time. Pure functions, no state.
#include "transport/websocket/message_channel.h"
#include <cstdint>
#include <span>
#include <string_view>

#include "base/bytes.h"
#include "base/error.h"
#include "transport/transport.h"

namespace moqd::transport::websocket {


// The JS client closes the session if a STREAM frame carries more (16384 - 24); senders split.
inline constexpr size_t kMaxStreamPayload = 16'360;
// QX_TRANSPORT_PARAMETERS frame type; always the 8-byte varint ff 51 53 30 0d 0a 0d 0a.
inline constexpr uint64_t kTransportParametersType = 0x3f5153300d0a0d0aULL;

// qmux-00 transport parameters (QUIC ids 0x04..0x09); 0 means absent.
struct TransportParameters {
  uint64_t initial_max_data = 0;
  uint64_t initial_max_stream_data_bidi_local = 0;
  uint64_t initial_max_stream_data_bidi_remote = 0;
  uint64_t initial_max_stream_data_uni = 0;
  uint64_t initial_max_streams_bidi = 0;
  uint64_t initial_max_streams_uni = 0;

  friend bool operator==(const TransportParameters&, const TransportParameters&) = default;
};

enum class FrameKind : uint8_t {
  kStream,
  kResetStream,
  kStopSending,
  kClose,  // APPLICATION_CLOSE, or qmux CONNECTION_CLOSE (0x1c)
  kMaxData,
  kMaxStreamData,
  kMaxStreamsBidi,
  kMaxStreamsUni,
  kTransportParameters,
  kPing,     // QX_PING request (qmux-01/02): answer with a response carrying `value`
  kPingResponse,  // QX_PING response (qmux-01/02) echoing the sequence `value`
  kIgnored,  // PADDING, blocked frames, DATAGRAM; unknown types in qmux-00
};

// APPLICATION_CLOSE (0x1d) layouts. RFC 9000 §19.19 (and @moq/qmux 0.3.3, the Rust qmux): code,
// reason length, reason. @moq/qmux 0.0.6 and 0.1.3 put a frame type field after the code.
enum class CloseLayout : uint8_t { kRfc9000, kWithFrameType };
// What a peer of `framing` reads: qmux-02 is spoken only by RFC 9000 peers; qmux-00 and qmux-01 by
// @moq/qmux 0.0.6 / 0.1.3 too, which need the frame type (a session that sees its peer send a
// STREAM frame with an offset, which only 0.3.3 does, switches to kRfc9000).
inline CloseLayout close_layout_for(Framing framing) {
  return framing == Framing::kQmux02 ? CloseLayout::kRfc9000 : CloseLayout::kWithFrameType;
}

// One decoded frame. `data` views the message it was decoded from.
struct MuxFrame {
  FrameKind kind = FrameKind::kIgnored;
  StreamId stream_id = 0;
  uint64_t code = 0;   // RESET_STREAM, STOP_SENDING and close error code
  uint64_t value = 0;  // MAX_* limit; RESET_STREAM final size; STREAM offset; QX_PING sequence
  bool fin = false;
  bool has_offset = false;  // STREAM frame with the OFF bit (only @moq/qmux 0.3.3 sends it)
  size_t size = 0;          // bytes of the message this frame took
  std::span<const uint8_t> data;  // STREAM payload or close reason
  TransportParameters params;
};

// Decodes the frame at the front of `message` (in qmux-01/02, of what is left of a record).
// Errors: kDecode (truncated or inconsistent), kProtocolViolation (unknown type in legacy
// framing, qmux-01 or qmux-02). A received APPLICATION_CLOSE is read in either CloseLayout: the
// one that takes the rest of the message exactly, else RFC 9000's if it fits.
[[nodiscard]] Result<MuxFrame> decode_frame(Framing framing, std::span<const uint8_t> message);

// Encoders. Each returns a whole message, except encode_stream_header, whose message continues
// with `payload_len` bytes of payload (qmux writes LEN, never OFF).
Bytes encode_stream_header(Framing framing, StreamId id, size_t payload_len, bool fin);
Bytes encode_reset_stream(Framing framing, StreamId id, uint64_t code, uint64_t final_size);
Bytes encode_stop_sending(Framing framing, StreamId id, uint64_t code);
// APPLICATION_CLOSE (0x1d); in qmux a length-prefixed reason, after a frame type 0 when `layout`
// says so; legacy: the reason to the end of the message.
Bytes encode_close(Framing framing, uint64_t code, std::string_view reason,
                   CloseLayout layout = CloseLayout::kWithFrameType);
// QX_PING response (qmux-01/02) echoing a request's sequence.
Bytes encode_ping_response(uint64_t sequence);
// QX_PING request (qmux-01/02); qmux-02 requires each sequence above the previous one.
Bytes encode_ping_request(uint64_t sequence);
// qmux only.
Bytes encode_max_data(uint64_t max);
Bytes encode_max_stream_data(StreamId id, uint64_t max);
Bytes encode_max_streams(bool uni, uint64_t max);
// Parameters whose value is 0 are omitted.
Bytes encode_transport_parameters(const TransportParameters& params);

}  // namespace moqd::transport::websocket
