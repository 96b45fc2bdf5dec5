#pragma once
// --auth-url: one HTTP request per session to the operator's auth service, moq-relay's newer
// moq-auth contract. The relay POSTs JSON naming the session (id, event "connect", node,
// transport, remote, alpn, path, query: the token travels in the query) and the service answers
// 2xx with a grant {publish: [patterns], subscribe: [patterns], root?, expires?} (patterns: "foo"
// one broadcast, "foo/**" a subtree, "**" everything; relative to root, the connect path unless
// the grant names one). 401/403 refuse; anything else, no answer within kTimeout, or a grant that
// grants nothing, refuses too: it fails closed. http:// only. Worker thread.
#include <functional>
#include <memory>
#include <string>

#include "auth/grant.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"

namespace moqd::relay {

struct AuthServiceUrl {
  std::string host;  // an address (resolving a name would block the worker)
  uint16_t port = 80;
  std::string target = "/";  // path and query of the URL
  std::string text;          // the URL as given, for logs
};
// Parses "http://HOST:PORT/path"; https and other schemes are refused.
Result<AuthServiceUrl> parse_auth_url(const std::string& url);


using AuthResult = Result<auth::Grant, auth::TokenError>;

// One request in flight. Destroying it abandons the request (no callback).
class AuthServiceCall final : public transport::PipeHandler {
 public:
  static constexpr Duration kTimeout = std::chrono::seconds(5);
  // `done` is called once, from the loop (never from inside start()); it may not destroy the
  // call (defer that). The grant's patterns are relative to the dialed path unless the answer
  // names a root.
  static std::unique_ptr<AuthServiceCall> start(runtime::EventLoop& loop, const AuthServiceUrl& url,
                                                const auth::ServiceRequest& request,
                                                std::function<void(AuthResult)> done);
  ~AuthServiceCall() override;

  void on_pipe_data(std::span<const uint8_t> data) override;
  void on_pipe_writable() override {}
  void on_pipe_closed() override;

 private:
  AuthServiceCall(runtime::EventLoop& loop, std::function<void(AuthResult)> done)
      : loop_(loop), done_(std::move(done)) {}
  void finish(AuthResult r);
  void fail(const std::string& why);
  // The response is complete when the body has Content-Length bytes (or the peer closed).
  void try_complete(bool closed);

  runtime::EventLoop& loop_;
  std::function<void(AuthResult)> done_;
  std::unique_ptr<runtime::TcpConnection> tcp_;
  std::string response_;
  std::string root_;  // the dialed path, normalised
  TimerId timer_ = 0;
  bool finished_ = false;
};

}  // namespace moqd::relay
