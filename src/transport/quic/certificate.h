#pragma once
// moqd's server certificate: a GnuTLS credential (chain + private key) with the leaf's DER and its
// SHA-256, the value GET /certificate.sha256 serves and browsers pin via serverCertificateHashes.
// Made by load() (--tls-cert/--tls-key, PEM) or generate_self_signed() (no flags: ECDSA P-256 for
// localhost, 127.0.0.1 and ::1, valid 13 days so that it stays under the browsers' 14-day limit).
//
// Immutable after creation, so one Certificate may serve many TLS sessions on one thread; GnuTLS
// credentials are not documented as safe to share across threads, so each worker holds its own.
// It must outlive every session made from it (tls.h). Renewal means making a new Certificate and
// using it for new sessions; existing sessions keep the old one alive.
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/error.h"

namespace moqd::transport::quic {

// Certificates carry wall-clock times, unlike the steady moqd::Clock.
using WallTime = std::chrono::system_clock::time_point;
using Sha256 = std::array<uint8_t, 32>;

struct CredentialsDeleter {
  void operator()(gnutls_certificate_credentials_st* cred) const {
    gnutls_certificate_free_credentials(cred);
  }
};
using CredentialsPtr = std::unique_ptr<gnutls_certificate_credentials_st, CredentialsDeleter>;

class Certificate {
 public:
  // Validity of generated certificates: 13 days. Browsers reject serverCertificateHashes for
  // certificates whose whole validity period exceeds 14 days.
  static constexpr std::chrono::seconds kDefaultValidity = std::chrono::hours(13 * 24);
  static constexpr std::chrono::seconds kMaxValidity = std::chrono::hours(14 * 24);
  // not_before is set this far before `now`, so a peer whose clock lags a little accepts it.
  static constexpr std::chrono::seconds kBackdate = std::chrono::minutes(1);

  // Reads a PEM certificate chain (leaf first) and its PEM private key. Fails (kTransport) when a
  // file is missing or unreadable, is not PEM, or the key does not match the leaf.
  [[nodiscard]] static Result<std::unique_ptr<Certificate>> load(const std::string& cert_pem_path,
                                                                 const std::string& key_pem_path);

  // A fresh ECDSA P-256 key and a self-signed X.509 v3 certificate (SHA-256): CN and SAN DNS
  // localhost, SAN IP 127.0.0.1 and ::1, digitalSignature, serverAuth, CA:FALSE, valid from
  // now - kBackdate to now + validity. Fails (kBoundsExceeded) unless 0 < validity + kBackdate
  // < kMaxValidity. Takes about a millisecond.
  [[nodiscard]] static Result<std::unique_ptr<Certificate>> generate_self_signed(
      WallTime now = std::chrono::system_clock::now(),
      std::chrono::seconds validity = kDefaultValidity);

  Certificate(const Certificate&) = delete;
  Certificate& operator=(const Certificate&) = delete;

  // For gnutls_credentials_set(GNUTLS_CRD_CERTIFICATE); owned by this object.
  gnutls_certificate_credentials_t credentials() const { return credentials_.get(); }
  // DER of the leaf certificate.
  std::span<const uint8_t> der() const { return der_; }
  // SHA-256 of der().
  const Sha256& sha256() const { return sha256_; }
  // Lowercase hex of sha256(), 64 characters: the body of GET /certificate.sha256.
  const std::string& sha256_hex() const { return sha256_hex_; }
  // PEM of the chain and of the private key (generated ones: as generated; loaded: as read).
  const std::string& cert_pem() const { return cert_pem_; }
  const std::string& key_pem() const { return key_pem_; }
  // The leaf's validity period, at the certificate's one-second resolution.
  WallTime not_before() const { return not_before_; }
  WallTime not_after() const { return not_after_; }

  // True once less than a third of the validity period is left at `now` (also when expired):
  // for a 13-day certificate that is after about 8.7 days, which leaves days of overlap for
  // clients that fetched the old hash to reconnect before it expires.
  bool needs_renewal(WallTime now) const;

 private:
  Certificate() = default;
  // Fills der_, hashes and validity from the leaf.
  Status set_leaf(gnutls_x509_crt_t leaf);

  CredentialsPtr credentials_;
  std::vector<uint8_t> der_;
  Sha256 sha256_{};
  std::string sha256_hex_;
  std::string cert_pem_;
  std::string key_pem_;
  WallTime not_before_{};
  WallTime not_after_{};
};

// Lowercase hex of `bytes`.
std::string to_hex(std::span<const uint8_t> bytes);

}  // namespace moqd::transport::quic
