#include "transport/quic/certificate.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>

#include <cstring>

#include "base/log.h"

namespace moqd::transport::quic {
namespace {

struct CrtDeleter {
  void operator()(gnutls_x509_crt_int* crt) const { gnutls_x509_crt_deinit(crt); }
};
using CrtPtr = std::unique_ptr<gnutls_x509_crt_int, CrtDeleter>;

struct PrivkeyDeleter {
  void operator()(gnutls_x509_privkey_int* key) const { gnutls_x509_privkey_deinit(key); }
};
using PrivkeyPtr = std::unique_ptr<gnutls_x509_privkey_int, PrivkeyDeleter>;

// A gnutls_datum_t whose data GnuTLS allocated.
class Datum {
 public:
  Datum() = default;
  ~Datum() { gnutls_free(d_.data); }
  Datum(const Datum&) = delete;
  Datum& operator=(const Datum&) = delete;
  gnutls_datum_t* out() { return &d_; }
  const gnutls_datum_t* get() const { return &d_; }
  std::string str() const { return std::string(reinterpret_cast<const char*>(d_.data), d_.size); }

 private:
  gnutls_datum_t d_{nullptr, 0};
};

// Logs the GnuTLS reason (static text) and returns the typed error.
tl::unexpected<Error> gnutls_fail(ErrorCode code, const char* detail, int rv) {
  MOQD_LOG(kWarn, "tls: %s: %s", detail, gnutls_strerror(rv));
  return fail(code, detail);
}

Result<CrtPtr> new_crt() {
  gnutls_x509_crt_t crt = nullptr;
  if (int rv = gnutls_x509_crt_init(&crt); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "x509 init failed", rv);
  }
  return CrtPtr(crt);
}

Result<PrivkeyPtr> generate_p256_key() {
  gnutls_x509_privkey_t key = nullptr;
  if (int rv = gnutls_x509_privkey_init(&key); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "private key init failed", rv);
  }
  PrivkeyPtr owned(key);
  int rv = gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA,
                                        GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
  if (rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "ECDSA P-256 key generation failed", rv);
  }
  return owned;
}

Status set_random_serial(gnutls_x509_crt_t crt) {
  uint8_t serial[16];
  if (int rv = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof(serial)); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "random serial failed", rv);
  }
  serial[0] &= 0x7f;  // RFC 5280 §4.1.2.2: a positive integer.
  serial[0] |= 0x01;  // and no leading zero octet, so the DER stays 16 bytes.
  if (int rv = gnutls_x509_crt_set_serial(crt, serial, sizeof(serial)); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "set serial failed", rv);
  }
  return {};
}

Status add_localhost_names(gnutls_x509_crt_t crt) {
  static constexpr char kName[] = "localhost";
  uint8_t v4[4];
  uint8_t v6[16];
  inet_pton(AF_INET, "127.0.0.1", v4);
  inet_pton(AF_INET6, "::1", v6);
  int rv =
      gnutls_x509_crt_set_dn_by_oid(crt, GNUTLS_OID_X520_COMMON_NAME, 0, kName, sizeof(kName) - 1);
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, kName, sizeof(kName) - 1,
                                              GNUTLS_FSAN_APPEND);
  }
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v4, sizeof(v4),
                                              GNUTLS_FSAN_APPEND);
  }
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_IPADDRESS, v6, sizeof(v6),
                                              GNUTLS_FSAN_APPEND);
  }
  if (rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "set certificate names failed", rv);
  }
  return {};
}

Status set_server_extensions(gnutls_x509_crt_t crt) {
  int rv = gnutls_x509_crt_set_basic_constraints(crt, 0, -1);
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE);
  }
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 1);
  }
  uint8_t key_id[20];
  size_t key_id_size = sizeof(key_id);
  if (rv >= 0) {
    rv = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA1, key_id, &key_id_size);
  }
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_subject_key_id(crt, key_id, key_id_size);
  }
  if (rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "set certificate extensions failed", rv);
  }
  return {};
}

// The unsigned certificate: key, validity, names and extensions.
Result<CrtPtr> build_crt(gnutls_x509_privkey_t key, WallTime now, std::chrono::seconds validity) {
  auto crt = new_crt();
  if (!crt) {
    return tl::unexpected(crt.error());
  }
  gnutls_x509_crt_t c = crt->get();
  const time_t from = std::chrono::system_clock::to_time_t(now - Certificate::kBackdate);
  const time_t until = std::chrono::system_clock::to_time_t(now + validity);
  int rv = gnutls_x509_crt_set_version(c, 3);
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_key(c, key);
  }
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_activation_time(c, from);
  }
  if (rv >= 0) {
    rv = gnutls_x509_crt_set_expiration_time(c, until);
  }
  if (rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "set certificate fields failed", rv);
  }
  if (auto s = set_random_serial(c); !s) {
    return tl::unexpected(s.error());
  }
  if (auto s = add_localhost_names(c); !s) {
    return tl::unexpected(s.error());
  }
  if (auto s = set_server_extensions(c); !s) {
    return tl::unexpected(s.error());
  }
  return crt;
}

Result<CredentialsPtr> new_credentials() {
  gnutls_certificate_credentials_t cred = nullptr;
  if (int rv = gnutls_certificate_allocate_credentials(&cred); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "allocate credentials failed", rv);
  }
  return CredentialsPtr(cred);
}

Result<std::string> read_file(const std::string& path, const char* what) {
  Datum data;
  if (int rv = gnutls_load_file(path.c_str(), data.out()); rv < 0) {
    MOQD_LOG(kWarn, "tls: cannot read %s %s: %s", what, path.c_str(), gnutls_strerror(rv));
    return fail(ErrorCode::kTransport, "cannot read TLS certificate or key file");
  }
  return data.str();
}

// The first certificate of a PEM chain.
Result<CrtPtr> import_leaf(const std::string& pem) {
  gnutls_x509_crt_t* list = nullptr;
  unsigned int size = 0;
  const gnutls_datum_t in{reinterpret_cast<unsigned char*>(const_cast<char*>(pem.data())),
                          static_cast<unsigned int>(pem.size())};
  int rv = gnutls_x509_crt_list_import2(&list, &size, &in, GNUTLS_X509_FMT_PEM, 0);
  if (rv < 0 || size == 0) {
    return gnutls_fail(ErrorCode::kTransport, "certificate file holds no PEM certificate",
                       rv < 0 ? rv : GNUTLS_E_NO_CERTIFICATE_FOUND);
  }
  CrtPtr leaf(list[0]);
  for (unsigned int i = 1; i < size; ++i) {
    gnutls_x509_crt_deinit(list[i]);
  }
  gnutls_free(list);
  return leaf;
}

}  // namespace

std::string to_hex(std::span<const uint8_t> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

Status Certificate::set_leaf(gnutls_x509_crt_t leaf) {
  Datum der;
  if (int rv = gnutls_x509_crt_export2(leaf, GNUTLS_X509_FMT_DER, der.out()); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "certificate DER export failed", rv);
  }
  der_.assign(der.get()->data, der.get()->data + der.get()->size);
  if (int rv = gnutls_hash_fast(GNUTLS_DIG_SHA256, der_.data(), der_.size(), sha256_.data());
      rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "certificate hash failed", rv);
  }
  sha256_hex_ = to_hex(sha256_);
  const time_t from = gnutls_x509_crt_get_activation_time(leaf);
  const time_t until = gnutls_x509_crt_get_expiration_time(leaf);
  if (from == static_cast<time_t>(-1) || until == static_cast<time_t>(-1)) {
    return fail(ErrorCode::kTransport, "certificate validity unreadable");
  }
  not_before_ = std::chrono::system_clock::from_time_t(from);
  not_after_ = std::chrono::system_clock::from_time_t(until);
  return {};
}

Result<std::unique_ptr<Certificate>> Certificate::load(const std::string& cert_pem_path,
                                                       const std::string& key_pem_path) {
  auto cert_pem = read_file(cert_pem_path, "certificate");
  if (!cert_pem) {
    return tl::unexpected(cert_pem.error());
  }
  auto key_pem = read_file(key_pem_path, "key");
  if (!key_pem) {
    return tl::unexpected(key_pem.error());
  }
  auto leaf = import_leaf(*cert_pem);
  if (!leaf) {
    return tl::unexpected(leaf.error());
  }
  auto cred = new_credentials();
  if (!cred) {
    return tl::unexpected(cred.error());
  }
  const gnutls_datum_t cert_in{reinterpret_cast<unsigned char*>(cert_pem->data()),
                               static_cast<unsigned int>(cert_pem->size())};
  const gnutls_datum_t key_in{reinterpret_cast<unsigned char*>(key_pem->data()),
                              static_cast<unsigned int>(key_pem->size())};
  // Also checks that the key matches the leaf.
  int rv = gnutls_certificate_set_x509_key_mem2(cred->get(), &cert_in, &key_in, GNUTLS_X509_FMT_PEM,
                                                nullptr, 0);
  if (rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "TLS certificate or key rejected", rv);
  }
  std::unique_ptr<Certificate> out(new Certificate());
  if (auto s = out->set_leaf(leaf->get()); !s) {
    return tl::unexpected(s.error());
  }
  out->credentials_ = std::move(*cred);
  out->cert_pem_ = std::move(*cert_pem);
  out->key_pem_ = std::move(*key_pem);
  return out;
}

Result<std::unique_ptr<Certificate>> Certificate::generate_self_signed(
    WallTime now, std::chrono::seconds validity) {
  if (validity <= std::chrono::seconds(0) || validity + kBackdate >= kMaxValidity) {
    return fail(ErrorCode::kBoundsExceeded, "certificate validity must be under 14 days");
  }
  auto key = generate_p256_key();
  if (!key) {
    return tl::unexpected(key.error());
  }
  auto crt = build_crt(key->get(), now, validity);
  if (!crt) {
    return tl::unexpected(crt.error());
  }
  if (int rv = gnutls_x509_crt_sign2(crt->get(), crt->get(), key->get(), GNUTLS_DIG_SHA256, 0);
      rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "self-signing failed", rv);
  }
  auto cred = new_credentials();
  if (!cred) {
    return tl::unexpected(cred.error());
  }
  gnutls_x509_crt_t chain[] = {crt->get()};
  // Copies the certificate and key.
  if (int rv = gnutls_certificate_set_x509_key(cred->get(), chain, 1, key->get()); rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "install generated certificate failed", rv);
  }
  Datum cert_pem;
  Datum key_pem;
  int rv = gnutls_x509_crt_export2(crt->get(), GNUTLS_X509_FMT_PEM, cert_pem.out());
  if (rv >= 0) {
    rv = gnutls_x509_privkey_export2_pkcs8(key->get(), GNUTLS_X509_FMT_PEM, nullptr,
                                           GNUTLS_PKCS_PLAIN, key_pem.out());
  }
  if (rv < 0) {
    return gnutls_fail(ErrorCode::kTransport, "PEM export failed", rv);
  }
  std::unique_ptr<Certificate> out(new Certificate());
  if (auto s = out->set_leaf(crt->get()); !s) {
    return tl::unexpected(s.error());
  }
  out->credentials_ = std::move(*cred);
  out->cert_pem_ = cert_pem.str();
  out->key_pem_ = key_pem.str();
  return out;
}

bool Certificate::needs_renewal(WallTime now) const {
  const auto lifetime = not_after_ - not_before_;
  return not_after_ - now < lifetime / 3;
}

}  // namespace moqd::transport::quic
