#pragma once
// OBJECT_DATAGRAM (d14..d17 §10.3.1, d18..d20 §11.3.1): one object, or with the STATUS bit one
// Object Status, in a QUIC / WebTransport datagram. Pure: no I/O. Varints in the draft's form
// (d17 leading ones, d18+ with the 7-byte form); d17+ call the extensions Properties (same
// length-prefixed block, §10.2.1.2 / §11.2.1.2) and forbid them on a status that is not Normal.
//
// Type bits (d16 §10.3.1; d15's table is the same set): 0x01 EXTENSIONS, 0x02 END_OF_GROUP,
// 0x04 ZERO_OBJECT_ID (no Object ID field, the id is 0), 0x08 DEFAULT_PRIORITY (no Publisher
// Priority field; d15+), 0x20 STATUS (an Object Status instead of a payload). d14 knows only
// 0x00..0x07, 0x20 and 0x21; d15..d20 0x00..0x0F and 0x20..0x2F except STATUS with END_OF_GROUP.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "wire/ietf.h"

namespace moqd::wire::ietf {

struct ObjectDatagram {
  uint64_t type = 0;  // the wire type, kept so a relay can forward the same form
  uint64_t track_alias = 0;
  uint64_t group = 0;
  uint64_t object = 0;  // 0 when the type has ZERO_OBJECT_ID
  std::optional<uint8_t> publisher_priority;  // absent with DEFAULT_PRIORITY
  std::string extensions;          // raw Extension Headers, non-empty exactly with EXTENSIONS
  std::optional<uint64_t> status;  // with STATUS (no payload then)
  friend bool operator==(const ObjectDatagram&, const ObjectDatagram&) = default;

  bool end_of_group() const { return (type & 0x02) != 0; }
};

// True when `type` is an OBJECT_DATAGRAM type of draft `v`.
bool is_datagram_type(Version v, uint64_t type);
// The type for these properties (`default_priority` only from d15 on; status excludes end of
// group).
uint64_t datagram_type(bool extensions, bool end_of_group, bool zero_object_id,
                       bool default_priority, bool status);

// One datagram's header. A datagram arrives whole, so a truncated one is an error (kDecode), never
// need-more; the result always has a value. `consumed`: the header's bytes; the payload is the
// rest of the datagram (empty for a STATUS type, whose bytes must end with the status). Errors:
// an unknown type for the draft, EXTENSIONS with a zero length (kProtocolViolation, §10.3.1),
// extensions over Limits::max_extensions (kBoundsExceeded), an unknown Object Status for the
// draft (kProtocolViolation; 1 DOES_NOT_EXIST is gone from d17 on), Properties with a status
// other than Normal on d17+ (kProtocolViolation).
ParseResult<ObjectDatagram> decode_datagram(Version v, std::span<const uint8_t> in,
                                            const Limits& limits);
// Appends the header, then `payload` (ignored for a STATUS type). False (nothing written) when the
// fields do not match the type or the draft lacks it, or properties ride a non-Normal status on
// d17+ (a caller bug).
bool encode_datagram(Version v, const ObjectDatagram& d, std::span<const uint8_t> payload,
                     std::vector<uint8_t>& out);

}  // namespace moqd::wire::ietf
