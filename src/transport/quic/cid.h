#pragma once
// moqd's connection IDs and the parsing the UDP endpoint needs before any connection exists.
// Sans-I/O and thread-safe: pure functions plus one per-process random key.
//
// Format: every CID moqd issues is kCidLength (16) bytes; byte 0 encodes the owning worker (its
// index, so at most 256 workers), bytes 1..15 are random. A datagram that the kernel's
// SO_REUSEPORT hashing steers to the wrong worker is forwarded to worker_of(dcid).
#include <ngtcp2/ngtcp2.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace moqd::transport::quic {

inline constexpr size_t kCidLength = 16;
inline constexpr size_t kStatelessResetTokenLength = NGTCP2_STATELESS_RESET_TOKENLEN;
// Workers a CID can name (byte 0).
inline constexpr size_t kMaxCidWorkers = 256;

using StatelessResetToken = std::array<uint8_t, kStatelessResetTokenLength>;

// Fills `out` with `n` bytes of the cryptographic RNG (connection IDs, reset tokens, keys); aborts
// when it has no entropy.
void fill_random(uint8_t* out, size_t n);

// A fresh CID owned by `worker` (< kMaxCidWorkers): byte 0 = worker, the rest from the
// cryptographic RNG.
ngtcp2_cid make_cid(size_t worker);

// The worker a moqd CID names, or nullopt for a CID of another length (a client-chosen DCID of an
// Initial, which any worker may take).
std::optional<size_t> worker_of(std::span<const uint8_t> cid);

// HMAC-SHA256(process key, cid) truncated to 16 bytes (RFC 9000 §10.3.2): the same CID always
// gets the same token within this process, so any worker can answer for any CID without state.
StatelessResetToken stateless_reset_token(std::span<const uint8_t> cid);

// Fills what Connection's CidGenerator asks for: a new CID for `worker` and its reset token.
void generate_cid(size_t worker, ngtcp2_cid* cid, uint8_t* reset_token);

// The destination connection ID of a QUIC packet, bounds-checked against the datagram.
// Long header (RFC 9000 §17.2): the DCID length byte is trusted only up to 20 (version 1) or 255
// (other versions, for Version Negotiation) and only if the bytes are there. Short header
// (§17.3): `short_dcid_len` bytes after the first byte. Returns nullopt for a datagram too short
// to hold one.
std::optional<std::span<const uint8_t>> extract_dcid(std::span<const uint8_t> datagram,
                                                     size_t short_dcid_len);

// True for a long-header packet (first byte's top bit).
inline bool is_long_header(std::span<const uint8_t> datagram) {
  return !datagram.empty() && (datagram[0] & 0x80) != 0;
}

// True when `datagram` is a QUIC v1 Initial (long header, type 0); says nothing of its validity.
bool is_initial(std::span<const uint8_t> datagram);

}  // namespace moqd::transport::quic
