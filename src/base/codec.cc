#include "base/codec.h"

namespace moqd {

size_t varint_size(uint64_t v) {
  if (v < (1u << 6)) {
    return 1;
  }
  if (v < (1u << 14)) {
    return 2;
  }
  if (v < (uint64_t{1} << 30)) {
    return 4;
  }
  return 8;
}

bool Reader::need(size_t n) {
  if (!ok() || remaining() < n) {
    truncated_ = truncated_ || !too_long_;
    return false;
  }
  return true;
}

std::optional<uint64_t> Reader::varint() {
  if (!need(1)) {
    return std::nullopt;
  }
  size_t len = size_t{1} << (data_[pos_] >> 6);
  if (!need(len)) {
    return std::nullopt;
  }
  uint64_t v = data_[pos_] & 0x3f;
  for (size_t i = 1; i < len; ++i) {
    v = (v << 8) | data_[pos_ + i];
  }
  pos_ += len;
  return v;
}

std::optional<uint8_t> Reader::u8() {
  if (!need(1)) {
    return std::nullopt;
  }
  return data_[pos_++];
}

std::optional<uint16_t> Reader::u16() {
  if (!need(2)) {
    return std::nullopt;
  }
  uint16_t v = static_cast<uint16_t>((data_[pos_] << 8) | data_[pos_ + 1]);
  pos_ += 2;
  return v;
}

std::optional<std::span<const uint8_t>> Reader::bytes(size_t n) {
  if (!need(n)) {
    return std::nullopt;
  }
  auto out = data_.subspan(pos_, n);
  pos_ += n;
  return out;
}

std::optional<std::string_view> Reader::string(size_t max_len) {
  auto len = varint();
  if (!len) {
    return std::nullopt;
  }
  if (*len > max_len) {
    too_long_ = true;
    return std::nullopt;
  }
  auto b = bytes(static_cast<size_t>(*len));
  if (!b) {
    return std::nullopt;
  }
  return std::string_view(reinterpret_cast<const char*>(b->data()), b->size());
}

void Writer::varint(uint64_t v) {
  switch (varint_size(v)) {
    case 1:
      u8(static_cast<uint8_t>(v));
      break;
    case 2:
      u16(static_cast<uint16_t>(v | 0x4000));
      break;
    case 4:
      for (int shift = 24; shift >= 0; shift -= 8) {
        u8(static_cast<uint8_t>(((v | (uint64_t{2} << 30)) >> shift)));
      }
      break;
    default:
      for (int shift = 56; shift >= 0; shift -= 8) {
        u8(static_cast<uint8_t>(((v | (uint64_t{3} << 62)) >> shift)));
      }
      break;
  }
}

std::string to_hex(std::span<const uint8_t> data) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < data.size(); ++i) {
    if (i) {
      out.push_back(' ');
    }
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 15]);
  }
  return out;
}

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  int hi = -1;
  for (char c : hex) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      continue;
    }
    if (hi < 0) {
      hi = v;
    } else {
      out.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  return out;
}

}  // namespace moqd
