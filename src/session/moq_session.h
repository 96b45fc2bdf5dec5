#pragma once
// The family-neutral face of one MoQ session: what the relay and the client call, whichever
// protocol family (moq-lite, or IETF MoQ Transport) the session speaks. make_session() picks the
// family from what the transport negotiated (ALPN, WebTransport protocol or WebSocket
// subprotocol) and, for the SETUP path, the enabled versions. One worker thread; owned by the
// connection that owns the transport session; destroyed at the latest inside
// SessionHandler::on_session_closed.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"
#include "base/error.h"
#include "model/origin.h"
#include "session/config.h"
#include "transport/transport.h"
#include "wire/version.h"

namespace moqd::session {

class MoqSession : public model::BroadcastSource {
 public:
  ~MoqSession() override = default;

  // Starts the handshake. When the handler's admission is pending, nothing starts until admit().
  virtual void start() = 0;
  // The handler decided (authorize(kConnect) now answers): starts, or closes with unauthorized.
  virtual void admit() = 0;
  virtual bool is_admission_pending() const = 0;
  // Closes the transport session with `reason`; on_session_closed follows.
  virtual void close(Error reason) = 0;
  // Sends GOAWAY naming `uri` where the version has it; false otherwise.
  virtual bool send_goaway(const std::string& uri) = 0;

  virtual uint64_t id() const = 0;
  virtual std::optional<wire::Version> version() const = 0;
  virtual bool is_ready() const = 0;
  virtual transport::Session& transport() = 0;
  // Downstream subscriptions the peer holds open now.
  virtual size_t subscription_count() const = 0;
};

// Path conversions between a peer's view (relative to the session's normalized `root`) and the
// origin's (full), the same for both families: the full path of `peer_path`, and the peer's view
// of `full_path` (nullopt when it lies outside root).
std::string full_path_of(const std::string& root, std::string_view peer_path);
std::optional<std::string> peer_path_of(const std::string& root, std::string_view full_path);

// The session for `transport`: an IETF MoQ Transport session when the transport's protocol is an
// IETF row's ALPN (moqt-15, moqt-16 ...), or when it is the SETUP ALPN ("moql" or none) and the
// only SETUP-reached version enabled is moq-transport-14; the moq-lite Session otherwise.
// The versions a client-role session can run among `wanted`: every moq-lite version and IETF
// drafts 14 to 20 (IetfSession's client role), so `moq --versions moq-transport-16` offers moqt-16.
wire::VersionSet client_versions(const wire::VersionSet& wanted);

std::unique_ptr<MoqSession> make_session(transport::Session& transport, SessionConfig config,
                                         model::Origin& origin, SessionHandler& handler,
                                         const Clock& clock, Timers& timers);
// The same, borrowing `shared` (the owner's, shared by its sessions: it must outlive the
// session, and its root and query are not read) with the session's own `root` and `query`: a
// session then holds a reference, not a copy of the limits every session has alike.
std::unique_ptr<MoqSession> make_session(transport::Session& transport, const SessionConfig& shared,
                                         std::string root, std::string query,
                                         model::Origin& origin, SessionHandler& handler,
                                         const Clock& clock, Timers& timers);

}  // namespace moqd::session
