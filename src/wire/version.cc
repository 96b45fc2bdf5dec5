#include "wire/version.h"

#include <iterator>

#include "wire/draft14_alpn.h"

namespace moqd::wire {
namespace {
constexpr uint8_t kQmuxAll = 0b111;  // qmux-00, qmux-01, qmux-02
constexpr uint8_t kQmux01 = 0b010;   // qmux-01 only
constexpr uint8_t kQmuxNone = 0;      // not reached over WebSocket
constexpr uint8_t kQmuxNewest = 2;

// CONVENTIONS.md "Protocol versions". Preference among served protocols is the reverse of this
// order for kAlpn rows (newest first), then "moql".
constexpr ProtocolInfo kVersions[] = {
    {Version::kLite01, "moq-lite-01", Reach::kSetup, "moql", kQmuxAll, true},
    {Version::kLite02, "moq-lite-02", Reach::kSetup, "moql", kQmuxAll, true},
    {Version::kLite03, "moq-lite-03", Reach::kAlpn, "moq-lite-03", kQmuxAll, true},
    {Version::kLite04, "moq-lite-04", Reach::kAlpn, "moq-lite-04", kQmuxAll, true},
    {Version::kLite05, "moq-lite-05", Reach::kAlpn, "moq-lite-05", kQmuxAll, true},
    {Version::kTransport14, "moq-transport-14", Reach::kSetup, "moql", kQmuxAll, true},
    {Version::kTransport15, "moq-transport-15", Reach::kAlpn, "moqt-15", kQmuxAll, true},
    {Version::kTransport16, "moq-transport-16", Reach::kAlpn, "moqt-16", kQmuxAll, true},
    {Version::kTransport17, "moq-transport-17", Reach::kAlpn, "moqt-17", kQmuxAll, true},
    // NET-0.3.md §1.1: @moq/net 0.3.4 offers moqt-18 and moqt-20 over WebSocket only as
    // qmux-01.<alpn>, and moqt-19 not at all (WebTransport and QUIC only).
    {Version::kTransport18, "moq-transport-18", Reach::kAlpn, "moqt-18", kQmux01, true},
    {Version::kTransport19, "moq-transport-19", Reach::kAlpn, "moqt-19", kQmuxNone, true},
    {Version::kTransport20, "moq-transport-20", Reach::kAlpn, "moqt-20", kQmux01, true},
};
using Entry = ProtocolInfo;

std::string qmux_name(unsigned draft) { return "qmux-0" + std::to_string(draft); }

}  // namespace

const ProtocolInfo* protocol_info(Version v) {
  for (const auto& e : kVersions) {
    if (e.version == v) {
      return &e;
    }
  }
  return nullptr;
}

const ProtocolInfo* protocol_for_alpn(std::string_view alpn) {
  for (const auto& e : kVersions) {
    if (e.reach == Reach::kAlpn && alpn == e.alpn) {
      return &e;
    }
  }
  return nullptr;
}

std::vector<std::string> served_alpns(const VersionSet& enabled) {
  std::vector<std::string> out;
  bool setup = false;
  // moq-lite's own ALPNs first (newest first), then the IETF drafts' (newest first), then "moql":
  // a client that offers both families gets moq-lite, as before IETF sessions existed.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = std::size(kVersions); i-- > 0;) {
      const auto& e = kVersions[i];
      if (!e.served || !enabled.contains(e.version) || is_lite(e.version) != (pass == 0)) {
        continue;
      }
      if (e.reach == Reach::kAlpn) {
        out.emplace_back(e.alpn);
      } else {
        setup = true;
      }
    }
  }
  if (setup) {
    out.emplace_back(kSetupAlpn);
  }
  if (enabled.contains(Version::kTransport14)) {
    out.emplace_back(kDraft14Alpn);
  }
  return out;
}

std::vector<std::string> websocket_subprotocols(const VersionSet& enabled) {
  std::vector<std::string> out;
  for (const auto& alpn : served_alpns(enabled)) {
    if (alpn == kDraft14Alpn) {
      continue;  // QUIC and WebTransport only
    }
    const ProtocolInfo* row = protocol_for_alpn(alpn);
    const uint8_t drafts = row != nullptr ? row->qmux_drafts : kQmuxAll;
    for (unsigned d = kQmuxNewest + 1; d-- > 0;) {
      if ((drafts & (1u << d)) != 0) {
        out.push_back(qmux_name(d) + "." + alpn);
      }
    }
  }
  if (!out.empty() && out.back() == qmux_name(0) + "." + std::string(kSetupAlpn)) {
    // SETUP is also reached by the bare forms, which every moq-dev client offers.
    for (unsigned d = kQmuxNewest + 1; d-- > 0;) {
      out.push_back(qmux_name(d));
    }
    out.push_back("webtransport." + std::string(kSetupAlpn));
    out.push_back("webtransport");
  }
  return out;
}

const char* version_name(Version v) {
  for (const auto& e : kVersions) {
    if (e.version == v) {
      return e.name;
    }
  }
  return nullptr;
}

std::optional<Version> version_from_name(std::string_view name) {
  for (const auto& e : kVersions) {
    if (name == e.name) {
      return e.version;
    }
  }
  return std::nullopt;
}

std::optional<Version> version_from_wire(uint64_t v) {
  for (const auto& e : kVersions) {
    if (static_cast<uint64_t>(e.version) == v) {
      return e.version;
    }
  }
  return std::nullopt;
}

uint32_t VersionSet::bit(Version v) {
  for (uint32_t i = 0; i < sizeof kVersions / sizeof kVersions[0]; ++i) {
    if (kVersions[i].version == v) {
      return 1u << i;
    }
  }
  return 0;
}

VersionSet VersionSet::all() {
  VersionSet s;
  for (const auto& e : kVersions) {
    s.add(e.version);
  }
  return s;
}

}  // namespace moqd::wire
