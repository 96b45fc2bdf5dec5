#pragma once
// Keys that sign and verify moq-relay style JWTs, loaded from what operators have: the JWK that
// `moq-token generate` writes (plain JSON or base64url-encoded JSON), a JWK set ({"keys": [...]})
// or PEM (a public key, a certificate, or a private key). Pure parsing plus GnuTLS conversions to
// the PEM that libjwt takes; no I/O beyond reading a named file. Any thread.
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace moqd::auth {

// What a key can check: HMAC secrets sign and verify HS*, RSA keys RS*, EC keys ES* on their curve.
enum class KeyFamily { kHmac, kRsa, kEc };

struct Key {
  std::string kid;  // "" when the key names none
  KeyFamily family = KeyFamily::kHmac;
  // The one algorithm this key is for ("HS256", "ES256", ...). A JWK names it; a PEM key gets the
  // only one its family and curve allow (RSA: "RS256"). Tokens with another alg are refused.
  std::string alg;
  std::string secret;       // HMAC: the raw secret bytes
  std::string public_pem;   // RSA/EC: SubjectPublicKeyInfo PEM, what libjwt verifies with
  std::string private_pem;  // RSA/EC: the private key PEM when the source had one (signing)

  bool can_sign() const { return family == KeyFamily::kHmac || !private_pem.empty(); }
};

// Parses one key source (the text of a file): a JWK, base64url(JWK), a JWK set, or PEM. A set
// yields every key; keys of types libjwt cannot verify (OKP/EdDSA, PS*) are an error naming them.
// `detail` of an error is static; `why` (when not null) gets a specific message.
Result<std::vector<Key>> parse_keys(std::string_view text, std::string* why = nullptr);
// Reads and parses a file.
Result<std::vector<Key>> load_key_file(const std::string& path, std::string* why = nullptr);

// base64url without padding (RFC 4648 §5), and decoding that also accepts standard base64 and
// padding. Decoding fails on any other character.
std::string base64url_encode(std::string_view bytes);
Result<std::string> base64url_decode(std::string_view text);

}  // namespace moqd::auth
