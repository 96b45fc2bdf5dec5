#include "transport/webtransport/h3.h"

#include <algorithm>

namespace moqd::transport::webtransport {
namespace {

// draft-ietf-webtrans-http3 §9.5: the HTTP/3 error codes that carry WebTransport codes.
constexpr uint64_t kWtCodeFirst = 0x52e4a40fa8db;
constexpr uint64_t kWtCodeLast = 0x52e5ac983162;
constexpr uint64_t kMaxAppCode = 0xffffffff;

// RFC 9297 §2.1: stream ids stop at 2^62 - 1, so quarter stream ids stop at 2^60 - 1.
constexpr uint64_t kMaxQuarterStreamId = (uint64_t{1} << 60) - 1;

// RFC 9114 §7.2.4.1: the HTTP/2 settings that have no HTTP/3 meaning.
bool is_http2_setting(uint64_t id) { return id == 0x00 || (id >= 0x02 && id <= 0x05); }

// RFC 9297 §2.1.1 (and its draft-04 id): any value but 0 or 1 is a SETTINGS error.
bool is_boolean_setting(uint64_t id) {
  return id == kSettingH3Datagram || id == kSettingH3DatagramDraft04;
}

std::vector<uint8_t> data_frame(uint64_t capsule_type, std::span<const uint8_t> value) {
  std::vector<uint8_t> capsule;
  Writer c(capsule);
  c.varint(capsule_type);
  c.varint(value.size());
  c.bytes(value);
  std::vector<uint8_t> out;
  Writer w(out);
  write_frame(w, kFrameData, capsule);
  return out;
}

// The longest prefix of `s` of at most `max` bytes that does not split a UTF-8 sequence.
std::string_view cut_utf8(std::string_view s, size_t max) {
  if (s.size() <= max) {
    return s;
  }
  size_t n = max;
  while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xc0) == 0x80) {
    --n;
  }
  return s.substr(0, n);
}

}  // namespace

bool is_reserved(uint64_t type) { return type >= 0x21 && (type - 0x21) % 0x1f == 0; }

uint64_t wt_to_h3_code(uint64_t app_code) {
  uint64_t n = std::min(app_code, kMaxAppCode);
  return kWtCodeFirst + n + n / 0x1e;
}

std::optional<uint32_t> h3_to_wt_code(uint64_t h3_code) {
  if (h3_code < kWtCodeFirst || h3_code > kWtCodeLast || is_reserved(h3_code)) {
    return std::nullopt;
  }
  uint64_t shifted = h3_code - kWtCodeFirst;
  return static_cast<uint32_t>(shifted - shifted / 0x1f);
}

H3Result<std::optional<Parsed<Frame>>> parse_frame(std::span<const uint8_t> in,
                                                   size_t max_payload) {
  Reader r(in);
  auto type = r.varint();
  auto length = r.varint();
  if (!type || !length) {
    return std::nullopt;
  }
  if (*length > max_payload) {
    return h3_fail(H3Code::kExcessiveLoad, "frame too long");
  }
  auto payload = r.bytes(*length);
  if (!payload) {
    return std::nullopt;
  }
  return Parsed<Frame>{Frame{*type, *payload}, r.consumed()};
}

void write_frame_header(Writer& w, uint64_t type, uint64_t length) {
  w.varint(type);
  w.varint(length);
}

void write_frame(Writer& w, uint64_t type, std::span<const uint8_t> payload) {
  write_frame_header(w, type, payload.size());
  w.bytes(payload);
}

H3Result<std::vector<Setting>> parse_settings(std::span<const uint8_t> payload) {
  std::vector<Setting> settings;
  Reader r(payload);
  while (!r.empty()) {
    auto id = r.varint();
    auto value = r.varint();
    if (!id || !value) {
      return h3_fail(H3Code::kSettingsError, "truncated setting");
    }
    if (is_http2_setting(*id)) {
      return h3_fail(H3Code::kSettingsError, "HTTP/2 setting");
    }
    if (is_boolean_setting(*id) && *value > 1) {
      return h3_fail(H3Code::kSettingsError, "H3_DATAGRAM not 0 or 1");
    }
    settings.push_back(Setting{*id, *value});
  }
  std::vector<uint64_t> ids;
  ids.reserve(settings.size());
  for (const Setting& s : settings) {
    ids.push_back(s.id);
  }
  std::sort(ids.begin(), ids.end());
  if (std::adjacent_find(ids.begin(), ids.end()) != ids.end()) {
    return h3_fail(H3Code::kSettingsError, "duplicate setting");
  }
  return settings;
}

PeerSettings summarize(std::span<const Setting> settings) {
  PeerSettings p;
  for (const Setting& s : settings) {
    switch (s.id) {
      case kSettingQpackMaxTableCapacity:
        p.qpack_max_table_capacity = s.value;
        break;
      case kSettingQpackBlockedStreams:
        p.qpack_blocked_streams = s.value;
        break;
      case kSettingMaxFieldSectionSize:
        p.max_field_section_size = s.value;
        break;
      case kSettingH3Datagram:
      case kSettingH3DatagramDraft04:
        p.h3_datagram = p.h3_datagram || s.value == 1;
        break;
      case kSettingEnableWebTransport:
        p.webtransport = p.webtransport || s.value == 1;
        break;
      case kSettingWtMaxSessions:
        p.webtransport = p.webtransport || s.value > 0;
        break;
      default:
        break;  // RFC 9114 §7.2.4: unknown settings, grease included, are ignored
    }
  }
  return p;
}

namespace {

std::vector<uint8_t> control_stream_preamble(std::span<const Setting> settings) {
  std::vector<uint8_t> payload;
  Writer p(payload);
  for (const Setting& s : settings) {
    p.varint(s.id);
    p.varint(s.value);
  }
  std::vector<uint8_t> out;
  Writer w(out);
  w.varint(kStreamControl);
  write_frame(w, kFrameSettings, payload);
  return out;
}

}  // namespace

std::vector<uint8_t> server_control_stream_preamble(uint64_t max_sessions) {
  const Setting settings[] = {
      {kSettingQpackMaxTableCapacity, 0}, {kSettingQpackBlockedStreams, 0},
      {kSettingEnableConnectProtocol, 1}, {kSettingH3Datagram, 1},
      {kSettingEnableWebTransport, 1},    {kSettingWtMaxSessions, max_sessions},
  };
  return control_stream_preamble(settings);
}

std::vector<uint8_t> client_control_stream_preamble() {
  const Setting settings[] = {
      {kSettingQpackMaxTableCapacity, 0},
      {kSettingQpackBlockedStreams, 0},
      {kSettingH3Datagram, 1},
      {kSettingEnableWebTransport, 1},
  };
  return control_stream_preamble(settings);
}

std::optional<Parsed<uint64_t>> parse_varint(std::span<const uint8_t> in) {
  Reader r(in);
  auto v = r.varint();
  if (!v) {
    return std::nullopt;
  }
  return Parsed<uint64_t>{*v, r.consumed()};
}

std::vector<uint8_t> wt_stream_preamble(bool uni, uint64_t session_id) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.varint(uni ? kStreamWebTransportUni : kWebTransportBidiSignal);
  w.varint(session_id);
  return out;
}

H3Result<Datagram> parse_datagram(std::span<const uint8_t> datagram) {
  Reader r(datagram);
  auto quarter = r.varint();
  if (!quarter) {
    return h3_fail(H3Code::kDatagramError, "truncated quarter stream id");
  }
  if (*quarter > kMaxQuarterStreamId) {
    return h3_fail(H3Code::kDatagramError, "quarter stream id too large");
  }
  return Datagram{*quarter * 4, r.rest()};
}

void write_datagram(Writer& w, uint64_t session_id, std::span<const uint8_t> payload) {
  w.varint(session_id / 4);
  w.bytes(payload);
}

H3Result<std::optional<Parsed<Capsule>>> parse_capsule(std::span<const uint8_t> in,
                                                       size_t max_value) {
  Reader r(in);
  auto type = r.varint();
  auto length = r.varint();
  if (!type || !length) {
    return std::nullopt;
  }
  if (*length > max_value) {
    return h3_fail(H3Code::kMessageError, "capsule too long");
  }
  auto value = r.bytes(*length);
  if (!value) {
    return std::nullopt;
  }
  return Parsed<Capsule>{Capsule{*type, *value}, r.consumed()};
}

H3Result<CloseSession> parse_close_session(std::span<const uint8_t> value) {
  if (value.size() < 4) {
    return h3_fail(H3Code::kMessageError, "close capsule too short");
  }
  if (value.size() - 4 > kMaxCloseReason) {
    return h3_fail(H3Code::kMessageError, "close reason too long");
  }
  uint32_t code = (uint32_t{value[0]} << 24) | (uint32_t{value[1]} << 16) |
                  (uint32_t{value[2]} << 8) | uint32_t{value[3]};
  std::string_view reason(reinterpret_cast<const char*>(value.data()) + 4, value.size() - 4);
  return CloseSession{code, reason};
}

std::vector<uint8_t> close_session_data_frame(uint32_t code, std::string_view reason) {
  reason = cut_utf8(reason, kMaxCloseReason);
  std::vector<uint8_t> value;
  Writer w(value);
  w.u16(static_cast<uint16_t>(code >> 16));
  w.u16(static_cast<uint16_t>(code));
  w.bytes(reason);
  return data_frame(kCapsuleCloseSession, value);
}

std::vector<uint8_t> drain_session_data_frame() { return data_frame(kCapsuleDrainSession, {}); }

namespace {

// RFC 8941 §4.2 parsing, enough to walk a List and keep its String members. Each step consumes
// from `in_` and answers false on input that is not a valid structured field.
class ListParser {
 public:
  explicit ListParser(std::string_view in) : in_(in) {}

  // §4.2.1: members separated by commas with optional whitespace; a trailing comma is invalid.
  bool list(std::vector<std::string>& strings) {
    skip_sp();
    while (!in_.empty()) {
      if (!member(strings)) {
        return false;
      }
      skip_ows();
      if (in_.empty()) {
        break;
      }
      if (!eat(',')) {
        return false;
      }
      skip_ows();
      if (in_.empty()) {
        return false;
      }
    }
    return true;
  }

 private:
  bool member(std::vector<std::string>& strings) {
    if (peek() == '(') {
      return inner_list() && parameters();
    }
    std::string s;
    bool is_string = peek() == '"';
    if (!bare_item(s) || !parameters()) {
      return false;
    }
    if (is_string) {
      strings.push_back(std::move(s));
    }
    return true;
  }

  // §4.2.1.2: "(" items separated by SP ")" then parameters.
  bool inner_list() {
    eat('(');
    std::string ignored;
    while (true) {
      skip_sp();
      if (eat(')')) {
        return true;
      }
      if (!bare_item(ignored) || !parameters()) {
        return false;
      }
      if (peek() != ' ' && peek() != ')') {
        return false;
      }
    }
  }

  // §4.2.3.2: *( ";" *SP key [ "=" bare-item ] ).
  bool parameters() {
    std::string ignored;
    while (eat(';')) {
      skip_sp();
      if (!key()) {
        return false;
      }
      if (eat('=') && !bare_item(ignored)) {
        return false;
      }
    }
    return true;
  }

  bool key() {
    char c = peek();
    if (!(is_lcalpha(c) || c == '*')) {
      return false;
    }
    while (!in_.empty() && (is_lcalpha(peek()) || is_digit(peek()) || is_any_of(peek(), "_-.*"))) {
      in_.remove_prefix(1);
    }
    return true;
  }

  // §4.2.3.1: the value of a String lands in `out`; other types are checked and dropped.
  bool bare_item(std::string& out) {
    char c = peek();
    if (c == '-' || is_digit(c)) {
      return number();
    }
    if (c == '"') {
      return string(out);
    }
    if (is_alpha(c) || c == '*') {
      return token();
    }
    if (c == ':') {
      return byte_sequence();
    }
    if (c == '?') {
      in_.remove_prefix(1);
      return eat('0') || eat('1');
    }
    return false;
  }

  // §4.2.4: at most 15 integer digits, or 12 digits, '.', and 1 to 3 fraction digits.
  bool number() {
    eat('-');
    size_t digits = take_digits();
    if (digits == 0) {
      return false;
    }
    if (!eat('.')) {
      return digits <= 15;
    }
    size_t fraction = take_digits();
    return digits <= 12 && fraction >= 1 && fraction <= 3;
  }

  // §4.2.5: printable ASCII, with only \" and \\ as escapes.
  bool string(std::string& out) {
    eat('"');
    out.clear();
    while (!in_.empty()) {
      char c = take();
      if (c == '"') {
        return true;
      }
      if (c == '\\') {
        if (in_.empty() || (peek() != '"' && peek() != '\\')) {
          return false;
        }
        c = take();
      } else if (c < 0x20 || c > 0x7e) {
        return false;
      }
      out += c;
    }
    return false;
  }

  // §4.2.6: tchar, ':' and '/'.
  bool token() {
    in_.remove_prefix(1);
    while (!in_.empty() && (is_tchar(peek()) || peek() == ':' || peek() == '/')) {
      in_.remove_prefix(1);
    }
    return true;
  }

  // §4.2.7: ':' base64 ':'.
  bool byte_sequence() {
    eat(':');
    while (!in_.empty() && (is_alpha(peek()) || is_digit(peek()) || is_any_of(peek(), "+/="))) {
      in_.remove_prefix(1);
    }
    return eat(':');
  }

  size_t take_digits() {
    size_t n = 0;
    while (!in_.empty() && is_digit(peek())) {
      in_.remove_prefix(1);
      ++n;
    }
    return n;
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_lcalpha(char c) { return c >= 'a' && c <= 'z'; }
  static bool is_alpha(char c) { return is_lcalpha(c) || (c >= 'A' && c <= 'Z'); }
  static bool is_any_of(char c, std::string_view set) {
    return c != '\0' && set.find(c) != std::string_view::npos;
  }
  static bool is_tchar(char c) {
    return is_alpha(c) || is_digit(c) || is_any_of(c, "!#$%&'*+-.^_`|~");
  }

  char peek() const { return in_.empty() ? '\0' : in_.front(); }
  char take() {
    char c = in_.front();
    in_.remove_prefix(1);
    return c;
  }
  bool eat(char c) {
    if (in_.empty() || in_.front() != c) {
      return false;
    }
    in_.remove_prefix(1);
    return true;
  }
  void skip_sp() {
    while (eat(' ')) {
    }
  }
  void skip_ows() {
    while (eat(' ') || eat('\t')) {
    }
  }

  std::string_view in_;
};

}  // namespace

std::optional<std::vector<std::string>> parse_protocol_list(std::string_view value) {
  std::vector<std::string> strings;
  if (!ListParser(value).list(strings)) {
    return std::nullopt;
  }
  return strings;
}

namespace {

Refusal refuse(const char* reason) { return Refusal{400, reason}; }

// RFC 9110 §5.1 tchar, lower case only: RFC 9114 §4.2 makes upper case malformed.
bool is_valid_field_name(std::string_view name) {
  if (name.empty()) {
    return false;
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) {
      return false;
    }
  }
  return true;
}

// RFC 9114 §4.2: NUL, CR and LF are never valid in a field value.
bool is_valid_field_value(std::string_view value) {
  return value.find_first_of(std::string_view("\0\r\n", 3)) == std::string_view::npos;
}

bool is_port(std::string_view port) {
  return !port.empty() && port.size() <= 5 &&
         std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// RFC 3986 §3.2.2 reg-name characters (unreserved, pct-encoded, sub-delims).
bool is_reg_name(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("-._~%!$&'()*+,;=").find(c) != std::string_view::npos;
  });
}

bool is_ip_literal(std::string_view host) {
  if (host.size() < 3 || host.front() != '[' || host.back() != ']') {
    return false;
  }
  std::string_view inner = host.substr(1, host.size() - 2);
  return std::all_of(inner.begin(), inner.end(), [](char c) {
    return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') ||
           c == ':' || c == '.';
  });
}

// host [ ":" port ], with no userinfo (RFC 9114 §4.3.1 forbids it).
bool is_valid_authority(std::string_view authority) {
  std::string_view host = authority;
  size_t colon = authority.rfind(':');
  size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    if (!is_port(authority.substr(colon + 1))) {
      return false;
    }
    host = authority.substr(0, colon);
  }
  return is_reg_name(host) || is_ip_literal(host);
}

// The pseudo-headers of a request, each at most once (RFC 9114 §4.3.1).
struct PseudoHeaders {
  std::optional<std::string> method, scheme, authority, path, protocol;

  std::optional<std::string>* slot(std::string_view name) {
    if (name == ":method") {
      return &method;
    }
    if (name == ":scheme") {
      return &scheme;
    }
    if (name == ":authority") {
      return &authority;
    }
    if (name == ":path") {
      return &path;
    }
    if (name == ":protocol") {
      return &protocol;
    }
    return nullptr;
  }
};

// RFC 9114 §4.3: pseudo-headers first, each known and once; field names lower case.
std::optional<Refusal> read_fields(const HeaderList& headers, PseudoHeaders& pseudo,
                                   ConnectRequest& req) {
  bool seen_regular = false;
  for (const HeaderField& f : headers) {
    if (!is_valid_field_value(f.value)) {
      return refuse("bad field value");
    }
    if (!f.name.empty() && f.name.front() == ':') {
      std::optional<std::string>* slot = pseudo.slot(f.name);
      if (seen_regular) {
        return refuse("pseudo-header after field");
      }
      if (slot == nullptr) {
        return refuse("unknown pseudo-header");
      }
      if (slot->has_value()) {
        return refuse("repeated pseudo-header");
      }
      *slot = f.value;
      continue;
    }
    if (!is_valid_field_name(f.name)) {
      return refuse("bad field name");
    }
    seen_regular = true;
    if (f.name == "origin" && req.origin.empty()) {
      req.origin = f.value;
    } else if (f.name == "sec-webtransport-http3-draft02") {
      req.draft02 = f.value == "1";
    } else if (f.name == "wt-available-protocols") {
      req.available_protocols = parse_protocol_list(f.value).value_or(std::vector<std::string>{});
    }
  }
  return std::nullopt;
}

std::optional<Refusal> check_pseudo(const PseudoHeaders& p) {
  if (!p.method) {
    return refuse("missing :method");
  }
  if (*p.method != "CONNECT") {
    return Refusal{405, "not CONNECT"};
  }
  if (!p.protocol) {
    return refuse("missing :protocol");
  }
  if (*p.protocol != "webtransport") {
    return refuse("bad :protocol");
  }
  if (p.scheme != "https") {
    return refuse("bad :scheme");
  }
  if (!p.path || p.path->empty() || p.path->front() != '/') {
    return refuse("bad :path");
  }
  if (!p.authority || !is_valid_authority(*p.authority)) {
    return refuse("bad authority");
  }
  return std::nullopt;
}

}  // namespace

Result<ConnectRequest, Refusal> parse_connect(const HeaderList& headers) {
  PseudoHeaders pseudo;
  ConnectRequest req;
  if (auto refusal = read_fields(headers, pseudo, req)) {
    return tl::unexpected<Refusal>(*refusal);
  }
  if (auto refusal = check_pseudo(pseudo)) {
    return tl::unexpected<Refusal>(*refusal);
  }
  req.authority = std::move(*pseudo.authority);
  req.path = std::move(*pseudo.path);
  return req;
}

std::optional<std::string> select_protocol(const std::vector<std::string>& offered,
                                           const std::vector<std::string>& supported) {
  if (offered.empty()) {
    return std::string();
  }
  for (const std::string& s : supported) {
    if (std::find(offered.begin(), offered.end(), s) != offered.end()) {
      return s;
    }
  }
  return std::nullopt;
}

std::string protocol_header_value(std::string_view protocol) {
  std::string out = "\"";
  for (char c : protocol) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  out += '"';
  return out;
}

}  // namespace moqd::transport::webtransport
