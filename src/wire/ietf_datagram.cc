// OBJECT_DATAGRAM codec, drafts 14..20. See ietf_datagram.h.
#include "wire/ietf_datagram.h"

namespace moqd::wire::ietf {

namespace {
constexpr uint64_t kExtensions = 0x01;
constexpr uint64_t kEndOfGroup = 0x02;
constexpr uint64_t kZeroObjectId = 0x04;
constexpr uint64_t kDefaultPriority = 0x08;
constexpr uint64_t kStatus = 0x20;

// Reads varints in the draft's form; the first problem sticks.
class DatagramReader {
 public:
  DatagramReader(std::span<const uint8_t> in, VarintForm form) : in_(in), form_(form) {}
  uint64_t varint() {
    if (error_) {
      return 0;
    }
    auto r = read_varint(form_, in_.subspan(at_));
    if (!r) {
      error_ = r.error();
      return 0;
    }
    if (!r->has_value()) {
      error_ = make_error(ErrorCode::kDecode, "truncated datagram");
      return 0;
    }
    at_ += (*r)->consumed;
    return (*r)->value;
  }
  uint8_t u8() {
    if (!error_ && at_ >= in_.size()) {
      error_ = make_error(ErrorCode::kDecode, "truncated datagram");
    }
    return error_ ? 0 : in_[at_++];
  }
  std::string bytes(uint64_t n) {
    if (!error_ && n > in_.size() - at_) {
      error_ = make_error(ErrorCode::kDecode, "truncated datagram");
    }
    if (error_) {
      return {};
    }
    std::string out(reinterpret_cast<const char*>(in_.data() + at_), static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return out;
  }
  void fail(ErrorCode code, const char* detail) {
    if (!error_) {
      error_ = make_error(code, detail);
    }
  }
  const std::optional<Error>& error() const { return error_; }
  size_t at() const { return at_; }

 private:
  std::span<const uint8_t> in_;
  VarintForm form_;
  size_t at_ = 0;
  std::optional<Error> error_;
};
bool status_known(const Draft& d, uint64_t status) {
  if (status == 1) {
    return !d.request_streams;
  }
  return status == 0 || status == 3 || status == 4;
}
}  // namespace

bool is_datagram_type(Version v, uint64_t type) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return false;
  }
  if (d->number == 14) {
    return type <= 0x07 || type == 0x20 || type == 0x21;
  }
  // d15..19: 0b00X0XXXX, and a status cannot end the group (d17 §10.3.1, d18/d19 §11.3.1). d20
  // §11.3.1 words it as flags (bit 4 reserved, no unspecified bit): the same set.
  if ((type & ~uint64_t{0x2f}) != 0) {
    return false;
  }
  return !((type & kStatus) != 0 && (type & kEndOfGroup) != 0);
}

uint64_t datagram_type(bool extensions, bool end_of_group, bool zero_object_id,
                       bool default_priority, bool status) {
  return (extensions ? kExtensions : 0) | (end_of_group && !status ? kEndOfGroup : 0) |
         (zero_object_id ? kZeroObjectId : 0) | (default_priority ? kDefaultPriority : 0) |
         (status ? kStatus : 0);
}

ParseResult<ObjectDatagram> decode_datagram(Version v, std::span<const uint8_t> in,
                                            const Limits& limits) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return fail(ErrorCode::kVersion, "no OBJECT_DATAGRAM codec for this draft");
  }
  DatagramReader r(in, d->varint_form);
  ObjectDatagram o;
  o.type = r.varint();
  if (!r.error() && !is_datagram_type(v, o.type)) {
    return fail(ErrorCode::kProtocolViolation, "unknown OBJECT_DATAGRAM type");
  }
  o.track_alias = r.varint();
  o.group = r.varint();
  if ((o.type & kZeroObjectId) == 0) {
    o.object = r.varint();
  }
  if ((o.type & kDefaultPriority) == 0) {
    o.publisher_priority = r.u8();
  }
  if ((o.type & kExtensions) != 0) {
    const uint64_t n = r.varint();
    if (!r.error() && n == 0) {
      r.fail(ErrorCode::kProtocolViolation, "EXTENSIONS with an empty block");
    } else if (!r.error() && n > limits.max_extensions) {
      r.fail(ErrorCode::kBoundsExceeded, "extension headers too long");
    }
    o.extensions = r.bytes(n);
  }
  if ((o.type & kStatus) != 0) {
    o.status = r.varint();
    if (!r.error() && r.at() != in.size()) {
      r.fail(ErrorCode::kDecode, "bytes after the Object Status");
    }
    // §10.2.1.1 Object Status: 0 normal, 1 does not exist, 3 end of group, 4 end of track; d17
    // §10.2.1.1 (d18+ §11.2.1.1) drops 1.
    if (!r.error() && !status_known(*d, *o.status)) {
      r.fail(ErrorCode::kProtocolViolation, "unknown object status");
    }
    // d17 §10.3.1, d18+ §11.3.1: "only Normal Objects can have Properties".
    if (!r.error() && d->request_streams && !o.extensions.empty() && *o.status != 0) {
      r.fail(ErrorCode::kProtocolViolation, "properties on an object that is not Normal");
    }
  }
  if (r.error()) {
    return tl::unexpected(*r.error());
  }
  return Parsed<ObjectDatagram>{std::move(o), r.at()};
}

bool encode_datagram(Version v, const ObjectDatagram& o, std::span<const uint8_t> payload,
                     std::vector<uint8_t>& out) {
  const Draft* d = draft(v);
  if (d == nullptr || !is_datagram_type(v, o.type) ||
      ((o.type & kZeroObjectId) != 0 && o.object != 0) ||
      ((o.type & kDefaultPriority) == 0) != o.publisher_priority.has_value() ||
      ((o.type & kExtensions) != 0) == o.extensions.empty() ||
      ((o.type & kStatus) != 0) != o.status.has_value() ||
      (d->request_streams && o.status && *o.status != 0 && !o.extensions.empty())) {
    return false;
  }
  const VarintForm f = d->varint_form;
  write_varint(f, o.type, out);
  write_varint(f, o.track_alias, out);
  write_varint(f, o.group, out);
  if ((o.type & kZeroObjectId) == 0) {
    write_varint(f, o.object, out);
  }
  if (o.publisher_priority) {
    out.push_back(*o.publisher_priority);
  }
  if (!o.extensions.empty()) {
    write_varint(f, o.extensions.size(), out);
    out.insert(out.end(), o.extensions.begin(), o.extensions.end());
  }
  if (o.status) {
    write_varint(f, *o.status, out);
  } else {
    out.insert(out.end(), payload.begin(), payload.end());
  }
  return true;
}

}  // namespace moqd::wire::ietf
