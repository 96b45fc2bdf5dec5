#pragma once
// The relay's side of one MoQ session, whatever transport carries it (WebSocket or QUIC): builds
// the session::Session on the transport session, answers its hooks (auth through the relay's
// Authorizer, the peer's announcements into the worker's origin and bridge) and keeps the
// worker's session count for /health. Owned by its connection object, on the worker's thread;
// destroyed before the transport session it runs on.
#include <memory>
#include <optional>
#include <string>

#include "auth/grant.h"
#include "relay/auth_service.h"
#include "session/moq_session.h"

namespace moqd::relay {

class RelayWorker;

class RelaySession final : public session::SessionHandler {
 public:
  explicit RelaySession(RelayWorker& worker) : worker_(worker) {}
  ~RelaySession() override;
  RelaySession(const RelaySession&) = delete;
  RelaySession& operator=(const RelaySession&) = delete;

  // Decides the session's grant from the connect URL's path and query (the worker's auth policy:
  // a JWT from `?jwt=`, public prefixes, or open). True when the session may connect; a refusal
  // is counted and logged. start() calls it when the transport did not call it earlier (a
  // WebTransport CONNECT asks first, to answer 403).
  bool admit(std::string_view path, std::string_view query, std::string_view peer);
  // Starts the MoQ session over `transport`. `root` is the URL path ("" over raw QUIC, which has
  // none) and `query` the URL query. A session whose grant expires is closed then with
  // unauthorized.
  void start(transport::Session& transport, std::string root, std::string query);
  // Closes the MoQ session; false when there is none (the caller closes its transport itself).
  bool close(Error reason);

  // session::SessionHandler
  bool authorize(session::Action action, std::string_view path, std::string_view query) override;
  void on_session_ready(wire::Version version) override;
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override;
  void on_peer_route(const std::string& path, const model::Hops& hops, uint64_t cost,
                     model::BroadcastSource& source) override;
  void on_session_closed(Error reason) override;
  bool is_admission_pending() override { return service_call_ != nullptr; }
  // A token with the cluster claim (or an open relay) makes the peer a relay.
  bool is_relay_link() const override { return grant_ && grant_->cluster; }
  // The MoQ session's GOAWAY (lite-04): tells the peer to reconnect to `url` ("" = here again).
  // False when the session's version has no GOAWAY.
  bool send_goaway(const std::string& url);

 private:
  void schedule_expiry();
  // --auth-url: asks the service; the session waits (Session::admit) for the answer.
  void ask_service(transport::Session& transport, const std::string& path, const std::string& query);
  void on_service_answer(AuthResult r, std::string path, std::string peer);

  RelayWorker& worker_;
  std::optional<auth::Grant> grant_;
  bool admitted_ = false;  // admit() ran (grant_ set, or the session refused)
  TimerId expiry_timer_ = 0;
  std::unique_ptr<AuthServiceCall> service_call_;
  std::optional<wire::Version> version_;
  // The worker's shared settings as they were when the session started; outlives session_.
  std::shared_ptr<const session::SessionConfig> session_config_;
  std::unique_ptr<session::MoqSession> session_;
  bool ready_ = false;
  size_t transport_class_ = 0;  // TransportClass of the transport the session runs on
  bool closed_ = false;
};

}  // namespace moqd::relay
