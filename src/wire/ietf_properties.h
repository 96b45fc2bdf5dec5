#pragma once
// An object's Extension Headers (d14..d17) / Properties (d18+) block between drafts. The block is
// Key-Value-Pairs to its end: an even type holds one varint, an odd type a length and that many
// bytes. Drafts differ only in how they write it: QUIC varints (14..16) or leading-ones ones (17;
// 18+ with the 7-byte form), and types absolute (14, 15) or each a delta from the previous one
// (16+). A relay that forwards the block between two drafts of the same encoding passes its bytes
// through; between two others it rewrites the same pairs, in the same order, in the other form.
#include <cstdint>
#include <span>
#include <vector>

#include "wire/ietf.h"

namespace moqd::wire::ietf {

// The block is written the same way in both drafts (its bytes can be forwarded as they are).
bool same_property_encoding(const Draft& a, const Draft& b);

// Appends `in` (a whole block in `from`'s encoding) to `out` in `to`'s. False, with `out` as it
// was, when `in` is not a well-formed block (a truncated pair, a length past the end, a type past
// 2^62-1, a varint `from` does not accept) or when `to` cannot write it (types that go down, which
// a delta-coded draft cannot express).
bool transcode_properties(const Draft& from, const Draft& to, std::span<const uint8_t> in,
                          std::vector<uint8_t>& out);

}  // namespace moqd::wire::ietf
