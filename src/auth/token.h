#pragma once
// moq-relay's JWT (the `?jwt=` of a connect URL): claims `root`, `put`, `get` (a prefix or a list of
// prefixes, relative to root), `exp` and `iat`, signed with HS256/384/512, RS256/384/512 or
// ES256/384 through libjwt 1.10 (GnuTLS). Verification picks the key by the header's `kid`, checks
// the header's `alg` against the key before libjwt sees the token (so `alg: none`, an HMAC token
// "signed" with an RSA public key and other algorithm confusions never reach a verifier), then
// the signature, then the claims. Any thread.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "auth/key.h"
#include "base/error.h"

namespace moqd::auth {

struct Claims {
  std::string root;
  // Absent and empty differ: absent grants nothing, [""] grants everything under root.
  std::optional<std::vector<std::string>> put;
  std::optional<std::vector<std::string>> get;
  std::optional<int64_t> exp;  // unix seconds
  std::optional<int64_t> iat;  // unix seconds
  // `cluster: true`: the token is a relay's (--cluster-token), so the session is a relay link
  // whose announcements' hop lists are trusted for routing.
  bool cluster = false;
};

// The keys a relay verifies with: those of --auth-key files (a token without `kid` may use the
// single one of them) and those of --auth-key-dir, found by `kid`.
struct KeySet {
  std::vector<Key> keys;
  bool empty() const { return keys.empty(); }
};

// Why a token was refused, for the log line and the metrics label.
enum class Refusal {
  kMalformed,       // not three base64url parts of JSON
  kAlgNone,         // alg "none" or missing
  kMissingKid,      // no kid, and no single key to fall back to
  kUnknownKid,      // no key with that kid
  kWrongAlg,        // the key is for another algorithm
  kBadSignature,
  kBadClaims,       // root missing, put/get of the wrong type, neither put nor get
  kExpired,
  kWrongRoot,       // the connect path is not inside `root`
  kNoPermission,    // (grant) the action is not allowed
  kServiceFailed,   // (--auth-url) the auth service did not answer usefully
};
const char* refusal_name(Refusal r);

struct TokenError {
  Refusal reason = Refusal::kMalformed;
  std::string detail;
};

// Verifies `token` with `keys` at unix time `now` and returns its claims. An expired token
// (exp <= now) is refused.
Result<Claims, TokenError> verify_token(std::string_view token, const KeySet& keys, int64_t now);

// Signs `claims` with `key` (its alg; its kid in the header when it has one). The key must be able
// to sign (an HMAC secret, or a private RSA/EC key).
Result<std::string> sign_token(const Key& key, const Claims& claims, std::string* why = nullptr);

// The value of `name` in a URL query ("a=1&jwt=xyz"), percent-decoded; nullopt when absent.
std::optional<std::string> query_param(std::string_view query, std::string_view name);

}  // namespace moqd::auth
