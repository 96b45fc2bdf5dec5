#pragma once
// Codecs for the two stream-multiplexing framings carried in WebSocket binary messages
// (protocol README §4): qmux-00 (varint frame types, QUIC flow control) and the legacy
// "webtransport" framing (1-byte types, no flow control). One frame per message; bytes after the
// frame are ignored. Pure functions, no state.
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
  kIgnored,  // qmux blocked frames, DATAGRAM and unknown types
};

// One decoded frame. `data` views the message it was decoded from.
struct MuxFrame {
  FrameKind kind = FrameKind::kIgnored;
  StreamId stream_id = 0;
  uint64_t code = 0;   // RESET_STREAM, STOP_SENDING and close error code
  uint64_t value = 0;  // MAX_* limit; RESET_STREAM final size; STREAM offset (qmux, unused)
  bool fin = false;
  std::span<const uint8_t> data;  // STREAM payload or close reason
  TransportParameters params;
};

// Decodes the frame at the front of one message. Errors: kDecode (truncated or inconsistent),
// kProtocolViolation (unknown type in legacy framing).
[[nodiscard]] Result<MuxFrame> decode_frame(Framing framing, std::span<const uint8_t> message);

// Encoders. Each returns a whole message, except encode_stream_header, whose message continues
// with `payload_len` bytes of payload (qmux writes LEN, never OFF).
Bytes encode_stream_header(Framing framing, StreamId id, size_t payload_len, bool fin);
Bytes encode_reset_stream(Framing framing, StreamId id, uint64_t code, uint64_t final_size);
Bytes encode_stop_sending(Framing framing, StreamId id, uint64_t code);
// APPLICATION_CLOSE (0x1d); in qmux with frame_type 0 and a length-prefixed reason.
Bytes encode_close(Framing framing, uint64_t code, std::string_view reason);
// qmux-00 only.
Bytes encode_max_data(uint64_t max);
Bytes encode_max_stream_data(StreamId id, uint64_t max);
Bytes encode_max_streams(bool uni, uint64_t max);
// Parameters whose value is 0 are omitted.
Bytes encode_transport_parameters(const TransportParameters& params);

}  // namespace moqd::transport::websocket
