// FETCH streams of drafts 14..20 (see ietf.h): FETCH_HEADER and the objects after it.
#include <algorithm>
#include <cstdint>

#include "wire/ietf.h"

namespace moqd::wire::ietf {
namespace {

using Span = std::span<const uint8_t>;

// d15/16 §10.4.4 Serialization Flags.
constexpr uint64_t kSubgroupMask = 0x03;  // 0: zero, 1: previous, 2: previous + 1, 3: present
constexpr uint64_t kObjectPresent = 0x04;
constexpr uint64_t kGroupPresent = 0x08;
constexpr uint64_t kPriorityPresent = 0x10;
constexpr uint64_t kExtensionsPresent = 0x20;
constexpr uint64_t kDatagram = 0x40;         // d16: no subgroup; d15: a violation
constexpr uint64_t kEndOfNonExistent = 0x8c;  // d16+
constexpr uint64_t kEndOfUnknown = 0x10c;     // d16+
constexpr uint64_t kEndOfTimedOut = 0x20c;    // d20 §11.4.4

bool is_end_of_range(const Draft& d, uint64_t flags) {
  return d.number >= 16 &&
         (flags == kEndOfNonExistent || flags == kEndOfUnknown ||
          (d.number >= 20 && flags == kEndOfTimedOut));
}

// Reads varints and bytes off the front of a span; the first shortfall or error sticks.
struct Cursor {
  VarintForm form;
  Span in;
  size_t at = 0;
  bool short_ = false;
  std::optional<Error> error;

  uint64_t varint() {
    if (short_ || error) {
      return 0;
    }
    auto r = read_varint(form, in.subspan(at));
    if (!r) {
      error = r.error();
      return 0;
    }
    if (!r->has_value()) {
      short_ = true;
      return 0;
    }
    at += (*r)->consumed;
    return (*r)->value;
  }
  uint8_t u8() {
    if (short_ || error) {
      return 0;
    }
    if (at >= in.size()) {
      short_ = true;
      return 0;
    }
    return in[at++];
  }
  void bytes(size_t n, size_t max, std::string& out) {
    if (short_ || error) {
      return;
    }
    if (n > max) {
      error = make_error(ErrorCode::kBoundsExceeded, "extension headers too long");
      return;
    }
    if (in.size() - at < n) {
      short_ = true;
      return;
    }
    out.assign(reinterpret_cast<const char*>(in.data() + at), n);
    at += n;
  }
};

template <class T>
ParseResult<T> finish(const Cursor& c, T value) {
  if (c.error) {
    return tl::unexpected(*c.error);
  }
  if (c.short_) {
    return std::optional<Parsed<T>>();
  }
  return Parsed<T>{std::move(value), c.at};
}

// d16 End of Range: group and object, nothing else.
void read_end_of_range(Cursor& c, uint64_t flags, FetchObject& o) {
  o.end_of_range = flags;
  o.group = c.varint();
  o.object = c.varint();
}

// d15..17: the fields the flags say are present; the others from `prev`. d18+ (`deltas`): Group ID
// and Object ID are deltas (d18 §11.4.4): a new group is the previous one plus (ascending) or
// minus (descending) the delta plus 1, its Object ID then absolute; in the same group the Object ID
// is the previous one plus the delta.
void read_flagged(Cursor& c, uint64_t flags, const FetchObject* prev, bool deltas, bool descending,
                  FetchObject& o) {
  const uint64_t sub = flags & kSubgroupMask;
  const bool refers = (flags & kDatagram) == 0 && (sub == 1 || sub == 2);
  if (prev == nullptr && (refers || (flags & (kObjectPresent | kGroupPresent | kPriorityPresent)) !=
                                        (kObjectPresent | kGroupPresent | kPriorityPresent))) {
    c.error = make_error(ErrorCode::kProtocolViolation, "first fetch object refers to a previous one");
    return;
  }
  const bool group_present = (flags & kGroupPresent) != 0;
  o.group = group_present ? c.varint() : prev->group;
  if (deltas && group_present && prev != nullptr && !c.short_ && !c.error) {
    const uint64_t delta = o.group;
    if (descending ? delta >= prev->group : delta >= kMaxVarint - prev->group) {
      c.error = make_error(ErrorCode::kProtocolViolation, "fetch group delta leaves the group range");
      return;
    }
    o.group = descending ? prev->group - delta - 1 : prev->group + delta + 1;
  }
  if ((flags & kDatagram) != 0) {
    o.subgroup = 0;
  } else if (sub == 3) {
    o.subgroup = c.varint();
  } else {
    o.subgroup = sub == 0 ? 0 : prev->subgroup + (sub == 2 ? 1 : 0);
  }
  if ((flags & kObjectPresent) == 0) {
    o.object = prev->object + 1;
  } else {
    o.object = c.varint();
    if (deltas && !group_present && !c.short_ && !c.error) {
      o.object = o.object > kMaxVarint - prev->object ? kMaxVarint + 1 : prev->object + o.object;
    }
  }
  o.publisher_priority = (flags & kPriorityPresent) != 0 ? c.u8() : prev->publisher_priority;
  if (o.object > kMaxVarint || o.subgroup > kMaxVarint) {
    // The previous object's id (or subgroup) plus one past 2^62-1: no varint can carry it.
    c.error = make_error(ErrorCode::kProtocolViolation, "fetch object id overflows");
  }
}

}  // namespace

void encode_fetch_header(Version v, uint64_t request_id, std::vector<uint8_t>& out) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return;
  }
  write_varint(d->varint_form, kFetchHeaderType, out);
  write_varint(d->varint_form, request_id, out);
}

ParseResult<uint64_t> decode_fetch_header(Version v, Span in) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return fail(ErrorCode::kVersion, "no FETCH stream in this draft");
  }
  Cursor c{d->varint_form, in};
  const uint64_t type = c.varint();
  if (!c.short_ && !c.error && type != kFetchHeaderType) {
    return fail(ErrorCode::kProtocolViolation, "not a FETCH_HEADER");
  }
  const uint64_t id = c.varint();
  return finish(c, id);
}

void encode_fetch_object(Version v, const FetchObject& o, std::vector<uint8_t>& out) {
  encode_fetch_object(v, o, nullptr, false, out);
}

void encode_fetch_object(Version v, const FetchObject& o, const FetchObject* previous,
                         bool descending, std::vector<uint8_t>& out) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return;
  }
  const VarintForm f = d->varint_form;
  if (is_end_of_range(*d, o.end_of_range)) {
    write_varint(f, o.end_of_range, out);
    write_varint(f, o.group, out);
    write_varint(f, o.object, out);
    return;
  }
  if (d->number >= 15) {
    // Every field present, subgroup explicit unless zero: each object stands alone.
    // d18+: the same group as the previous object leaves Group ID Delta out (present, it would
    // name another group) and writes the Object ID as a delta.
    const bool deltas = d->number >= 18 && previous != nullptr;
    const bool same_group = deltas && previous->group == o.group;
    uint64_t flags = kObjectPresent | (same_group ? 0 : kGroupPresent) | kPriorityPresent;
    flags |= o.subgroup != 0 ? kSubgroupMask : 0;
    flags |= o.extensions.empty() ? 0 : kExtensionsPresent;
    if (d->number == 15) {
      out.push_back(static_cast<uint8_t>(flags));  // d15: Serialization Flags (8)
    } else {
      write_varint(f, flags, out);
    }
    if (!same_group) {
      const uint64_t g = !deltas        ? o.group
                         : descending ? previous->group - o.group - 1
                                      : o.group - previous->group - 1;
      write_varint(f, g, out);
    }
    if (o.subgroup != 0) {
      write_varint(f, o.subgroup, out);
    }
    write_varint(f, same_group ? o.object - previous->object : o.object, out);
    out.push_back(o.publisher_priority);
    if (!o.extensions.empty()) {
      write_varint(f, o.extensions.size(), out);
      out.insert(out.end(), o.extensions.begin(), o.extensions.end());
    }
  } else {
    write_varint(f, o.group, out);
    write_varint(f, o.subgroup, out);
    write_varint(f, o.object, out);
    out.push_back(o.publisher_priority);
    write_varint(f, o.extensions.size(), out);  // d14: the length is always there
    out.insert(out.end(), o.extensions.begin(), o.extensions.end());
  }
  write_varint(f, o.payload_length, out);
  if (o.payload_length == 0 && d->number <= 15) {
    write_varint(f, o.status, out);  // d16+ have no Object Status on FETCH streams
  }
}

ParseResult<FetchObject> decode_fetch_object(Version v, const FetchObject* previous, Span in,
                                             const Limits& limits) {
  return decode_fetch_object(v, previous, false, in, limits);
}

ParseResult<FetchObject> decode_fetch_object(Version v, const FetchObject* previous,
                                             bool descending, Span in, const Limits& limits) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return fail(ErrorCode::kVersion, "no FETCH stream in this draft");
  }
  Cursor c{d->varint_form, in};
  FetchObject o;
  if (d->number == 14) {
    o.group = c.varint();
    o.subgroup = c.varint();
    o.object = c.varint();
    o.publisher_priority = c.u8();
    c.bytes(static_cast<size_t>(std::min<uint64_t>(c.varint(), SIZE_MAX)), limits.max_extensions,
            o.extensions);
  } else {
    const uint64_t flags = d->number == 15 ? c.u8() : c.varint();
    if (c.short_ || c.error) {
      return finish(c, o);
    }
    if (is_end_of_range(*d, flags)) {
      read_end_of_range(c, flags, o);
      return finish(c, o);
    }
    if (flags >= (d->number == 15 ? kDatagram : 0x80)) {
      return fail(ErrorCode::kProtocolViolation, "reserved serialization flags");
    }
    read_flagged(c, flags, previous, d->number >= 18, descending, o);
    if ((flags & kExtensionsPresent) != 0) {
      c.bytes(static_cast<size_t>(std::min<uint64_t>(c.varint(), SIZE_MAX)), limits.max_extensions,
              o.extensions);
    }
  }
  o.payload_length = c.varint();
  if (o.payload_length == 0 && d->number <= 15) {
    o.status = c.varint();
    if (!c.short_ && !c.error && (o.status == 2 || o.status > 4)) {
      return fail(ErrorCode::kProtocolViolation, "unknown object status");
    }
  }
  return finish(c, o);
}

}  // namespace moqd::wire::ietf
