#pragma once
// QPACK (RFC 9204) for the WebTransport server, on nghttp3's standalone QPACK encoder and decoder
// (nghttp3 0.8 cannot do WebTransport itself; see docs/ARCHITECTURE.md). We advertise
// QPACK_MAX_TABLE_CAPACITY 0 and QPACK_BLOCKED_STREAMS 0, so a peer may only use the static table
// and literals: a field section that references the dynamic table, or an encoder-stream
// instruction that would insert into it, is a QPACK error. We encode with no dynamic table
// either, so we never need the peer's decoder stream.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transport/webtransport/h3.h"

namespace moqd::transport::webtransport {

// Decodes the peer's field sections. One per connection, on the connection's thread.
class QpackDecoder {
 public:
  // Fails (kInternalError) only when nghttp3 cannot allocate.
  static H3Result<std::unique_ptr<QpackDecoder>> create();
  ~QpackDecoder();
  QpackDecoder(const QpackDecoder&) = delete;
  QpackDecoder& operator=(const QpackDecoder&) = delete;

  // Decodes one HEADERS frame payload. Fails with kQpackDecompressionFailed on invalid or
  // dynamic-table input, and with kExcessiveLoad when the decoded fields exceed
  // `max_field_section_size` (RFC 9114 §4.2.2 size: name + value + 32 per field).
  H3Result<HeaderList> decode(std::span<const uint8_t> field_section, size_t max_field_section_size);
  // Bytes from the peer's encoder stream (type byte already removed). Fails with
  // kQpackEncoderStreamError on anything but Set Dynamic Table Capacity 0.
  H3Result<void> read_encoder_stream(std::span<const uint8_t> data);

 private:
  struct Impl;
  explicit QpackDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Encodes a field section (a HEADERS frame payload) with the static table and literals only.
// Field names must be lower case.
H3Result<std::vector<uint8_t>> encode_field_section(const HeaderList& headers);

}  // namespace moqd::transport::webtransport
