// Keys, tokens and grants: every refusal the issue names, each on its own.
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <gtest/gtest.h>

#include "auth/grant.h"
#include "auth/key.h"
#include "auth/token.h"

namespace moqd::auth {
namespace {

constexpr int64_t kNow = 1'800'000'000;

// 32 bytes, base64url: the shape `moq-token generate` writes for HS256.
const char* kHmacJwk =
    R"({"kty":"oct","alg":"HS256","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTMyYg","kid":"k1","key_ops":["sign","verify"]})";

Key only_key(std::string_view text) {
  std::string why;
  auto keys = parse_keys(text, &why);
  EXPECT_TRUE(keys) << why;
  EXPECT_EQ(keys->size(), 1u);
  return keys->front();
}

std::string ec_private_pem(gnutls_ecc_curve_t curve) {
  gnutls_x509_privkey_t key;
  gnutls_x509_privkey_init(&key);
  EXPECT_EQ(gnutls_x509_privkey_generate(key, GNUTLS_PK_EC, GNUTLS_CURVE_TO_BITS(curve), 0), 0);
  gnutls_datum_t out{};
  EXPECT_EQ(gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &out), 0);
  std::string pem(reinterpret_cast<char*>(out.data), out.size);
  gnutls_free(out.data);
  gnutls_x509_privkey_deinit(key);
  return pem;
}

Claims claims(std::string root, std::vector<std::string> put, std::vector<std::string> get) {
  Claims c;
  c.root = std::move(root);
  c.put = std::move(put);
  c.get = std::move(get);
  c.exp = kNow + 3600;
  c.iat = kNow;
  return c;
}

std::string sign(const Key& k, const Claims& c) {
  std::string why;
  auto t = sign_token(k, c, &why);
  EXPECT_TRUE(t) << why;
  return t ? *t : "";
}

Refusal refusal_of(std::string_view token, const KeySet& keys, int64_t now = kNow) {
  auto r = verify_token(token, keys, now);
  EXPECT_FALSE(r) << "token was accepted";
  return r ? Refusal::kMalformed : r.error().reason;
}

TEST(KeyTest, HmacJwkPlainAndBase64urlParseTheSame) {
  Key plain = only_key(kHmacJwk);
  Key b64 = only_key(base64url_encode(kHmacJwk));
  EXPECT_EQ(plain.family, KeyFamily::kHmac);
  EXPECT_EQ(plain.alg, "HS256");
  EXPECT_EQ(plain.kid, "k1");
  EXPECT_EQ(plain.secret, "secret-secret-secret-secret-32b");
  EXPECT_EQ(b64.secret, plain.secret);
}

TEST(KeyTest, JwkSetYieldsEveryKey) {
  auto keys = parse_keys(R"({"keys":[{"kty":"oct","alg":"HS256","k":"YWFh","kid":"a"},
                                     {"kty":"oct","alg":"HS512","k":"YmJi","kid":"b"}]})");
  ASSERT_TRUE(keys);
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[1].kid, "b");
  EXPECT_EQ((*keys)[1].alg, "HS512");
}

TEST(KeyTest, UnsupportedKeysAreErrorsNotSilentlyOpen) {
  EXPECT_FALSE(parse_keys(R"({"kty":"OKP","crv":"Ed25519","alg":"EdDSA","x":"AAAA"})"));
  EXPECT_FALSE(parse_keys(R"({"kty":"oct","alg":"RS256","k":"YWFh"})"));
  EXPECT_FALSE(parse_keys("not a key"));
  EXPECT_FALSE(parse_keys(""));
}

TEST(TokenTest, HmacTokenVerifiesWithItsClaims) {
  Key k = only_key(kHmacJwk);
  std::string t = sign(k, claims("room", {"alice"}, {""}));
  auto c = verify_token(t, KeySet{{k}}, kNow);
  ASSERT_TRUE(c) << c.error().detail;
  EXPECT_EQ(c->root, "room");
  EXPECT_EQ(c->put, std::vector<std::string>{"alice"});
  EXPECT_EQ(c->get, std::vector<std::string>{""});
  EXPECT_EQ(c->exp, kNow + 3600);
}

TEST(TokenTest, EcPemPrivateKeySignsAndItsPublicHalfVerifies) {
  for (auto curve : {GNUTLS_ECC_CURVE_SECP256R1, GNUTLS_ECC_CURVE_SECP384R1}) {
    Key priv = only_key(ec_private_pem(curve));
    EXPECT_EQ(priv.alg, curve == GNUTLS_ECC_CURVE_SECP256R1 ? "ES256" : "ES384");
    std::string t = sign(priv, claims("", {""}, {}));
    // JWS sizes (RFC 7518 §3.4), which jose and @moq/token insist on: r || s, 32 or 48 bytes each.
    auto sig = base64url_decode(t.substr(t.rfind('.') + 1));
    ASSERT_TRUE(sig);
    EXPECT_EQ(sig->size(), curve == GNUTLS_ECC_CURVE_SECP256R1 ? 64u : 96u);
    Key pub = only_key(priv.public_pem);
    EXPECT_FALSE(pub.can_sign());
    auto c = verify_token(t, KeySet{{pub}}, kNow);
    EXPECT_TRUE(c) << (c ? "" : c.error().detail);
  }
}

TEST(TokenTest, WrongSignatureIsRefused) {
  Key k = only_key(kHmacJwk);
  Key other = k;
  other.secret = "another-secret-another-secret-32";
  EXPECT_EQ(refusal_of(sign(other, claims("", {""}, {})), KeySet{{k}}), Refusal::kBadSignature);
  // A flipped byte in the payload breaks an EC signature too.
  Key ec = only_key(ec_private_pem(GNUTLS_ECC_CURVE_SECP256R1));
  std::string t = sign(ec, claims("", {""}, {}));
  size_t dot = t.find('.');
  t[dot + 3] = t[dot + 3] == 'A' ? 'B' : 'A';
  EXPECT_EQ(refusal_of(t, KeySet{{only_key(ec.public_pem)}}), Refusal::kBadSignature);
}

TEST(TokenTest, AlgNoneIsRefused) {
  Key k = only_key(kHmacJwk);
  std::string good = sign(k, claims("", {""}, {}));
  std::string payload = good.substr(good.find('.') + 1, good.rfind('.') - good.find('.') - 1);
  for (const char* header : {R"({"alg":"none","typ":"JWT"})", R"({"typ":"JWT","kid":"k1"})",
                             R"({"alg":"none","kid":"k1"})"}) {
    std::string t = base64url_encode(header) + "." + payload + ".";
    EXPECT_EQ(refusal_of(t, KeySet{{k}}), Refusal::kAlgNone) << header;
  }
}

TEST(TokenTest, WrongAlgorithmIsRefused) {
  Key k = only_key(kHmacJwk);
  Key hs384 = k;
  hs384.alg = "HS384";  // same secret and kid, another algorithm
  EXPECT_EQ(refusal_of(sign(hs384, claims("", {""}, {})), KeySet{{k}}), Refusal::kWrongAlg);
  // The classic confusion: an HMAC token "signed" with the RSA/EC public key as its secret.
  Key ec = only_key(only_key(ec_private_pem(GNUTLS_ECC_CURVE_SECP256R1)).public_pem);
  Key confused;
  confused.family = KeyFamily::kHmac;
  confused.alg = "HS256";
  confused.secret = ec.public_pem;
  EXPECT_EQ(refusal_of(sign(confused, claims("", {""}, {})), KeySet{{ec}}), Refusal::kWrongAlg);
}

TEST(TokenTest, MissingKidIsRefusedWhenSeveralKeysCouldApply) {
  Key a = only_key(kHmacJwk);
  Key b = a;
  b.kid = "k2";
  b.secret = "another-secret-another-secret-32";
  Key anonymous = a;
  anonymous.kid = "";
  std::string no_kid = sign(anonymous, claims("", {""}, {}));
  EXPECT_EQ(refusal_of(no_kid, KeySet{{a, b}}), Refusal::kMissingKid);
  // With the single configured key, no kid is needed (moq-relay's --auth-key).
  EXPECT_TRUE(verify_token(no_kid, KeySet{{a}}, kNow));
  // A kid nobody has.
  Key c = a;
  c.kid = "k9";
  EXPECT_EQ(refusal_of(sign(c, claims("", {""}, {})), KeySet{{a, b}}), Refusal::kUnknownKid);
  // The right kid picks the right key among several.
  EXPECT_TRUE(verify_token(sign(b, claims("", {""}, {})), KeySet{{a, b}}, kNow));
}

TEST(TokenTest, ExpiredTokenIsRefusedAtAndAfterExp) {
  Key k = only_key(kHmacJwk);
  std::string t = sign(k, claims("", {""}, {}));
  EXPECT_TRUE(verify_token(t, KeySet{{k}}, kNow + 3599));
  EXPECT_EQ(refusal_of(t, KeySet{{k}}, kNow + 3600), Refusal::kExpired);
}

TEST(TokenTest, MalformedTokensAreRefused) {
  KeySet keys{{only_key(kHmacJwk)}};
  for (const char* t : {"", "abc", "a.b", "a.b.c.d", "!!.??.##"}) {
    EXPECT_EQ(refusal_of(t, keys), Refusal::kMalformed) << t;
  }
}

TEST(GrantTest, RootConfinesTheConnectPath) {
  Claims c = claims("room", {"alice"}, {""});
  EXPECT_TRUE(grant_for_claims(c, "room", "jwt"));
  EXPECT_TRUE(grant_for_claims(c, "room/alice", "jwt"));
  EXPECT_EQ(grant_for_claims(c, "other", "jwt").error().reason, Refusal::kWrongRoot);
  EXPECT_EQ(grant_for_claims(c, "roomy", "jwt").error().reason, Refusal::kWrongRoot);
  EXPECT_EQ(grant_for_claims(c, "", "jwt").error().reason, Refusal::kWrongRoot);
}

TEST(GrantTest, PutAndGetAllowAndRefuseRelativeToRoot) {
  auto g = grant_for_claims(claims("room", {"alice"}, {"bob", "carol/cam"}), "room", "jwt");
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->may_publish("room/alice"));
  EXPECT_TRUE(g->may_publish("room/alice/cam"));
  EXPECT_FALSE(g->may_publish("room/alicex"));
  EXPECT_FALSE(g->may_publish("room/bob"));
  EXPECT_TRUE(g->may_subscribe("room/bob"));
  EXPECT_TRUE(g->may_subscribe("room/carol/cam"));
  EXPECT_FALSE(g->may_subscribe("room/carol"));
  EXPECT_FALSE(g->may_subscribe("room/alice"));
  // Discovery of the root is allowed (and filtered by may_subscribe), of an unrelated prefix not.
  EXPECT_TRUE(g->may_discover("room"));
  EXPECT_TRUE(g->may_discover("room/bob/x"));
  EXPECT_FALSE(g->may_discover("room/alice"));
  EXPECT_FALSE(g->may_discover("other"));
  // Absent put grants no publishing at all.
  Claims read_only = claims("room", {}, {""});
  read_only.put.reset();
  auto r = grant_for_claims(read_only, "room", "jwt");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->may_publish("room/x"));
  EXPECT_TRUE(r->may_subscribe("room/x"));
}

TEST(GrantTest, PolicyUsesTokensPublicPrefixesOrNothing) {
  Key k = only_key(kHmacJwk);
  AuthPolicy open;
  EXPECT_EQ(authenticate(open, "x", "", kNow)->source, "open");

  AuthPolicy p;
  p.keys.keys.push_back(k);
  p.public_prefixes.push_back("anon");
  std::string t = sign(k, claims("room", {""}, {""}));
  auto g = authenticate(p, "room", "a=1&jwt=" + t, kNow);
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->may_publish("room/x"));
  EXPECT_FALSE(g->may_publish("anon/x"));  // a token replaces the public grant
  auto anon = authenticate(p, "", "", kNow);
  ASSERT_TRUE(anon);
  EXPECT_TRUE(anon->may_subscribe("anon/x"));
  EXPECT_FALSE(anon->may_subscribe("room/x"));
  EXPECT_EQ(authenticate(p, "room", "", kNow).error().reason, Refusal::kNoPermission);
  EXPECT_EQ(authenticate(p, "room", "jwt=garbage", kNow).error().reason, Refusal::kMalformed);
}

TEST(GrantTest, AuthServicePatterns) {
  EXPECT_EQ(parse_pattern("room", "**"), (Pattern{"room", true}));
  EXPECT_EQ(parse_pattern("room", "alice/**"), (Pattern{"room/alice", true}));
  EXPECT_EQ(parse_pattern("room", "alice"), (Pattern{"room/alice", false}));
  EXPECT_TRUE(parse_pattern("", "a").matches("a"));
  EXPECT_FALSE(parse_pattern("", "a").matches("a/b"));
}

TEST(ServiceTest, RequestNamesTheSessionAndTheGrantIsRead) {
  ServiceRequest r{"00ff", "relay-1", "websocket", "127.0.0.1:5", "", "/demo/room", "jwt=abc"};
  EXPECT_EQ(service_request_json(r),
            R"({"id":"00ff","event":"connect","node":"relay-1","transport":"websocket",)"
            R"("remote":"127.0.0.1:5","path":"/demo/room","query":"jwt=abc"})");
  auto g = grant_from_service(R"({"publish":["alice/**"],"subscribe":["**"],"expires":1800000600})",
                              "demo/room", kNow);
  ASSERT_TRUE(g) << g.error().detail;
  EXPECT_TRUE(g->may_publish("demo/room/alice/cam"));
  EXPECT_FALSE(g->may_publish("demo/room/bob"));
  EXPECT_TRUE(g->may_subscribe("demo/room/bob"));
  EXPECT_FALSE(g->may_subscribe("demo/other"));
  EXPECT_EQ(g->expires, 1800000600);
  // An alias root replaces the dialed path.
  auto aliased = grant_from_service(R"({"root":"x7k2","subscribe":["cam"]})", "demo/room", kNow);
  ASSERT_TRUE(aliased);
  EXPECT_TRUE(aliased->may_subscribe("x7k2/cam"));
  EXPECT_FALSE(aliased->may_subscribe("x7k2/cam/hd"));
}

TEST(ServiceTest, UselessExpiredOrMalformedGrantsRefuse) {
  EXPECT_EQ(grant_from_service("{}", "r", kNow).error().reason, Refusal::kNoPermission);
  EXPECT_EQ(grant_from_service(R"({"publish":["**"],"expires":1})", "r", kNow).error().reason,
            Refusal::kExpired);
  for (const char* bad : {"", "[]", "nope", R"({"publish":"**"})", R"({"publish":[1]})",
                          R"({"subscribe":["a"],"expires":"soon"})", R"({"root":5,"publish":["a"]})"}) {
    EXPECT_EQ(grant_from_service(bad, "r", kNow).error().reason, Refusal::kServiceFailed) << bad;
  }
}

TEST(QueryTest, JwtParamIsFoundAndDecoded) {
  EXPECT_EQ(query_param("jwt=abc", "jwt"), "abc");
  EXPECT_EQ(query_param("x=1&jwt=a%2Eb&y", "jwt"), "a.b");
  EXPECT_EQ(query_param("xjwt=1", "jwt"), std::nullopt);
  EXPECT_EQ(query_param("", "jwt"), std::nullopt);
}

}  // namespace
}  // namespace moqd::auth
