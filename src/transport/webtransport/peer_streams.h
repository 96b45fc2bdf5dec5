#pragma once
// What both ends of our HTTP/3 connection (server.h, client.h) do with the peer's streams that
// carry no WebTransport data: classifying its unidirectional streams (RFC 9114 §6.2, RFC 9204
// §4.2), reading its QPACK streams and enforcing the control stream's frame rules (RFC 9114
// §6.2.1, §7.2). Everything here either returns the HTTP/3 connection error to close with or
// leaves the decision to the caller; nothing keeps state but PeerStreams.
#include <cstddef>
#include <cstdint>

#include "transport/transport.h"
#include "transport/webtransport/h3.h"
#include "transport/webtransport/qpack.h"

namespace moqd::transport::webtransport {

// Control-stream frames are small (SETTINGS, GOAWAY); anything larger is an attack.
inline constexpr size_t kMaxControlFrame = 16 << 10;

// What a peer's unidirectional stream is, by its type.
enum class UniStream { kControl, kQpackEncoder, kQpackDecoder, kWebTransport, kPush, kUnknown };

// The peer's critical streams seen so far: each of them may be opened once.
class PeerStreams {
 public:
  // The kind of a unidirectional stream of `type`. A second control or QPACK stream fails with
  // H3_STREAM_CREATION_ERROR. kPush and kUnknown are the caller's to answer: which error a push
  // stream is depends on the side, and unknown (and reserved) types are ignored.
  H3Result<UniStream> classify(uint64_t type);

 private:
  bool control_ = false;
  bool qpack_encoder_ = false;
  bool qpack_decoder_ = false;
};

// Consumes what arrived on the peer's QPACK stream of `kind`: encoder-stream instructions go to
// `decoder`; decoder-stream bytes are dropped, since we never insert into a dynamic table. A
// decoder error, or the stream's end (H3_CLOSED_CRITICAL_STREAM), is a connection error.
H3Result<void> read_qpack_stream(Stream& raw, UniStream kind, QpackDecoder& decoder);

// The control stream's rule for a frame of `type` (RFC 9114 §6.2.1, §7.2): the first frame must
// be SETTINGS (else H3_MISSING_SETTINGS) and no later one may be (H3_FRAME_UNEXPECTED); DATA,
// HEADERS, PUSH_PROMISE and HTTP/2's reserved types are H3_FRAME_UNEXPECTED, and so is
// MAX_PUSH_ID from a server. Anything else (GOAWAY, unknown frames) is the caller's.
H3Result<void> check_control_frame(uint64_t type, bool first, bool peer_is_server);

// Stops (and for bidi, resets) a WebTransport stream we will not deliver, and releases it.
void refuse_wt_stream(Stream& raw, uint64_t code);

}  // namespace moqd::transport::webtransport
