#include "auth/key.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <jansson.h>

#include <fstream>
#include <memory>
#include <sstream>

#include "auth/json_ptr.h"

namespace moqd::auth {
namespace {

Error bad(std::string* why, const char* detail, const std::string& more = "") {
  if (why != nullptr) {
    *why = more.empty() ? detail : std::string(detail) + ": " + more;
  }
  return Error{ErrorCode::kUnauthorized, detail};
}

int b64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-' || c == '+') return 62;
  if (c == '_' || c == '/') return 63;
  return -1;
}

std::string json_str(const json_t* obj, const char* name) {
  const char* s = json_string_value(json_object_get(obj, name));
  return s != nullptr ? s : "";
}

gnutls_datum_t datum(const std::string& s) {
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(s.data())),
          static_cast<unsigned>(s.size())};
}

std::string take(gnutls_datum_t& d) {
  std::string s(reinterpret_cast<const char*>(d.data), d.size);
  gnutls_free(d.data);
  d.data = nullptr;
  return s;
}

// A JWK member holding base64url bytes, decoded; empty when absent or malformed.
std::string json_bytes(const json_t* obj, const char* name) {
  auto v = base64url_decode(json_str(obj, name));
  return v ? *v : std::string();
}

// RSA and EC keys as the PEM libjwt takes: the public key always, the private key when present.
struct Pems {
  std::string public_pem, private_pem;
};

Result<Pems> ec_pems(const json_t* jwk, gnutls_ecc_curve_t curve, std::string* why) {
  std::string x = json_bytes(jwk, "x"), y = json_bytes(jwk, "y"), d = json_bytes(jwk, "d");
  if (x.empty() || y.empty()) {
    return tl::unexpected(bad(why, "EC JWK without x and y"));
  }
  Pems out;
  gnutls_datum_t dx = datum(x), dy = datum(y), dd = datum(d), pem{};
  gnutls_pubkey_t pub = nullptr;
  gnutls_pubkey_init(&pub);
  int rc = gnutls_pubkey_import_ecc_raw(pub, curve, &dx, &dy);
  if (rc == 0) rc = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_PEM, &pem);
  gnutls_pubkey_deinit(pub);
  if (rc != 0) {
    return tl::unexpected(bad(why, "EC JWK is not a valid public key", gnutls_strerror(rc)));
  }
  out.public_pem = take(pem);
  if (!d.empty()) {
    gnutls_x509_privkey_t key = nullptr;
    gnutls_x509_privkey_init(&key);
    rc = gnutls_x509_privkey_import_ecc_raw(key, curve, &dx, &dy, &dd);
    if (rc == 0) rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &pem);
    gnutls_x509_privkey_deinit(key);
    if (rc != 0) {
      return tl::unexpected(bad(why, "EC JWK has an invalid private scalar", gnutls_strerror(rc)));
    }
    out.private_pem = take(pem);
  }
  return out;
}

Result<Pems> rsa_pems(const json_t* jwk, std::string* why) {
  std::string n = json_bytes(jwk, "n"), e = json_bytes(jwk, "e");
  if (n.empty() || e.empty()) {
    return tl::unexpected(bad(why, "RSA JWK without n and e"));
  }
  Pems out;
  gnutls_datum_t dn = datum(n), de = datum(e), pem{};
  gnutls_pubkey_t pub = nullptr;
  gnutls_pubkey_init(&pub);
  int rc = gnutls_pubkey_import_rsa_raw(pub, &dn, &de);
  if (rc == 0) rc = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_PEM, &pem);
  gnutls_pubkey_deinit(pub);
  if (rc != 0) {
    return tl::unexpected(bad(why, "RSA JWK is not a valid public key", gnutls_strerror(rc)));
  }
  out.public_pem = take(pem);
  std::string d = json_bytes(jwk, "d"), p = json_bytes(jwk, "p"), q = json_bytes(jwk, "q");
  if (!d.empty() && !p.empty() && !q.empty()) {
    gnutls_datum_t dd = datum(d), dpp = datum(p), dqq = datum(q);
    gnutls_x509_privkey_t key = nullptr;
    gnutls_x509_privkey_init(&key);
    // The CRT values (dp, dq, qi) are recomputed by GnuTLS from d, p and q.
    rc = gnutls_x509_privkey_import_rsa_raw2(key, &dn, &de, &dd, &dpp, &dqq, nullptr, nullptr,
                                             nullptr);
    if (rc == 0) rc = gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &pem);
    gnutls_x509_privkey_deinit(key);
    if (rc != 0) {
      return tl::unexpected(bad(why, "RSA JWK has invalid private fields", gnutls_strerror(rc)));
    }
    out.private_pem = take(pem);
  }
  return out;
}

// One JWK object.
Result<Key> parse_jwk(const json_t* jwk, std::string* why) {
  if (!json_is_object(jwk)) {
    return tl::unexpected(bad(why, "JWK is not a JSON object"));
  }
  Key key;
  key.kid = json_str(jwk, "kid");
  key.alg = json_str(jwk, "alg");
  std::string kty = json_str(jwk, "kty");
  if (kty.empty() && json_object_get(jwk, "k") != nullptr) {
    kty = "oct";  // moq-token's legacy HMAC keys carry no kty
  }
  if (kty == "oct") {
    key.family = KeyFamily::kHmac;
    key.secret = json_bytes(jwk, "k");
    if (key.secret.empty()) {
      return tl::unexpected(bad(why, "oct JWK without a valid k"));
    }
    if (key.alg.empty()) key.alg = "HS256";
    if (key.alg != "HS256" && key.alg != "HS384" && key.alg != "HS512") {
      return tl::unexpected(bad(why, "oct JWK with a non-HMAC alg", key.alg));
    }
    return key;
  }
  if (kty == "EC") {
    std::string crv = json_str(jwk, "crv");
    gnutls_ecc_curve_t curve;
    std::string alg;
    if (crv == "P-256") {
      curve = GNUTLS_ECC_CURVE_SECP256R1;
      alg = "ES256";
    } else if (crv == "P-384") {
      curve = GNUTLS_ECC_CURVE_SECP384R1;
      alg = "ES384";
    } else {
      return tl::unexpected(bad(why, "EC JWK on an unsupported curve", crv));
    }
    if (key.alg.empty()) key.alg = alg;
    if (key.alg != alg) {
      return tl::unexpected(bad(why, "EC JWK alg does not match its curve", key.alg));
    }
    key.family = KeyFamily::kEc;
    auto pems = ec_pems(jwk, curve, why);
    if (!pems) return tl::unexpected(pems.error());
    key.public_pem = std::move(pems->public_pem);
    key.private_pem = std::move(pems->private_pem);
    return key;
  }
  if (kty == "RSA") {
    if (key.alg.empty()) key.alg = "RS256";
    if (key.alg != "RS256" && key.alg != "RS384" && key.alg != "RS512") {
      // PS* needs libjwt 1.12; Debian 12 has 1.10.
      return tl::unexpected(bad(why, "RSA JWK alg not supported by libjwt 1.10", key.alg));
    }
    key.family = KeyFamily::kRsa;
    auto pems = rsa_pems(jwk, why);
    if (!pems) return tl::unexpected(pems.error());
    key.public_pem = std::move(pems->public_pem);
    key.private_pem = std::move(pems->private_pem);
    return key;
  }
  if (kty == "OKP") {
    return tl::unexpected(bad(why, "EdDSA (OKP) keys are not supported by libjwt 1.10"));
  }
  return tl::unexpected(bad(why, "JWK with an unknown kty", kty));
}

Result<std::vector<Key>> parse_json(std::string_view text, std::string* why) {
  json_error_t err;
  JsonPtr root(json_loadb(text.data(), text.size(), 0, &err));
  if (!root) {
    return tl::unexpected(bad(why, "key is not valid JSON", err.text));
  }
  std::vector<Key> keys;
  json_t* set = json_object_get(root.get(), "keys");
  if (json_is_array(set)) {
    size_t i;
    json_t* item;
    json_array_foreach(set, i, item) {
      auto k = parse_jwk(item, why);
      if (!k) return tl::unexpected(k.error());
      keys.push_back(std::move(*k));
    }
    if (keys.empty()) {
      return tl::unexpected(bad(why, "JWK set holds no key"));
    }
    return keys;
  }
  auto k = parse_jwk(root.get(), why);
  if (!k) return tl::unexpected(k.error());
  keys.push_back(std::move(*k));
  return keys;
}

// The family and alg of a public key (RSA: RS256; EC: by curve).
Result<Key> describe_public(gnutls_pubkey_t pub, std::string* why) {
  Key key;
  unsigned bits = 0;
  int pk = gnutls_pubkey_get_pk_algorithm(pub, &bits);
  if (pk == GNUTLS_PK_RSA) {
    key.family = KeyFamily::kRsa;
    key.alg = "RS256";
  } else if (pk == GNUTLS_PK_EC) {
    gnutls_ecc_curve_t curve{};
    if (gnutls_pubkey_export_ecc_raw(pub, &curve, nullptr, nullptr) != 0) {
      return tl::unexpected(bad(why, "cannot read the EC key's curve"));
    }
    key.family = KeyFamily::kEc;
    if (curve == GNUTLS_ECC_CURVE_SECP256R1) {
      key.alg = "ES256";
    } else if (curve == GNUTLS_ECC_CURVE_SECP384R1) {
      key.alg = "ES384";
    } else if (curve == GNUTLS_ECC_CURVE_SECP521R1) {
      key.alg = "ES512";
    } else {
      return tl::unexpected(bad(why, "EC key on an unsupported curve"));
    }
  } else {
    return tl::unexpected(bad(why, "PEM key of an unsupported type (RSA and EC only)"));
  }
  gnutls_datum_t pem{};
  if (int rc = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_PEM, &pem); rc != 0) {
    return tl::unexpected(bad(why, "cannot export the public key", gnutls_strerror(rc)));
  }
  key.public_pem = take(pem);
  return key;
}

Result<std::vector<Key>> parse_pem(std::string_view text, std::string* why) {
  std::string copy(text);
  gnutls_datum_t data = datum(copy);
  gnutls_pubkey_t pub = nullptr;
  gnutls_pubkey_init(&pub);
  std::string private_pem;
  int rc = GNUTLS_E_BASE64_DECODING_ERROR;
  if (copy.find("-----BEGIN PUBLIC KEY-----") != std::string::npos) {
    rc = gnutls_pubkey_import(pub, &data, GNUTLS_X509_FMT_PEM);
  } else if (copy.find("-----BEGIN CERTIFICATE-----") != std::string::npos) {
    gnutls_x509_crt_t crt = nullptr;
    gnutls_x509_crt_init(&crt);
    rc = gnutls_x509_crt_import(crt, &data, GNUTLS_X509_FMT_PEM);
    if (rc == 0) rc = gnutls_pubkey_import_x509(pub, crt, 0);
    gnutls_x509_crt_deinit(crt);
  } else if (copy.find("PRIVATE KEY-----") != std::string::npos) {
    gnutls_x509_privkey_t x509 = nullptr;
    gnutls_privkey_t priv = nullptr;
    gnutls_x509_privkey_init(&x509);
    gnutls_privkey_init(&priv);
    rc = gnutls_x509_privkey_import2(x509, &data, GNUTLS_X509_FMT_PEM, nullptr, 0);
    gnutls_datum_t pem{};
    if (rc == 0) rc = gnutls_x509_privkey_export2(x509, GNUTLS_X509_FMT_PEM, &pem);
    if (rc == 0) private_pem = take(pem);
    if (rc == 0) rc = gnutls_privkey_import_x509(priv, x509, 0);
    if (rc == 0) rc = gnutls_pubkey_import_privkey(pub, priv, 0, 0);
    gnutls_privkey_deinit(priv);
    gnutls_x509_privkey_deinit(x509);
  }
  if (rc != 0) {
    gnutls_pubkey_deinit(pub);
    return tl::unexpected(bad(why, "PEM holds no usable public key, certificate or private key",
                              gnutls_strerror(rc)));
  }
  auto key = describe_public(pub, why);
  gnutls_pubkey_deinit(pub);
  if (!key) return tl::unexpected(key.error());
  key->private_pem = std::move(private_pem);
  return std::vector<Key>{std::move(*key)};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string base64url_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() * 4 + 2) / 3);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) {
    out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  }
  return out;
}

Result<std::string> base64url_decode(std::string_view text) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t i = 0;
  for (; i < text.size() && text[i] != '='; ++i) {
    int v = b64_value(text[i]);
    if (v < 0) {
      return fail(ErrorCode::kDecode, "invalid base64url");
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  for (; i < text.size(); ++i) {
    if (text[i] != '=') {
      return fail(ErrorCode::kDecode, "invalid base64url padding");
    }
  }
  return out;
}

Result<std::vector<Key>> parse_keys(std::string_view text, std::string* why) {
  std::string_view t = trim(text);
  if (t.empty()) {
    return tl::unexpected(bad(why, "key file is empty"));
  }
  if (t.front() == '{') {
    return parse_json(t, why);
  }
  if (t.starts_with("-----BEGIN")) {
    return parse_pem(t, why);
  }
  auto decoded = base64url_decode(t);
  if (!decoded || trim(*decoded).empty() || trim(*decoded).front() != '{') {
    return tl::unexpected(bad(why, "key is neither JWK, base64url JWK nor PEM"));
  }
  return parse_json(*decoded, why);
}

Result<std::vector<Key>> load_key_file(const std::string& path, std::string* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return tl::unexpected(bad(why, "cannot read key file", path));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string inner;
  auto keys = parse_keys(ss.str(), &inner);
  if (!keys) {
    return tl::unexpected(bad(why, "bad key file", path + ": " + inner));
  }
  return keys;
}

}  // namespace moqd::auth
