#include "transport/quic/tls.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "base/log.h"
#include "transport/quic/alpn_offer.h"

namespace moqd::transport::quic {

// Heap-allocated so that its address, which GnuTLS holds, survives moves of the TlsSession.
struct ClientVerifyState {
  std::string server_name;  // gnutls_session_set_verify_cert keeps the pointer, not a copy
  Sha256 fingerprint{};
};

// Heap-allocated for the same reason; the server session's db pointer (see choose_server_alpn).
struct ServerAlpnState {
  std::vector<std::string> preference;  // most preferred first
};

TlsSession::TlsSession() = default;
TlsSession::TlsSession(GnutlsSessionPtr session, CredentialsPtr own_credentials,
                       std::unique_ptr<ClientVerifyState> verify,
                       std::unique_ptr<ServerAlpnState> alpn)
    : own_credentials_(std::move(own_credentials)),
      verify_(std::move(verify)),
      alpn_(std::move(alpn)),
      session_(std::move(session)) {}
TlsSession::~TlsSession() = default;
TlsSession::TlsSession(TlsSession&&) noexcept = default;
TlsSession& TlsSession::operator=(TlsSession&&) noexcept = default;

namespace {

// RFC 7301 §3.1: a protocol name is 1 to 255 bytes.
constexpr size_t kMaxAlpnLength = 255;

tl::unexpected<Error> gnutls_fail(const char* detail, int rv) {
  MOQD_LOG(kWarn, "tls: %s: %s", detail, gnutls_strerror(rv));
  return fail(ErrorCode::kTransport, detail);
}

// kTlsPriority parsed once per process and shared by every session (GnuTLS only reads a priority
// cache once it is made): parsing it per session cost about 8 KB of heap per connection.
gnutls_priority_t shared_priority() {
  static gnutls_priority_t priority = [] {
    gnutls_priority_t p = nullptr;
    if (int rv = gnutls_priority_init(&p, kTlsPriority, nullptr); rv < 0) {
      MOQD_LOG(kError, "tls: priority string rejected: %s", gnutls_strerror(rv));
      return static_cast<gnutls_priority_t>(nullptr);
    }
    return p;
  }();
  return priority;
}

Result<GnutlsSessionPtr> init_session(unsigned int role, Binding binding) {
  unsigned int flags = role;
  if (binding == Binding::kQuic) {
    // RFC 9001 §8.3: QUIC has no EndOfEarlyData; tickets are sent when ngtcp2 asks.
    flags |= GNUTLS_NO_END_OF_EARLY_DATA;
    if (role == GNUTLS_SERVER) {
      flags |= GNUTLS_NO_AUTO_SEND_TICKET;
    }
  }
  gnutls_session_t s = nullptr;
  if (int rv = gnutls_init(&s, flags); rv < 0) {
    return gnutls_fail("gnutls_init failed", rv);
  }
  GnutlsSessionPtr session(s);
  gnutls_priority_t priority = shared_priority();
  if (priority == nullptr) {
    return fail(ErrorCode::kTransport, "TLS priority rejected");
  }
  if (int rv = gnutls_priority_set(s, priority); rv < 0) {
    return gnutls_fail("TLS priority rejected", rv);
  }
  return session;
}

Status bind_quic(gnutls_session_t s, unsigned int role, ngtcp2_crypto_conn_ref* conn_ref) {
  if (conn_ref == nullptr) {
    return fail(ErrorCode::kTransport, "QUIC TLS session needs a conn_ref");
  }
  const int rv = role == GNUTLS_SERVER ? ngtcp2_crypto_gnutls_configure_server_session(s)
                                       : ngtcp2_crypto_gnutls_configure_client_session(s);
  if (rv != 0) {
    return fail(ErrorCode::kTransport, "ngtcp2 TLS configuration failed");
  }
  gnutls_session_set_ptr(s, conn_ref);
  return {};
}

Status check_alpns(std::span<const std::string> alpns) {
  if (alpns.empty()) {
    return fail(ErrorCode::kTransport, "ALPN list is empty");
  }
  for (const std::string& alpn : alpns) {
    if (alpn.empty() || alpn.size() > kMaxAlpnLength) {
      return fail(ErrorCode::kTransport, "ALPN protocol must be 1 to 255 bytes");
    }
  }
  return {};
}

// Hands GnuTLS `alpns` (checked by check_alpns, at most kMaxAlpns).
Status set_alpns(gnutls_session_t s, std::span<const std::string> alpns, unsigned int flags) {
  if (alpns.empty() || alpns.size() > kMaxAlpns) {
    return fail(ErrorCode::kTransport, "ALPN list must hold 1 to 8 protocols");
  }
  std::vector<gnutls_datum_t> list;
  list.reserve(alpns.size());
  for (const std::string& alpn : alpns) {
    list.push_back({reinterpret_cast<unsigned char*>(const_cast<char*>(alpn.data())),
                    static_cast<unsigned int>(alpn.size())});
  }
  // GnuTLS copies the names.
  if (int rv = gnutls_alpn_set_protocols(s, list.data(), static_cast<unsigned>(list.size()), flags);
      rv < 0) {
    return gnutls_fail("ALPN setup failed", rv);
  }
  return {};
}

constexpr unsigned int kServerAlpnFlags = GNUTLS_ALPN_MANDATORY | GNUTLS_ALPN_SERVER_PRECEDENCE;

// The gnutls_ext_raw_parse callback: keeps the first ALPN extension's data.
int find_alpn_extension(void* ctx, unsigned int type, const unsigned char* data,
                        unsigned int size) {
  auto* found = static_cast<std::optional<std::span<const uint8_t>>*>(ctx);
  if (type == kAlpnExtensionType && !found->has_value()) {
    *found = std::span<const uint8_t>(data, size);
  }
  return 0;
}

// What GnuTLS is given for the ClientHello `hello` (its body): the first of `preference` that the
// client offers, alone. Without one (no ALPN extension, a malformed one, or no common protocol)
// the head of the list, which GnuTLS then refuses (no_application_protocol) or, for a malformed
// extension, rejects itself (decode_error).
std::span<const std::string> pick_for_hello(std::span<const std::string> preference,
                                            const gnutls_datum_t& hello) {
  std::optional<std::span<const uint8_t>> ext;
  const int rv =
      gnutls_ext_raw_parse(&ext, find_alpn_extension, &hello, GNUTLS_EXT_RAW_FLAG_TLS_CLIENT_HELLO);
  if (rv >= 0 && ext) {
    if (auto offers = parse_alpn_offer(*ext)) {
      if (auto i = choose_alpn(preference, *offers)) {
        return preference.subspan(*i, 1);
      }
    }
  }
  return preference.first(std::min(preference.size(), kMaxAlpns));
}

// GnuTLS's ClientHello hook (GNUTLS_HOOK_PRE: before it reads the extensions, ALPN included).
int choose_server_alpn(gnutls_session_t session, unsigned int htype, unsigned int when,
                       unsigned int incoming, const gnutls_datum_t* msg) {
  const auto* state = static_cast<const ServerAlpnState*>(gnutls_db_get_ptr(session));
  if (htype != GNUTLS_HANDSHAKE_CLIENT_HELLO || when != GNUTLS_HOOK_PRE || incoming == 0 ||
      msg == nullptr || state == nullptr) {
    return 0;
  }
  if (auto s = set_alpns(session, pick_for_hello(state->preference, *msg), kServerAlpnFlags); !s) {
    return GNUTLS_E_INTERNAL_ERROR;
  }
  return 0;
}

// The common part of both roles: flags, priority, ngtcp2 hooks and ALPN (for a server, the head
// of `alpns` until its ClientHello hook picks).
Result<GnutlsSessionPtr> make_session(unsigned int role, std::span<const std::string> alpns,
                                      ngtcp2_crypto_conn_ref* conn_ref, Binding binding) {
  if (auto s = check_alpns(alpns); !s) {
    return tl::unexpected(s.error());
  }
  if (role == GNUTLS_SERVER) {
    alpns = alpns.first(std::min(alpns.size(), kMaxAlpns));
  }
  auto session = init_session(role, binding);
  if (!session) {
    return session;
  }
  if (binding == Binding::kQuic) {
    if (auto s = bind_quic(session->get(), role, conn_ref); !s) {
      return tl::unexpected(s.error());
    }
  }
  const unsigned int alpn_flags =
      role == GNUTLS_SERVER ? kServerAlpnFlags : unsigned{GNUTLS_ALPN_MANDATORY};
  if (auto s = set_alpns(session->get(), alpns, alpn_flags); !s) {
    return tl::unexpected(s.error());
  }
  return session;
}

bool is_ip_literal(const std::string& name) {
  uint8_t buf[16];
  return inet_pton(AF_INET, name.c_str(), buf) == 1 || inet_pton(AF_INET6, name.c_str(), buf) == 1;
}

bool equal_constant_time(const Sha256& a, const uint8_t* b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

// gnutls_session_set_verify_function callback for VerifyMode::kFingerprint. The pinned hash sits in
// the session's db pointer, which only server-side session resumption uses: the session pointer
// belongs to ngtcp2's conn_ref.
int verify_pinned_leaf(gnutls_session_t session) {
  const auto* state = static_cast<const ClientVerifyState*>(gnutls_db_get_ptr(session));
  unsigned int count = 0;
  const gnutls_datum_t* peers = gnutls_certificate_get_peers(session, &count);
  if (state == nullptr || peers == nullptr || count == 0) {
    return GNUTLS_E_CERTIFICATE_ERROR;
  }
  Sha256 got{};
  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, peers[0].data, peers[0].size, got.data()) < 0) {
    return GNUTLS_E_CERTIFICATE_ERROR;
  }
  if (!equal_constant_time(state->fingerprint, got.data())) {
    MOQD_LOG(kWarn, "tls: server certificate sha256 %s does not match the pinned one",
             to_hex(got).c_str());
    return GNUTLS_E_CERTIFICATE_ERROR;
  }
  return 0;
}

Status load_trust(gnutls_certificate_credentials_t cred, const Verification& v) {
  if (v.mode == VerifyMode::kSystem) {
    if (int rv = gnutls_certificate_set_x509_system_trust(cred); rv < 0) {
      return gnutls_fail("cannot load the system trust store", rv);
    }
  } else if (v.mode == VerifyMode::kCaFile) {
    int rv = gnutls_certificate_set_x509_trust_file(cred, v.ca_file.c_str(), GNUTLS_X509_FMT_PEM);
    if (rv <= 0) {
      return gnutls_fail("CA file holds no usable certificate",
                         rv < 0 ? rv : GNUTLS_E_NO_CERTIFICATE_FOUND);
    }
  }
  return {};
}

// Installs the checks of `v` on `s`; returns the state the session reads during the handshake.
std::unique_ptr<ClientVerifyState> set_verification(gnutls_session_t s,
                                                    std::string_view server_name,
                                                    const Verification& v) {
  auto state = std::make_unique<ClientVerifyState>();
  state->server_name = std::string(server_name);
  state->fingerprint = v.fingerprint;
  switch (v.mode) {
    case VerifyMode::kSystem:
    case VerifyMode::kCaFile:
      gnutls_session_set_verify_cert(s, state->server_name.c_str(), 0);
      break;
    case VerifyMode::kFingerprint:
      gnutls_db_set_ptr(s, state.get());
      gnutls_session_set_verify_function(s, verify_pinned_leaf);
      break;
    case VerifyMode::kInsecure:
      break;
  }
  return state;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

}  // namespace

Result<Sha256> parse_sha256_hex(std::string_view hex) {
  Sha256 out{};
  size_t nibbles = 0;
  for (char c : hex) {
    if (c == ':') {
      continue;
    }
    const int v = hex_value(c);
    if (v < 0 || nibbles >= out.size() * 2) {
      return fail(ErrorCode::kDecode, "fingerprint must be 64 hex digits");
    }
    out[nibbles / 2] = static_cast<uint8_t>(out[nibbles / 2] << 4 | v);
    ++nibbles;
  }
  if (nibbles != out.size() * 2) {
    return fail(ErrorCode::kDecode, "fingerprint must be 64 hex digits");
  }
  return out;
}

Result<TlsSession> make_server_session(const Certificate& cert, std::span<const std::string> alpns,
                                       ngtcp2_crypto_conn_ref* conn_ref, Binding binding) {
  auto session = make_session(GNUTLS_SERVER, alpns, conn_ref, binding);
  if (!session) {
    return tl::unexpected(session.error());
  }
  gnutls_session_t s = session->get();
  if (int rv = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cert.credentials()); rv < 0) {
    return gnutls_fail("set server credentials failed", rv);
  }
  // The db pointer is free on a server: moqd sets no session-resumption database functions, and
  // the session pointer belongs to ngtcp2's conn_ref.
  auto state = std::make_unique<ServerAlpnState>();
  state->preference.assign(alpns.begin(), alpns.end());
  gnutls_db_set_ptr(s, state.get());
  gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_CLIENT_HELLO, GNUTLS_HOOK_PRE,
                                     choose_server_alpn);
  return TlsSession(std::move(*session), {}, {}, std::move(state));
}

Result<TlsSession> make_client_session(std::string_view server_name,
                                       std::span<const std::string> alpns,
                                       const Verification& verification,
                                       ngtcp2_crypto_conn_ref* conn_ref, Binding binding) {
  const bool checks_name =
      verification.mode == VerifyMode::kSystem || verification.mode == VerifyMode::kCaFile;
  if (checks_name && server_name.empty()) {
    return fail(ErrorCode::kTransport, "certificate verification needs a server name");
  }
  gnutls_certificate_credentials_t raw = nullptr;
  if (int rv = gnutls_certificate_allocate_credentials(&raw); rv < 0) {
    return gnutls_fail("allocate credentials failed", rv);
  }
  CredentialsPtr cred(raw);
  if (auto s = load_trust(raw, verification); !s) {
    return tl::unexpected(s.error());
  }
  auto session = make_session(GNUTLS_CLIENT, alpns, conn_ref, binding);
  if (!session) {
    return tl::unexpected(session.error());
  }
  gnutls_session_t s = session->get();
  const std::string name(server_name);
  int rv = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, raw);
  // RFC 6066 §3: SNI carries host names only, never IP literals.
  if (rv >= 0 && !name.empty() && !is_ip_literal(name)) {
    rv = gnutls_server_name_set(s, GNUTLS_NAME_DNS, name.data(), name.size());
  }
  if (rv < 0) {
    return gnutls_fail("client session setup failed", rv);
  }
  auto verify = set_verification(s, name, verification);
  return TlsSession(std::move(*session), std::move(cred), std::move(verify));
}

std::string selected_alpn(gnutls_session_t session) {
  gnutls_datum_t proto{nullptr, 0};
  if (gnutls_alpn_get_selected_protocol(session, &proto) < 0 || proto.data == nullptr) {
    return {};
  }
  return std::string(reinterpret_cast<const char*>(proto.data), proto.size);
}

}  // namespace moqd::transport::quic
