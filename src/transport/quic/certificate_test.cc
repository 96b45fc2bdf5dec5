#include "transport/quic/certificate.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace moqd::transport::quic {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

const WallTime kNow = std::chrono::system_clock::from_time_t(1'700'000'000);

// A fresh directory for PEM files, removed with its files at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/moqd_cert_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    for (const auto& f : files_) {
      unlink(f.c_str());
    }
    rmdir(path_.c_str());
  }
  std::string write(const std::string& name, const std::string& content) {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    files_.push_back(p);
    return p;
  }
  std::string path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
  std::vector<std::string> files_;
};

std::unique_ptr<Certificate> generate(WallTime now = kNow) {
  auto cert = Certificate::generate_self_signed(now);
  EXPECT_TRUE(cert.has_value());
  return cert ? std::move(*cert) : nullptr;
}

// The leaf parsed independently of Certificate.
struct ParsedCrt {
  explicit ParsedCrt(std::span<const uint8_t> der) {
    gnutls_x509_crt_init(&crt);
    const gnutls_datum_t d{const_cast<unsigned char*>(der.data()),
                           static_cast<unsigned int>(der.size())};
    rv = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_DER);
  }
  ~ParsedCrt() { gnutls_x509_crt_deinit(crt); }
  gnutls_x509_crt_t crt = nullptr;
  int rv = -1;
};

TEST(CertificateTest, GeneratedCertificateParsesAsEcdsaP256V3) {
  auto cert = generate();
  ASSERT_NE(cert, nullptr);
  ParsedCrt p(cert->der());
  ASSERT_EQ(p.rv, 0);
  EXPECT_EQ(gnutls_x509_crt_get_version(p.crt), 3);
  unsigned int bits = 0;
  EXPECT_EQ(gnutls_x509_crt_get_pk_algorithm(p.crt, &bits), GNUTLS_PK_ECDSA);
  gnutls_ecc_curve_t curve = GNUTLS_ECC_CURVE_INVALID;
  gnutls_datum_t x{}, y{};
  ASSERT_EQ(gnutls_x509_crt_get_pk_ecc_raw(p.crt, &curve, &x, &y), 0);
  EXPECT_EQ(curve, GNUTLS_ECC_CURVE_SECP256R1);
  gnutls_free(x.data);
  gnutls_free(y.data);
  EXPECT_EQ(gnutls_x509_crt_get_signature_algorithm(p.crt), GNUTLS_SIGN_ECDSA_SHA256);
  unsigned int usage = 0, critical = 0;
  ASSERT_EQ(gnutls_x509_crt_get_key_usage(p.crt, &usage, &critical), 0);
  EXPECT_EQ(usage, static_cast<unsigned>(GNUTLS_KEY_DIGITAL_SIGNATURE));
  char oid[128];
  size_t oid_size = sizeof(oid);
  ASSERT_EQ(gnutls_x509_crt_get_key_purpose_oid(p.crt, 0, oid, &oid_size, nullptr), 0);
  EXPECT_STREQ(oid, GNUTLS_KP_TLS_WWW_SERVER);
  char cn[64];
  size_t cn_size = sizeof(cn);
  ASSERT_EQ(gnutls_x509_crt_get_dn_by_oid(p.crt, GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &cn_size),
            0);
  EXPECT_STREQ(cn, "localhost");
}

TEST(CertificateTest, GeneratedCertificateNamesLocalhostAndLoopbackIps) {
  auto cert = generate();
  ASSERT_NE(cert, nullptr);
  ParsedCrt p(cert->der());
  ASSERT_EQ(p.rv, 0);
  std::vector<std::pair<int, std::string>> sans;
  for (unsigned int i = 0;; ++i) {
    char buf[256];
    size_t size = sizeof(buf);
    int type = gnutls_x509_crt_get_subject_alt_name(p.crt, i, buf, &size, nullptr);
    if (type < 0) {
      break;
    }
    sans.emplace_back(type, std::string(buf, size));
  }
  uint8_t v4[4], v6[16];
  inet_pton(AF_INET, "127.0.0.1", v4);
  inet_pton(AF_INET6, "::1", v6);
  std::vector<std::pair<int, std::string>> want = {
      {GNUTLS_SAN_DNSNAME, "localhost"},
      {GNUTLS_SAN_IPADDRESS, std::string(reinterpret_cast<char*>(v4), 4)},
      {GNUTLS_SAN_IPADDRESS, std::string(reinterpret_cast<char*>(v6), 16)},
  };
  EXPECT_EQ(sans, want);
  EXPECT_TRUE(gnutls_x509_crt_check_hostname(p.crt, "localhost"));
  EXPECT_TRUE(gnutls_x509_crt_check_ip(p.crt, v4, 4, 0));
  EXPECT_TRUE(gnutls_x509_crt_check_ip(p.crt, v6, 16, 0));
  EXPECT_FALSE(gnutls_x509_crt_check_hostname(p.crt, "example.com"));
}

TEST(CertificateTest, ValidityIsUnderFourteenDaysAndBackdated) {
  auto cert = generate();
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(cert->not_before(), kNow - Certificate::kBackdate);
  EXPECT_EQ(cert->not_after(), kNow + Certificate::kDefaultValidity);
  EXPECT_LT(cert->not_after() - cert->not_before(), hours(14 * 24));
  ParsedCrt p(cert->der());
  ASSERT_EQ(p.rv, 0);
  EXPECT_EQ(std::chrono::system_clock::from_time_t(gnutls_x509_crt_get_expiration_time(p.crt)),
            cert->not_after());
}

TEST(CertificateTest, ValidityOutsideBoundsIsRefused) {
  EXPECT_EQ(Certificate::generate_self_signed(kNow, hours(14 * 24)).error().code,
            ErrorCode::kBoundsExceeded);
  EXPECT_EQ(Certificate::generate_self_signed(kNow, hours(14 * 24) - seconds(60)).error().code,
            ErrorCode::kBoundsExceeded);
  EXPECT_FALSE(Certificate::generate_self_signed(kNow, seconds(0)).has_value());
  EXPECT_TRUE(Certificate::generate_self_signed(kNow, hours(14 * 24) - seconds(61)).has_value());
}

TEST(CertificateTest, Sha256HexMatchesIndependentHashOfDer) {
  auto cert = generate();
  ASSERT_NE(cert, nullptr);
  uint8_t digest[32];
  ASSERT_EQ(gnutls_hash_fast(GNUTLS_DIG_SHA256, cert->der().data(), cert->der().size(), digest), 0);
  std::string hex;
  for (uint8_t b : digest) {
    char two[3];
    std::snprintf(two, sizeof(two), "%02x", b);
    hex += two;
  }
  EXPECT_EQ(cert->sha256_hex(), hex);
  EXPECT_EQ(cert->sha256_hex().size(), 64u);
  EXPECT_EQ(to_hex(cert->sha256()), hex);
}

TEST(CertificateTest, TwoGenerationsDiffer) {
  auto a = generate();
  auto b = generate();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a->sha256_hex(), b->sha256_hex());
  EXPECT_NE(a->key_pem(), b->key_pem());
  ASSERT_NE(a->credentials(), nullptr);
}

TEST(CertificateTest, LoadRoundTripsGeneratedPem) {
  auto gen = generate();
  ASSERT_NE(gen, nullptr);
  TempDir dir;
  auto loaded = Certificate::load(dir.write("cert.pem", gen->cert_pem()),
                                  dir.write("key.pem", gen->key_pem()));
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ((*loaded)->sha256_hex(), gen->sha256_hex());
  EXPECT_EQ((*loaded)->not_before(), gen->not_before());
  EXPECT_EQ((*loaded)->not_after(), gen->not_after());
  EXPECT_NE((*loaded)->credentials(), nullptr);
}

TEST(CertificateTest, LoadMissingFileFails) {
  auto gen = generate();
  ASSERT_NE(gen, nullptr);
  TempDir dir;
  std::string key = dir.write("key.pem", gen->key_pem());
  std::string cert = dir.write("cert.pem", gen->cert_pem());
  EXPECT_EQ(Certificate::load(dir.path("absent.pem"), key).error().code, ErrorCode::kTransport);
  EXPECT_EQ(Certificate::load(cert, dir.path("absent.pem")).error().code, ErrorCode::kTransport);
}

TEST(CertificateTest, LoadGarbageFails) {
  auto gen = generate();
  ASSERT_NE(gen, nullptr);
  TempDir dir;
  std::string garbage = dir.write("garbage.pem", "-----BEGIN CERTIFICATE-----\nnot base64!\n");
  std::string empty = dir.write("empty.pem", "");
  std::string key = dir.write("key.pem", gen->key_pem());
  std::string cert = dir.write("cert.pem", gen->cert_pem());
  EXPECT_FALSE(Certificate::load(garbage, key).has_value());
  EXPECT_FALSE(Certificate::load(empty, key).has_value());
  EXPECT_FALSE(Certificate::load(cert, garbage).has_value());
  EXPECT_FALSE(Certificate::load(cert, cert).has_value());
}

TEST(CertificateTest, LoadRejectsKeyOfAnotherCertificate) {
  auto a = generate();
  auto b = generate();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  TempDir dir;
  auto loaded =
      Certificate::load(dir.write("a.pem", a->cert_pem()), dir.write("b.key", b->key_pem()));
  EXPECT_EQ(loaded.error().code, ErrorCode::kTransport);
}

TEST(CertificateTest, NeedsRenewalOnceAThirdOfValidityIsLeft) {
  auto cert = generate();
  ASSERT_NE(cert, nullptr);
  const auto third = (cert->not_after() - cert->not_before()) / 3;
  EXPECT_FALSE(cert->needs_renewal(kNow));
  EXPECT_FALSE(cert->needs_renewal(cert->not_after() - third));
  EXPECT_TRUE(cert->needs_renewal(cert->not_after() - third + seconds(1)));
  EXPECT_TRUE(cert->needs_renewal(cert->not_after()));
  EXPECT_TRUE(cert->needs_renewal(cert->not_after() + hours(1)));
  // About 8.7 days into a 13-day certificate.
  EXPECT_FALSE(cert->needs_renewal(kNow + hours(8 * 24)));
  EXPECT_TRUE(cert->needs_renewal(kNow + hours(9 * 24)));
}

}  // namespace
}  // namespace moqd::transport::quic
