#pragma once
// Sans-I/O codecs for the slice of HTTP/3 (RFC 9114) that WebTransport over HTTP/3
// (draft-ietf-webtrans-http3, as Chromium speaks it) needs: frames, SETTINGS, stream preambles,
// capsules (RFC 9297), error-code mapping and the extended CONNECT request (RFC 9220). No I/O and
// no state: the WebTransport server in webtransport/server.h drives them. QPACK is in qpack.h.
//
// Every decoder takes untrusted peer bytes: it never asserts, it answers an H3Error carrying the
// HTTP/3 error code to close the connection (or reset the stream) with.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/codec.h"
#include "base/error.h"

namespace moqd::transport::webtransport {

// HTTP/3 and WebTransport error codes (RFC 9114 §8.1, RFC 9204 §6, the WebTransport draft).
enum class H3Code : uint64_t {
  kNoError = 0x100,
  kGeneralProtocolError = 0x101,
  kInternalError = 0x102,
  kStreamCreationError = 0x103,
  kClosedCriticalStream = 0x104,
  kFrameUnexpected = 0x105,
  kFrameError = 0x106,
  kExcessiveLoad = 0x107,
  kIdError = 0x108,
  kSettingsError = 0x109,
  kMissingSettings = 0x10a,
  kRequestRejected = 0x10b,
  kRequestCancelled = 0x10c,
  kRequestIncomplete = 0x10d,
  kMessageError = 0x10e,
  kConnectError = 0x10f,
  kQpackDecompressionFailed = 0x200,
  kQpackEncoderStreamError = 0x201,
  kQpackDecoderStreamError = 0x202,
  kDatagramError = 0x33,
  kWtBufferedStreamRejected = 0x3994bd84,
  kWtSessionGone = 0x170d7b68,
};

// An HTTP/3 failure: the code to close or reset with, and a static detail for logs.
struct H3Error {
  H3Code code = H3Code::kGeneralProtocolError;
  const char* detail = "";
  friend bool operator==(const H3Error& a, const H3Error& b) { return a.code == b.code; }
};
template <class T>
using H3Result = tl::expected<T, H3Error>;
// The number an H3Code travels as (CONNECTION_CLOSE, RESET_STREAM, STOP_SENDING).
inline uint64_t wire_code(H3Code code) { return static_cast<uint64_t>(code); }
inline tl::unexpected<H3Error> h3_fail(H3Code code, const char* detail) {
  return tl::unexpected<H3Error>(H3Error{code, detail});
}

// Frame types (RFC 9114 §7.2) and the WebTransport bidi stream signal, which is not a frame: it
// is followed by the session id and then the stream's payload, with no length.
inline constexpr uint64_t kFrameData = 0x00;
inline constexpr uint64_t kFrameHeaders = 0x01;
inline constexpr uint64_t kFrameCancelPush = 0x03;
inline constexpr uint64_t kFrameSettings = 0x04;
inline constexpr uint64_t kFramePushPromise = 0x05;
inline constexpr uint64_t kFrameGoaway = 0x07;
inline constexpr uint64_t kFrameMaxPushId = 0x0d;
inline constexpr uint64_t kWebTransportBidiSignal = 0x41;

// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2, WebTransport).
inline constexpr uint64_t kStreamControl = 0x00;
inline constexpr uint64_t kStreamPush = 0x01;
inline constexpr uint64_t kStreamQpackEncoder = 0x02;
inline constexpr uint64_t kStreamQpackDecoder = 0x03;
inline constexpr uint64_t kStreamWebTransportUni = 0x54;

// SETTINGS identifiers.
inline constexpr uint64_t kSettingQpackMaxTableCapacity = 0x01;
inline constexpr uint64_t kSettingMaxFieldSectionSize = 0x06;
inline constexpr uint64_t kSettingQpackBlockedStreams = 0x07;
inline constexpr uint64_t kSettingEnableConnectProtocol = 0x08;
inline constexpr uint64_t kSettingH3Datagram = 0x33;
inline constexpr uint64_t kSettingH3DatagramDraft04 = 0xffd277;
inline constexpr uint64_t kSettingEnableWebTransport = 0x2b603742;
inline constexpr uint64_t kSettingWtMaxSessions = 0xc671706a;

// Capsule types (RFC 9297 §3.2, WebTransport §5).
inline constexpr uint64_t kCapsuleCloseSession = 0x2843;
inline constexpr uint64_t kCapsuleDrainSession = 0x78ae;
// A CLOSE_WEBTRANSPORT_SESSION reason is at most this many bytes.
inline constexpr size_t kMaxCloseReason = 1024;

// True for the reserved "grease" types 0x1f * N + 0x21 (frames, stream types, settings, codes),
// which receivers ignore.
bool is_reserved(uint64_t type);

// --- error codes ---
// A WebTransport application error code (32 bits) carried in an HTTP/3 RESET_STREAM or
// STOP_SENDING code: first + code + code / 0x1e, skipping the reserved values. Codes above
// 0xffffffff are clamped to it.
uint64_t wt_to_h3_code(uint64_t app_code);
// The application code of an HTTP/3 code in the WebTransport range; nullopt for any other code
// (including a reserved value inside the range).
std::optional<uint32_t> h3_to_wt_code(uint64_t h3_code);

// --- frames ---
// One frame from the front of `in`: its type and a view of its whole payload. nullopt when more
// bytes are needed. A payload longer than `max_payload` fails with kExcessiveLoad before the
// payload has arrived, so a peer cannot make us buffer an arbitrary frame.
struct Frame {
  uint64_t type = 0;
  std::span<const uint8_t> payload;
};
H3Result<std::optional<Parsed<Frame>>> parse_frame(std::span<const uint8_t> in, size_t max_payload);
// Appends a frame's type and length (the payload follows from the caller).
void write_frame_header(Writer& w, uint64_t type, uint64_t length);
// Appends a whole frame.
void write_frame(Writer& w, uint64_t type, std::span<const uint8_t> payload);

// --- SETTINGS ---
struct Setting {
  uint64_t id = 0;
  uint64_t value = 0;
};
// Decodes a SETTINGS payload. A duplicated identifier, an HTTP/2 identifier (0x00, 0x02-0x05),
// an H3_DATAGRAM value other than 0 or 1 (RFC 9297 §2.1.1) or a truncated pair fails with
// kSettingsError.
H3Result<std::vector<Setting>> parse_settings(std::span<const uint8_t> payload);
// What our peer's SETTINGS say, with the defaults of absent identifiers.
struct PeerSettings {
  uint64_t qpack_max_table_capacity = 0;
  uint64_t qpack_blocked_streams = 0;
  std::optional<uint64_t> max_field_section_size;  // unlimited when absent
  bool h3_datagram = false;         // H3_DATAGRAM (0x33) or its draft-04 id = 1
  bool webtransport = false;        // ENABLE_WEBTRANSPORT = 1, or WT_MAX_SESSIONS > 0
};
PeerSettings summarize(std::span<const Setting> settings);
// The control stream a WebTransport server opens: the stream type, then SETTINGS with
// QPACK_MAX_TABLE_CAPACITY 0, QPACK_BLOCKED_STREAMS 0, ENABLE_CONNECT_PROTOCOL 1, H3_DATAGRAM 1,
// ENABLE_WEBTRANSPORT 1 and WT_MAX_SESSIONS `max_sessions`.
std::vector<uint8_t> server_control_stream_preamble(uint64_t max_sessions);
// The control stream a WebTransport client opens: the stream type, then SETTINGS with
// QPACK_MAX_TABLE_CAPACITY 0, QPACK_BLOCKED_STREAMS 0, H3_DATAGRAM 1 and ENABLE_WEBTRANSPORT 1.
std::vector<uint8_t> client_control_stream_preamble();

// --- stream preambles ---
// The first varint of a stream: the uni stream type, or on a bidi stream the frame type (0x41
// for a WebTransport stream). nullopt while incomplete.
std::optional<Parsed<uint64_t>> parse_varint(std::span<const uint8_t> in);
// What starts a WebTransport stream we open: 0x41 + session id (bidi) or 0x54 + session id (uni).
std::vector<uint8_t> wt_stream_preamble(bool uni, uint64_t session_id);

// --- datagrams (RFC 9297 §2.1) ---
// An HTTP datagram's payload after its quarter stream id (the CONNECT stream id / 4).
struct Datagram {
  uint64_t session_id = 0;  // the CONNECT stream id (quarter id * 4)
  std::span<const uint8_t> payload;
};
// A datagram without a complete quarter stream id, or with one above 2^60-1, fails with
// kDatagramError.
H3Result<Datagram> parse_datagram(std::span<const uint8_t> datagram);
void write_datagram(Writer& w, uint64_t session_id, std::span<const uint8_t> payload);

// --- capsules (RFC 9297 §3.2), carried in DATA frames on the CONNECT stream ---
struct Capsule {
  uint64_t type = 0;
  std::span<const uint8_t> value;
};
// One capsule from the front of the CONNECT stream's DATA bytes; a value over `max_value` fails
// with kMessageError.
H3Result<std::optional<Parsed<Capsule>>> parse_capsule(std::span<const uint8_t> in, size_t max_value);
struct CloseSession {
  uint32_t code = 0;
  std::string_view reason;  // UTF-8, at most kMaxCloseReason bytes
};
// Decodes a CLOSE_WEBTRANSPORT_SESSION value: a 32-bit code then the reason. Shorter than 4
// bytes, or a reason over kMaxCloseReason, fails with kMessageError.
H3Result<CloseSession> parse_close_session(std::span<const uint8_t> value);
// A DATA frame holding one CLOSE_WEBTRANSPORT_SESSION capsule (the reason cut to kMaxCloseReason
// bytes), ready to write on the CONNECT stream.
std::vector<uint8_t> close_session_data_frame(uint32_t code, std::string_view reason);
// A DATA frame holding one DRAIN_WEBTRANSPORT_SESSION capsule.
std::vector<uint8_t> drain_session_data_frame();

// --- the extended CONNECT request (RFC 9220, WebTransport §3) ---
struct HeaderField {
  std::string name;
  std::string value;
};
using HeaderList = std::vector<HeaderField>;

// A validated WebTransport CONNECT.
struct ConnectRequest {
  std::string authority;
  std::string path;    // ":path", query included ("/room?jwt=..")
  std::string origin;  // "" when absent
  // WT-Available-Protocols in the client's order; empty when absent or unparseable.
  std::vector<std::string> available_protocols;
  bool draft02 = false;  // "sec-webtransport-http3-draft02: 1": answer with the draft02 header
};
// Why a request is refused: the HTTP status to answer with and a static reason for the log.
struct Refusal {
  int status = 400;
  const char* reason = "";
};
// Validates a decoded request header list. A method other than CONNECT is refused with 405; a
// missing :method, a missing or unknown :protocol (anything but "webtransport"), a missing
// :scheme/:path/:authority, a scheme other than https, a malformed authority, a pseudo-header
// after a regular field, an unknown or repeated pseudo-header, a field name that is not a
// lower-case token, or NUL/CR/LF in a value with 400.
Result<ConnectRequest, Refusal> parse_connect(const HeaderList& headers);
// Parses an RFC 8941 list of strings ("\"moq-lite-04\", \"moql\""); members that are not
// strings, and their parameters, are skipped. nullopt when the header is not a valid list.
std::optional<std::vector<std::string>> parse_protocol_list(std::string_view value);
// The protocol to answer in WT-Protocol: the first of `supported` (our preference order) that
// the client offered; "" when the client offered none. nullopt when it offered some and none
// is supported.
std::optional<std::string> select_protocol(const std::vector<std::string>& offered,
                                           const std::vector<std::string>& supported);
// Serializes a WT-Protocol value: an RFC 8941 string ("\"moq-lite-04\"").
std::string protocol_header_value(std::string_view protocol);

}  // namespace moqd::transport::webtransport
