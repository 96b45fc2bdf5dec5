#pragma once
// Sans-I/O byte codecs: QUIC varints (RFC 9000 §16), a bounds-checked Reader over a span and a
// Writer that appends to a vector. Every wire decoder in moqd is built from these.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace moqd {

inline constexpr uint64_t kMaxVarint = (uint64_t{1} << 62) - 1;

// Number of bytes the minimal encoding of `v` takes (1, 2, 4 or 8). `v` must be <= kMaxVarint.
size_t varint_size(uint64_t v);

// Reads fields from a byte span. Each read returns nullopt when the span is too short; the reader
// then stays failed (is_truncated()) so a decoder can read a whole message and check once.
// The Reader never owns the bytes.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}

  std::optional<uint64_t> varint();
  std::optional<uint8_t> u8();
  std::optional<uint16_t> u16();
  // `n` raw bytes, viewed in place.
  std::optional<std::span<const uint8_t>> bytes(size_t n);
  // A varint length then that many bytes, viewed in place. A length above `max_len` makes the
  // reader fail with is_too_long() set, before anything is consumed past the length.
  std::optional<std::string_view> string(size_t max_len);

  size_t consumed() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool empty() const { return remaining() == 0; }
  std::span<const uint8_t> rest() const { return data_.subspan(pos_); }
  bool is_truncated() const { return truncated_; }
  bool is_too_long() const { return too_long_; }
  bool ok() const { return !truncated_ && !too_long_; }

 private:
  bool need(size_t n);

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  bool truncated_ = false;
  bool too_long_ = false;
};

// Appends fields to a byte vector. Varints are always minimal.
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}

  void varint(uint64_t v);
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) {
    out_.push_back(static_cast<uint8_t>(v >> 8));
    out_.push_back(static_cast<uint8_t>(v));
  }
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void bytes(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  void string(std::string_view s) {
    varint(s.size());
    bytes(s);
  }
  size_t size() const { return out_.size(); }
  std::vector<uint8_t>& buffer() { return out_; }

 private:
  std::vector<uint8_t>& out_;
};

// Result of decoding one message from the front of a buffer: the message and how many bytes it
// took, nullopt when more bytes are needed, or an error (the peer sent something invalid).
template <class T>
struct Parsed {
  T value;
  size_t consumed = 0;
};
template <class T>
using ParseResult = Result<std::optional<Parsed<T>>>;

// Hex helpers for tests and logs: "0a ff" <-> bytes. from_hex ignores spaces.
std::string to_hex(std::span<const uint8_t> data);
std::vector<uint8_t> from_hex(std::string_view hex);

}  // namespace moqd
