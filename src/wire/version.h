#pragma once
// MoQ protocol versions moqd knows, with the names used by --versions (see CONVENTIONS.md).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace moqd::wire {

enum class Version : uint64_t {
  kLite01 = 0xff0dad01,
  kLite02 = 0xff0dad02,
  kLite03 = 0xff0dad03,
  kLite04 = 0xff0dad04,
  kLite05 = 0xff0dad05,
  kTransport14 = 0xff00000e,
  kTransport15 = 0xff00000f,
  kTransport16 = 0xff000010,
  kTransport17 = 0xff000011,
  kTransport18 = 0xff000012,
  kTransport19 = 0xff000013,
  kTransport20 = 0xff000014,
};

// How a client reaches a version (CONVENTIONS.md, "Protocol versions").
enum class Reach : uint8_t {
  kSetup,  // SETUP on the first bidi stream, under ALPN / WebTransport protocol "moql" or none
  kAlpn,   // its own ALPN / WebTransport protocol, no version exchange
};

// One row of moqd's protocol table: every protocol moqd knows, whether it serves it, and the
// names a client reaches it by. The relay's QUIC ALPNs and WebTransport protocols, its WebSocket
// subprotocol choice, the session's protocol dispatch and `moq` all read this one table.
struct ProtocolInfo {
  Version version;
  const char* name;  // in --versions and logs: "moq-lite-04"
  Reach reach;
  const char* alpn;  // ALPN and WebTransport protocol; "moql" for kSetup
  // The WebSocket QMux drafts a client may name it with as "qmux-NN.<alpn>": bit NN.
  uint8_t qmux_drafts;
  bool served;  // moqd implements it (IETF: drafts 14..20, the server role)
};

// The ALPN / WebTransport protocol under which SETUP on the first bidi stream picks the version.
inline constexpr std::string_view kSetupAlpn = "moql";

// The row for `v`; null for a value outside the table.
const ProtocolInfo* protocol_info(Version v);
// The row whose own ALPN is `alpn` (kAlpn rows only); null for "moql", "" or anything unknown.
const ProtocolInfo* protocol_for_alpn(std::string_view alpn);

// "moq-lite-02" etc.; null for an unknown value.
const char* version_name(Version v);
std::optional<Version> version_from_name(std::string_view name);
std::optional<Version> version_from_wire(uint64_t v);
inline bool is_lite(Version v) {
  return v == Version::kLite01 || v == Version::kLite02 || v == Version::kLite03 ||
         v == Version::kLite04 || v == Version::kLite05;
}
// lite-03 and later: no SETUP on a bidi stream, typed SUBSCRIBE responses, hop counts, PROBE.
inline bool is_lite03_plus(Version v) {
  return v == Version::kLite03 || v == Version::kLite04 || v == Version::kLite05;
}
// lite-04 and later: hop ids in ANNOUNCE, exclude_hop, PROBE rtt, GOAWAY.
inline bool is_lite04_plus(Version v) { return v == Version::kLite04 || v == Version::kLite05; }
// lite-05: the uni SETUP stream, ANNOUNCE_OK, the TRACK stream, SUBSCRIBE_START/END, timestamped
// FRAMEs, FETCH answered with FRAMEs.
inline bool is_lite05(Version v) { return v == Version::kLite05; }

// Set of versions, as a bitmask over the enum order above.
class VersionSet;

// The ALPNs (and WebTransport protocols) moqd serves within `enabled`, most preferred first: the
// moq-lite kAlpn protocols (newest first), then the IETF ones (newest first), then "moql" when a
// served kSetup version is enabled.
std::vector<std::string> served_alpns(const VersionSet& enabled);
// The WebSocket subprotocols of served_alpns(), most preferred first: for each ALPN, newest QMux
// draft first, "qmux-NN.<alpn>"; for "moql" also the bare forms "qmux-NN" and then
// "webtransport.moql", "webtransport" (the legacy framing, which carries SETUP only). The
// transport drops the forms whose framing it does not implement.
std::vector<std::string> websocket_subprotocols(const VersionSet& enabled);

class VersionSet {
 public:
  static VersionSet all();
  static VersionSet none() { return VersionSet(); }
  void add(Version v) { bits_ |= bit(v); }
  bool contains(Version v) const { return (bits_ & bit(v)) != 0; }
  bool empty() const { return bits_ == 0; }

 private:
  static uint32_t bit(Version v);
  uint32_t bits_ = 0;
};

}  // namespace moqd::wire
