#include "wire/ietf_properties.h"

#include "base/codec.h"

namespace moqd::wire::ietf {

bool same_property_encoding(const Draft& a, const Draft& b) {
  return a.varint_form == b.varint_form && a.delta_types == b.delta_types;
}

bool transcode_properties(const Draft& from, const Draft& to, std::span<const uint8_t> in,
                          std::vector<uint8_t>& out) {
  const size_t start = out.size();
  auto fail = [&] {
    out.resize(start);
    return false;
  };
  auto next = [&](uint64_t& v) {
    auto r = read_varint(from.varint_form, in);
    if (!r || !r->has_value()) {
      return false;
    }
    v = (*r)->value;
    in = in.subspan((*r)->consumed);
    return true;
  };
  uint64_t prev_in = 0;
  uint64_t prev_out = 0;
  while (!in.empty()) {
    uint64_t t = 0;
    if (!next(t)) {
      return fail();
    }
    uint64_t type = t;
    if (from.delta_types) {
      if (t > kMaxVarint - prev_in) {
        return fail();
      }
      type = prev_in + t;
    }
    prev_in = type;
    if (to.delta_types) {
      if (type < prev_out) {
        return fail();
      }
      write_varint(to.varint_form, type - prev_out, out);
    } else {
      write_varint(to.varint_form, type, out);
    }
    prev_out = type;
    uint64_t value = 0;
    if (!next(value)) {
      return fail();
    }
    write_varint(to.varint_form, value, out);
    if ((type & 1) != 0) {
      if (value > in.size()) {
        return fail();
      }
      out.insert(out.end(), in.begin(), in.begin() + static_cast<std::ptrdiff_t>(value));
      in = in.subspan(static_cast<size_t>(value));
    }
  }
  return true;
}

}  // namespace moqd::wire::ietf
