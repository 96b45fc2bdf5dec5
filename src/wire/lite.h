#pragma once
// moq-lite drafts 01..05 messages (protocol/README.md §3; lite-05: NET-0.3.md §3): plain structs, an encoder that appends
// the size-prefixed message, and a decoder per message that reads one from the front of a buffer.
// Pure: no I/O, no session state. Decoders check every peer-controlled count and length against
// DecodeLimits before allocating; a message body must be consumed exactly (trailing bytes inside
// the size are a decode error, as in the JS client).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/codec.h"
#include "wire/version.h"

namespace moqd::wire {

// Bounds on what a peer may make a decoder allocate or accept.
struct DecodeLimits {
  size_t max_message_size = 64 * 1024;  // bytes in one control message body
  size_t max_path_size = 1024;          // bytes in a broadcast path, prefix or suffix
  size_t max_track_name_size = 1024;    // bytes in a track name
  size_t max_versions = 128;            // entries in CLIENT_SETUP's version list
  size_t max_parameters = 64;           // setup parameters
  size_t max_parameter_size = 4096;     // bytes in one bytes-typed parameter
  size_t max_announce_entries = 100000; // suffixes in ANNOUNCE_INIT
  size_t max_hops = 256;                // hop ids in ANNOUNCE (lite-04)
};

// Bidi stream types (first varint on a bidi stream).
enum class BidiType : uint64_t {
  kSession = 0x00,
  kAnnounce = 0x01,
  kSubscribe = 0x02,
  kFetch = 0x03,
  kProbe = 0x04,
  kGoaway = 0x05,
  kTrack = 0x06,  // lite-05: TRACK -> TRACK_INFO
  kClientSetup = 0x20,  // compat SETUP (lite-01/02 and IETF-14 via "moql"/no protocol)
};
// Uni stream types: the first byte of a uni stream up to lite-04, a varint from lite-05 on.
enum class UniType : uint8_t { kGroup = 0x00, kSetup = 0x01 /* lite-05 */ };

// A setup parameter: even keys carry a varint, odd keys carry bytes.
struct SetupParameter {
  uint64_t key = 0;
  uint64_t value = 0;     // even key
  std::string bytes;      // odd key
  friend bool operator==(const SetupParameter&, const SetupParameter&) = default;
};

// CLIENT_SETUP (0x20, u16 length), draft-14 layout: versions then parameters.
struct ClientSetup {
  std::vector<uint64_t> versions;
  std::vector<SetupParameter> parameters;
  friend bool operator==(const ClientSetup&, const ClientSetup&) = default;
};
// SERVER_SETUP (0x21, u16 length), draft-14 layout.
struct ServerSetup {
  uint64_t version = 0;
  std::vector<SetupParameter> parameters;
  friend bool operator==(const ServerSetup&, const ServerSetup&) = default;
};

// lite-01/02 SESSION_INFO on the session stream.
struct SessionInfo {
  uint64_t bitrate = 0;
  friend bool operator==(const SessionInfo&, const SessionInfo&) = default;
};

struct AnnouncePlease {
  std::string prefix;
  uint64_t exclude_hop = 0;  // lite-04 only
  friend bool operator==(const AnnouncePlease&, const AnnouncePlease&) = default;
};

// lite-01/02 only.
struct AnnounceInit {
  std::vector<std::string> suffixes;
  friend bool operator==(const AnnounceInit&, const AnnounceInit&) = default;
};

struct Announce {
  bool active = false;
  std::string suffix;
  // lite-03 carries only a count; lite-04 carries the ids. On decode of lite-03, `hops` holds
  // `hop_count` zeros; on encode of lite-03 only hops.size() is written.
  std::vector<uint64_t> hops;
  friend bool operator==(const Announce&, const Announce&) = default;
};

struct Subscribe {
  uint64_t id = 0;
  std::string broadcast;
  std::string track;
  uint8_t priority = 0;
  // lite-03/04 only (defaults are what lite-01/02 imply):
  bool ordered = false;
  uint64_t max_latency_ms = 0;            // 0 = unlimited
  std::optional<uint64_t> start_group;    // wire: 0 = none, else sequence + 1
  std::optional<uint64_t> end_group;      // wire: 0 = unbounded, else sequence + 1
  friend bool operator==(const Subscribe&, const Subscribe&) = default;
};

// lite-01: {priority}; lite-02: {} ; lite-03/04: type 0 then {priority, ordered, max_latency,
// start, end}.
struct SubscribeOk {
  uint8_t priority = 0;
  bool ordered = false;
  uint64_t max_latency_ms = 0;
  std::optional<uint64_t> start_group;
  std::optional<uint64_t> end_group;
  friend bool operator==(const SubscribeOk&, const SubscribeOk&) = default;
};

// lite-03/04 only: type 1 on the subscribe stream.
struct SubscribeDrop {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t error_code = 0;
  friend bool operator==(const SubscribeDrop&, const SubscribeDrop&) = default;
};

// lite-05 only: type 0 on the subscribe stream, the absolute first group that will be delivered.
struct SubscribeStart {
  uint64_t group = 0;
  friend bool operator==(const SubscribeStart&, const SubscribeStart&) = default;
};

// lite-05 only: type 1 on the subscribe stream, the exclusive end (first sequence that will never
// come; 0 when the track ended before any group).
struct SubscribeEnd {
  uint64_t group = 0;
  friend bool operator==(const SubscribeEnd&, const SubscribeEnd&) = default;
};

// lite-01/02: OK only; lite-03/04: OK (type 0) or DROP (type 1); lite-05: START (type 0), END
// (type 1) or DROP (type 2).
using SubscribeResponse = std::variant<SubscribeOk, SubscribeDrop, SubscribeStart, SubscribeEnd>;

// lite-01/02: {priority}; lite-03/04: the same five fields as SubscribeOk.
struct SubscribeUpdate {
  uint8_t priority = 0;
  bool ordered = false;
  uint64_t max_latency_ms = 0;
  std::optional<uint64_t> start_group;
  std::optional<uint64_t> end_group;
  friend bool operator==(const SubscribeUpdate&, const SubscribeUpdate&) = default;
};

// GROUP header on a group uni stream (after the 0x00 type byte).
struct GroupHeader {
  uint64_t subscribe_id = 0;
  uint64_t sequence = 0;
  friend bool operator==(const GroupHeader&, const GroupHeader&) = default;
};

// lite-03+.
struct Fetch {
  std::string broadcast;
  std::string track;
  uint8_t priority = 0;
  uint64_t group = 0;
  friend bool operator==(const Fetch&, const Fetch&) = default;
};

// lite-05: one parameter of SETUP on the uni setup stream: an id and its raw value.
struct LiteSetupParameter {
  uint64_t id = 0;
  std::string value;
  friend bool operator==(const LiteSetupParameter&, const LiteSetupParameter&) = default;
};

// lite-05 SETUP: `size { count, { id, length, value } x count }`, the only message on each side's
// uni setup stream (type 1). Parameters keep their wire order. The decoder refuses a duplicate id,
// more than DecodeLimits::max_parameters, and a known varint parameter (Probe, Role, Origin) whose
// value is not exactly one varint.
struct LiteSetup {
  static constexpr uint64_t kProbe = 0x01;   // varint: 0 none, 1 report, 2+ increase
  static constexpr uint64_t kPath = 0x02;    // UTF-8 path [?query], client only
  static constexpr uint64_t kRole = 0x03;    // varint: 0 both, 1 publisher, 2 subscriber
  static constexpr uint64_t kOrigin = 0x05;  // varint: the sender's hop id, 0 = none
  std::vector<LiteSetupParameter> parameters;
  // The value of varint parameter `id`, if present (and well formed, which decode checks).
  std::optional<uint64_t> varint(uint64_t id) const;
  // Appends varint parameter `id`.
  void add_varint(uint64_t id, uint64_t value);
  friend bool operator==(const LiteSetup&, const LiteSetup&) = default;
};

// lite-05: the publisher's first reply on an announce stream.
struct AnnounceOk {
  uint64_t hop_id = 0;        // the sender's own origin, implicitly the last hop of every ANNOUNCE
  uint64_t active_count = 0;  // ANNOUNCEs of the current set that follow
  friend bool operator==(const AnnounceOk&, const AnnounceOk&) = default;
};

// lite-05, bidi type 6: the subscriber asks for a track's properties.
struct TrackRequest {
  std::string broadcast;
  std::string track;
  friend bool operator==(const TrackRequest&, const TrackRequest&) = default;
};

// lite-05: the publisher's only message on a track stream, then FIN. timescale (units per second)
// is never 0: the decoder refuses it, the encoder writes nothing for it.
struct TrackInfo {
  uint8_t priority = 0;
  bool ordered = false;
  uint64_t max_latency_ms = 0;
  uint64_t timescale = 0;
  friend bool operator==(const TrackInfo&, const TrackInfo&) = default;
};

// lite-05 FRAME header: the zigzag timestamp delta from the previous frame of the same stream
// (the first from 0), then the payload size (which does not count the timestamp).
struct TimedFrameHeader {
  int64_t timestamp_delta = 0;
  uint64_t size = 0;
  friend bool operator==(const TimedFrameHeader&, const TimedFrameHeader&) = default;
};

// zigzag: d >= 0 -> 2d, d < 0 -> -2d - 1 (a total bijection between int64 and uint64).
inline uint64_t zigzag_encode(int64_t d) {
  return (static_cast<uint64_t>(d) << 1) ^ static_cast<uint64_t>(d >> 63);
}
inline int64_t zigzag_decode(uint64_t z) {
  return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

// lite-04, bidi type 5.
struct Goaway {
  std::string uri;
  friend bool operator==(const Goaway&, const Goaway&) = default;
};

// lite-03+, bidi type 4. rtt_ms is lite-04 only.
struct Probe {
  uint64_t bitrate = 0;
  uint64_t rtt_ms = 0;
  friend bool operator==(const Probe&, const Probe&) = default;
};

// --- Encoders: append the complete message (size prefix included; for the SETUPs the type and
// u16 length; for SUBSCRIBE responses of lite-03+ the type varint). Fields a version lacks are
// not written; a message the version lacks (or a non-lite version) writes nothing.
void encode(const ClientSetup& m, std::vector<uint8_t>& out);
void encode(const ServerSetup& m, std::vector<uint8_t>& out);
void encode(Version v, const SessionInfo& m, std::vector<uint8_t>& out);
void encode(Version v, const AnnouncePlease& m, std::vector<uint8_t>& out);
void encode(Version v, const AnnounceInit& m, std::vector<uint8_t>& out);
void encode(Version v, const Announce& m, std::vector<uint8_t>& out);
void encode(Version v, const Subscribe& m, std::vector<uint8_t>& out);
void encode(Version v, const SubscribeOk& m, std::vector<uint8_t>& out);
void encode(Version v, const SubscribeDrop& m, std::vector<uint8_t>& out);
void encode(Version v, const SubscribeUpdate& m, std::vector<uint8_t>& out);
void encode(Version v, const GroupHeader& m, std::vector<uint8_t>& out);
void encode(Version v, const Fetch& m, std::vector<uint8_t>& out);
void encode(Version v, const Goaway& m, std::vector<uint8_t>& out);
void encode(Version v, const Probe& m, std::vector<uint8_t>& out);
void encode(Version v, const SubscribeStart& m, std::vector<uint8_t>& out);
void encode(Version v, const SubscribeEnd& m, std::vector<uint8_t>& out);
void encode(Version v, const LiteSetup& m, std::vector<uint8_t>& out);
void encode(Version v, const AnnounceOk& m, std::vector<uint8_t>& out);
void encode(Version v, const TrackRequest& m, std::vector<uint8_t>& out);
void encode(Version v, const TrackInfo& m, std::vector<uint8_t>& out);
// lite-05 FRAME header (the payload follows separately). False, and nothing written, when the
// delta's zigzag does not fit a varint (|delta| >= 2^61): never for a delta a decoder produced.
bool encode_timed_frame_header(const TimedFrameHeader& m, std::vector<uint8_t>& out);
// A FRAME's size prefix (the payload follows separately, so it is never copied).
void encode_frame_header(uint64_t payload_size, std::vector<uint8_t>& out);

// --- Decoders: one message from the front of `in`. nullopt = need more bytes. Errors carry
// ErrorCode::kDecode (malformed), kBoundsExceeded (a limit) or kVersion.
// ClientSetup is decoded starting at its 0x20 type byte; ServerSetup at 0x21.
ParseResult<ClientSetup> decode_client_setup(std::span<const uint8_t> in, const DecodeLimits& l);
ParseResult<ServerSetup> decode_server_setup(std::span<const uint8_t> in, const DecodeLimits& l);
ParseResult<SessionInfo> decode_session_info(Version v, std::span<const uint8_t> in,
                                             const DecodeLimits& l);
ParseResult<AnnouncePlease> decode_announce_please(Version v, std::span<const uint8_t> in,
                                                   const DecodeLimits& l);
ParseResult<AnnounceInit> decode_announce_init(Version v, std::span<const uint8_t> in,
                                               const DecodeLimits& l);
ParseResult<Announce> decode_announce(Version v, std::span<const uint8_t> in,
                                      const DecodeLimits& l);
ParseResult<Subscribe> decode_subscribe(Version v, std::span<const uint8_t> in,
                                        const DecodeLimits& l);
// lite-01/02: a bare SubscribeOk; lite-03/04: type 0 (OK) or 1 (DROP); lite-05: 0 (START),
// 1 (END) or 2 (DROP).
ParseResult<SubscribeResponse> decode_subscribe_response(Version v, std::span<const uint8_t> in,
                                                         const DecodeLimits& l);
ParseResult<SubscribeUpdate> decode_subscribe_update(Version v, std::span<const uint8_t> in,
                                                     const DecodeLimits& l);
ParseResult<GroupHeader> decode_group_header(Version v, std::span<const uint8_t> in,
                                             const DecodeLimits& l);
ParseResult<Fetch> decode_fetch(Version v, std::span<const uint8_t> in, const DecodeLimits& l);
ParseResult<Goaway> decode_goaway(Version v, std::span<const uint8_t> in, const DecodeLimits& l);
ParseResult<Probe> decode_probe(Version v, std::span<const uint8_t> in, const DecodeLimits& l);
// lite-05 only.
ParseResult<LiteSetup> decode_lite_setup(Version v, std::span<const uint8_t> in,
                                         const DecodeLimits& l);
ParseResult<AnnounceOk> decode_announce_ok(Version v, std::span<const uint8_t> in,
                                           const DecodeLimits& l);
ParseResult<TrackRequest> decode_track_request(Version v, std::span<const uint8_t> in,
                                               const DecodeLimits& l);
ParseResult<TrackInfo> decode_track_info(Version v, std::span<const uint8_t> in,
                                         const DecodeLimits& l);
// A FRAME's size prefix. The caller checks the size against its frame-size limit.
ParseResult<uint64_t> decode_frame_header(std::span<const uint8_t> in);
// A lite-05 FRAME header (both varints, or nullopt). The caller checks the size.
ParseResult<TimedFrameHeader> decode_timed_frame_header(std::span<const uint8_t> in);
// The first varint of a bidi stream (and, from lite-05 on, of a uni stream).
ParseResult<uint64_t> decode_stream_type(std::span<const uint8_t> in);

}  // namespace moqd::wire
