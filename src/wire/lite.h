#pragma once
// moq-lite drafts 01..04 messages (protocol/README.md §3): plain structs, an encoder that appends
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
  kClientSetup = 0x20,  // compat SETUP (lite-01/02 and IETF-14 via "moql"/no protocol)
};
// Uni stream types (first raw byte on a uni stream).
enum class UniType : uint8_t { kGroup = 0x00 };

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

using SubscribeResponse = std::variant<SubscribeOk, SubscribeDrop>;

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
// lite-01/02: a bare SubscribeOk; lite-03/04: type 0 (OK) or 1 (DROP).
ParseResult<SubscribeResponse> decode_subscribe_response(Version v, std::span<const uint8_t> in,
                                                         const DecodeLimits& l);
ParseResult<SubscribeUpdate> decode_subscribe_update(Version v, std::span<const uint8_t> in,
                                                     const DecodeLimits& l);
ParseResult<GroupHeader> decode_group_header(Version v, std::span<const uint8_t> in,
                                             const DecodeLimits& l);
ParseResult<Fetch> decode_fetch(Version v, std::span<const uint8_t> in, const DecodeLimits& l);
ParseResult<Goaway> decode_goaway(Version v, std::span<const uint8_t> in, const DecodeLimits& l);
ParseResult<Probe> decode_probe(Version v, std::span<const uint8_t> in, const DecodeLimits& l);
// A FRAME's size prefix. The caller checks the size against its frame-size limit.
ParseResult<uint64_t> decode_frame_header(std::span<const uint8_t> in);
// The first varint of a bidi stream.
ParseResult<uint64_t> decode_stream_type(std::span<const uint8_t> in);

}  // namespace moqd::wire
