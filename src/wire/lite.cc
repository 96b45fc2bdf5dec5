#include "wire/lite.h"

#include <algorithm>
#include <utility>

// moq-lite 01..05 codecs (protocol/README.md §1, §2.4, §2.6, §3.4; lite-05: NET-0.3.md §3). Contract details the header
// leaves open:
// - Encoding a message with a version that lacks it writes nothing; decoding it is kVersion.
//   Non-lite versions count as lacking every message here.
// - Encoding a sequence of kMaxVarint in a start/end group field, or a SETUP whose body passes
//   65535 bytes, is a caller bug: the former is not representable (+1 encoding), the latter
//   writes nothing.
// - An odd-keyed setup parameter writes `bytes`, an even-keyed one `value`; the other is ignored.

namespace moqd::wire {
namespace {

using Span = std::span<const uint8_t>;

constexpr uint64_t kClientSetupType = 0x20;
constexpr uint64_t kServerSetupType = 0x21;
constexpr uint64_t kSubscribeOkType = 0x0;
constexpr uint64_t kSubscribeDropType = 0x1;
// lite-05 subscribe responses.
constexpr uint64_t kSubscribeStartType = 0x0;
constexpr uint64_t kSubscribeEndType = 0x1;
constexpr uint64_t kSubscribeDrop05Type = 0x2;
constexpr size_t kMaxSetupBody = 0xffff;  // u16 length prefix

bool is_lite_01_02(Version v) { return v == Version::kLite01 || v == Version::kLite02; }
bool is_lite04(Version v) { return is_lite04_plus(v); }  // hop ids, exclude_hop, rtt, GOAWAY

tl::unexpected<Error> version_error() {
  return fail(ErrorCode::kVersion, "message not defined in this version");
}

template <class T>
ParseResult<T> need_more() {
  return std::optional<Parsed<T>>();
}

// Start/end group on the wire: 0 = none, otherwise the sequence plus one.
uint64_t to_plus_one(const std::optional<uint64_t>& seq) { return seq ? *seq + 1 : 0; }
std::optional<uint64_t> from_plus_one(uint64_t wire) {
  return wire == 0 ? std::nullopt : std::optional<uint64_t>(wire - 1);
}

// --- Encoding helpers.

// Appends varint(size) + body. The body is written in place and the prefix rotated in front of
// it, so no temporary buffer is needed.
template <class F>
void write_sized(std::vector<uint8_t>& out, F&& body) {
  size_t start = out.size();
  Writer w(out);
  body(w);
  size_t size = out.size() - start;
  w.varint(size);
  std::rotate(out.begin() + static_cast<ptrdiff_t>(start),
              out.begin() + static_cast<ptrdiff_t>(start + size), out.end());
}

// Appends type varint + u16 length + body (README §2.4).
template <class F>
void write_setup(std::vector<uint8_t>& out, uint64_t type, F&& body) {
  size_t start = out.size();
  Writer w(out);
  w.varint(type);
  w.u16(0);
  size_t body_start = out.size();
  body(w);
  size_t len = out.size() - body_start;
  if (len > kMaxSetupBody) {
    out.resize(start);
    return;
  }
  out[body_start - 2] = static_cast<uint8_t>(len >> 8);
  out[body_start - 1] = static_cast<uint8_t>(len);
}

void write_parameters(Writer& w, const std::vector<SetupParameter>& params) {
  w.varint(params.size());
  for (const auto& p : params) {
    w.varint(p.key);
    if (p.key % 2 == 0) {
      w.varint(p.value);
    } else {
      w.string(p.bytes);
    }
  }
}

// priority, ordered, max_latency, start, end: shared by lite-03+ SUBSCRIBE, SUBSCRIBE_OK and
// SUBSCRIBE_UPDATE.
template <class M>
void write_delivery(Writer& w, const M& m) {
  w.u8(m.priority);
  w.u8(m.ordered ? 1 : 0);
  w.varint(m.max_latency_ms);
  w.varint(to_plus_one(m.start_group));
  w.varint(to_plus_one(m.end_group));
}

// --- Decoding helpers. Field reads may run past the body; the Reader remembers that, and
// check_consumed turns it into one error at the end. Semantic errors return at once.

Status check_consumed(const Reader& r) {
  if (r.is_too_long()) {
    return fail(ErrorCode::kBoundsExceeded, "string longer than its limit");
  }
  if (r.is_truncated()) {
    return fail(ErrorCode::kDecode, "message body shorter than its fields");
  }
  if (!r.empty()) {
    return fail(ErrorCode::kDecode, "trailing bytes in message body");
  }
  return {};
}

// Parses a complete, buffered body; `consumed` is the whole message including its prefix.
template <class T, class F>
ParseResult<T> parse_body(Span body, size_t consumed, F&& parse) {
  Reader r(body);
  T value{};
  if (Status s = parse(r, value); !s) {
    return tl::unexpected(s.error());
  }
  if (Status s = check_consumed(r); !s) {
    return tl::unexpected(s.error());
  }
  return Parsed<T>{std::move(value), consumed};
}

// varint(size) + body: nullopt until the whole body is buffered, but a size above the limit
// fails at once.
template <class T, class F>
ParseResult<T> decode_sized(Span in, const DecodeLimits& l, F&& parse) {
  Reader r(in);
  auto size = r.varint();
  if (!size) {
    return need_more<T>();
  }
  if (*size > l.max_message_size) {
    return fail(ErrorCode::kBoundsExceeded, "message larger than max_message_size");
  }
  auto body = r.bytes(static_cast<size_t>(*size));
  if (!body) {
    return need_more<T>();
  }
  return parse_body<T>(*body, r.consumed(), std::forward<F>(parse));
}

// type varint + u16 length + body (README §2.4).
template <class T, class F>
ParseResult<T> decode_setup(Span in, uint64_t type, const DecodeLimits& l, F&& parse) {
  Reader r(in);
  auto t = r.varint();
  if (!t) {
    return need_more<T>();
  }
  if (*t != type) {
    return fail(ErrorCode::kDecode, "unexpected setup message type");
  }
  auto len = r.u16();
  if (!len) {
    return need_more<T>();
  }
  if (*len > l.max_message_size) {
    return fail(ErrorCode::kBoundsExceeded, "setup larger than max_message_size");
  }
  auto body = r.bytes(*len);
  if (!body) {
    return need_more<T>();
  }
  return parse_body<T>(*body, r.consumed(), std::forward<F>(parse));
}

void read_string(Reader& r, size_t max_len, std::string& out) {
  if (auto s = r.string(max_len)) {
    out.assign(*s);
  }
}

// moq-lite bools are one byte, 0 or 1; JS and Rust reject anything else (README §1.3).
Status read_bool(Reader& r, bool& out) {
  auto b = r.u8();
  if (b && *b > 1) {
    return fail(ErrorCode::kDecode, "bool byte other than 0 or 1");
  }
  out = b.value_or(0) == 1;
  return {};
}

// A peer-controlled count, checked against its limit before anything is reserved.
Result<size_t> read_count(Reader& r, size_t limit, const char* detail) {
  uint64_t n = r.varint().value_or(0);
  if (n > limit) {
    return fail(ErrorCode::kBoundsExceeded, detail);
  }
  return static_cast<size_t>(n);
}

// Each listed item takes at least one byte, so the body bounds what is worth reserving.
template <class V>
void reserve_bounded(V& v, size_t count, const Reader& r) {
  v.reserve(std::min(count, r.remaining()));
}

bool has_key(const std::vector<SetupParameter>& params, uint64_t key) {
  return std::any_of(params.begin(), params.end(),
                     [key](const SetupParameter& p) { return p.key == key; });
}

// README §2.6, draft-14 layout: count, then key and a varint (even key) or bytes (odd key).
Status read_parameters(Reader& r, const DecodeLimits& l, std::vector<SetupParameter>& out) {
  auto n = read_count(r, l.max_parameters, "too many setup parameters");
  if (!n) {
    return tl::unexpected(n.error());
  }
  reserve_bounded(out, *n, r);
  for (size_t i = 0; i < *n && r.ok(); ++i) {
    SetupParameter p;
    p.key = r.varint().value_or(0);
    if (p.key % 2 == 0) {
      p.value = r.varint().value_or(0);
    } else {
      read_string(r, l.max_parameter_size, p.bytes);
    }
    if (!r.ok()) {
      break;
    }
    if (has_key(out, p.key)) {
      return fail(ErrorCode::kDecode, "duplicate setup parameter");
    }
    out.push_back(std::move(p));
  }
  return {};
}

template <class M>
Status read_delivery(Reader& r, M& m) {
  m.priority = r.u8().value_or(0);
  if (Status s = read_bool(r, m.ordered); !s) {
    return s;
  }
  m.max_latency_ms = r.varint().value_or(0);
  m.start_group = from_plus_one(r.varint().value_or(0));
  m.end_group = from_plus_one(r.varint().value_or(0));
  return {};
}

// Announce hops: lite-03 a count (decoded as that many zeros), lite-04 the ids.
Status read_hops(Version v, Reader& r, const DecodeLimits& l, std::vector<uint64_t>& hops) {
  auto n = read_count(r, l.max_hops, "too many announce hops");
  if (!n) {
    return tl::unexpected(n.error());
  }
  if (!is_lite04(v)) {
    hops.assign(*n, 0);
    return {};
  }
  reserve_bounded(hops, *n, r);
  for (size_t i = 0; i < *n && r.ok(); ++i) {
    hops.push_back(r.varint().value_or(0));
  }
  return {};
}

// Rewraps one alternative of a variant result, adding the bytes read before it.
template <class V, class T>
ParseResult<V> as_variant(ParseResult<T> r, size_t offset) {
  if (!r) {
    return tl::unexpected(r.error());
  }
  if (!r->has_value()) {
    return need_more<V>();
  }
  return Parsed<V>{V(std::move((*r)->value)), (*r)->consumed + offset};
}

Status parse_subscribe_ok(Version v, Reader& r, SubscribeOk& m) {
  if (is_lite03_plus(v)) {
    return read_delivery(r, m);
  }
  if (v == Version::kLite01) {
    m.priority = r.u8().value_or(0);
  }
  return {};
}

ParseResult<SubscribeDrop> decode_drop_body(Span in, const DecodeLimits& l) {
  return decode_sized<SubscribeDrop>(in, l, [](Reader& br, SubscribeDrop& m) {
    m.start = br.varint().value_or(0);
    m.end = br.varint().value_or(0);
    m.error_code = br.varint().value_or(0);
    return Status();
  });
}

// A one-varint body: SUBSCRIBE_START and SUBSCRIBE_END.
template <class T>
ParseResult<T> decode_group_body(Span in, const DecodeLimits& l) {
  return decode_sized<T>(in, l, [](Reader& r, T& m) {
    m.group = r.varint().value_or(0);
    return Status();
  });
}

ParseResult<SubscribeResponse> decode_subscribe_response05(uint64_t type, Span rest, size_t offset,
                                                           const DecodeLimits& l) {
  switch (type) {
    case kSubscribeStartType:
      return as_variant<SubscribeResponse>(decode_group_body<SubscribeStart>(rest, l), offset);
    case kSubscribeEndType:
      return as_variant<SubscribeResponse>(decode_group_body<SubscribeEnd>(rest, l), offset);
    case kSubscribeDrop05Type:
      return as_variant<SubscribeResponse>(decode_drop_body(rest, l), offset);
    default:
      return fail(ErrorCode::kDecode, "unknown subscribe response type");
  }
}

bool is_varint_setup_parameter(uint64_t id) {
  return id == LiteSetup::kProbe || id == LiteSetup::kRole || id == LiteSetup::kOrigin;
}

}  // namespace

// --- SETUP (README §2.4).

void encode(const ClientSetup& m, std::vector<uint8_t>& out) {
  write_setup(out, kClientSetupType, [&](Writer& w) {
    w.varint(m.versions.size());
    for (uint64_t v : m.versions) {
      w.varint(v);
    }
    write_parameters(w, m.parameters);
  });
}

void encode(const ServerSetup& m, std::vector<uint8_t>& out) {
  write_setup(out, kServerSetupType, [&](Writer& w) {
    w.varint(m.version);
    write_parameters(w, m.parameters);
  });
}

ParseResult<ClientSetup> decode_client_setup(Span in, const DecodeLimits& l) {
  return decode_setup<ClientSetup>(in, kClientSetupType, l, [&](Reader& r, ClientSetup& m) {
    auto n = read_count(r, l.max_versions, "too many setup versions");
    if (!n) {
      return Status(tl::unexpected(n.error()));
    }
    reserve_bounded(m.versions, *n, r);
    for (size_t i = 0; i < *n && r.ok(); ++i) {
      m.versions.push_back(r.varint().value_or(0));
    }
    return read_parameters(r, l, m.parameters);
  });
}

ParseResult<ServerSetup> decode_server_setup(Span in, const DecodeLimits& l) {
  return decode_setup<ServerSetup>(in, kServerSetupType, l, [&](Reader& r, ServerSetup& m) {
    m.version = r.varint().value_or(0);
    return read_parameters(r, l, m.parameters);
  });
}

// --- Session and announce streams (README §3.3, §3.4.1-3).

void encode(Version v, const SessionInfo& m, std::vector<uint8_t>& out) {
  if (!is_lite_01_02(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) { w.varint(m.bitrate); });
}

ParseResult<SessionInfo> decode_session_info(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite_01_02(v)) {
    return version_error();
  }
  return decode_sized<SessionInfo>(in, l, [](Reader& r, SessionInfo& m) {
    m.bitrate = r.varint().value_or(0);
    return Status();
  });
}

void encode(Version v, const AnnouncePlease& m, std::vector<uint8_t>& out) {
  if (!is_lite(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.string(m.prefix);
    if (is_lite04(v)) {
      w.varint(m.exclude_hop);
    }
  });
}

ParseResult<AnnouncePlease> decode_announce_please(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite(v)) {
    return version_error();
  }
  return decode_sized<AnnouncePlease>(in, l, [&](Reader& r, AnnouncePlease& m) {
    read_string(r, l.max_path_size, m.prefix);
    if (is_lite04(v)) {
      m.exclude_hop = r.varint().value_or(0);
    }
    return Status();
  });
}

void encode(Version v, const AnnounceInit& m, std::vector<uint8_t>& out) {
  if (!is_lite_01_02(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.varint(m.suffixes.size());
    for (const auto& s : m.suffixes) {
      w.string(s);
    }
  });
}

ParseResult<AnnounceInit> decode_announce_init(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite_01_02(v)) {
    return version_error();
  }
  return decode_sized<AnnounceInit>(in, l, [&](Reader& r, AnnounceInit& m) {
    auto n = read_count(r, l.max_announce_entries, "too many announce entries");
    if (!n) {
      return Status(tl::unexpected(n.error()));
    }
    reserve_bounded(m.suffixes, *n, r);
    for (size_t i = 0; i < *n && r.ok(); ++i) {
      read_string(r, l.max_path_size, m.suffixes.emplace_back());
    }
    return Status();
  });
}

void encode(Version v, const Announce& m, std::vector<uint8_t>& out) {
  if (!is_lite(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.u8(m.active ? 1 : 0);
    w.string(m.suffix);
    if (!is_lite03_plus(v)) {
      return;
    }
    w.varint(m.hops.size());
    if (is_lite04(v)) {
      for (uint64_t hop : m.hops) {
        w.varint(hop);
      }
    }
  });
}

ParseResult<Announce> decode_announce(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite(v)) {
    return version_error();
  }
  return decode_sized<Announce>(in, l, [&](Reader& r, Announce& m) {
    if (is_lite05(v)) {
      // 0 ended, 1 active, 2 restart (read as active: lite-05's duplicate ANNOUNCE replaces).
      auto status = r.u8();
      if (status && *status > 2) {
        return Status(fail(ErrorCode::kDecode, "unknown announce status"));
      }
      m.active = status.value_or(0) != 0;
    } else if (Status s = read_bool(r, m.active); !s) {
      return s;
    }
    read_string(r, l.max_path_size, m.suffix);
    if (!is_lite03_plus(v)) {
      return Status();
    }
    return read_hops(v, r, l, m.hops);
  });
}

// --- Subscribe stream (README §3.4.4-6).

void encode(Version v, const Subscribe& m, std::vector<uint8_t>& out) {
  if (!is_lite(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.varint(m.id);
    w.string(m.broadcast);
    w.string(m.track);
    if (is_lite03_plus(v)) {
      write_delivery(w, m);
    } else {
      w.u8(m.priority);
    }
  });
}

ParseResult<Subscribe> decode_subscribe(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite(v)) {
    return version_error();
  }
  return decode_sized<Subscribe>(in, l, [&](Reader& r, Subscribe& m) {
    m.id = r.varint().value_or(0);
    read_string(r, l.max_path_size, m.broadcast);
    read_string(r, l.max_track_name_size, m.track);
    if (is_lite03_plus(v)) {
      return read_delivery(r, m);
    }
    m.priority = r.u8().value_or(0);
    return Status();
  });
}

void encode(Version v, const SubscribeOk& m, std::vector<uint8_t>& out) {
  if (!is_lite(v) || is_lite05(v)) {
    return;
  }
  if (is_lite03_plus(v)) {
    Writer(out).varint(kSubscribeOkType);
    write_sized(out, [&](Writer& w) { write_delivery(w, m); });
    return;
  }
  write_sized(out, [&](Writer& w) {
    if (v == Version::kLite01) {
      w.u8(m.priority);
    }
  });
}

void encode(Version v, const SubscribeDrop& m, std::vector<uint8_t>& out) {
  if (!is_lite03_plus(v)) {
    return;
  }
  Writer(out).varint(is_lite05(v) ? kSubscribeDrop05Type : kSubscribeDropType);
  write_sized(out, [&](Writer& w) {
    w.varint(m.start);
    w.varint(m.end);
    w.varint(m.error_code);
  });
}

ParseResult<SubscribeResponse> decode_subscribe_response(Version v, Span in,
                                                         const DecodeLimits& l) {
  if (!is_lite(v)) {
    return version_error();
  }
  auto ok = [v](Reader& r, SubscribeOk& m) { return parse_subscribe_ok(v, r, m); };
  if (!is_lite03_plus(v)) {
    return as_variant<SubscribeResponse>(decode_sized<SubscribeOk>(in, l, ok), 0);
  }
  Reader r(in);
  auto type = r.varint();
  if (!type) {
    return need_more<SubscribeResponse>();
  }
  Span rest = r.rest();
  if (is_lite05(v)) {
    return decode_subscribe_response05(*type, rest, r.consumed(), l);
  }
  if (*type == kSubscribeOkType) {
    return as_variant<SubscribeResponse>(decode_sized<SubscribeOk>(rest, l, ok), r.consumed());
  }
  if (*type != kSubscribeDropType) {
    return fail(ErrorCode::kDecode, "unknown subscribe response type");
  }
  return as_variant<SubscribeResponse>(decode_drop_body(rest, l), r.consumed());
}

void encode(Version v, const SubscribeUpdate& m, std::vector<uint8_t>& out) {
  if (!is_lite(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    if (is_lite03_plus(v)) {
      write_delivery(w, m);
    } else {
      w.u8(m.priority);
    }
  });
}

ParseResult<SubscribeUpdate> decode_subscribe_update(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite(v)) {
    return version_error();
  }
  return decode_sized<SubscribeUpdate>(in, l, [v](Reader& r, SubscribeUpdate& m) {
    if (is_lite03_plus(v)) {
      return read_delivery(r, m);
    }
    m.priority = r.u8().value_or(0);
    return Status();
  });
}

// --- Group, fetch, goaway and probe streams (README §3.4.7-10).

void encode(Version v, const GroupHeader& m, std::vector<uint8_t>& out) {
  if (!is_lite(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.varint(m.subscribe_id);
    w.varint(m.sequence);
  });
}

ParseResult<GroupHeader> decode_group_header(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite(v)) {
    return version_error();
  }
  return decode_sized<GroupHeader>(in, l, [](Reader& r, GroupHeader& m) {
    m.subscribe_id = r.varint().value_or(0);
    m.sequence = r.varint().value_or(0);
    return Status();
  });
}

void encode(Version v, const Fetch& m, std::vector<uint8_t>& out) {
  if (!is_lite03_plus(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.string(m.broadcast);
    w.string(m.track);
    w.u8(m.priority);
    w.varint(m.group);
  });
}

ParseResult<Fetch> decode_fetch(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite03_plus(v)) {
    return version_error();
  }
  return decode_sized<Fetch>(in, l, [&](Reader& r, Fetch& m) {
    read_string(r, l.max_path_size, m.broadcast);
    read_string(r, l.max_track_name_size, m.track);
    m.priority = r.u8().value_or(0);
    m.group = r.varint().value_or(0);
    return Status();
  });
}

void encode(Version v, const Goaway& m, std::vector<uint8_t>& out) {
  if (!is_lite04(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) { w.string(m.uri); });
}

ParseResult<Goaway> decode_goaway(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite04(v)) {
    return version_error();
  }
  // The URI has no limit of its own: the message size already bounds it.
  return decode_sized<Goaway>(in, l, [&](Reader& r, Goaway& m) {
    read_string(r, l.max_message_size, m.uri);
    return Status();
  });
}

void encode(Version v, const Probe& m, std::vector<uint8_t>& out) {
  if (!is_lite03_plus(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.varint(m.bitrate);
    if (is_lite04(v)) {
      w.varint(m.rtt_ms);
    }
  });
}

ParseResult<Probe> decode_probe(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite03_plus(v)) {
    return version_error();
  }
  return decode_sized<Probe>(in, l, [v](Reader& r, Probe& m) {
    m.bitrate = r.varint().value_or(0);
    if (is_lite04(v)) {
      m.rtt_ms = r.varint().value_or(0);
    }
    return Status();
  });
}

// --- lite-05 messages (NET-0.3.md §3).

void encode(Version v, const SubscribeStart& m, std::vector<uint8_t>& out) {
  if (!is_lite05(v)) {
    return;
  }
  Writer(out).varint(kSubscribeStartType);
  write_sized(out, [&](Writer& w) { w.varint(m.group); });
}

void encode(Version v, const SubscribeEnd& m, std::vector<uint8_t>& out) {
  if (!is_lite05(v)) {
    return;
  }
  Writer(out).varint(kSubscribeEndType);
  write_sized(out, [&](Writer& w) { w.varint(m.group); });
}

std::optional<uint64_t> LiteSetup::varint(uint64_t id) const {
  for (const auto& p : parameters) {
    if (p.id == id) {
      Reader r(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(p.value.data()),
                                        p.value.size()));
      auto v = r.varint();
      if (v && r.empty()) {
        return v;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

void LiteSetup::add_varint(uint64_t id, uint64_t value) {
  std::vector<uint8_t> bytes;
  Writer(bytes).varint(value);
  parameters.push_back(LiteSetupParameter{id, std::string(bytes.begin(), bytes.end())});
}

void encode(Version v, const LiteSetup& m, std::vector<uint8_t>& out) {
  if (!is_lite05(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.varint(m.parameters.size());
    for (const auto& p : m.parameters) {
      w.varint(p.id);
      w.string(p.value);
    }
  });
}

ParseResult<LiteSetup> decode_lite_setup(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite05(v)) {
    return version_error();
  }
  return decode_sized<LiteSetup>(in, l, [&](Reader& r, LiteSetup& m) {
    auto n = read_count(r, l.max_parameters, "too many setup parameters");
    if (!n) {
      return Status(tl::unexpected(n.error()));
    }
    reserve_bounded(m.parameters, *n, r);
    for (size_t i = 0; i < *n && r.ok(); ++i) {
      LiteSetupParameter p;
      p.id = r.varint().value_or(0);
      read_string(r, l.max_parameter_size, p.value);
      if (!r.ok()) {
        break;
      }
      for (const auto& q : m.parameters) {
        if (q.id == p.id) {
          return Status(fail(ErrorCode::kDecode, "duplicate setup parameter"));
        }
      }
      m.parameters.push_back(std::move(p));
      if (is_varint_setup_parameter(m.parameters.back().id) &&
          !m.varint(m.parameters.back().id)) {
        return Status(fail(ErrorCode::kDecode, "setup parameter is not one varint"));
      }
    }
    return Status();
  });
}

void encode(Version v, const AnnounceOk& m, std::vector<uint8_t>& out) {
  if (!is_lite05(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.varint(m.hop_id);
    w.varint(m.active_count);
  });
}

ParseResult<AnnounceOk> decode_announce_ok(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite05(v)) {
    return version_error();
  }
  return decode_sized<AnnounceOk>(in, l, [](Reader& r, AnnounceOk& m) {
    m.hop_id = r.varint().value_or(0);
    m.active_count = r.varint().value_or(0);
    return Status();
  });
}

void encode(Version v, const TrackRequest& m, std::vector<uint8_t>& out) {
  if (!is_lite05(v)) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.string(m.broadcast);
    w.string(m.track);
  });
}

ParseResult<TrackRequest> decode_track_request(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite05(v)) {
    return version_error();
  }
  return decode_sized<TrackRequest>(in, l, [&](Reader& r, TrackRequest& m) {
    read_string(r, l.max_path_size, m.broadcast);
    read_string(r, l.max_track_name_size, m.track);
    return Status();
  });
}

void encode(Version v, const TrackInfo& m, std::vector<uint8_t>& out) {
  if (!is_lite05(v) || m.timescale == 0) {
    return;
  }
  write_sized(out, [&](Writer& w) {
    w.u8(m.priority);
    w.u8(m.ordered ? 1 : 0);
    w.varint(m.max_latency_ms);
    w.varint(m.timescale);
  });
}

ParseResult<TrackInfo> decode_track_info(Version v, Span in, const DecodeLimits& l) {
  if (!is_lite05(v)) {
    return version_error();
  }
  return decode_sized<TrackInfo>(in, l, [](Reader& r, TrackInfo& m) {
    m.priority = r.u8().value_or(0);
    if (Status s = read_bool(r, m.ordered); !s) {
      return s;
    }
    m.max_latency_ms = r.varint().value_or(0);
    m.timescale = r.varint().value_or(0);
    if (r.ok() && m.timescale == 0) {
      return Status(fail(ErrorCode::kDecode, "track timescale 0"));
    }
    return Status();
  });
}

bool encode_timed_frame_header(const TimedFrameHeader& m, std::vector<uint8_t>& out) {
  uint64_t z = zigzag_encode(m.timestamp_delta);
  if (z > kMaxVarint) {
    return false;
  }
  Writer w(out);
  w.varint(z);
  w.varint(m.size);
  return true;
}

ParseResult<TimedFrameHeader> decode_timed_frame_header(Span in) {
  Reader r(in);
  auto z = r.varint();
  if (!z) {
    return need_more<TimedFrameHeader>();
  }
  auto size = r.varint();
  if (!size) {
    return need_more<TimedFrameHeader>();
  }
  return Parsed<TimedFrameHeader>{TimedFrameHeader{zigzag_decode(*z), *size}, r.consumed()};
}

// --- Bare varints.

void encode_frame_header(uint64_t payload_size, std::vector<uint8_t>& out) {
  Writer(out).varint(payload_size);
}

namespace {
ParseResult<uint64_t> decode_varint(Span in) {
  Reader r(in);
  auto v = r.varint();
  if (!v) {
    return need_more<uint64_t>();
  }
  return Parsed<uint64_t>{*v, r.consumed()};
}
}  // namespace

ParseResult<uint64_t> decode_frame_header(Span in) { return decode_varint(in); }

ParseResult<uint64_t> decode_stream_type(Span in) { return decode_varint(in); }

}  // namespace moqd::wire
