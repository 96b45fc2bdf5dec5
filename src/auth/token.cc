#include "auth/token.h"

#include <jansson.h>
#include <jwt.h>

#include <cstdlib>
#include <memory>

#include "auth/json_ptr.h"

namespace moqd::auth {
namespace {

struct JwtDeleter {
  void operator()(jwt_t* j) const { jwt_free(j); }
};
using JwtPtr = std::unique_ptr<jwt_t, JwtDeleter>;

tl::unexpected<TokenError> refuse(Refusal r, std::string detail) {
  return tl::unexpected(TokenError{r, std::move(detail)});
}

JsonPtr parse_json(std::string_view text) {
  json_error_t err;
  return JsonPtr(json_loadb(text.data(), text.size(), 0, &err));
}

// A claim that is a prefix or a list of prefixes. False when it has another type.
bool read_prefixes(const json_t* claims, const char* name,
                   std::optional<std::vector<std::string>>& out) {
  const json_t* v = json_object_get(claims, name);
  if (v == nullptr || json_is_null(v)) {
    return true;
  }
  std::vector<std::string> list;
  if (json_is_string(v)) {
    list.emplace_back(json_string_value(v));
  } else if (json_is_array(v)) {
    size_t i;
    const json_t* item;
    json_array_foreach(v, i, item) {
      if (!json_is_string(item)) {
        return false;
      }
      list.emplace_back(json_string_value(item));
    }
  } else {
    return false;
  }
  out = std::move(list);
  return true;
}

bool read_time(const json_t* claims, const char* name, std::optional<int64_t>& out) {
  const json_t* v = json_object_get(claims, name);
  if (v == nullptr || json_is_null(v)) {
    return true;
  }
  if (!json_is_number(v)) {
    return false;
  }
  out = static_cast<int64_t>(json_number_value(v));
  return true;
}

Result<Claims, TokenError> parse_claims(std::string_view json) {
  JsonPtr root = parse_json(json);
  if (!root || !json_is_object(root.get())) {
    return refuse(Refusal::kBadClaims, "claims are not a JSON object");
  }
  Claims c;
  const json_t* r = json_object_get(root.get(), "root");
  if (!json_is_string(r)) {
    return refuse(Refusal::kBadClaims, "claim root missing or not a string");
  }
  c.root = json_string_value(r);
  if (!read_prefixes(root.get(), "put", c.put) || !read_prefixes(root.get(), "get", c.get)) {
    return refuse(Refusal::kBadClaims, "claim put or get is not a string or a list of strings");
  }
  if (!read_time(root.get(), "exp", c.exp) || !read_time(root.get(), "iat", c.iat)) {
    return refuse(Refusal::kBadClaims, "claim exp or iat is not a number");
  }
  if (const json_t* cl = json_object_get(root.get(), "cluster"); cl != nullptr && !json_is_null(cl)) {
    if (!json_is_boolean(cl)) {
      return refuse(Refusal::kBadClaims, "claim cluster is not a boolean");
    }
    c.cluster = json_is_true(cl);
  }
  return c;
}

const Key* pick_key(const KeySet& keys, const std::string& kid, TokenError& err) {
  if (kid.empty()) {
    if (keys.keys.size() == 1) {
      return &keys.keys[0];
    }
    err = {Refusal::kMissingKid, "token names no key (kid) and several keys are configured"};
    return nullptr;
  }
  for (const Key& k : keys.keys) {
    if (k.kid == kid) {
      return &k;
    }
  }
  if (keys.keys.size() == 1 && keys.keys[0].kid.empty()) {
    return &keys.keys[0];
  }
  err = {Refusal::kUnknownKid, "no key with kid " + kid};
  return nullptr;
}

json_t* prefixes_json(const std::vector<std::string>& list) {
  json_t* a = json_array();
  for (const auto& p : list) {
    json_array_append_new(a, json_string(p.c_str()));
  }
  return a;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// libjwt 1.10 on GnuTLS pads both halves of an ECDSA signature to 66 bytes whatever the curve
// (132 bytes), where JWS (RFC 7518 §3.4) wants r || s of the curve's size: 64 bytes for ES256, 96
// for ES384. Verifiers such as jose refuse the padded form, so it is cut back to size here (the
// padding is leading zeros).
Result<std::string> fix_ec_signature(std::string token, size_t half) {
  size_t dot = token.rfind('.');
  auto sig = base64url_decode(std::string_view(token).substr(dot + 1));
  if (!sig) {
    return fail(ErrorCode::kUnauthorized, "libjwt produced an unreadable signature");
  }
  if (sig->size() == 2 * half) {
    return token;
  }
  const size_t padded = sig->size() / 2;
  if (sig->size() % 2 != 0 || padded < half) {
    return fail(ErrorCode::kUnauthorized, "libjwt produced an ECDSA signature of an odd size");
  }
  for (size_t i = 0; i < padded - half; ++i) {
    if ((*sig)[i] != 0 || (*sig)[padded + i] != 0) {
      return fail(ErrorCode::kUnauthorized, "libjwt produced an ECDSA signature that is too long");
    }
  }
  std::string fixed = sig->substr(padded - half, half) + sig->substr(2 * padded - half, half);
  return token.substr(0, dot + 1) + base64url_encode(fixed);
}

}  // namespace

const char* refusal_name(Refusal r) {
  switch (r) {
    case Refusal::kMalformed: return "malformed";
    case Refusal::kAlgNone: return "alg_none";
    case Refusal::kMissingKid: return "missing_kid";
    case Refusal::kUnknownKid: return "unknown_kid";
    case Refusal::kWrongAlg: return "wrong_alg";
    case Refusal::kBadSignature: return "bad_signature";
    case Refusal::kBadClaims: return "bad_claims";
    case Refusal::kExpired: return "expired";
    case Refusal::kWrongRoot: return "wrong_root";
    case Refusal::kNoPermission: return "no_permission";
    case Refusal::kServiceFailed: return "service_failed";
  }
  return "unknown";
}

Result<Claims, TokenError> verify_token(std::string_view token, const KeySet& keys, int64_t now) {
  size_t dot1 = token.find('.');
  size_t dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return refuse(Refusal::kMalformed, "not a compact JWS (three dot-separated parts)");
  }
  auto header_json = base64url_decode(token.substr(0, dot1));
  JsonPtr header = header_json ? parse_json(*header_json) : nullptr;
  if (!header || !json_is_object(header.get())) {
    return refuse(Refusal::kMalformed, "header is not base64url JSON");
  }
  const char* alg = json_string_value(json_object_get(header.get(), "alg"));
  if (alg == nullptr || std::string_view(alg) == "none" || std::string_view(alg).empty()) {
    return refuse(Refusal::kAlgNone, "unsigned token (alg none)");
  }
  const char* kid_c = json_string_value(json_object_get(header.get(), "kid"));
  TokenError err;
  const Key* key = pick_key(keys, kid_c != nullptr ? kid_c : "", err);
  if (key == nullptr) {
    return tl::unexpected(err);
  }
  if (key->alg != alg) {
    return refuse(Refusal::kWrongAlg, std::string("token alg ") + alg + ", key alg " + key->alg);
  }
  const std::string& material = key->family == KeyFamily::kHmac ? key->secret : key->public_pem;
  std::string copy(token);
  jwt_t* raw = nullptr;
  int rc = jwt_decode(&raw, copy.c_str(), reinterpret_cast<const unsigned char*>(material.data()),
                      static_cast<int>(material.size()));
  JwtPtr jwt(raw);
  if (rc != 0 || !jwt || jwt_get_alg(jwt.get()) != jwt_str_alg(alg)) {
    return refuse(Refusal::kBadSignature, "signature does not verify");
  }
  CString grants(jwt_get_grants_json(jwt.get(), nullptr));
  if (!grants) {
    return refuse(Refusal::kBadClaims, "no claims");
  }
  auto claims = parse_claims(grants.get());
  if (!claims) {
    return claims;
  }
  if (claims->exp && *claims->exp <= now) {
    return refuse(Refusal::kExpired, "token expired");
  }
  return claims;
}

Result<std::string> sign_token(const Key& key, const Claims& claims, std::string* why) {
  auto failed = [why](const char* what) {
    if (why != nullptr) *why = what;
    return tl::unexpected(Error{ErrorCode::kUnauthorized, what});
  };
  if (!key.can_sign()) {
    return failed("key has no private part to sign with");
  }
  JsonPtr body(json_object());
  json_object_set_new(body.get(), "root", json_string(claims.root.c_str()));
  if (claims.put) json_object_set_new(body.get(), "put", prefixes_json(*claims.put));
  if (claims.get) json_object_set_new(body.get(), "get", prefixes_json(*claims.get));
  if (claims.exp) json_object_set_new(body.get(), "exp", json_integer(*claims.exp));
  if (claims.iat) json_object_set_new(body.get(), "iat", json_integer(*claims.iat));
  if (claims.cluster) json_object_set_new(body.get(), "cluster", json_true());
  CString body_text(json_dumps(body.get(), JSON_COMPACT));
  const std::string& material = key.family == KeyFamily::kHmac ? key.secret : key.private_pem;
  jwt_t* raw = nullptr;
  if (jwt_new(&raw) != 0) {
    return failed("out of memory");
  }
  JwtPtr jwt(raw);
  if (jwt_set_alg(jwt.get(), jwt_str_alg(key.alg.c_str()),
                  reinterpret_cast<const unsigned char*>(material.data()),
                  static_cast<int>(material.size())) != 0) {
    return failed("libjwt refused the key for its alg");
  }
  if (!key.kid.empty() && jwt_add_header(jwt.get(), "kid", key.kid.c_str()) != 0) {
    return failed("cannot add kid");
  }
  if (jwt_add_grants_json(jwt.get(), body_text.get()) != 0) {
    return failed("cannot add claims");
  }
  CString out(jwt_encode_str(jwt.get()));
  if (!out) {
    return failed("libjwt could not sign (is the key valid for its alg?)");
  }
  if (key.family == KeyFamily::kEc) {
    return fix_ec_signature(out.get(), key.alg == "ES384" ? 48 : key.alg == "ES512" ? 66 : 32);
  }
  return std::string(out.get());
}

std::optional<std::string> query_param(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    size_t eq = pair.find('=');
    if (pair.substr(0, eq) != name) {
      continue;
    }
    std::string_view raw = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '%' && i + 2 < raw.size() && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
        out.push_back(static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2])));
        i += 2;
      } else {
        out.push_back(raw[i] == '+' ? ' ' : raw[i]);
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace moqd::auth
