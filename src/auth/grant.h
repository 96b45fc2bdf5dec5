#pragma once
// What one session may do, and the policy that decides it at connect: moq-relay's JWTs
// (auth/token.h), anonymous public prefixes, or an operator's grant (--auth-url). Paths are full
// broadcast paths (root included), normalised as model/path.h does. Immutable; any thread.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/token.h"

namespace moqd::auth {

// One permission: a broadcast path exactly, or everything under it ("" with subtree: all).
struct Pattern {
  std::string path;  // full, normalised
  bool subtree = true;
  bool matches(std::string_view full_path) const;
  friend bool operator==(const Pattern&, const Pattern&) = default;
};

// Parses moq-auth's pattern form relative to `root`: "foo" (exactly foo), "foo/**" (foo and
// below), "**" (everything). Legacy put/get prefixes are subtrees: use Pattern{join(root, p)}.
Pattern parse_pattern(std::string_view root, std::string_view text);

struct Grant {
  std::vector<Pattern> publish;
  std::vector<Pattern> subscribe;
  std::optional<int64_t> expires;  // unix seconds; the session is closed then
  // The grant's root (the token's `root`); sessions connect at or below it.
  std::string root;
  // For logs: "open", "public", "jwt kid=..", "auth-url".
  std::string source;
  // A relay link (a token with `cluster: true`, or an open relay, which trusts every peer): the
  // hop lists of its announcements count for routing (relay/cluster.h).
  bool cluster = false;

  static Grant everything(std::string source);
  bool may_publish(std::string_view full_path) const;
  // A broadcast (subscribe) or a discovery prefix (ANNOUNCE_PLEASE): allowed when a subtree
  // pattern covers it, or it is a broadcast that an exact pattern names.
  bool may_subscribe(std::string_view full_path) const;
  // A discovery prefix (ANNOUNCE_PLEASE): allowed when something under it may be subscribed to
  // (a pattern lies at or below it, or a subtree covers it); what is announced is then filtered
  // with may_subscribe.
  bool may_discover(std::string_view prefix) const;
  // A session rooted at `root` may connect when it may do something there: a pattern lies at or
  // below root, or covers root.
  bool may_connect(std::string_view root) const;
};

struct AuthPolicy {
  KeySet keys;                               // --auth-key, --auth-key-dir
  std::vector<std::string> public_prefixes;  // --auth-public: publish and subscribe, no token
  // --auth-url: every session's grant comes from this HTTP service instead (relay/auth_service.h).
  std::string service_url;
  // True when neither keys nor public prefixes are configured: every session may do everything.
  bool is_open() const { return keys.empty() && public_prefixes.empty() && service_url.empty(); }
};

// Decides a session's grant at connect. `root` is the connect path (normalised), `query` the URL
// query (`jwt=` read from it), `now` unix seconds. A token is used when keys are configured; without
// a token, the public prefixes apply.
Result<Grant, TokenError> authenticate(const AuthPolicy& policy, std::string_view root,
                                       std::string_view query, int64_t now);

// The grant a verified token gives a session at `root` (checks that root lies inside claims.root).
Result<Grant, TokenError> grant_for_claims(const Claims& claims, std::string_view root,
                                           std::string source);

// --auth-url (moq-auth's contract): what the relay tells the service about a session, and what
// the service's 2xx answer grants.
struct ServiceRequest {
  std::string id;         // random, unique per session (32 hex digits)
  std::string node;       // the relay's name
  std::string transport;  // "quic" (raw QUIC and WebTransport) or "websocket"
  std::string remote;     // peer address
  std::string alpn;       // negotiated protocol, when the transport has one
  std::string path;       // as dialed, with its leading '/'
  std::string query;      // without '?'; the token, if any, is in it
};
// {"id":..,"event":"connect","node":..,"transport":..,"remote":..,"alpn":..,"path":..,"query":..}
std::string service_request_json(const ServiceRequest& r);
// The grant in a service's answer for a session at `root` (normalised): publish and subscribe
// patterns relative to the answer's `root` (else the connect path), `expires` in unix seconds.
// Refused (kServiceFailed) when it is not a JSON object or its fields have the wrong types,
// (kNoPermission) when it grants nothing, (kExpired) when it has already expired.
Result<Grant, TokenError> grant_from_service(std::string_view json, std::string_view root,
                                             int64_t now);

}  // namespace moqd::auth
