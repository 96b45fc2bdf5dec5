#pragma once
// GnuTLS sessions configured the way moqd needs them: TLS 1.3 only, AES-128-GCM preferred, ALPN
// mandatory, and (Binding::kQuic) hooked into ngtcp2 1.11 per the recipe in
// shared/research/ngtcp2-1.11.md §3 (unchanged since 0.12). Binding::kStream makes the same
// session for TLS over a byte stream (TLS on the TCP port, and the handshake tests): the caller
// then sets GnuTLS transport push/pull functions itself.
//
// For kQuic the caller still calls ngtcp2_conn_set_tls_native_handle(conn, session.get()) once
// the ngtcp2_conn exists. Sessions are single-threaded, like the connection that owns them.
// Server sessions borrow the Certificate's credentials: the Certificate must outlive them. Client
// sessions own their credentials, expected name and pinned hash.
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2_crypto.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "base/error.h"
#include "transport/quic/certificate.h"

namespace moqd::transport::quic {

// "+AES-128-GCM" first because GnuTLS's NORMAL prefers AES-256-GCM; no compat mode (RFC 9001 §8.4).
inline constexpr const char* kTlsPriority =
    "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
    "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:%DISABLE_TLS13_COMPAT_MODE";
// GnuTLS 3.7 keeps at most 8 ALPN protocols per gnutls_alpn_set_protocols (it silently drops the
// rest): a client session refuses more; a server session hands GnuTLS only the protocol it picked
// from the ClientHello, so its list has no such bound.
inline constexpr size_t kMaxAlpns = 8;

enum class Binding {
  kQuic,    // ngtcp2_crypto_gnutls_configure_*_session; conn_ref required
  kStream,  // plain TLS records; the caller sets the transport functions
};

enum class VerifyMode {
  kSystem,       // the system trust store, and the server name must match the certificate
  kCaFile,       // only the CAs (or self-signed certificates) in ca_file; name must match
  kFingerprint,  // only the leaf whose DER has SHA-256 == fingerprint; names and dates ignored,
                 // like browsers' serverCertificateHashes
  kInsecure,     // anything (--tls-insecure)
};

struct Verification {
  VerifyMode mode = VerifyMode::kSystem;
  std::string ca_file;   // PEM, for kCaFile
  Sha256 fingerprint{};  // for kFingerprint
};

// Parses a --tls-fingerprint value: 64 hex digits, either case, optionally separated by ':'.
[[nodiscard]] Result<Sha256> parse_sha256_hex(std::string_view hex);

struct GnutlsSessionDeleter {
  void operator()(gnutls_session_int* s) const { gnutls_deinit(s); }
};
using GnutlsSessionPtr = std::unique_ptr<gnutls_session_int, GnutlsSessionDeleter>;

// What a client session's verification reads during the handshake; GnuTLS keeps pointers to it.
struct ClientVerifyState;
// What a server session's ClientHello hook reads: moqd's ALPNs in preference order.
struct ServerAlpnState;

// A GnuTLS session plus whatever it references that the session itself does not own. Movable;
// the gnutls_session_t stays the same across moves.
class TlsSession {
 public:
  TlsSession();
  // Takes the session and what it references; the session is destroyed first.
  explicit TlsSession(GnutlsSessionPtr session, CredentialsPtr own_credentials = {},
                      std::unique_ptr<ClientVerifyState> verify = {},
                      std::unique_ptr<ServerAlpnState> alpn = {});
  ~TlsSession();
  TlsSession(TlsSession&&) noexcept;
  TlsSession& operator=(TlsSession&&) noexcept;

  gnutls_session_t get() const { return session_.get(); }
  explicit operator bool() const { return session_ != nullptr; }

 private:
  // Declared before session_ so that they are destroyed after it.
  CredentialsPtr own_credentials_;
  std::unique_ptr<ClientVerifyState> verify_;
  std::unique_ptr<ServerAlpnState> alpn_;
  GnutlsSessionPtr session_;
};

// A server session presenting `cert`. `alpns` lists what moqd accepts, most preferred first, of
// any length; the first of them that the client also offers is selected (server precedence: a
// ClientHello hook reads the client's ALPN extension and gives GnuTLS only that one, see
// alpn_offer.h), and a client that offers none fails the handshake with no_application_protocol.
// For kQuic, `conn_ref` becomes the session pointer ngtcp2's crypto callbacks read and must outlive
// the session; for kStream it is ignored. Fails (kTransport) on an empty ALPN list, a name that is
// not 1 to 255 bytes, or a GnuTLS error.
[[nodiscard]] Result<TlsSession> make_server_session(const Certificate& cert,
                                                     std::span<const std::string> alpns,
                                                     ngtcp2_crypto_conn_ref* conn_ref,
                                                     Binding binding = Binding::kQuic);

// A client session for `server_name` (host name or IP literal: SNI is sent only for names;
// kSystem and kCaFile check the name against the certificate, so they need one), offering
// `alpns` in that order. Fails (kTransport) when the trust store or CA file cannot be loaded, or
// as make_server_session does.
[[nodiscard]] Result<TlsSession> make_client_session(std::string_view server_name,
                                                     std::span<const std::string> alpns,
                                                     const Verification& verification,
                                                     ngtcp2_crypto_conn_ref* conn_ref,
                                                     Binding binding = Binding::kQuic);

// The ALPN protocol the handshake selected; empty before that or when none was.
std::string selected_alpn(gnutls_session_t session);

}  // namespace moqd::transport::quic
