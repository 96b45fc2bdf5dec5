#pragma once
// IETF MoQ Transport (draft-ietf-moq-transport) codecs for drafts 14 to 20: one shared core
// (control message framing, Key-Value-Pair parameters, namespace tuples, SUBGROUP streams) and a
// row of differences per draft (ietf::Draft). Adding a draft is a new row plus the messages whose
// layout it changes. Pure: no I/O, no session state. Decoders check every peer-controlled count
// and length before allocating and never assert on peer bytes; errors carry an ErrorCode that
// termination_code() maps to the draft's session termination code.
//
// Where @moq/net 0.3.4 and the draft text differ, the decoder accepts both and the encoder writes
// the form both accept; each such point is marked "JS:" below and listed in docs/ARCHITECTURE.md.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/codec.h"
#include "wire/version.h"

namespace moqd::wire::ietf {

// How a draft writes every varint on every stream: QUIC's (RFC 9000 §16; drafts 14..16) or the
// leading-ones form draft 17 introduced (protocol/README.md §1.2: the count of leading 1-bits in
// the first byte gives the length, 1111110x is invalid). Draft 18 (§1.4.1, #1595) makes 1111110x
// a 7-byte form (49 value bits): kLeadingOnes7. Message lengths stay u16 in all of them.
enum class VarintForm : uint8_t { kQuic, kLeadingOnes, kLeadingOnes7 };

// Appends the minimal encoding of `v` (<= 2^62-1) in form `f` (kLeadingOnes7 uses the 7-byte form
// for 2^42 <= v < 2^49; JS: @moq/net 0.3.4 writes 8 bytes there and reads both).
void write_varint(VarintForm f, uint64_t v, std::vector<uint8_t>& out);
// One varint from the front of `in`: nullopt = need more. Errors (kDecode): the prefix 1111110x
// in kLeadingOnes (draft 17), or a leading-ones value above 2^62-1 (moqd keeps one value space
// across drafts). Non-minimal encodings are accepted.
ParseResult<uint64_t> read_varint(VarintForm f, std::span<const uint8_t> in);

// Per-draft differences over the shared core. One row per draft (ietf.cc kDrafts).
struct Draft {
  Version version;
  uint8_t number;                  // 14 .. 20
  VarintForm varint_form;          // 14..16 kQuic, 17 kLeadingOnes, 18+ kLeadingOnes7
  bool setup_versions;             // d14: CLIENT_SETUP lists versions, SERVER_SETUP selects one
  bool delta_types;                // d16: Key-Value-Pair types delta-coded from the previous one
  bool subscribe_params;           // d15+: priority, group order, forward, filter are parameters
  bool request_ok;                 // d15+: 0x07 REQUEST_OK {id, params}; 0x05 REQUEST_ERROR
  bool retry_interval;             // d16: REQUEST_ERROR carries Retry Interval
  bool namespace_messages;         // d15 (JS) / d16: 0x08 NAMESPACE, 0x0E NAMESPACE_DONE
  bool done_by_request_id;         // d16: PUBLISH_NAMESPACE_DONE / _CANCEL name a request id
  bool subscribe_options;          // d16: SUBSCRIBE_NAMESPACE carries Subscribe Options
  bool unknown_params_fatal;       // d16 §9.2: an unknown message parameter is a violation
  bool track_extensions;           // d16: SUBSCRIBE_OK ends with Track Extensions
  bool empty_field_fatal;          // d16 §2.4.1: a zero-length namespace field is a violation
  // d17 §3.3, §9: a bidi stream per request. SETUP (0x2F00, options to the end of the message, no
  // count) replaces CLIENT/SERVER_SETUP; responses (SUBSCRIBE_OK, REQUEST_OK, REQUEST_ERROR,
  // PUBLISH_DONE) carry no request id; PUBLISH_NAMESPACE_DONE/_CANCEL, UNSUBSCRIBE,
  // MAX_REQUEST_ID and REQUESTS_BLOCKED are gone (closing or resetting the stream says it);
  // GOAWAY carries a Timeout.
  bool request_streams;
  bool request_id_delta;           // d17 only: Required Request ID Delta after a request's id
  // d17 §9.3: a message parameter's value layout comes from its type (uint8, varint, Location,
  // length-prefixed), not from the type's parity.
  bool typed_params;
  // d18 §10.18, §10.19 (#1542): SUBSCRIBE_NAMESPACE is 0x50 with no Subscribe Options, SUBSCRIBE_TRACKS
  // (0x51) has the same layout; 0x11 is gone.
  bool namespace_v2 = false;
  bool goaway_request_id = false;  // d18 only: GOAWAY may end with a Request ID (#1559)
  bool ok_track_properties = false;  // d18+: REQUEST_OK ends with Track Properties
  bool error_redirect = false;       // d18+: REQUEST_ERROR ends with a Redirect (code 0x34)
  bool first_object_bit = false;     // d18 §11.4.2 (#1618): SUBGROUP_HEADER types | 0x40
  // d20 (editor's copy, see ietf.cc): LOCATION_FILTER is 0..4 varints whose count says the kind,
  // instead of a Filter Type tag.
  bool filter_fields = false;
};
// The row for `v`; null for a version outside drafts 14..20.
const Draft* draft(Version v);

// Session termination codes (draft-14 §3.4, unchanged in 15/16).
enum class TerminationCode : uint64_t {
  kNoError = 0x0,
  kInternalError = 0x1,
  kUnauthorized = 0x2,
  kProtocolViolation = 0x3,
  kInvalidRequestId = 0x4,
  kDuplicateTrackAlias = 0x5,
  kKeyValueFormattingError = 0x6,
  kTooManyRequests = 0x7,
  kGoawayTimeout = 0x10,
  kControlMessageTimeout = 0x11,
  kVersionNegotiationFailed = 0x15,
};
// The code a session closes with for a decoder (or session) error. One table: kWrongSize is a
// Key-Value-Pair formatting error, kVersion a failed version negotiation, kUnauthorized itself,
// everything else a protocol violation.
TerminationCode termination_code(ErrorCode code);

// Control message types (draft-14 §9, table "Control Messages").
enum class MessageType : uint64_t {
  kSubscribeUpdate = 0x02,
  kSubscribe = 0x03,
  kSubscribeOk = 0x04,
  kRequestError = 0x05,  // d14: SUBSCRIBE_ERROR
  kPublishNamespace = 0x06,
  kRequestOk = 0x07,     // d14: PUBLISH_NAMESPACE_OK
  kNamespace = 0x08,     // d14: PUBLISH_NAMESPACE_ERROR
  kPublishNamespaceDone = 0x09,
  kUnsubscribe = 0x0a,
  kPublishDone = 0x0b,
  kPublishNamespaceCancel = 0x0c,
  kNamespaceDone = 0x0e,
  kTrackStatus = 0x0d,
  kTrackStatusOk = 0x0e,     // d14 only (d15+: 0x0E is NAMESPACE_DONE)
  kTrackStatusError = 0x0f,  // d14 only
  kGoaway = 0x10,
  kSubscribeNamespace = 0x11,
  kSubscribeNamespaceOk = 0x12,     // d14 only
  kSubscribeNamespaceError = 0x13,  // d14 only
  kMaxRequestId = 0x15,
  kFetch = 0x16,
  kFetchCancel = 0x17,
  kFetchOk = 0x18,
  kFetchError = 0x19,  // d14 only (d15+: REQUEST_ERROR)
  kRequestsBlocked = 0x1a,
  kPublish = 0x1d,       // d17+: the first message of its own request stream
  kPublishOk = 0x1e,     // d14..17 (d18+: REQUEST_OK answers a PUBLISH)
  kPublishError = 0x1f,  // d14 only (d15+: REQUEST_ERROR)
  kClientSetup = 0x20,
  kServerSetup = 0x21,
  kSetup = 0x2f00,  // d17
  kSubscribeNamespace2 = 0x50,  // d18+ SUBSCRIBE_NAMESPACE (replaces 0x11)
  kSubscribeTracks = 0x51,      // d18+
};
// REQUEST_ERROR code REDIRECT (d18 §10.6.2, §15.10.2): the message ends with a Redirect.
inline constexpr uint64_t kErrorRedirect = 0x34;

// Bounds on what a peer may make a decoder allocate or accept.
struct Limits {
  size_t max_versions = 64;          // CLIENT_SETUP version list
  size_t max_parameters = 64;        // Key-Value-Pairs in one message
  size_t max_namespace_fields = 32;  // draft-14 §2.4.1
  size_t max_full_name = 4096;       // namespace fields + track name, bytes (§2.4.1)
  size_t max_reason = 1024;          // Reason Phrase bytes (§1.4.3)
  size_t max_uri = 8192;             // GOAWAY New Session URI bytes
  size_t max_extensions = 65535;     // object extension headers, bytes
};

// A Key-Value-Pair (draft-14 §1.4.2): an even type carries `value`, an odd type `bytes`. Types
// are absolute here; the d16 delta coding exists only on the wire.
struct Parameter {
  uint64_t type = 0;
  uint64_t value = 0;
  std::string bytes;
  friend bool operator==(const Parameter&, const Parameter&) = default;
};
using Parameters = std::vector<Parameter>;
// The first parameter of `type`, or null.
const Parameter* find(const Parameters& params, uint64_t type);

// Setup parameter types (draft-14 §9.3.2); the same numbers in every draft.
inline constexpr uint64_t kSetupPath = 0x01;
inline constexpr uint64_t kSetupMaxRequestId = 0x02;
inline constexpr uint64_t kSetupAuthorizationToken = 0x03;
inline constexpr uint64_t kSetupAuthority = 0x05;
inline constexpr uint64_t kSetupImplementation = 0x07;
// MoQ relay-hops option (@moq/net cluster extension; NET-0.3.md §4.7): odd, bytes.
inline constexpr uint64_t kSetupRelayHops = 0x40b55;
// MoQ relay-cost option (cluster extension): even, varint: the cost of the link to the sender.
// Defined by @moq/net, not sent by it.
inline constexpr uint64_t kSetupRelayCost = 0x40b56;
// MoQ solicit option (NET-0.3.md §4.7): even, varint.
inline constexpr uint64_t kSetupSolicit = 0x40b5a;
// The sender's origin (hop id) in a RELAY_HOPS option: one varint in the draft's form filling the
// value. nullopt: absent or malformed (the caller treats the option as not sent).
std::optional<uint64_t> relay_hops_origin(Version v, const Parameters& options);
// The RELAY_COST option's value (already a varint once decoded: any value is well formed); 0 when
// absent (the cluster extension's "no cost declared").
uint64_t relay_cost(const Parameters& options);

// Message parameter types (draft-15 §9.2.1, draft-16 §9.2.2, draft-17 §9.3).
inline constexpr uint64_t kParamDeliveryTimeout = 0x02;
inline constexpr uint64_t kParamAuthorizationToken = 0x03;
inline constexpr uint64_t kParamMaxCacheDuration = 0x04;
inline constexpr uint64_t kParamExpires = 0x08;
inline constexpr uint64_t kParamLargestObject = 0x09;
inline constexpr uint64_t kParamPublisherPriority = 0x0e;
inline constexpr uint64_t kParamForward = 0x10;
inline constexpr uint64_t kParamSubscriberPriority = 0x20;
inline constexpr uint64_t kParamSubscriptionFilter = 0x21;
inline constexpr uint64_t kParamGroupOrder = 0x22;
inline constexpr uint64_t kParamSubgroupDeliveryTimeout = 0x06;  // d18+
inline constexpr uint64_t kParamFillParameters = 0x23;  // JS: @moq/net d20 only; not in the text
inline constexpr uint64_t kParamTrackNamespacePrefix = 0x34;  // d18+: a namespace tuple, no length
inline constexpr uint64_t kParamIncludeProperties = 0x35;     // d20: uint8 (JS: length + byte)
// Cluster extension message parameters (NET-0.3.md §4.4), accepted from d17 on.
inline constexpr uint64_t kParamHopPath = 0x40b57;
inline constexpr uint64_t kParamRouteCost = 0x40b58;

using TrackNamespace = std::vector<std::string>;

struct Location {
  uint64_t group = 0;
  uint64_t object = 0;
  friend bool operator==(const Location&, const Location&) = default;
};

// Subscription Filter (draft-14 §9.7, draft-16 §5.1.2; in d15+ the value of
// SUBSCRIPTION_FILTER, d19 LOCATION_FILTER). Drafts 14..19 write the type as a tag; d20 writes
// 0..4 varints and their count says the kind (kUnfiltered: none; kNextGroupStart / kRelative: one,
// the groups back from the next group; kLargestObject: "0 0"; kAbsoluteStart: two others;
// kAbsoluteRange: three or four).
enum class FilterType : uint64_t {
  kNextGroupStart = 0x1,
  kLargestObject = 0x2,  // d20: "Next Object"
  kAbsoluteStart = 0x3,
  kAbsoluteRange = 0x4,
  kUnfiltered = 0x100,  // d20 only (not a tag): an empty value
  kRelative = 0x101,    // d20 only (not a tag): `relative_groups` back from the next group
};
struct Filter {
  FilterType type = FilterType::kLargestObject;
  Location start;          // kAbsoluteStart, kAbsoluteRange
  uint64_t end_group = 0;  // kAbsoluteRange: the wire value (d14 End Group, d17+ End Group Delta)
  uint64_t relative_groups = 0;         // kRelative
  std::optional<uint64_t> end_object;   // d20 kAbsoluteRange, the fourth field
  friend bool operator==(const Filter&, const Filter&) = default;
};

struct ClientSetup {
  std::vector<uint64_t> versions;  // d14 only
  Parameters params;
  friend bool operator==(const ClientSetup&, const ClientSetup&) = default;
};
struct ServerSetup {
  uint64_t version = 0;  // d14 only
  Parameters params;
  friend bool operator==(const ServerSetup&, const ServerSetup&) = default;
};
// d17 SETUP (both sides, on a uni stream): Setup Options, delta-coded, no count.
struct Setup {
  Parameters options;
  friend bool operator==(const Setup&, const Setup&) = default;
};

// SUBSCRIBE (d14 §9.7, d15 and d16 §9.9, d17 §9.8). In d15+ the first four fields travel as parameters; on
// decode they are taken out of `params`, which keeps the rest in wire order.
struct Subscribe {
  uint64_t request_id = 0;
  uint64_t request_id_delta = 0;  // d17 Required Request ID Delta
  TrackNamespace ns;
  std::string track;
  uint8_t subscriber_priority = 128;
  uint8_t group_order = 0;  // 0: the publisher's (d14 field value; d15+ parameter absent)
  bool forward = true;
  std::optional<Filter> filter;  // always present in d14; d15+: absent = unfiltered
  Parameters params;
  friend bool operator==(const Subscribe&, const Subscribe&) = default;
};

// SUBSCRIBE_OK. d14: the fields below; d15+: {request_id, track_alias, params[, d16 track
// extensions]} with group order and largest as parameters (d15 GROUP_ORDER, LARGEST_OBJECT);
// d17: no request_id. REQUEST_OK, REQUEST_ERROR and PUBLISH_DONE lose theirs in d17 too (the
// field stays 0).
struct SubscribeOk {
  uint64_t request_id = 0;
  uint64_t track_alias = 0;
  uint64_t expires = 0;     // d14 field; d15+ EXPIRES parameter stays in params
  uint8_t group_order = 2;  // d14 field (1 ascending, 2 descending)
  std::optional<Location> largest;  // d14 Content Exists + Largest Location
  Parameters params;
  std::string track_extensions;  // d16 Track Extensions / d17 Track Properties, raw, to the end
  friend bool operator==(const SubscribeOk&, const SubscribeOk&) = default;
};

// 0x05 SUBSCRIBE_ERROR (d14) / REQUEST_ERROR (d15+), 0x08 PUBLISH_NAMESPACE_ERROR (d14),
// 0x13 SUBSCRIBE_NAMESPACE_ERROR (d14), 0x0F TRACK_STATUS_ERROR (d14) and 0x19 FETCH_ERROR (d14):
// one layout, the type says which.
// d18+ REQUEST_ERROR with code REDIRECT: where to ask instead.
struct Redirect {
  std::string uri;
  TrackNamespace ns;
  std::string track;
  friend bool operator==(const Redirect&, const Redirect&) = default;
};
struct RequestError {
  MessageType type = MessageType::kRequestError;
  uint64_t request_id = 0;
  uint64_t error_code = 0;
  uint64_t retry_interval = 0;  // d16 REQUEST_ERROR only
  std::string reason;
  std::optional<Redirect> redirect;  // d18+, exactly when error_code is kErrorRedirect
  friend bool operator==(const RequestError&, const RequestError&) = default;
};

// 0x07 PUBLISH_NAMESPACE_OK (d14, no params) / REQUEST_OK (d15+), 0x12 SUBSCRIBE_NAMESPACE_OK
// (d14).
struct RequestOk {
  MessageType type = MessageType::kRequestOk;
  uint64_t request_id = 0;
  Parameters params;  // d15+ REQUEST_OK only
  std::string track_properties;  // d18+ REQUEST_OK: Track Properties, raw, to the end
  friend bool operator==(const RequestOk&, const RequestOk&) = default;
};

// 0x02 SUBSCRIBE_UPDATE (d14 §9.10, d15) / REQUEST_UPDATE (d16, d17 §9.10). d14 has the fields
// inline; d15+ carry them as parameters, kept here as they came (each checked against the
// draft's parameter rules).
struct SubscribeUpdate {
  uint64_t request_id = 0;
  uint64_t request_id_delta = 0;     // d17
  uint64_t existing_request_id = 0;  // d14..16: the subscription's request id
  Location start;                    // d14
  uint64_t end_group = 0;            // d14
  uint8_t subscriber_priority = 128;  // d14
  bool forward = true;                // d14
  Parameters params;
  friend bool operator==(const SubscribeUpdate&, const SubscribeUpdate&) = default;
};

struct Unsubscribe {
  uint64_t request_id = 0;
  friend bool operator==(const Unsubscribe&, const Unsubscribe&) = default;
};

struct PublishNamespace {
  uint64_t request_id = 0;
  uint64_t request_id_delta = 0;  // d17
  TrackNamespace ns;
  Parameters params;
  friend bool operator==(const PublishNamespace&, const PublishNamespace&) = default;
};

// d14/15: names the namespace; d16: the request id of the PUBLISH_NAMESPACE.
struct PublishNamespaceDone {
  TrackNamespace ns;
  uint64_t request_id = 0;
  friend bool operator==(const PublishNamespaceDone&, const PublishNamespaceDone&) = default;
};

struct PublishNamespaceCancel {
  TrackNamespace ns;        // d14/15
  uint64_t request_id = 0;  // d16
  uint64_t error_code = 0;
  std::string reason;
  friend bool operator==(const PublishNamespaceCancel&, const PublishNamespaceCancel&) = default;
};

struct SubscribeNamespace {
  uint64_t request_id = 0;
  uint64_t request_id_delta = 0;  // d17
  TrackNamespace prefix;  // 0..32 fields
  uint64_t options = 0;   // d16, d17 Subscribe Options (0 PUBLISH, 1 NAMESPACE, 2 both)
  Parameters params;
  bool tracks = false;    // d18+: 0x51 SUBSCRIBE_TRACKS (same layout) instead of 0x50
  friend bool operator==(const SubscribeNamespace&, const SubscribeNamespace&) = default;
};

// 0x08 NAMESPACE / 0x0E NAMESPACE_DONE (d15 as @moq/net speaks it, d16 text): a suffix of the
// SUBSCRIBE_NAMESPACE prefix. d17+ on a session that negotiated the cluster extension
// (draft-lcurley-moq-cluster): the extended NAMESPACE, Parameters after the suffix (HOP_PATH,
// ROUTE_COST; NAMESPACE_DONE is never extended). Decoding reads it as extended when bytes follow
// the suffix.
struct Namespace {
  bool done = false;
  TrackNamespace suffix;
  bool extended = false;
  Parameters params;  // extended only
  friend bool operator==(const Namespace&, const Namespace&) = default;
};

struct PublishDone {
  uint64_t request_id = 0;
  uint64_t status_code = 0;
  uint64_t stream_count = 0;
  std::string reason;
  friend bool operator==(const PublishDone&, const PublishDone&) = default;
};

// 0x15 MAX_REQUEST_ID and 0x1A REQUESTS_BLOCKED.
struct MaxRequestId {
  bool blocked = false;  // REQUESTS_BLOCKED
  uint64_t value = 0;
  friend bool operator==(const MaxRequestId&, const MaxRequestId&) = default;
};

struct Goaway {
  std::string uri;
  uint64_t timeout = 0;  // d17, milliseconds
  std::optional<uint64_t> request_id;  // d18 only, optional trailing field
  friend bool operator==(const Goaway&, const Goaway&) = default;
};

// 0x0D TRACK_STATUS (d14 §9.17, d15, d16 §9.19, d17 §9.16, d18/19 §10.14, d20 §10.15): the
// layout of SUBSCRIBE (from 17 the first message of its own bidi stream).
struct TrackStatus {
  Subscribe request;
  friend bool operator==(const TrackStatus&, const TrackStatus&) = default;
};
// 0x0E TRACK_STATUS_OK (d14 §9.18 only): the layout of SUBSCRIBE_OK. d15/16 answer REQUEST_OK.
struct TrackStatusOk {
  SubscribeOk ok;
  friend bool operator==(const TrackStatusOk&, const TrackStatusOk&) = default;
};

// FETCH (d14 §9.16, d15, d16 §9.16, d17 §9.14, d18/19 §10.12, d20 §10.13): a range of objects
// already published. From 17 the first message of its own bidi stream (17: Required Request ID
// Delta after the id); 20 moves Start / End (standalone) and Joining Start (joining) into the
// LOCATION_FILTER parameter (0x21), decoded into `filter`.
enum class FetchType : uint64_t { kStandalone = 0x1, kRelativeJoining = 0x2, kAbsoluteJoining = 0x3 };
struct Fetch {
  uint64_t request_id = 0;
  // d14 fields; d15+ SUBSCRIBER_PRIORITY / GROUP_ORDER parameters, taken out of `params` on
  // decode (absent: 128 and 0, which the d16 text reads as ascending).
  uint8_t subscriber_priority = 128;
  uint8_t group_order = 0;
  FetchType type = FetchType::kStandalone;
  // Standalone: the track and the range; End Location is "the end plus 1", its Object 0 meaning
  // the whole End Group.
  TrackNamespace ns;
  std::string track;
  Location start;
  Location end;
  // Joining: the subscription joined, and Joining Start (groups back, or an absolute group).
  uint64_t joining_request_id = 0;
  uint64_t joining_start = 0;
  uint64_t request_id_delta = 0;  // d17
  // d20 LOCATION_FILTER (§5.1.2): standalone Start / End, or a joining fetch's StartGroup; absent:
  // the whole track (standalone), StartGroup 0 (joining).
  std::optional<Filter> filter;
  Parameters params;
  friend bool operator==(const Fetch&, const Fetch&) = default;
};

// FETCH_OK (d14 §9.17: with Group Order; d15: without; d16: Track Extensions at the end; d17+:
// no Request ID (the stream says it), Track Properties at the end).
struct FetchOk {
  uint64_t request_id = 0;
  uint8_t group_order = 1;  // d14 only (1 ascending, 2 descending)
  bool end_of_track = false;
  Location end;
  Parameters params;
  std::string track_extensions;  // d16, raw, to the end of the message
  friend bool operator==(const FetchOk&, const FetchOk&) = default;
};

// d14..16 only: from 17 a FETCH is cancelled by resetting its request stream (d17 §5.2).
struct FetchCancel {
  uint64_t request_id = 0;
  friend bool operator==(const FetchCancel&, const FetchCancel&) = default;
};

// PUBLISH (d14 §9.13, d15 §9.13, d16 §9.13, d17 §9.11, d18/19 §10.10, d20 §10.11): the publisher
// starts a subscription for one track under an alias it chose. d14 has Group Order, Content Exists
// [+ Largest Location] and Forward as fields; d15+ carry them as GROUP_ORDER (d15, d17 and d20:
// the draft text's parameter lists), LARGEST_OBJECT and FORWARD parameters, taken out of `params`
// on decode; d16 ends the message with Track Extensions, d17+ with Track Properties (checked to be
// well-formed). d17+: the first message of its own request stream; d17 adds the Required Request
// ID Delta. d20 (#1834) also lets it carry the subscription's initial SUBSCRIBER_PRIORITY,
// LOCATION_FILTER and delivery timeouts (kept in `params`).
struct Publish {
  uint64_t request_id = 0;
  uint64_t request_id_delta = 0;  // d17
  TrackNamespace ns;
  std::string track;
  uint64_t track_alias = 0;
  uint8_t group_order = 0;          // 0: not given (d15+ parameter absent); d14 field is 1..2
  std::optional<Location> largest;  // d14 Content Exists + Largest Location; d15+ LARGEST_OBJECT
  bool forward = true;              // d14 field; d15+ FORWARD parameter (absent: 1)
  Parameters params;
  std::string track_extensions;  // d16, raw, to the end of the message
  friend bool operator==(const Publish&, const Publish&) = default;
};

// PUBLISH_OK (d14 §9.14: fields like SUBSCRIBE's; d15/16: Request ID and parameters, with
// FORWARD, SUBSCRIBER_PRIORITY, GROUP_ORDER and SUBSCRIPTION_FILTER taken out on decode; d17
// §9.12: 0x1E with parameters only, no Request ID). From 18 (#1611) there is no PUBLISH_OK type:
// encoding one writes REQUEST_OK (0x07: its parameters, empty Track Properties), which decodes as a
// RequestOk; d20 (#1834) allows none of FORWARD, SUBSCRIBER_PRIORITY, GROUP_ORDER or the filter
// there, so a d20 PublishOk with any of them set (other than forward 1, priority 128) does not
// encode. PUBLISH_ERROR (d14 0x1F) is a RequestError of type kPublishError; d15+ answer
// REQUEST_ERROR.
struct PublishOk {
  uint64_t request_id = 0;
  bool forward = true;
  uint8_t subscriber_priority = 128;
  uint8_t group_order = 0;       // d14 field must be 1..2; d15+: 0 = parameter absent
  std::optional<Filter> filter;  // always present in d14; d15+: absent = unfiltered
  Parameters params;
  friend bool operator==(const PublishOk&, const PublishOk&) = default;
};

using ControlMessage =
    std::variant<ClientSetup, ServerSetup, Setup, Subscribe, SubscribeOk, RequestError, RequestOk,
                 SubscribeUpdate, Unsubscribe, PublishNamespace, PublishNamespaceDone, PublishNamespaceCancel,
                 SubscribeNamespace, Namespace, PublishDone, MaxRequestId, Goaway, TrackStatus,
                 TrackStatusOk, Fetch, FetchOk, FetchCancel, Publish, PublishOk>;

// Which peer's form to write, and to try first when decoding, where @moq/net 0.3.4 and the draft
// text disagree on the bytes of the same value (drafts 17+: LARGEST_OBJECT and INCLUDE_PROPERTIES
// with a Length in front, see docs/ARCHITECTURE.md). Decoding falls back to the other form when the
// message does not decode in the first; a session that knows its peer (SETUP's Implementation
// option "moq-lite-js") passes kMoqNetJs so an ambiguous message reads the peer's way.
enum class Peer : uint8_t { kDraftText, kMoqNetJs };

// Appends `type (i) length (16) body`. A message the draft lacks, or a body over 65535 bytes,
// writes nothing and returns false (a caller bug, not a peer's).
bool encode(Version v, const ControlMessage& m, std::vector<uint8_t>& out);
bool encode(Version v, const ControlMessage& m, std::vector<uint8_t>& out, Peer peer);

// One control message from the front of `in`: nullopt = need more bytes. Errors: an unknown type
// for the draft (kUnexpectedMessage), a body whose fields do not fill its length exactly
// (kDecode), a limit (kBoundsExceeded), a malformed known parameter (kWrongSize), any other rule
// of the draft (kProtocolViolation). All map to the draft's code via termination_code().
ParseResult<ControlMessage> decode_control(Version v, std::span<const uint8_t> in,
                                           const Limits& limits);
ParseResult<ControlMessage> decode_control(Version v, std::span<const uint8_t> in,
                                           const Limits& limits, Peer peer);

// SUBGROUP_HEADER (d14 §10.4.2; d15+ adds 0x30..0x3D without Publisher Priority; d17 the same
// types with leading-ones varints).
struct SubgroupHeader {
  uint64_t type = 0x10;  // the wire type, kept so a relay can forward the same form
  uint64_t track_alias = 0;
  uint64_t group = 0;
  uint64_t subgroup = 0;  // explicit, 0, or the first object id (types 0x12/0x13/0x1A/0x1B)
  std::optional<uint8_t> publisher_priority;  // absent for 0x30..0x3D
  friend bool operator==(const SubgroupHeader&, const SubgroupHeader&) = default;

  bool has_extensions() const { return (type & 0x01) != 0; }
  bool subgroup_is_first_object() const { return (type & 0x06) == 0x02; }
  bool has_subgroup_field() const { return (type & 0x04) != 0; }
  bool contains_end_of_group() const { return (type & 0x08) != 0; }
  bool has_priority() const { return (type & 0x20) == 0; }
  // d18+ FIRST_OBJECT bit: the stream starts with the subgroup's first object. Drafts before 18
  // carry no such signal (their types never have it).
  bool first_object() const { return (type & 0x40) != 0; }
};
// The SUBGROUP_HEADER type for these properties.
uint64_t subgroup_type(bool extensions, bool explicit_subgroup, bool end_of_group,
                       bool with_priority);
// The same with d18's FIRST_OBJECT bit (0x40); only d18+ accept such a type.
uint64_t subgroup_type(bool extensions, bool explicit_subgroup, bool end_of_group,
                       bool with_priority, bool first_object);

// One object on a subgroup stream, its payload not included (it follows the header and may be
// large: the caller streams `payload_length` bytes).
struct ObjectHeader {
  uint64_t id_delta = 0;  // the wire delta (draft-14 §10.4.2)
  std::string extensions;  // raw Extension Headers block, carried through unchanged
  uint64_t payload_length = 0;
  uint64_t status = 0;  // only when payload_length == 0
  friend bool operator==(const ObjectHeader&, const ObjectHeader&) = default;
};

// Stream types on a uni stream: SUBGROUP_HEADER types are accepted per draft.
bool is_subgroup_type(Version v, uint64_t type);

void encode(Version v, const SubgroupHeader& h, std::vector<uint8_t>& out);
// `extensions` is written only when the header's type has extensions.
void encode_object(Version v, const SubgroupHeader& h, const ObjectHeader& o,
                   std::vector<uint8_t>& out);
// From the stream type varint on.
ParseResult<SubgroupHeader> decode_subgroup_header(Version v, std::span<const uint8_t> in,
                                                   const Limits& limits);
ParseResult<ObjectHeader> decode_object(Version v, const SubgroupHeader& h,
                                        std::span<const uint8_t> in, const Limits& limits);
// Object id of the object with `delta` after `previous` (nullopt previous: the first object on
// the stream). nullopt when the id would pass 2^62-1 (a protocol violation by the peer).
std::optional<uint64_t> object_id(std::optional<uint64_t> previous, uint64_t delta);

// FETCH streams (d14 §10.4.4, d15, d16 §10.4.4, d17 §10.4.4, d18..20 §11.4.4): FETCH_HEADER
// (type 0x05, Request ID), then objects that each name their group, subgroup and object id. d14
// writes every field; d15 adds Serialization Flags (one byte) that let fields repeat the previous
// object's; d16 and d17 make the flags a varint, drop Object Status and add End of Range markers
// (0x8C, 0x10C); d18 turns Group ID and Object ID into deltas from the previous object (in the
// fetch's group order; the first object's are absolute); d20 adds End of Timed-Out Range 0x20C.
inline constexpr uint64_t kFetchHeaderType = 0x05;
struct FetchObject {
  uint64_t group = 0;
  uint64_t subgroup = 0;
  uint64_t object = 0;
  uint8_t publisher_priority = 128;
  std::string extensions;  // raw Extension Headers block
  uint64_t payload_length = 0;
  uint64_t status = 0;      // d14/15, only when payload_length == 0
  // d16 End of Range (flags 0x8C: objects up to here do not exist; 0x10C: unknown). Only group and
  // object are meaningful then, and no payload follows.
  uint64_t end_of_range = 0;
  friend bool operator==(const FetchObject&, const FetchObject&) = default;
};
// Appends FETCH_HEADER (type included).
void encode_fetch_header(Version v, uint64_t request_id, std::vector<uint8_t>& out);
// From the stream type on: the Request ID. A type other than 0x05 is an error.
ParseResult<uint64_t> decode_fetch_header(Version v, std::span<const uint8_t> in);
// One object's fields (not its payload). d15..17 write every field (flags 0x1C, plus 0x03 for a
// non-zero subgroup and 0x20 for non-empty extensions), so each object stands alone; a d16+ End of
// Range writes only its flags, group and object. d18+: `previous` is the stream's previous object
// (null for the first) and `descending` the fetch's group order: a new group writes its Group ID
// Delta and the absolute Object ID, the same group only the Object ID Delta. Precondition: the
// objects come in the fetch's order (groups in `descending` order, object ids rising in a group).
void encode_fetch_object(Version v, const FetchObject& o, std::vector<uint8_t>& out);
void encode_fetch_object(Version v, const FetchObject& o, const FetchObject* previous,
                         bool descending, std::vector<uint8_t>& out);
// `previous`: the stream's previous object, or null for the first (a flag that refers to it is
// then a protocol violation). Reserved flag bits, and d16+ values >= 128 other than the End of
// Range values, are protocol violations; d18+ a Group ID Delta that leaves 0..2^62-1.
ParseResult<FetchObject> decode_fetch_object(Version v, const FetchObject* previous,
                                             std::span<const uint8_t> in, const Limits& limits);
ParseResult<FetchObject> decode_fetch_object(Version v, const FetchObject* previous,
                                             bool descending, std::span<const uint8_t> in,
                                             const Limits& limits);

// A SUBSCRIPTION_FILTER / LOCATION_FILTER parameter's value (d15+ tag form, d20 0..4 fields) read
// in `v`'s varint form; nullopt when it does not decode or does not fill the value exactly.
std::optional<Filter> decode_filter(Version v, std::string_view value);

}  // namespace moqd::wire::ietf
