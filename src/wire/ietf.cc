#include "wire/ietf.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <utility>

// IETF MoQ Transport drafts 14..20: the shared core. Section numbers are draft-14's unless
// marked. Drafts 18 and 19 are the tagged texts of moq-wg/moq-transport; "d20" is its editor's
// copy after draft-19 (commit e1ae858d), the text nearest to what @moq/net 0.3.4 calls draft 20.
// Contract details the header leaves open:
// - Fields a draft lacks are not written and decode to their defaults.
// - On decode, parameters keep wire order with absolute types; on encode, d14/15 write them in
//   the order given and d16+ sort them by type (a stable sort) for the delta coding.
// - Parameter rules (kParamRules): a known parameter repeated is a violation in every draft
//   (AUTHORIZATION_TOKEN excepted); an unknown one, or a known one in a message that does not
//   take it, is kept in d14/15 (the text: "Receivers ignore unrecognized parameters", duplicates
//   of unknown ones allowed) and a violation from d16 (d16 §9.2). JS: @moq/net rejects every
//   duplicate, known or not.
// - d17+ LARGEST_OBJECT (a Location, no length) is kept in Parameter::bytes as its two varints,
//   in the draft's form, as they were on the wire. JS writes a Length in front (see Peer).
// - d18+ TRACK_NAMESPACE_PREFIX (a namespace tuple, no length) is kept in Parameter::bytes as the
//   tuple's wire bytes.

namespace moqd::wire::ietf {
namespace {

using Span = std::span<const uint8_t>;

constexpr size_t kMaxBody = 0xffff;  // u16 Message Length (§9)

constexpr Draft kDrafts[] = {
    // version, number, varint_form, setup_versions, delta_types, subscribe_params, request_ok,
    // retry_interval, namespace_messages, done_by_request_id, subscribe_options,
    // unknown_params_fatal, track_extensions, empty_field_fatal, request_streams,
    // request_id_delta, typed_params
    {Version::kTransport14, 14, VarintForm::kQuic, true, false, false, false, false, false, false,
     false, false, false, false, false, false, false},
    // JS: @moq/net sends NAMESPACE (0x08) / NAMESPACE_DONE (0x0E) in d15; the d15 text has
    // neither (it answers SUBSCRIBE_NAMESPACE with PUBLISH_NAMESPACE). Both are accepted.
    {Version::kTransport15, 15, VarintForm::kQuic, false, false, true, true, false, true, false,
     false, false, false, false, false, false, false},
    {Version::kTransport16, 16, VarintForm::kQuic, false, true, true, true, true, true, true,
     true, true, true, true, false, false, false},
    {Version::kTransport17, 17, VarintForm::kLeadingOnes, false, true, true, true, true, true,
     true, true, true, true, true, true, true, true},
    // ... typed_params, namespace_v2, goaway_request_id, ok_track_properties, error_redirect,
    // first_object_bit, filter_fields
    {Version::kTransport18, 18, VarintForm::kLeadingOnes7, false, true, true, true, true, true,
     true, false, true, true, true, true, false, true, true, true, true, true, true, false},
    {Version::kTransport19, 19, VarintForm::kLeadingOnes7, false, true, true, true, true, true,
     true, false, true, true, true, true, false, true, true, false, true, true, true, false},
    {Version::kTransport20, 20, VarintForm::kLeadingOnes7, false, true, true, true, true, true,
     true, false, true, true, true, true, false, true, true, false, true, true, true, true},
};

// A message type that takes message parameters as a bit: types below 48 as themselves, d18's
// 0x50 / 0x51 as bits 48 / 49; 0 for the others.
constexpr uint64_t bit(MessageType t) {
  const auto v = static_cast<uint64_t>(t);
  if (v < 48) {
    return uint64_t{1} << v;
  }
  return v == 0x50 || v == 0x51 ? uint64_t{1} << (v - 0x50 + 48) : 0;
}

// How a typed parameter's value is written (d17 §9.3, d18 §10.2); before 17 the type's parity
// decides. kLocation and kUint8Js: JS writes a Length in front (Peer::kMoqNetJs).
enum class ParamForm : uint8_t { kVarint, kUint8, kLocation, kBytes, kNamespace, kUint8Js };

// Which message parameters a draft defines, which messages take them and how the value is
// written (d15 §9.2.1, d16 §9.2.2, d17 §9.3; d14 §9.2.1 defines only the first three).
// AUTHORIZATION_TOKEN may be repeated (d14 §9.2.1.1 and later).
struct ParamRule {
  uint64_t type;
  uint8_t first_draft;
  uint8_t last_draft;
  uint64_t messages;  // bit(MessageType)
  ParamForm form;
  bool repeatable = false;
};
constexpr uint64_t kSub = bit(MessageType::kSubscribe);
constexpr uint64_t kSubOk = bit(MessageType::kSubscribeOk);
constexpr uint64_t kUpd = bit(MessageType::kSubscribeUpdate);
constexpr uint64_t kReqOk = bit(MessageType::kRequestOk);
constexpr uint64_t kPubNs = bit(MessageType::kPublishNamespace);
constexpr uint64_t kSubNs =
    bit(MessageType::kSubscribeNamespace) | bit(MessageType::kSubscribeNamespace2);
constexpr uint64_t kSubTr = bit(MessageType::kSubscribeTracks);
constexpr uint64_t kFetch = bit(MessageType::kFetch);  // d16 §9.2.2, d18 §10.2
constexpr uint64_t kPub = bit(MessageType::kPublish);      // d15 §9.2.1, d16 §9.2.2, d17 §9.3
constexpr uint64_t kPubOk = bit(MessageType::kPublishOk);  // d14..17 (d18+: REQUEST_OK, kReqOk)
constexpr uint64_t kNs = bit(MessageType::kNamespace);     // d17+ extended NAMESPACE (cluster)
// d18+ rows: the messages this codec has among those each parameter's section lists (TRACK_STATUS
// is read with SUBSCRIBE's rules). PUBLISH_OK is a REQUEST_OK from 18 (#1611): the parameters the
// d18/19 text allows in PUBLISH_OK are allowed in every REQUEST_OK, since a REQUEST_OK does not
// say which request it answers; d20 (#1834) moves them from PUBLISH_OK into PUBLISH. The range
// filters 0x25..0x28 (d19 §5.1.3) are accepted in FETCH; the session refuses such a FETCH.
constexpr ParamRule kParamRules[] = {
    {kParamDeliveryTimeout, 14, 17, kSub | kSubOk | kUpd | kReqOk | kPub | kPubOk, ParamForm::kVarint},
    // OBJECT_DELIVERY_TIMEOUT: d18/19 in PUBLISH_OK (a REQUEST_OK), d20 in PUBLISH (#1834).
    {kParamDeliveryTimeout, 18, 19, kSub | kUpd | kReqOk, ParamForm::kVarint},
    {kParamDeliveryTimeout, 20, 20, kSub | kUpd | kPub, ParamForm::kVarint},
    {kParamAuthorizationToken, 14, 20, kSub | kUpd | kPubNs | kSubNs | kSubTr | kFetch | kPub,
     ParamForm::kBytes,
     true},
    {kParamMaxCacheDuration, 14, 15, kSubOk | kReqOk | kPub, ParamForm::kVarint},
    {0x04, 17, 20, kSub, ParamForm::kVarint},  // RENDEZVOUS_TIMEOUT (d17)
    {kParamSubgroupDeliveryTimeout, 18, 19, kSub | kUpd | kReqOk, ParamForm::kVarint},
    {kParamSubgroupDeliveryTimeout, 20, 20, kSub | kUpd | kPub, ParamForm::kVarint},
    {kParamExpires, 15, 20, kSubOk | kReqOk | kPub | kPubOk, ParamForm::kVarint},
    {kParamLargestObject, 15, 20, kSubOk | kReqOk | kPub, ParamForm::kLocation},
    {kParamPublisherPriority, 15, 15, kSubOk, ParamForm::kUint8},
    {kParamForward, 15, 17, kSub | kUpd | kSubNs | kPub | kPubOk, ParamForm::kUint8},
    {kParamForward, 18, 19, kSub | kUpd | kSubTr | kPub | kReqOk, ParamForm::kUint8},
    {kParamForward, 20, 20, kSub | kUpd | kSubTr | kPub, ParamForm::kUint8},
    {kParamSubscriberPriority, 15, 17, kSub | kUpd | kFetch | kPubOk, ParamForm::kUint8},
    {kParamSubscriberPriority, 18, 19, kSub | kUpd | kFetch | kReqOk, ParamForm::kUint8},
    {kParamSubscriberPriority, 20, 20, kSub | kUpd | kFetch | kPub, ParamForm::kUint8},
    {kParamSubscriptionFilter, 15, 17, kSub | kUpd | kPubOk, ParamForm::kBytes},
    {kParamSubscriptionFilter, 18, 19, kSub | kUpd | kReqOk, ParamForm::kBytes},
    {kParamSubscriptionFilter, 20, 20, kSub | kUpd | kFetch | kPub, ParamForm::kBytes},  // §5.1.2
    {kParamGroupOrder, 15, 17, kSub | kSubOk | kReqOk | kFetch | kPub | kPubOk, ParamForm::kUint8},
    {kParamGroupOrder, 18, 18, kSub | kFetch | kReqOk, ParamForm::kUint8},
    {kParamGroupOrder, 19, 19, kSub | kSubTr | kFetch, ParamForm::kUint8},  // #1777
    {kParamGroupOrder, 20, 20, kSub | kSubTr | kFetch | kPub, ParamForm::kUint8},
    {0x0a, 18, 20, kFetch, ParamForm::kVarint},  // FILL_TIMEOUT (d18 §10.2.x "FILL TIMEOUT")
    {kParamFillParameters, 20, 20, kSub, ParamForm::kBytes},       // JS only
    {0x25, 19, 20, kSub | kUpd | kSubTr | kFetch, ParamForm::kBytes, true},  // SUBGROUP_FILTER
    {0x26, 19, 20, kSub | kUpd | kSubTr | kFetch, ParamForm::kBytes, true},  // OBJECTID_FILTER
    {0x27, 19, 20, kSub | kUpd | kSubTr | kFetch, ParamForm::kBytes, true},  // PRIORITY_FILTER
    {0x28, 19, 20, kSub | kUpd | kSubTr | kFetch, ParamForm::kBytes, true},  // OBJECT_PROPERTY_FILTER
    {0x29, 19, 20, kUpd | kSubTr, ParamForm::kBytes, true},         // TRACK_PROPERTY_FILTER
    {0x30, 15, 15, kSubOk | kPub, ParamForm::kVarint},  // DYNAMIC_GROUPS (d15)
    {0x32, 15, 17, kSub | kUpd | kPubOk, ParamForm::kVarint},  // NEW_GROUP_REQUEST
    {0x32, 18, 19, kSub | kUpd | kReqOk, ParamForm::kVarint},
    {0x32, 20, 20, kSub | kUpd, ParamForm::kVarint},
    {kParamTrackNamespacePrefix, 18, 20, kUpd, ParamForm::kNamespace},
    {kParamIncludeProperties, 20, 20, kSub | kSubTr, ParamForm::kUint8Js},
    {kParamHopPath, 17, 20, kPubNs | kNs, ParamForm::kBytes},     // cluster extension
    {kParamRouteCost, 17, 20, kPubNs | kNs, ParamForm::kVarint},  // cluster extension
};

const ParamRule* param_rule(const Draft& d, uint64_t type) {
  for (const auto& r : kParamRules) {
    if (r.type == type && d.number >= r.first_draft && d.number <= r.last_draft) {
      return &r;
    }
  }
  return nullptr;
}

// Setup parameters moqd knows (§9.3.2): a repeat of one of these is a violation.
bool is_known_setup_param(uint64_t type) {
  return type == kSetupPath || type == kSetupMaxRequestId || type == kSetupAuthorizationToken ||
         type == 0x04 || type == kSetupAuthority || type == kSetupImplementation;
}

// --- Varint forms. FormReader and FormWriter are base's Reader and Writer with the draft's
// varint form: every varint, and every length in front of a string, goes through it.

constexpr uint64_t kLoLimit[] = {uint64_t{1} << 7,  uint64_t{1} << 14, uint64_t{1} << 21,
                                 uint64_t{1} << 28, uint64_t{1} << 35, uint64_t{1} << 42,
                                 uint64_t{1} << 49};

class FormReader {
 public:
  FormReader(Span data, VarintForm form) : r_(data), form_(form) {}

  // After an invalid varint or an over-long string every read fails, so the first problem is the
  // one reported. `wide`: the whole 64 bits of the 9-byte leading-ones form are a value (d20's
  // vi64 where the text names 2^64-1), not only up to 2^62-1.
  std::optional<uint64_t> varint(bool wide = false) {
    if (invalid_ || too_long_) {
      return std::nullopt;
    }
    if (form_ == VarintForm::kQuic) {
      return r_.varint();
    }
    auto first = r_.u8();
    if (!first) {
      return std::nullopt;
    }
    const int ones = std::countl_one(*first);
    if (ones == 6 && form_ == VarintForm::kLeadingOnes) {
      invalid_ = true;  // 1111110x (d17)
      return std::nullopt;
    }
    // 0..6 ones: 1..7 bytes, 7 - ones value bits in the first byte; 7: 8 bytes, 8: 9 bytes,
    // none in the first. Either way `ones` bytes follow.
    const size_t more = static_cast<size_t>(ones);
    uint64_t v = ones <= 6 ? (*first & (0x7fu >> ones)) : 0;
    auto rest = r_.bytes(more);
    if (!rest) {
      return std::nullopt;
    }
    for (uint8_t b : *rest) {
      v = (v << 8) | b;
    }
    if (v > kMaxVarint && !wide) {
      invalid_ = true;
      return std::nullopt;
    }
    return v;
  }
  std::optional<uint8_t> u8() {
    if (invalid_ || too_long_) {
      return std::nullopt;
    }
    return r_.u8();
  }
  std::optional<uint16_t> u16() { return r_.u16(); }
  std::optional<std::span<const uint8_t>> bytes(size_t n) { return r_.bytes(n); }
  // A varint length then that many bytes; a length over `max` sets is_too_long().
  std::optional<std::string_view> string(size_t max) {
    auto n = varint();
    if (!n) {
      return std::nullopt;
    }
    if (*n > max) {
      too_long_ = true;
      return std::nullopt;
    }
    auto b = r_.bytes(static_cast<size_t>(*n));
    if (!b) {
      return std::nullopt;
    }
    return std::string_view(reinterpret_cast<const char*>(b->data()), b->size());
  }
  size_t consumed() const { return r_.consumed(); }
  size_t remaining() const { return r_.remaining(); }
  bool empty() const { return r_.empty(); }
  Span rest() const { return r_.rest(); }
  bool is_too_long() const { return too_long_; }
  bool is_invalid() const { return invalid_; }
  bool ok() const { return r_.ok() && !too_long_ && !invalid_; }

 private:
  Reader r_;
  VarintForm form_;
  bool too_long_ = false;
  bool invalid_ = false;
};

class FormWriter {
 public:
  FormWriter(std::vector<uint8_t>& out, VarintForm form, Peer peer = Peer::kDraftText)
      : out_(out), form_(form), peer_(peer) {}
  void varint(uint64_t v) { write_varint(form_, v, out_); }
  void u8(uint8_t v) { out_.push_back(v); }
  void u16(uint16_t v) { Writer(out_).u16(v); }
  void bytes(Span b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void bytes(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
  void string(std::string_view s) {
    varint(s.size());
    bytes(s);
  }
  VarintForm form() const { return form_; }
  Peer peer() const { return peer_; }

 private:
  std::vector<uint8_t>& out_;
  VarintForm form_;
  Peer peer_;
};

Span as_span(const std::string& s) {
  return Span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

template <class T>
ParseResult<T> need_more() {
  return std::optional<Parsed<T>>();
}

// --- Decoding. Field reads may run past the body; the Reader remembers that and finish() turns
// it into one error. Semantic errors are kept in `error` (the first wins) and returned at the end.

struct Decoder {
  FormReader r;
  const Draft& d;
  const Limits& l;
  std::optional<Error> error;
  bool js_forms = false;   // read the Peer::kMoqNetJs forms of LARGEST_OBJECT / INCLUDE_PROPERTIES
  bool saw_dual = false;   // a parameter with two peer forms was read (decode_control may retry)

  void fail_with(ErrorCode code, const char* detail) {
    if (!error) {
      error = make_error(code, detail);
    }
  }
  bool ok() const { return r.ok() && !error; }
  uint64_t varint() { return r.varint().value_or(0); }
  uint8_t u8() { return r.u8().value_or(0); }

  void string(size_t max, std::string& out, const char* detail) {
    auto s = r.string(max);
    if (r.is_too_long()) {
      fail_with(ErrorCode::kBoundsExceeded, detail);
    } else if (s) {
      out.assign(*s);
    }
  }
  void reason(std::string& out) { string(l.max_reason, out, "reason phrase over 1024 bytes"); }

  // A count, checked against its limit before anything is reserved.
  size_t count(size_t limit, const char* detail) {
    uint64_t n = varint();
    if (n > limit) {
      fail_with(ErrorCode::kBoundsExceeded, detail);
      return 0;
    }
    return static_cast<size_t>(n);
  }
  // What is worth reserving for `n` items of at least one byte each.
  size_t reservable(size_t n) const { return std::min(n, r.remaining()); }

  // Namespace tuple (§2.4.1). `full`: 1..32 fields (a track's namespace); otherwise 0..32 (a
  // prefix or suffix). Adds the field bytes to `name_bytes` for the 4096-byte Full Track Name.
  void tuple(TrackNamespace& ns, bool full, size_t& name_bytes) {
    uint64_t n = varint();
    if (!r.ok()) {
      return;
    }
    if (n > l.max_namespace_fields || (full && n == 0)) {
      fail_with(ErrorCode::kBoundsExceeded, "namespace with 0 or more than 32 fields");
      return;
    }
    ns.reserve(std::min(static_cast<size_t>(n), r.remaining()));
    for (uint64_t i = 0; i < n && ok(); ++i) {
      std::string field;
      string(l.max_full_name, field, "namespace field over the name limit");
      if (!r.ok()) {
        return;
      }
      if (field.empty() && d.empty_field_fatal) {
        fail_with(ErrorCode::kProtocolViolation, "empty namespace field");
      }
      name_bytes += field.size();
      ns.push_back(std::move(field));
    }
    check_name(name_bytes);
  }
  void check_name(size_t name_bytes) {
    if (name_bytes > l.max_full_name) {
      fail_with(ErrorCode::kBoundsExceeded, "full track name over 4096 bytes");
    }
  }
  void track_name(std::string& out, size_t& name_bytes) {
    string(l.max_full_name, out, "track name over 4096 bytes");
    name_bytes += out.size();
    check_name(name_bytes);
  }
  void tuple(TrackNamespace& ns, bool full) {
    size_t bytes = 0;
    tuple(ns, full, bytes);
  }

  // Key-Value-Pairs (§1.4.2): count, then pairs (`until_end`: no count, pairs to the end of the
  // message, as d17 Setup Options); d16+ types are deltas. An odd type's value is at most 2^16-1
  // bytes (a violation above it). `typed`: d17 message parameters, laid out by type.
  void kvps(Parameters& out, bool typed = false, bool until_end = false) {
    size_t n = until_end ? l.max_parameters + 1 : count(l.max_parameters, "too many parameters");
    out.reserve(until_end ? 0 : reservable(n));
    uint64_t type = 0;
    for (size_t i = 0; i < n && ok(); ++i) {
      if (until_end && r.empty()) {
        return;
      }
      if (until_end && i == l.max_parameters) {
        fail_with(ErrorCode::kBoundsExceeded, "too many parameters");
        return;
      }
      uint64_t t = varint();
      if (d.delta_types) {
        if (t > kMaxVarint - type) {
          fail_with(ErrorCode::kProtocolViolation, "parameter type delta overflows");
          return;
        }
        type += t;
      } else {
        type = t;
      }
      const ParamRule* rule = typed ? param_rule(d, type) : nullptr;
      if (typed && rule == nullptr) {
        // d17 §9.3: an unknown message parameter cannot even be skipped.
        fail_with(ErrorCode::kProtocolViolation, "unknown message parameter");
        return;
      }
      Parameter p;
      p.type = type;
      value(p, rule);
      out.push_back(std::move(p));
    }
  }

  // A parameter's value: by its rule's form where the draft types parameters (`rule` non-null),
  // else by the type's parity (even: varint; odd: length-prefixed bytes).
  void value(Parameter& p, const ParamRule* rule) {
    const ParamForm form = rule != nullptr ? rule->form
                           : p.type % 2 == 0 ? ParamForm::kVarint
                                             : ParamForm::kBytes;
    if (form == ParamForm::kLocation || form == ParamForm::kUint8Js) {
      saw_dual = true;
      if (js_forms) {
        js_value(p, form);
        return;
      }
    }
    switch (form) {
      case ParamForm::kUint8:
      case ParamForm::kUint8Js:
        p.value = u8();
        break;
      case ParamForm::kLocation:
        raw(p.bytes, [this] { location(); });
        break;
      case ParamForm::kNamespace:
        raw(p.bytes, [this] {
          TrackNamespace ns;
          tuple(ns, false);
        });
        break;
      case ParamForm::kVarint:
        p.value = varint();
        break;
      case ParamForm::kBytes:
        string(kMaxBody, p.bytes, "parameter value over 65535 bytes");
        break;
    }
  }
  // JS: the value inside a Length (a Location's two varints, or one byte).
  void js_value(Parameter& p, ParamForm form) {
    string(kMaxBody, p.bytes, "parameter value over 65535 bytes");
    FormReader inner(as_span(p.bytes), d.varint_form);
    if (form == ParamForm::kUint8Js) {
      p.value = inner.u8().value_or(0);
      p.bytes.clear();
    } else {
      inner.varint();
      inner.varint();
    }
    if (!inner.ok() || !inner.empty()) {
      fail_with(ErrorCode::kWrongSize, "parameter does not fill its Length");
    }
  }
  // The bytes `read` consumes, as they were on the wire.
  template <class F>
  void raw(std::string& out, F read) {
    Span before = r.rest();
    read();
    const size_t n = before.size() - r.rest().size();
    out.assign(before.begin(), before.begin() + static_cast<ptrdiff_t>(n));
  }

  // Message parameters with the draft's rules for message `m` (see the file comment).
  void message_params(MessageType m, Parameters& out) {
    kvps(out, d.typed_params);
    for (size_t i = 0; i < out.size() && ok(); ++i) {
      const ParamRule* rule = param_rule(d, out[i].type);
      if (rule == nullptr || (rule->messages & bit(m)) == 0) {
        if (d.unknown_params_fatal) {
          fail_with(ErrorCode::kProtocolViolation, "parameter not allowed in this message");
        }
        continue;
      }
      if ((rule->form == ParamForm::kUint8Js || out[i].type == kParamForward) && out[i].value > 1) {
        // d20 INCLUDE_PROPERTIES; FORWARD (d15 §9.2.1, d20 §10.2: "If an endpoint receives
        // a value outside this range, it MUST close the session with PROTOCOL_VIOLATION"): 0 or 1.
        fail_with(ErrorCode::kProtocolViolation, "parameter value other than 0 or 1");
      }
      for (size_t j = 0; j < i && !rule->repeatable; ++j) {
        if (out[j].type == out[i].type) {
          fail_with(ErrorCode::kProtocolViolation, "duplicate parameter");
        }
      }
    }
  }

  void setup_params(Parameters& out) {
    kvps(out, false, d.request_streams);
    for (size_t i = 0; i < out.size() && ok(); ++i) {
      for (size_t j = 0; j < i && is_known_setup_param(out[i].type); ++j) {
        if (out[j].type == out[i].type) {
          fail_with(ErrorCode::kProtocolViolation, "duplicate setup parameter");
        }
      }
    }
  }

  Location location() {
    Location loc;
    loc.group = varint();
    loc.object = varint();
    return loc;
  }

  // Subscription Filter (§9.7): type, then what the type needs.
  void filter(FormReader& fr, Filter& f) {
    uint64_t t = fr.varint().value_or(0);
    if (t < 1 || t > 4) {
      fail_with(ErrorCode::kProtocolViolation, "unknown filter type");
      return;
    }
    f.type = static_cast<FilterType>(t);
    if (f.type == FilterType::kAbsoluteStart || f.type == FilterType::kAbsoluteRange) {
      f.start.group = fr.varint().value_or(0);
      f.start.object = fr.varint().value_or(0);
    }
    if (f.type == FilterType::kAbsoluteRange) {
      f.end_group = fr.varint().value_or(0);
    }
  }

  // d20 Location Filter (editor's copy §5.1.2 "Location Filters"): up to four varints filling the
  // value; their count says the kind (see FilterType).
  void filter_fields(FormReader& fr, Filter& f) {
    uint64_t v[4] = {};
    size_t n = 0;
    while (!fr.empty() && n < 4 && fr.ok()) {
      v[n++] = fr.varint().value_or(0);
    }
    if (!fr.empty()) {
      fail_with(ErrorCode::kProtocolViolation, "more than four filter fields");
      return;
    }
    switch (n) {
      case 0: f.type = FilterType::kUnfiltered; break;
      case 1:
        f.type = v[0] == 0 ? FilterType::kNextGroupStart : FilterType::kRelative;
        f.relative_groups = v[0] == 0 ? 0 : v[0];
        break;
      case 2:
        f.type = v[0] == 0 && v[1] == 0 ? FilterType::kLargestObject : FilterType::kAbsoluteStart;
        f.start = f.type == FilterType::kAbsoluteStart ? Location{v[0], v[1]} : Location{};
        break;
      default:
        f.type = FilterType::kAbsoluteRange;
        f.start = Location{v[0], v[1]};
        f.end_group = v[2];
        if (n == 4) {
          f.end_object = v[3];
        }
    }
  }

  // Track Properties / Extensions (d16 §9.10, d18 §10.8): Key-Value-Pairs, delta-coded, no count,
  // to the end of the message. Kept raw; read once to check they are well formed.
  void properties(std::string& out) {
    raw(out, [this] {
      uint64_t type = 0;
      while (!r.empty() && ok()) {
        const uint64_t t = varint();
        if (t > kMaxVarint - type) {
          fail_with(ErrorCode::kProtocolViolation, "property type delta overflows");
          return;
        }
        type += t;
        Parameter p{type, 0, {}};
        value(p, nullptr);
      }
    });
  }

  // A request's Request ID, then d17's Required Request ID Delta.
  void request_id(uint64_t& id, uint64_t& delta) {
    id = varint();
    if (d.request_id_delta) {
      delta = varint();
    }
  }
  // A response's Request ID: gone with the control stream in d17 (the stream says which request).
  void response_id(uint64_t& id) {
    if (!d.request_streams) {
      id = varint();
    }
  }
  // PUBLISH_NAMESPACE_DONE / _CANCEL: d14/15 name the namespace, d16 the request id.
  void namespace_or_id(TrackNamespace& ns, uint64_t& id) {
    if (d.done_by_request_id) {
      id = varint();
    } else {
      tuple(ns, true);
    }
  }

  // The rest of the message, raw: d16 Track Extensions as they come; from d17 (typed drafts) Track
  // Properties, checked to be well-formed Key-Value-Pairs.
  void rest_or_properties(std::string& out) {
    if (d.typed_params) {
      properties(out);
      return;
    }
    auto rest = r.rest();
    out.assign(rest.begin(), rest.end());
    r.bytes(rest.size());
  }

  // SUBSCRIBER_PRIORITY as a parameter (d15+): one byte's worth.
  void subscriber_priority(uint64_t v, uint8_t& out) {
    if (v > 255) {
      fail_with(ErrorCode::kProtocolViolation, "subscriber priority over 255");
    }
    out = static_cast<uint8_t>(v);
  }
  // SUBSCRIPTION_FILTER / d20 LOCATION_FILTER as a parameter: the draft's filter form, filling the
  // value exactly (d15 §9.2.1.7, d20 §5.1.2).
  void filter_param(Span value, std::optional<Filter>& out) {
    FormReader fr(value, d.varint_form);
    Filter f;
    if (d.filter_fields) {
      filter_fields(fr, f);
    } else {
      filter(fr, f);
    }
    if (!fr.ok() || !fr.empty()) {
      fail_with(ErrorCode::kProtocolViolation, "filter does not fill its parameter");
    }
    out = f;
  }

  void group_order(uint64_t v, bool zero_ok, uint8_t& out) {
    if (v > 2 || (v == 0 && !zero_ok)) {
      fail_with(ErrorCode::kProtocolViolation, "group order outside 1..2");
    }
    out = static_cast<uint8_t>(v);
  }
  void forward(uint64_t v, bool& out) {
    if (v > 1) {
      fail_with(ErrorCode::kProtocolViolation, "forward other than 0 or 1");
    }
    out = v == 1;
  }
};

// --- Encoding.

void write_tuple(FormWriter& w, const TrackNamespace& ns) {
  w.varint(ns.size());
  for (const auto& f : ns) {
    w.string(f);
  }
}

// One parameter's value, the inverse of Decoder::value (null rule: by the type's parity).
void write_value(FormWriter& w, const ParamRule* rule, const Parameter& p) {
  const ParamForm form = rule != nullptr ? rule->form
                         : p.type % 2 == 0 ? ParamForm::kVarint
                                           : ParamForm::kBytes;
  const bool js = w.peer() == Peer::kMoqNetJs;
  switch (form) {
    case ParamForm::kUint8Js:
      if (js) {
        w.varint(1);
      }
      [[fallthrough]];
    case ParamForm::kUint8:
      w.u8(static_cast<uint8_t>(p.value));
      break;
    case ParamForm::kLocation:
      if (js) {
        w.varint(p.bytes.size());
      }
      [[fallthrough]];
    case ParamForm::kNamespace:
      w.bytes(p.bytes);  // already in the draft's form
      break;
    case ParamForm::kVarint:
      w.varint(p.value);
      break;
    case ParamForm::kBytes:
      w.string(p.bytes);
      break;
  }
}

// `until_end`: no count (d17 Setup Options). Typed drafts write each known type's form.
void write_kvps(FormWriter& w, const Draft& d, const Parameters& params, bool until_end = false) {
  if (!until_end) {
    w.varint(params.size());
  }
  const Parameters* list = &params;
  Parameters sorted;
  if (d.delta_types) {
    sorted = params;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Parameter& a, const Parameter& b) { return a.type < b.type; });
    list = &sorted;
  }
  uint64_t prev = 0;
  for (const auto& p : *list) {
    w.varint(d.delta_types ? p.type - prev : p.type);
    prev = p.type;
    const ParamRule* rule = d.typed_params && !until_end ? param_rule(d, p.type) : nullptr;
    write_value(w, rule, p);
  }
}

void write_request_id(FormWriter& w, const Draft& d, uint64_t id, uint64_t delta) {
  w.varint(id);
  if (d.request_id_delta) {
    w.varint(delta);
  }
}

void write_response_id(FormWriter& w, const Draft& d, uint64_t id) {
  if (!d.request_streams) {
    w.varint(id);
  }
}

void write_namespace_or_id(FormWriter& w, const Draft& d, const TrackNamespace& ns, uint64_t id) {
  if (d.done_by_request_id) {
    w.varint(id);
  } else {
    write_tuple(w, ns);
  }
}

void write_location(FormWriter& w, const Location& l) {
  w.varint(l.group);
  w.varint(l.object);
}

// d20: the fields the kind needs (an open AbsoluteStart {0, 0} is unfiltered, written empty so it
// does not read back as Next Object). Earlier drafts have no kUnfiltered / kRelative tag: the
// first is written as AbsoluteStart {0, 0} (what it means), the second only for 0 (Next Group).
std::optional<std::string> filter_fields_bytes(const Filter& f, VarintForm form) {
  std::vector<uint8_t> out;
  FormWriter w(out, form);
  switch (f.type) {
    case FilterType::kUnfiltered: break;
    case FilterType::kNextGroupStart: w.varint(0); break;
    case FilterType::kRelative: w.varint(f.relative_groups); break;
    case FilterType::kLargestObject: write_location(w, Location{}); break;
    case FilterType::kAbsoluteStart:
      if (f.start != Location{}) {
        write_location(w, f.start);
      }
      break;
    case FilterType::kAbsoluteRange:
      write_location(w, f.start);
      w.varint(f.end_group);
      if (f.end_object) {
        w.varint(*f.end_object);
      }
      break;
    default: return std::nullopt;
  }
  return std::string(out.begin(), out.end());
}

std::optional<std::string> filter_bytes(const Filter& given, const Draft& d) {
  if (d.filter_fields) {
    return filter_fields_bytes(given, d.varint_form);
  }
  Filter f = given;
  if (f.type == FilterType::kUnfiltered) {
    f = Filter{FilterType::kAbsoluteStart, {}, 0, 0, std::nullopt};
  } else if (f.type == FilterType::kRelative && f.relative_groups == 0) {
    f.type = FilterType::kNextGroupStart;
  } else if (f.type == FilterType::kRelative || f.end_object ||
             static_cast<uint64_t>(f.type) > 4) {
    return std::nullopt;
  }
  std::vector<uint8_t> out;
  FormWriter w(out, d.varint_form);
  w.varint(static_cast<uint64_t>(f.type));
  if (f.type == FilterType::kAbsoluteStart || f.type == FilterType::kAbsoluteRange) {
    write_location(w, f.start);
  }
  if (f.type == FilterType::kAbsoluteRange) {
    w.varint(f.end_group);
  }
  return std::string(out.begin(), out.end());
}

Parameter varint_param(uint64_t type, uint64_t value) { return Parameter{type, value, {}}; }
Parameter bytes_param(uint64_t type, std::string bytes) {
  return Parameter{type, 0, std::move(bytes)};
}

// d15+ SUBSCRIBE, FETCH and PUBLISH_OK: `all` (the fields each writes first) then the message's
// other parameters, then SUBSCRIPTION_FILTER last, as @moq/net writes them; written with
// write_kvps. False when the draft cannot write the filter's kind.
bool write_params_then_filter(FormWriter& w, const Draft& d, Parameters all,
                              const Parameters& params, const std::optional<Filter>& filter) {
  all.insert(all.end(), params.begin(), params.end());
  if (filter) {
    auto f = filter_bytes(*filter, d);
    if (!f) {
      return false;  // a d20 filter kind the draft cannot write, or the reverse
    }
    all.push_back(bytes_param(kParamSubscriptionFilter, std::move(*f)));
  }
  write_kvps(w, d, all);
  return true;
}

// --- Per message: body writers and readers. Each `write` returns the message type, or nullopt
// when the draft lacks the message.

using TypeOrNone = std::optional<MessageType>;

TypeOrNone write(FormWriter& w, const Draft& d, const ClientSetup& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  if (d.setup_versions) {
    w.varint(m.versions.size());
    for (uint64_t v : m.versions) {
      w.varint(v);
    }
  }
  write_kvps(w, d, m.params);
  return MessageType::kClientSetup;
}

TypeOrNone write(FormWriter& w, const Draft& d, const ServerSetup& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  if (d.setup_versions) {
    w.varint(m.version);
  }
  write_kvps(w, d, m.params);
  return MessageType::kServerSetup;
}

// d15+: priority, group order, forward, filter become parameters, in the order @moq/net writes
// them (priority, order, forward, then the filter after the others).
TypeOrNone write(FormWriter& w, const Draft& d, const Subscribe& m) {
  write_request_id(w, d, m.request_id, m.request_id_delta);
  write_tuple(w, m.ns);
  w.string(m.track);
  if (!d.subscribe_params) {
    w.u8(m.subscriber_priority);
    w.u8(m.group_order);
    w.u8(m.forward ? 1 : 0);
    const auto f = filter_bytes(m.filter.value_or(Filter{}), d);
    if (!f) {
      return std::nullopt;
    }
    w.bytes(*f);
    write_kvps(w, d, m.params);
    return MessageType::kSubscribe;
  }
  Parameters all;
  all.push_back(varint_param(kParamSubscriberPriority, m.subscriber_priority));
  if (m.group_order != 0) {
    all.push_back(varint_param(kParamGroupOrder, m.group_order));
  }
  all.push_back(varint_param(kParamForward, m.forward ? 1 : 0));
  if (!write_params_then_filter(w, d, std::move(all), m.params, m.filter)) {
    return std::nullopt;
  }
  return MessageType::kSubscribe;
}

// The Parameters of SUBSCRIBE and PUBLISH_OK (message `type`, 16+): SUBSCRIBER_PRIORITY,
// GROUP_ORDER, FORWARD and SUBSCRIPTION_FILTER into m's fields, the others kept in m.params.
template <class M>
void read_subscription_params(Decoder& dec, MessageType type, M& m) {
  Parameters all;
  dec.message_params(type, all);
  for (auto& p : all) {
    switch (p.type) {
      case kParamSubscriberPriority:
        dec.subscriber_priority(p.value, m.subscriber_priority);
        break;
      case kParamGroupOrder:
        dec.group_order(p.value, false, m.group_order);
        break;
      case kParamForward:
        dec.forward(p.value, m.forward);
        break;
      case kParamSubscriptionFilter:
        dec.filter_param(as_span(p.bytes), m.filter);
        break;
      default:
        m.params.push_back(std::move(p));
    }
  }
}

void read(Decoder& dec, Subscribe& m) {
  dec.request_id(m.request_id, m.request_id_delta);
  size_t name = 0;
  dec.tuple(m.ns, true, name);
  dec.track_name(m.track, name);
  if (!dec.d.subscribe_params) {
    m.subscriber_priority = dec.u8();
    dec.group_order(dec.u8(), true, m.group_order);
    dec.forward(dec.u8(), m.forward);
    Filter f;
    dec.filter(dec.r, f);
    m.filter = f;
    dec.message_params(MessageType::kSubscribe, m.params);
    return;
  }
  read_subscription_params(dec, MessageType::kSubscribe, m);
}

TypeOrNone write(FormWriter& w, const Draft& d, const SubscribeOk& m) {
  write_response_id(w, d, m.request_id);
  w.varint(m.track_alias);
  if (!d.subscribe_params) {
    w.varint(m.expires);
    w.u8(m.group_order);
    w.u8(m.largest ? 1 : 0);
    if (m.largest) {
      write_location(w, *m.largest);
    }
    write_kvps(w, d, m.params);
    return MessageType::kSubscribeOk;
  }
  write_kvps(w, d, m.params);
  if (d.track_extensions) {
    w.bytes(m.track_extensions);
  }
  return MessageType::kSubscribeOk;
}

void read(Decoder& dec, SubscribeOk& m) {
  dec.response_id(m.request_id);
  m.track_alias = dec.varint();
  if (!dec.d.subscribe_params) {
    m.expires = dec.varint();
    dec.group_order(dec.u8(), false, m.group_order);
    bool exists = false;
    dec.forward(dec.u8(), exists);  // Content Exists is 0 or 1 as well (§9.8)
    if (exists) {
      m.largest = dec.location();
    }
    dec.message_params(MessageType::kSubscribeOk, m.params);
    return;
  }
  dec.message_params(MessageType::kSubscribeOk, m.params);
  const Parameter* p = find(m.params, kParamLargestObject);
  if (p != nullptr && !dec.d.typed_params) {
    FormReader lr(as_span(p->bytes), dec.d.varint_form);
    lr.varint();
    lr.varint();
    if (!lr.ok() || !lr.empty()) {
      dec.fail_with(ErrorCode::kWrongSize, "LARGEST_OBJECT is not one Location");
    }
  }
  if (dec.d.track_extensions && dec.ok()) {
    // JS: @moq/net writes nothing here in d16, which is an empty Track Extensions block.
    dec.rest_or_properties(m.track_extensions);
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const RequestError& m) {
  // 0x08 PUBLISH_NAMESPACE_ERROR, 0x13 SUBSCRIBE_NAMESPACE_ERROR, 0x0F TRACK_STATUS_ERROR and
  // 0x19 FETCH_ERROR are d14 only.
  const bool d14_only =
      m.type == MessageType::kNamespace || m.type == MessageType::kSubscribeNamespaceError ||
      m.type == MessageType::kTrackStatusError || m.type == MessageType::kFetchError ||
      m.type == MessageType::kPublishError;
  if (m.type != MessageType::kRequestError && !(d14_only && !d.request_ok)) {
    return std::nullopt;
  }
  write_response_id(w, d, m.request_id);
  w.varint(m.error_code);
  if (d.retry_interval) {
    w.varint(m.retry_interval);
  }
  w.string(m.reason);
  const bool redirect = d.error_redirect && m.error_code == kErrorRedirect;
  if (redirect != m.redirect.has_value()) {
    return std::nullopt;  // a Redirect goes with REDIRECT, and only from d18
  }
  if (m.redirect) {
    w.string(m.redirect->uri);
    write_tuple(w, m.redirect->ns);
    w.string(m.redirect->track);
  }
  return m.type;
}

void read(Decoder& dec, RequestError& m) {
  dec.response_id(m.request_id);
  m.error_code = dec.varint();
  if (dec.d.retry_interval) {
    m.retry_interval = dec.varint();
  }
  dec.reason(m.reason);
  if (dec.d.error_redirect && m.error_code == kErrorRedirect && dec.ok()) {
    // d18 §10.6.1 Redirect {Connect URI, Track Namespace, Track Name}.
    Redirect r;
    dec.string(dec.l.max_uri, r.uri, "redirect URI too long");
    size_t name = 0;
    dec.tuple(r.ns, true, name);
    dec.track_name(r.track, name);
    m.redirect = std::move(r);
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const RequestOk& m) {
  // 0x12 SUBSCRIBE_NAMESPACE_OK is d14 only.
  const bool d14_only = m.type == MessageType::kSubscribeNamespaceOk;
  if (m.type != MessageType::kRequestOk && !(d14_only && !d.request_ok)) {
    return std::nullopt;
  }
  write_response_id(w, d, m.request_id);
  if (d.request_ok) {
    write_kvps(w, d, m.params);
  }
  if (d.ok_track_properties) {
    w.bytes(m.track_properties);
  } else if (!m.track_properties.empty()) {
    return std::nullopt;
  }
  return m.type;
}

void read(Decoder& dec, RequestOk& m) {
  dec.response_id(m.request_id);
  if (dec.d.request_ok) {
    dec.message_params(MessageType::kRequestOk, m.params);
  }
  if (dec.d.ok_track_properties && dec.ok()) {
    // d18: Track Properties end REQUEST_OK; JS: @moq/net writes none (an empty block).
    dec.properties(m.track_properties);
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const SubscribeUpdate& m) {
  write_request_id(w, d, m.request_id, m.request_id_delta);
  if (!d.request_streams) {
    w.varint(m.existing_request_id);
  }
  if (!d.subscribe_params) {
    write_location(w, m.start);
    w.varint(m.end_group);
    w.u8(m.subscriber_priority);
    w.u8(m.forward ? 1 : 0);
  }
  write_kvps(w, d, m.params);
  return MessageType::kSubscribeUpdate;
}

void read(Decoder& dec, SubscribeUpdate& m) {
  dec.request_id(m.request_id, m.request_id_delta);
  if (!dec.d.request_streams) {
    m.existing_request_id = dec.varint();
  }
  if (!dec.d.subscribe_params) {
    m.start = dec.location();
    m.end_group = dec.varint();
    m.subscriber_priority = dec.u8();
    dec.forward(dec.u8(), m.forward);
  }
  dec.message_params(MessageType::kSubscribeUpdate, m.params);
}

TypeOrNone write(FormWriter& w, const Draft& d, const Unsubscribe& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  w.varint(m.request_id);
  return MessageType::kUnsubscribe;
}

void read(Decoder& dec, Unsubscribe& m) { m.request_id = dec.varint(); }

TypeOrNone write(FormWriter& w, const Draft& d, const PublishNamespace& m) {
  write_request_id(w, d, m.request_id, m.request_id_delta);
  write_tuple(w, m.ns);
  write_kvps(w, d, m.params);
  return MessageType::kPublishNamespace;
}

void read(Decoder& dec, PublishNamespace& m) {
  dec.request_id(m.request_id, m.request_id_delta);
  dec.tuple(m.ns, true);
  dec.message_params(MessageType::kPublishNamespace, m.params);
}

TypeOrNone write(FormWriter& w, const Draft& d, const PublishNamespaceDone& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  write_namespace_or_id(w, d, m.ns, m.request_id);
  return MessageType::kPublishNamespaceDone;
}

void read(Decoder& dec, PublishNamespaceDone& m) {
  dec.namespace_or_id(m.ns, m.request_id);
}

TypeOrNone write(FormWriter& w, const Draft& d, const PublishNamespaceCancel& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  write_namespace_or_id(w, d, m.ns, m.request_id);
  w.varint(m.error_code);
  w.string(m.reason);
  return MessageType::kPublishNamespaceCancel;
}

void read(Decoder& dec, PublishNamespaceCancel& m) {
  dec.namespace_or_id(m.ns, m.request_id);
  m.error_code = dec.varint();
  dec.reason(m.reason);
}

// The type of a SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS in draft `d` (0x11 before d18).
MessageType subscribe_namespace_type(const Draft& d, bool tracks) {
  if (!d.namespace_v2) {
    return MessageType::kSubscribeNamespace;
  }
  return tracks ? MessageType::kSubscribeTracks : MessageType::kSubscribeNamespace2;
}

TypeOrNone write(FormWriter& w, const Draft& d, const SubscribeNamespace& m) {
  if (m.tracks && !d.namespace_v2) {
    return std::nullopt;
  }
  write_request_id(w, d, m.request_id, m.request_id_delta);
  write_tuple(w, m.prefix);
  if (d.subscribe_options) {
    w.varint(m.options);
  }
  write_kvps(w, d, m.params);
  return subscribe_namespace_type(d, m.tracks);
}

void read(Decoder& dec, SubscribeNamespace& m) {
  dec.request_id(m.request_id, m.request_id_delta);
  dec.tuple(m.prefix, false);
  if (dec.d.subscribe_options) {
    m.options = dec.varint();
    if (m.options > 2) {
      dec.fail_with(ErrorCode::kProtocolViolation, "subscribe options outside 0..2");
    }
  }
  dec.message_params(subscribe_namespace_type(dec.d, m.tracks), m.params);
}

TypeOrNone write(FormWriter& w, const Draft& d, const Namespace& m) {
  if (!d.namespace_messages) {
    return std::nullopt;
  }
  write_tuple(w, m.suffix);
  if (m.extended) {
    if (m.done || !d.request_streams) {
      return std::nullopt;
    }
    write_kvps(w, d, m.params);
  }
  return m.done ? MessageType::kNamespaceDone : MessageType::kNamespace;
}

void read(Decoder& dec, Namespace& m) {
  dec.tuple(m.suffix, false);
  // The cluster extension's extended form: Parameters after the suffix. Only a session that
  // negotiated it may send one; the bytes after the suffix say which form this is.
  if (!m.done && dec.d.request_streams && dec.ok() && !dec.r.empty()) {
    m.extended = true;
    dec.message_params(MessageType::kNamespace, m.params);
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const PublishDone& m) {
  write_response_id(w, d, m.request_id);
  w.varint(m.status_code);
  w.varint(m.stream_count);
  w.string(m.reason);
  return MessageType::kPublishDone;
}

void read(Decoder& dec, PublishDone& m) {
  dec.response_id(m.request_id);
  m.status_code = dec.varint();
  // d20 §10.12 (#1831): "unable to set Stream Count" is 2^64-1, past every other varint's range.
  m.stream_count = dec.r.varint(dec.d.number >= 20).value_or(0);
  dec.reason(m.reason);
}

TypeOrNone write(FormWriter& w, const Draft& d, const MaxRequestId& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  w.varint(m.value);
  return m.blocked ? MessageType::kRequestsBlocked : MessageType::kMaxRequestId;
}

void read(Decoder& dec, MaxRequestId& m) { m.value = dec.varint(); }

TypeOrNone write(FormWriter& w, const Draft& d, const Goaway& m) {
  w.string(m.uri);
  if (d.request_streams) {
    w.varint(m.timeout);
  }
  if (m.request_id && !d.goaway_request_id) {
    return std::nullopt;
  }
  if (m.request_id) {
    w.varint(*m.request_id);
  }
  return MessageType::kGoaway;
}

void read(Decoder& dec, Goaway& m) {
  dec.string(dec.l.max_uri, m.uri, "GOAWAY URI too long");
  if (dec.d.request_streams) {
    m.timeout = dec.varint();
  }
  if (dec.d.goaway_request_id && dec.ok() && !dec.r.empty()) {
    m.request_id = dec.varint();  // d18: present only on the control stream
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const Setup& m) {
  if (!d.request_streams) {
    return std::nullopt;
  }
  write_kvps(w, d, m.options, true);
  return MessageType::kSetup;
}

void read(Decoder& dec, Setup& m) { dec.setup_params(m.options); }

void read(Decoder& dec, ClientSetup& m) {
  if (dec.d.setup_versions) {
    size_t n = dec.count(dec.l.max_versions, "too many setup versions");
    m.versions.reserve(dec.reservable(n));
    for (size_t i = 0; i < n && dec.ok(); ++i) {
      m.versions.push_back(dec.varint());
    }
  }
  dec.setup_params(m.params);
}

void read(Decoder& dec, ServerSetup& m) {
  if (dec.d.setup_versions) {
    m.version = dec.varint();
  }
  dec.setup_params(m.params);
}

// --- TRACK_STATUS and FETCH (drafts 14..20; FETCH_CANCEL 14..16).

TypeOrNone write(FormWriter& w, const Draft& d, const TrackStatus& m) {
  if (!write(w, d, m.request)) {
    return std::nullopt;
  }
  return MessageType::kTrackStatus;
}

void read(Decoder& dec, TrackStatus& m) { read(dec, m.request); }

TypeOrNone write(FormWriter& w, const Draft& d, const TrackStatusOk& m) {
  if (d.request_ok || !write(w, d, m.ok)) {
    return std::nullopt;  // d15+ answer TRACK_STATUS with REQUEST_OK
  }
  return MessageType::kTrackStatusOk;
}

void read(Decoder& dec, TrackStatusOk& m) { read(dec, m.ok); }

// d14 §9.16: priority and group order are fields; d15+ parameters (written priority first, then a
// non-zero group order, as SUBSCRIBE writes them).
TypeOrNone write(FormWriter& w, const Draft& d, const Fetch& m) {
  if (m.filter && !d.filter_fields) {
    return std::nullopt;  // LOCATION_FILTER in FETCH is d20's
  }
  write_request_id(w, d, m.request_id, m.request_id_delta);
  if (!d.subscribe_params) {
    w.u8(m.subscriber_priority);
    w.u8(m.group_order);
  }
  w.varint(static_cast<uint64_t>(m.type));
  if (m.type == FetchType::kStandalone) {
    write_tuple(w, m.ns);
    w.string(m.track);
    if (!d.filter_fields) {
      write_location(w, m.start);
      write_location(w, m.end);
    }
  } else {
    w.varint(m.joining_request_id);
    if (!d.filter_fields) {
      w.varint(m.joining_start);
    }
  }
  if (!d.subscribe_params) {
    write_kvps(w, d, m.params);
    return MessageType::kFetch;
  }
  Parameters all;
  all.push_back(varint_param(kParamSubscriberPriority, m.subscriber_priority));
  if (m.group_order != 0) {
    all.push_back(varint_param(kParamGroupOrder, m.group_order));
  }
  if (!write_params_then_filter(w, d, std::move(all), m.params, m.filter)) {
    return std::nullopt;
  }
  return MessageType::kFetch;
}

void read(Decoder& dec, Fetch& m) {
  dec.request_id(m.request_id, m.request_id_delta);
  if (!dec.d.subscribe_params) {
    m.subscriber_priority = dec.u8();
    dec.group_order(dec.u8(), true, m.group_order);
  }
  const uint64_t type = dec.varint();
  if (dec.r.ok() && (type < 1 || type > 3)) {
    // §9.16: "a Fetch Type other than 0x1, 0x2 or 0x3 MUST close the session".
    dec.fail_with(ErrorCode::kProtocolViolation, "unknown fetch type");
    return;
  }
  m.type = static_cast<FetchType>(type);
  if (m.type == FetchType::kStandalone) {
    size_t name = 0;
    dec.tuple(m.ns, true, name);
    dec.track_name(m.track, name);
    if (!dec.d.filter_fields) {
      m.start = dec.location();
      m.end = dec.location();
    }
  } else {
    m.joining_request_id = dec.varint();
    if (!dec.d.filter_fields) {
      m.joining_start = dec.varint();
    }
  }
  if (!dec.d.subscribe_params) {
    dec.message_params(MessageType::kFetch, m.params);
    return;
  }
  Parameters all;
  dec.message_params(MessageType::kFetch, all);
  for (auto& p : all) {
    if (p.type == kParamSubscriberPriority) {
      dec.subscriber_priority(p.value, m.subscriber_priority);
    } else if (p.type == kParamGroupOrder) {
      dec.group_order(p.value, false, m.group_order);
    } else if (p.type == kParamSubscriptionFilter) {
      // d20 §5.1.2: the only draft whose FETCH takes LOCATION_FILTER (kParamRules).
      dec.filter_param(as_span(p.bytes), m.filter);
    } else {
      m.params.push_back(std::move(p));
    }
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const FetchOk& m) {
  if (!d.track_extensions && !m.track_extensions.empty()) {
    return std::nullopt;
  }
  write_response_id(w, d, m.request_id);
  if (!d.subscribe_params) {
    w.u8(m.group_order);
  }
  w.u8(m.end_of_track ? 1 : 0);
  write_location(w, m.end);
  write_kvps(w, d, m.params);
  w.bytes(m.track_extensions);
  return MessageType::kFetchOk;
}

void read(Decoder& dec, FetchOk& m) {
  dec.response_id(m.request_id);
  if (!dec.d.subscribe_params) {
    dec.group_order(dec.u8(), false, m.group_order);
  }
  dec.forward(dec.u8(), m.end_of_track);  // End Of Track is 0 or 1 as well
  m.end = dec.location();
  dec.message_params(MessageType::kFetchOk, m.params);
  if (dec.d.track_extensions && dec.ok()) {
    dec.rest_or_properties(m.track_extensions);
  }
}

TypeOrNone write(FormWriter& w, const Draft& d, const FetchCancel& m) {
  if (d.request_streams) {
    return std::nullopt;
  }
  w.varint(m.request_id);
  return MessageType::kFetchCancel;
}

void read(Decoder& dec, FetchCancel& m) { m.request_id = dec.varint(); }

// --- PUBLISH / PUBLISH_OK (d14 §9.13-9.14, d15 §9.13-9.14, d16 §9.13-9.14, d17 §9.11-9.12, d18
// and d19 §10.10 with REQUEST_OK §10.5, d20 §10.11). From 17 PUBLISH opens its own request stream
// (d17: Required Request ID Delta after the id) and PUBLISH_OK has no Request ID; from 18 there is
// no PUBLISH_OK type: REQUEST_OK answers (#1611), its Track Properties empty.

std::string location_bytes(const Draft& d, const Location& l) {
  std::vector<uint8_t> out;
  FormWriter w(out, d.varint_form);
  write_location(w, l);
  return std::string(out.begin(), out.end());
}

TypeOrNone write(FormWriter& w, const Draft& d, const Publish& m) {
  write_request_id(w, d, m.request_id, m.request_id_delta);
  write_tuple(w, m.ns);
  w.string(m.track);
  w.varint(m.track_alias);
  if (!d.subscribe_params) {
    w.u8(m.group_order);
    w.u8(m.largest ? 1 : 0);
    if (m.largest) {
      write_location(w, *m.largest);
    }
    w.u8(m.forward ? 1 : 0);
    write_kvps(w, d, m.params);
    return MessageType::kPublish;
  }
  Parameters all;
  if (m.group_order != 0) {
    // d15 defines GROUP_ORDER in PUBLISH; d16 moved it to a track property, but a value read from
    // a d16 peer is written back as it came. d18/19 have no place for it (d20 #1834 again has).
    const ParamRule* rule = param_rule(d, kParamGroupOrder);
    if (d.typed_params && (rule == nullptr || (rule->messages & kPub) == 0)) {
      return std::nullopt;
    }
    all.push_back(varint_param(kParamGroupOrder, m.group_order));
  }
  all.push_back(varint_param(kParamForward, m.forward ? 1 : 0));
  if (m.largest) {
    all.push_back(bytes_param(kParamLargestObject, location_bytes(d, *m.largest)));
  }
  all.insert(all.end(), m.params.begin(), m.params.end());
  write_kvps(w, d, all);
  if (d.track_extensions) {
    w.bytes(m.track_extensions);
  } else if (!m.track_extensions.empty()) {
    return std::nullopt;
  }
  return MessageType::kPublish;
}

void read(Decoder& dec, Publish& m) {
  dec.request_id(m.request_id, m.request_id_delta);
  size_t name = 0;
  dec.tuple(m.ns, true, name);
  dec.track_name(m.track, name);
  m.track_alias = dec.varint();
  if (!dec.d.subscribe_params) {
    // d14: Group Order 1..2, Content Exists 0..1, Forward 0..1, each a protocol violation else.
    dec.group_order(dec.u8(), false, m.group_order);
    bool exists = false;
    dec.forward(dec.u8(), exists);
    if (exists) {
      m.largest = dec.location();
    }
    dec.forward(dec.u8(), m.forward);
    dec.message_params(MessageType::kPublish, m.params);
    return;
  }
  Parameters all;
  dec.message_params(MessageType::kPublish, all);
  for (auto& p : all) {
    switch (p.type) {
      case kParamGroupOrder:
        dec.group_order(p.value, false, m.group_order);
        break;
      case kParamForward:
        dec.forward(p.value, m.forward);
        break;
      case kParamLargestObject: {
        FormReader lr(as_span(p.bytes), dec.d.varint_form);
        Location l;
        l.group = lr.varint().value_or(0);
        l.object = lr.varint().value_or(0);
        if (!lr.ok() || !lr.empty()) {
          dec.fail_with(ErrorCode::kWrongSize, "LARGEST_OBJECT is not one Location");
        }
        m.largest = l;
        break;
      }
      default:
        m.params.push_back(std::move(p));
    }
  }
  if (dec.d.track_extensions && dec.ok()) {
    dec.rest_or_properties(m.track_extensions);
  }
}

// d18+ (#1611): PUBLISH_OK is a REQUEST_OK, Parameters then empty Track Properties. d18/19 carry
// FORWARD, SUBSCRIBER_PRIORITY, GROUP_ORDER (18 only) and the filter there; d20 (#1834) moved them
// into PUBLISH, so a d20 PUBLISH_OK holds only m.params (EXPIRES): an accepted PUBLISH keeps the
// publisher's settings. What the draft cannot carry is not written (nullopt), never dropped.
TypeOrNone write_publish_ok_as_request_ok(FormWriter& w, const Draft& d, const PublishOk& m) {
  Parameters all;
  const ParamRule* fwd = param_rule(d, kParamForward);
  if (fwd != nullptr && (fwd->messages & kReqOk) != 0) {
    all.push_back(varint_param(kParamForward, m.forward ? 1 : 0));
    all.push_back(varint_param(kParamSubscriberPriority, m.subscriber_priority));
  } else if (!m.forward || m.subscriber_priority != 128) {
    return std::nullopt;
  }
  if (m.group_order != 0) {
    const ParamRule* order = param_rule(d, kParamGroupOrder);
    if (order == nullptr || (order->messages & kReqOk) == 0) {
      return std::nullopt;
    }
    all.push_back(varint_param(kParamGroupOrder, m.group_order));
  }
  if (m.filter) {
    const ParamRule* filter = param_rule(d, kParamSubscriptionFilter);
    if (filter == nullptr || (filter->messages & kReqOk) == 0) {
      return std::nullopt;
    }
  }
  if (!write_params_then_filter(w, d, std::move(all), m.params, m.filter)) {
    return std::nullopt;
  }
  return MessageType::kRequestOk;  // Track Properties: none
}

TypeOrNone write(FormWriter& w, const Draft& d, const PublishOk& m) {
  if (d.ok_track_properties) {
    return write_publish_ok_as_request_ok(w, d, m);
  }
  write_response_id(w, d, m.request_id);
  if (!d.subscribe_params) {
    w.u8(m.forward ? 1 : 0);
    w.u8(m.subscriber_priority);
    w.u8(m.group_order);
    const auto f = filter_bytes(m.filter.value_or(Filter{}), d);
    if (!f) {
      return std::nullopt;
    }
    w.bytes(*f);
    write_kvps(w, d, m.params);
    return MessageType::kPublishOk;
  }
  Parameters all;
  all.push_back(varint_param(kParamForward, m.forward ? 1 : 0));
  all.push_back(varint_param(kParamSubscriberPriority, m.subscriber_priority));
  if (m.group_order != 0) {
    all.push_back(varint_param(kParamGroupOrder, m.group_order));
  }
  if (!write_params_then_filter(w, d, std::move(all), m.params, m.filter)) {
    return std::nullopt;
  }
  return MessageType::kPublishOk;
}

void read(Decoder& dec, PublishOk& m) {
  dec.response_id(m.request_id);
  if (!dec.d.subscribe_params) {
    dec.forward(dec.u8(), m.forward);
    m.subscriber_priority = dec.u8();
    dec.group_order(dec.u8(), false, m.group_order);
    Filter f;
    dec.filter(dec.r, f);
    m.filter = f;
    dec.message_params(MessageType::kPublishOk, m.params);
    return;
  }
  read_subscription_params(dec, MessageType::kPublishOk, m);
}

// TRACK_STATUS and FETCH messages (FETCH_CANCEL and the d14 errors: before 17), PUBLISH and
// PUBLISH_OK (0x1E: before 18); nullopt for another type.
std::optional<ControlMessage> fetch_message_for(const Draft& d, MessageType t) {
  switch (t) {
    case MessageType::kTrackStatus: return TrackStatus{};
    case MessageType::kFetch: return Fetch{};
    case MessageType::kFetchCancel:
      if (d.request_streams) {
        return std::nullopt;  // d17 §5.2: cancelled by resetting the request stream
      }
      return FetchCancel{};
    case MessageType::kFetchOk: return FetchOk{};
    case MessageType::kPublish: return Publish{};
    case MessageType::kPublishOk:
      if (d.ok_track_properties) {
        return std::nullopt;  // d18 #1611: "RESERVED (PUBLISH_OK in <= 17)" (d19 table)
      }
      return PublishOk{};
    case MessageType::kTrackStatusError:
    case MessageType::kFetchError:
    case MessageType::kPublishError:
      if (!d.request_ok) {
        return RequestError{t, 0, 0, 0, {}, std::nullopt};
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}

// The message table: which structure a type decodes into, per draft. nullopt: unknown type.
std::optional<ControlMessage> message_for(const Draft& d, uint64_t type) {
  const auto t = static_cast<MessageType>(type);
  // Gone with the control stream in d17 (see Draft::request_streams).
  const bool control_stream_only =
      t == MessageType::kClientSetup || t == MessageType::kServerSetup ||
      t == MessageType::kPublishNamespaceDone || t == MessageType::kUnsubscribe ||
      t == MessageType::kPublishNamespaceCancel || t == MessageType::kMaxRequestId ||
      t == MessageType::kRequestsBlocked;
  if (d.request_streams && control_stream_only) {
    return std::nullopt;
  }
  switch (t) {
    case MessageType::kSetup:
      if (d.request_streams) {
        return Setup{};
      }
      return std::nullopt;
    case MessageType::kClientSetup: return ClientSetup{};
    case MessageType::kServerSetup: return ServerSetup{};
    case MessageType::kSubscribeUpdate: return SubscribeUpdate{};
    case MessageType::kSubscribe: return Subscribe{};
    case MessageType::kSubscribeOk: return SubscribeOk{};
    case MessageType::kRequestError: return RequestError{};
    case MessageType::kPublishNamespace: return PublishNamespace{};
    case MessageType::kRequestOk: return RequestOk{};
    case MessageType::kNamespace:
      if (d.namespace_messages) {
        return Namespace{};
      }
      return RequestError{MessageType::kNamespace, 0, 0, 0, {}};
    case MessageType::kPublishNamespaceDone: return PublishNamespaceDone{};
    case MessageType::kUnsubscribe: return Unsubscribe{};
    case MessageType::kPublishDone: return PublishDone{};
    case MessageType::kPublishNamespaceCancel: return PublishNamespaceCancel{};
    case MessageType::kNamespaceDone:
      if (d.namespace_messages) {
        return Namespace{true, {}};
      }
      if (!d.request_streams) {
        return TrackStatusOk{};  // d14 TRACK_STATUS_OK
      }
      return std::nullopt;
    case MessageType::kGoaway: return Goaway{};
    case MessageType::kSubscribeNamespace:
      if (d.namespace_v2) {
        return std::nullopt;  // d18: renumbered to 0x50
      }
      return SubscribeNamespace{};
    case MessageType::kSubscribeNamespace2:
    case MessageType::kSubscribeTracks:
      if (!d.namespace_v2) {
        return std::nullopt;
      }
      {
        SubscribeNamespace m;
        m.tracks = t == MessageType::kSubscribeTracks;
        return m;
      }
    case MessageType::kSubscribeNamespaceOk:
      if (!d.request_ok) {
        return RequestOk{MessageType::kSubscribeNamespaceOk, 0, {}};
      }
      return std::nullopt;
    case MessageType::kSubscribeNamespaceError:
      if (!d.request_ok) {
        return RequestError{MessageType::kSubscribeNamespaceError, 0, 0, 0, {}};
      }
      return std::nullopt;
    case MessageType::kMaxRequestId: return MaxRequestId{};
    case MessageType::kRequestsBlocked: return MaxRequestId{true, 0};
    default: return fetch_message_for(d, t);
  }
}

// One message body into `msg`; `js`: read the Peer::kMoqNetJs forms. `dual`: a parameter with two
// peer forms was read.
std::optional<Error> decode_body(const Draft& d, Span body, const Limits& limits, bool js,
                                 ControlMessage& msg, bool& dual) {
  Decoder dec{FormReader(body, d.varint_form), d, limits, std::nullopt};
  dec.js_forms = js;
  std::visit([&](auto& m) { read(dec, m); }, msg);
  dual = dec.saw_dual;
  if (dec.error) {
    return dec.error;
  }
  if (!dec.r.ok() || !dec.r.empty()) {
    // §9: a length that does not match the payload is a PROTOCOL_VIOLATION.
    return make_error(ErrorCode::kDecode, "message length does not match its fields");
  }
  return std::nullopt;
}

}  // namespace

void write_varint(VarintForm f, uint64_t v, std::vector<uint8_t>& out) {
  if (f == VarintForm::kQuic) {
    Writer(out).varint(v);
    return;
  }
  size_t n = 0;  // bytes after the first
  uint8_t prefix = 0;
  // d18+: 1111110x is the 7-byte form, up to 2^49.
  const size_t forms =
      f == VarintForm::kLeadingOnes7 ? std::size(kLoLimit) : std::size(kLoLimit) - 1;
  while (n < forms && v >= kLoLimit[n]) {
    ++n;
  }
  if (n < forms) {
    prefix = static_cast<uint8_t>(0xff00u >> n);  // n ones, then a zero
    out.push_back(static_cast<uint8_t>(prefix | (v >> (8 * n))));
  } else {
    // No 7-byte form (1111110x is invalid): 8 bytes up to 2^56, else 9.
    n = v < (uint64_t{1} << 56) ? 7 : 8;
    out.push_back(n == 7 ? 0xfe : 0xff);
  }
  for (size_t i = n; i-- > 0;) {
    out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
}

ParseResult<uint64_t> read_varint(VarintForm f, Span in) {
  FormReader r(in, f);
  auto v = r.varint();
  if (r.is_invalid()) {
    return fail(ErrorCode::kDecode, "invalid varint");
  }
  if (!v) {
    return need_more<uint64_t>();
  }
  return Parsed<uint64_t>{*v, r.consumed()};
}

std::optional<Filter> decode_filter(Version v, std::string_view value) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return std::nullopt;
  }
  const Limits limits;
  Span in(reinterpret_cast<const uint8_t*>(value.data()), value.size());
  Decoder dec{FormReader(in, d->varint_form), *d, limits, std::nullopt};
  std::optional<Filter> f;
  dec.filter_param(in, f);
  if (dec.error) {
    return std::nullopt;
  }
  return f;
}

const Draft* draft(Version v) {
  for (const auto& d : kDrafts) {
    if (d.version == v) {
      return &d;
    }
  }
  return nullptr;
}

TerminationCode termination_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kCancel: return TerminationCode::kNoError;
    case ErrorCode::kUnauthorized: return TerminationCode::kUnauthorized;
    case ErrorCode::kWrongSize: return TerminationCode::kKeyValueFormattingError;
    case ErrorCode::kVersion: return TerminationCode::kVersionNegotiationFailed;
    case ErrorCode::kGoingAway: return TerminationCode::kGoawayTimeout;
    case ErrorCode::kTimeout: return TerminationCode::kControlMessageTimeout;
    case ErrorCode::kTransport:
    case ErrorCode::kEncode:
    case ErrorCode::kClosed: return TerminationCode::kInternalError;
    default: return TerminationCode::kProtocolViolation;
  }
}

std::optional<uint64_t> relay_hops_origin(Version v, const Parameters& options) {
  const Draft* d = draft(v);
  const Parameter* p = find(options, kSetupRelayHops);
  if (d == nullptr || p == nullptr) {
    return std::nullopt;
  }
  auto r = read_varint(d->varint_form, as_span(p->bytes));
  if (!r || !r->has_value() || (*r)->consumed != p->bytes.size()) {
    return std::nullopt;
  }
  return (*r)->value;
}

uint64_t relay_cost(const Parameters& options) {
  const Parameter* p = find(options, kSetupRelayCost);
  return p == nullptr ? 0 : p->value;
}

const Parameter* find(const Parameters& params, uint64_t type) {
  for (const auto& p : params) {
    if (p.type == type) {
      return &p;
    }
  }
  return nullptr;
}

bool encode(Version v, const ControlMessage& m, std::vector<uint8_t>& out) {
  return encode(v, m, out, Peer::kDraftText);
}

bool encode(Version v, const ControlMessage& m, std::vector<uint8_t>& out, Peer peer) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return false;
  }
  std::vector<uint8_t> body;
  FormWriter bw(body, d->varint_form, peer);
  TypeOrNone type = std::visit([&](const auto& msg) { return write(bw, *d, msg); }, m);
  if (!type || body.size() > kMaxBody) {
    return false;
  }
  FormWriter w(out, d->varint_form);
  w.varint(static_cast<uint64_t>(*type));
  w.u16(static_cast<uint16_t>(body.size()));
  w.bytes(Span(body));
  return true;
}

ParseResult<ControlMessage> decode_control(Version v, Span in, const Limits& limits) {
  return decode_control(v, in, limits, Peer::kDraftText);
}

ParseResult<ControlMessage> decode_control(Version v, Span in, const Limits& limits, Peer peer) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return fail(ErrorCode::kVersion, "not an IETF draft moqd speaks");
  }
  FormReader r(in, d->varint_form);
  auto type = r.varint();
  auto len = r.u16();
  if (r.is_invalid()) {
    return fail(ErrorCode::kDecode, "invalid varint");
  }
  if (!type || !len) {
    return need_more<ControlMessage>();
  }
  std::optional<ControlMessage> msg = message_for(*d, *type);
  if (!msg) {
    // §9: "An endpoint that receives an unknown message type MUST close the session."
    return fail(ErrorCode::kUnexpectedMessage, "unknown control message type");
  }
  auto body = r.bytes(*len);
  if (!body) {
    return need_more<ControlMessage>();
  }
  const ControlMessage blank = *msg;
  bool dual = false;
  std::optional<Error> err = decode_body(*d, *body, limits, peer == Peer::kMoqNetJs, *msg, dual);
  if (err && dual) {
    // The other peer's form of LARGEST_OBJECT / INCLUDE_PROPERTIES (see Peer).
    ControlMessage other = blank;
    bool unused = false;
    if (!decode_body(*d, *body, limits, peer != Peer::kMoqNetJs, other, unused)) {
      *msg = std::move(other);
      err.reset();
    }
  }
  if (err) {
    return tl::unexpected(*err);
  }
  return Parsed<ControlMessage>{std::move(*msg), r.consumed()};
}

// --- Data streams (§10.4.2).

namespace {
// Where a data-stream read stopped, if it did: the first problem the reader met (an invalid
// varint, an extension block over its limit: errors; the end of the input: need more), else
// nullopt.
template <class T>
std::optional<ParseResult<T>> stream_stop(const FormReader& r) {
  if (r.is_invalid()) {
    return fail(ErrorCode::kDecode, "invalid varint");
  }
  if (r.is_too_long()) {
    return fail(ErrorCode::kBoundsExceeded, "extension headers too long");
  }
  if (!r.ok()) {
    return need_more<T>();
  }
  return std::nullopt;
}
}  // namespace

bool is_subgroup_type(Version v, uint64_t type) {
  if (draft(v) == nullptr) {
    return false;
  }
  uint64_t base = type & ~uint64_t{0x0f};
  uint64_t low = type & 0x07;
  // 0x16/0x17 and 0x1E/0x1F are not defined (subgroup bits 0b11).
  if (low >= 0x06) {
    return false;
  }
  // JS: @moq/net accepts the 0x30 range in d14 as well; the d14 text defines only 0x10..0x1D.
  // d18 §11.4.2: FIRST_OBJECT (0x40) on top, 0x50..0x7D.
  if (base == 0x50 || base == 0x70) {
    return draft(v)->first_object_bit;
  }
  return base == 0x10 || base == 0x30;
}

uint64_t subgroup_type(bool extensions, bool explicit_subgroup, bool end_of_group,
                       bool with_priority) {
  return subgroup_type(extensions, explicit_subgroup, end_of_group, with_priority, false);
}

uint64_t subgroup_type(bool extensions, bool explicit_subgroup, bool end_of_group,
                       bool with_priority, bool first_object) {
  uint64_t t = with_priority ? 0x10 : 0x30;
  t |= extensions ? 0x01 : 0;
  t |= explicit_subgroup ? 0x04 : 0;
  t |= end_of_group ? 0x08 : 0;
  t |= first_object ? 0x40 : 0;
  return t;
}

void encode(Version v, const SubgroupHeader& h, std::vector<uint8_t>& out) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return;
  }
  FormWriter w(out, d->varint_form);
  w.varint(h.type);
  w.varint(h.track_alias);
  w.varint(h.group);
  if (h.has_subgroup_field()) {
    w.varint(h.subgroup);
  }
  if (h.has_priority()) {
    w.u8(h.publisher_priority.value_or(128));
  }
}

ParseResult<SubgroupHeader> decode_subgroup_header(Version v, Span in, const Limits&) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return fail(ErrorCode::kVersion, "not an IETF draft moqd speaks");
  }
  FormReader r(in, d->varint_form);
  SubgroupHeader h;
  h.type = r.varint().value_or(0);
  if (auto end = stream_stop<SubgroupHeader>(r)) {
    return *end;
  }
  if (!is_subgroup_type(v, h.type)) {
    return fail(ErrorCode::kProtocolViolation, "not a SUBGROUP_HEADER type");
  }
  h.track_alias = r.varint().value_or(0);
  h.group = r.varint().value_or(0);
  if (h.has_subgroup_field()) {
    h.subgroup = r.varint().value_or(0);
  }
  if (h.has_priority()) {
    h.publisher_priority = r.u8().value_or(0);
  }
  if (auto end = stream_stop<SubgroupHeader>(r)) {
    return *end;
  }
  return Parsed<SubgroupHeader>{h, r.consumed()};
}

void encode_object(Version v, const SubgroupHeader& h, const ObjectHeader& o,
                   std::vector<uint8_t>& out) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return;
  }
  FormWriter w(out, d->varint_form);
  w.varint(o.id_delta);
  if (h.has_extensions()) {
    w.string(o.extensions);
  }
  w.varint(o.payload_length);
  if (o.payload_length == 0) {
    w.varint(o.status);
  }
}

ParseResult<ObjectHeader> decode_object(Version v, const SubgroupHeader& h, Span in,
                                        const Limits& l) {
  const Draft* d = draft(v);
  if (d == nullptr) {
    return fail(ErrorCode::kVersion, "not an IETF draft moqd speaks");
  }
  FormReader r(in, d->varint_form);
  ObjectHeader o;
  o.id_delta = r.varint().value_or(0);
  if (h.has_extensions()) {
    o.extensions.assign(r.string(l.max_extensions).value_or(std::string_view()));
  }
  o.payload_length = r.varint().value_or(1);
  if (o.payload_length == 0) {
    o.status = r.varint().value_or(0);
  }
  if (auto end = stream_stop<ObjectHeader>(r)) {
    return *end;
  }
  // §10.2.1.1 Object Status: 0 normal, 1 does not exist, 3 end of group, 4 end of track.
  if (o.payload_length == 0 && (o.status == 2 || o.status > 4)) {
    return fail(ErrorCode::kProtocolViolation, "unknown object status");
  }
  return Parsed<ObjectHeader>{std::move(o), r.consumed()};
}

std::optional<uint64_t> object_id(std::optional<uint64_t> previous, uint64_t delta) {
  if (!previous) {
    return delta;
  }
  if (*previous >= kMaxVarint || delta > kMaxVarint - *previous - 1) {
    return std::nullopt;
  }
  return *previous + delta + 1;
}

}  // namespace moqd::wire::ietf
