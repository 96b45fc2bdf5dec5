#include "session/moq_session.h"

#include "model/path.h"
#include "session/ietf_session.h"
#include "session/session.h"
#include "wire/draft14_alpn.h"

namespace moqd::session {

std::string full_path_of(const std::string& root, std::string_view peer_path) {
  return model::join_path(root, model::normalize_path(peer_path));
}

std::optional<std::string> peer_path_of(const std::string& root, std::string_view full_path) {
  auto rest = model::strip_prefix(root, full_path);
  if (!rest) {
    return std::nullopt;
  }
  return std::string(*rest);
}

wire::VersionSet client_versions(const wire::VersionSet& wanted) {
  wire::VersionSet out = wire::VersionSet::none();
  // IETF drafts 14..20: IetfSession's client role.
  for (auto v : {wire::Version::kLite01, wire::Version::kLite02, wire::Version::kLite03,
                 wire::Version::kLite04, wire::Version::kLite05, wire::Version::kTransport14,
                 wire::Version::kTransport15, wire::Version::kTransport16,
                 wire::Version::kTransport17, wire::Version::kTransport18,
                 wire::Version::kTransport19, wire::Version::kTransport20}) {
    if (wanted.contains(v)) {
      out.add(v);
    }
  }
  return out;
}

namespace {

// The IETF draft `transport`'s protocol selects among `versions`; nullopt: the moq-lite Session.
std::optional<wire::Version> ietf_version_for(transport::Session& transport,
                                              const wire::VersionSet& versions) {
  std::string_view protocol = transport.protocol();
  const wire::ProtocolInfo* row = wire::protocol_for_alpn(protocol);
  if (row != nullptr && !wire::is_lite(row->version) && row->served &&
      versions.contains(row->version)) {
    return row->version;
  }
  // The SETUP path ("moql" or none): CLIENT_SETUP lists versions. moqd serves draft 14 there when
  // it is the only SETUP-reached version enabled (--versions moq-transport-14); otherwise the
  // moq-lite Session picks lite-02 or lite-01 as before. A client (`moq --versions
  // moq-transport-14`) speaks draft 14 under the same condition on its own versions.
  const wire::ProtocolInfo* d14 = wire::protocol_info(wire::Version::kTransport14);
  // "moq-00" is draft 14's own ALPN: SETUP, where only draft 14 may be selected.
  if (protocol == wire::kDraft14Alpn && d14 != nullptr && d14->served &&
      versions.contains(wire::Version::kTransport14)) {
    return wire::Version::kTransport14;
  }
  if (row == nullptr && (protocol.empty() || protocol == wire::kSetupAlpn) &&
      d14 != nullptr && d14->served &&
      versions.contains(wire::Version::kTransport14) &&
      !versions.contains(wire::Version::kLite01) &&
      !versions.contains(wire::Version::kLite02)) {
    return wire::Version::kTransport14;
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<MoqSession> make_session(transport::Session& transport, SessionConfig config,
                                         model::Origin& origin, SessionHandler& handler,
                                         const Clock& clock, Timers& timers) {
  if (auto v = ietf_version_for(transport, config.versions)) {
    return std::make_unique<IetfSession>(transport, std::move(config), origin, handler, clock,
                                         timers, *v);
  }
  return std::make_unique<Session>(transport, std::move(config), origin, handler, clock, timers);
}

std::unique_ptr<MoqSession> make_session(transport::Session& transport, const SessionConfig& shared,
                                         std::string root, std::string query,
                                         model::Origin& origin, SessionHandler& handler,
                                         const Clock& clock, Timers& timers) {
  if (auto v = ietf_version_for(transport, shared.versions)) {
    return std::make_unique<IetfSession>(transport, shared, std::move(root), std::move(query),
                                         origin, handler, clock, timers, *v);
  }
  return std::make_unique<Session>(transport, shared, std::move(root), std::move(query), origin,
                                   handler, clock, timers);
}

}  // namespace moqd::session
