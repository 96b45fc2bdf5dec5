#include "transport/websocket/ws_frame.h"

#include <algorithm>
#include <vector>

namespace moqd::transport::websocket {
namespace {

bool is_known_opcode(uint8_t op) {
  return op <= 0x2 || (op >= 0x8 && op <= 0xa);
}

tl::unexpected<Error> violation(const char* detail) {
  return tl::unexpected(Error{ErrorCode::kProtocolViolation, detail});
}

}  // namespace

// RFC 6455 §5.2.
ParseResult<FrameHeader> decode_frame_header(std::span<const uint8_t> data) {
  if (data.size() < 2) {
    return std::nullopt;
  }
  FrameHeader h;
  h.fin = (data[0] & 0x80) != 0;
  if ((data[0] & 0x70) != 0) {
    return violation("websocket reserved bits set");
  }
  uint8_t op = data[0] & 0x0f;
  if (!is_known_opcode(op)) {
    return violation("unknown websocket opcode");
  }
  h.opcode = static_cast<Opcode>(op);
  h.masked = (data[1] & 0x80) != 0;
  uint8_t len7 = data[1] & 0x7f;
  size_t ext = len7 == 126 ? 2 : len7 == 127 ? 8 : 0;
  size_t size = 2 + ext + (h.masked ? 4 : 0);
  if (is_control(h.opcode) && (!h.fin || len7 > kMaxControlPayload)) {
    return violation("fragmented or long websocket control frame");
  }
  if (data.size() < size) {
    return std::nullopt;
  }
  h.payload_size = len7;
  if (ext > 0) {
    h.payload_size = 0;
    for (size_t i = 0; i < ext; ++i) {
      h.payload_size = (h.payload_size << 8) | data[2 + i];
    }
    if (ext == 8 && (h.payload_size >> 63) != 0) {
      return violation("websocket length has its top bit set");
    }
    if ((ext == 2 && h.payload_size < 126) || (ext == 8 && h.payload_size <= 0xffff)) {
      return violation("websocket length not minimally encoded");
    }
  }
  if (h.masked) {
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(2 + ext), 4, h.mask_key.begin());
  }
  return Parsed<FrameHeader>{h, size};
}

size_t encode_frame_header(const FrameHeader& h, std::span<uint8_t, kMaxFrameHeaderSize> out) {
  out[0] = static_cast<uint8_t>((h.fin ? 0x80 : 0) | static_cast<uint8_t>(h.opcode));
  uint8_t mask_bit = h.masked ? 0x80 : 0;
  size_t pos = 2;
  if (h.payload_size < 126) {
    out[1] = static_cast<uint8_t>(mask_bit | h.payload_size);
  } else if (h.payload_size <= 0xffff) {
    out[1] = mask_bit | 126;
    out[2] = static_cast<uint8_t>(h.payload_size >> 8);
    out[3] = static_cast<uint8_t>(h.payload_size);
    pos = 4;
  } else {
    out[1] = mask_bit | 127;
    for (size_t i = 0; i < 8; ++i) {
      out[2 + i] = static_cast<uint8_t>(h.payload_size >> (56 - 8 * i));
    }
    pos = 10;
  }
  if (h.masked) {
    std::copy(h.mask_key.begin(), h.mask_key.end(), out.begin() + static_cast<std::ptrdiff_t>(pos));
    pos += 4;
  }
  return pos;
}

Bytes encode_frame_header(const FrameHeader& header) {
  std::array<uint8_t, kMaxFrameHeaderSize> buf;
  size_t n = encode_frame_header(header, buf);
  return Bytes::copy(std::span<const uint8_t>(buf.data(), n));
}

void apply_mask(std::span<uint8_t> data, const MaskKey& key, uint64_t offset) {
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] ^= key[(offset + i) & 3];
  }
}

Bytes encode_frame(Opcode opcode, std::span<const uint8_t> payload, bool fin,
                   const MaskKey* mask_key) {
  FrameHeader h;
  h.fin = fin;
  h.opcode = opcode;
  h.masked = mask_key != nullptr;
  if (mask_key != nullptr) {
    h.mask_key = *mask_key;
  }
  h.payload_size = payload.size();
  std::array<uint8_t, kMaxFrameHeaderSize> header;
  size_t n = encode_frame_header(h, header);
  std::vector<uint8_t> out(header.begin(), header.begin() + static_cast<std::ptrdiff_t>(n));
  out.insert(out.end(), payload.begin(), payload.end());
  if (mask_key != nullptr) {
    apply_mask(std::span<uint8_t>(out).subspan(n), *mask_key);
  }
  return Bytes::from(out);
}

std::string encode_close_payload(uint16_t code, std::string_view reason) {
  std::string out;
  out += static_cast<char>(code >> 8);
  out += static_cast<char>(code & 0xff);
  // Cut at a character boundary so the reason stays valid UTF-8.
  size_t room = std::min(reason.size(), kMaxControlPayload - 2);
  while (room < reason.size() && room > 0 && (static_cast<uint8_t>(reason[room]) & 0xc0) == 0x80) {
    --room;
  }
  out.append(reason.substr(0, room));
  return out;
}

bool is_valid_close_code(uint16_t code) {
  if (code >= 3000 && code <= 4999) {
    return true;
  }
  return code >= 1000 && code <= 1011 && code != 1004 && code != kCloseNoStatus &&
         code != kCloseAbnormal;
}

Result<ClosePayload> decode_close_payload(std::span<const uint8_t> payload) {
  ClosePayload out;
  if (payload.empty()) {
    return out;
  }
  if (payload.size() < 2) {
    return violation("websocket close payload of one byte");
  }
  out.code = static_cast<uint16_t>((payload[0] << 8) | payload[1]);
  if (!is_valid_close_code(out.code)) {
    return violation("invalid websocket close code");
  }
  auto reason = payload.subspan(2);
  if (!is_valid_utf8(reason)) {
    return tl::unexpected(Error{ErrorCode::kDecode, "websocket close reason not utf-8"});
  }
  out.reason = std::string_view(reinterpret_cast<const char*>(reason.data()), reason.size());
  return out;
}

// RFC 3629 §4 table of well-formed sequences.
bool Utf8Validator::feed(std::span<const uint8_t> data) {
  for (uint8_t b : data) {
    if (!ok_) {
      return false;
    }
    if (need_ > 0) {
      ok_ = b >= lo_ && b <= hi_;
      lo_ = 0x80;
      hi_ = 0xbf;
      --need_;
      continue;
    }
    if (b < 0x80) {
      continue;
    }
    if (b >= 0xc2 && b <= 0xdf) {
      need_ = 1;
    } else if (b >= 0xe0 && b <= 0xef) {
      need_ = 2;
      lo_ = b == 0xe0 ? 0xa0 : 0x80;
      hi_ = b == 0xed ? 0x9f : 0xbf;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need_ = 3;
      lo_ = b == 0xf0 ? 0x90 : 0x80;
      hi_ = b == 0xf4 ? 0x8f : 0xbf;
    } else {
      ok_ = false;
    }
  }
  return ok_;
}

bool is_valid_utf8(std::span<const uint8_t> data) {
  Utf8Validator v;
  return v.feed(data) && v.is_complete();
}

}  // namespace moqd::transport::websocket
