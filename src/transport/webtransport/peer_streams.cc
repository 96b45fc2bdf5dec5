#include "transport/webtransport/peer_streams.h"

#include <utility>

namespace moqd::transport::webtransport {

H3Result<UniStream> PeerStreams::classify(uint64_t type) {
  switch (type) {
    case kStreamControl:
      if (std::exchange(control_, true)) {
        return h3_fail(H3Code::kStreamCreationError, "second control stream");
      }
      return UniStream::kControl;
    case kStreamQpackEncoder:
      // RFC 9204 §4.2: a second instance of either QPACK stream is a connection error.
      if (std::exchange(qpack_encoder_, true)) {
        return h3_fail(H3Code::kStreamCreationError, "second QPACK encoder stream");
      }
      return UniStream::kQpackEncoder;
    case kStreamQpackDecoder:
      if (std::exchange(qpack_decoder_, true)) {
        return h3_fail(H3Code::kStreamCreationError, "second QPACK decoder stream");
      }
      return UniStream::kQpackDecoder;
    case kStreamWebTransportUni:
      return UniStream::kWebTransport;
    case kStreamPush:
      return UniStream::kPush;
    default:
      return UniStream::kUnknown;
  }
}

H3Result<void> read_qpack_stream(Stream& raw, UniStream kind, QpackDecoder& decoder) {
  auto data = raw.peek();
  if (kind == UniStream::kQpackEncoder && !data.empty()) {
    auto r = decoder.read_encoder_stream(data);
    if (!r) {
      return r;
    }
  }
  raw.consume(data.size());
  if (raw.has_peer_fin()) {
    return h3_fail(H3Code::kClosedCriticalStream, kind == UniStream::kQpackEncoder
                                                      ? "QPACK encoder stream closed"
                                                      : "QPACK decoder stream closed");
  }
  return {};
}

H3Result<void> check_control_frame(uint64_t type, bool first, bool peer_is_server) {
  if (first) {
    if (type != kFrameSettings) {
      return h3_fail(H3Code::kMissingSettings, "first control frame is not SETTINGS");
    }
    return {};
  }
  switch (type) {
    case kFrameSettings:
      return h3_fail(H3Code::kFrameUnexpected, "second SETTINGS");
    case kFrameMaxPushId:  // RFC 9114 §7.2.7: only clients send it
      if (!peer_is_server) {
        return {};
      }
      [[fallthrough]];
    case kFrameData:
    case kFrameHeaders:
    case kFramePushPromise:
    case 0x02:  // RFC 9114 §7.2.8: HTTP/2's PRIORITY, PING, WINDOW_UPDATE, CONTINUATION
    case 0x06:
    case 0x08:
    case 0x09:
      return h3_fail(H3Code::kFrameUnexpected, "unexpected frame on the control stream");
    default:
      return {};
  }
}

void refuse_wt_stream(Stream& raw, uint64_t code) {
  raw.stop_sending(code);
  if (!raw.is_uni()) {
    raw.reset(code);
  }
  raw.release();
}

}  // namespace moqd::transport::webtransport
