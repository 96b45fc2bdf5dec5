// libFuzzer target for what moqd reads from strangers about auth: key files (JWK, base64url JWK,
// JWK sets, PEM), tokens (?jwt=) against fixed HMAC and EC keys, an auth service's grant JSON, URL
// queries and base64url. The first byte picks the mode. Round trip: base64url decode, encode,
// decode again must give the same bytes; a token that verifies must carry claims that sign again.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "auth/grant.h"
#include "auth/key.h"
#include "auth/token.h"

namespace {

using namespace moqd::auth;

const KeySet& keys() {
  static const KeySet set = [] {
    KeySet s;
    auto hmac = parse_keys(
        R"({"kty":"oct","alg":"HS256","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg","kid":"k1"})");
    if (hmac) s.keys.push_back(hmac->front());
    auto ec = parse_keys(
        R"({"kty":"EC","crv":"P-256","alg":"ES256","kid":"e1",)"
        R"("x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"})");
    if (ec) s.keys.push_back(ec->front());
    return s;
  }();
  return set;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0:
      (void)parse_keys(in);
      break;
    case 1: {
      auto claims = verify_token(in, keys(), 1'800'000'000);
      if (claims) {
        // Only a token signed with k1 can verify here; its claims must sign again.
        if (keys().keys.empty() || !sign_token(keys().keys[0], *claims)) {
          abort();
        }
      }
      break;
    }
    case 2:
      (void)grant_from_service(in, "room", 1'800'000'000);
      break;
    case 3:
      (void)query_param(in, "jwt");
      break;
    case 4: {
      auto once = base64url_decode(in);
      if (once) {
        auto twice = base64url_decode(base64url_encode(*once));
        if (!twice || *twice != *once) {
          abort();
        }
      }
      break;
    }
  }
  return 0;
}
