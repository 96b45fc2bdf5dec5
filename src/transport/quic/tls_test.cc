#include "transport/quic/tls.h"

#include <errno.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <string>
#include <vector>

namespace moqd::transport::quic {
namespace {

// One direction of an in-memory byte stream between two GnuTLS sessions.
struct Wire {
  std::deque<uint8_t> bytes;
};

struct End {
  gnutls_session_t session = nullptr;
  Wire* in = nullptr;
  Wire* out = nullptr;
};

ssize_t push(gnutls_transport_ptr_t ptr, const void* data, size_t len) {
  auto* end = static_cast<End*>(ptr);
  const auto* p = static_cast<const uint8_t*>(data);
  end->out->bytes.insert(end->out->bytes.end(), p, p + len);
  return static_cast<ssize_t>(len);
}

ssize_t pull(gnutls_transport_ptr_t ptr, void* data, size_t len) {
  auto* end = static_cast<End*>(ptr);
  if (end->in->bytes.empty()) {
    gnutls_transport_set_errno(end->session, EAGAIN);
    return -1;
  }
  size_t n = std::min(len, end->in->bytes.size());
  std::copy_n(end->in->bytes.begin(), n, static_cast<uint8_t*>(data));
  end->in->bytes.erase(end->in->bytes.begin(), end->in->bytes.begin() + n);
  return static_cast<ssize_t>(n);
}

struct HandshakeResult {
  int client = GNUTLS_E_AGAIN;
  int server = GNUTLS_E_AGAIN;
};

// Runs both handshakes over in-memory wires until each side finished or failed.
HandshakeResult handshake(gnutls_session_t client, gnutls_session_t server) {
  Wire to_server, to_client;
  End c{client, &to_client, &to_server};
  End s{server, &to_server, &to_client};
  for (End* e : {&c, &s}) {
    gnutls_transport_set_ptr(e->session, e);
    gnutls_transport_set_push_function(e->session, push);
    gnutls_transport_set_pull_function(e->session, pull);
  }
  HandshakeResult r;
  auto pending = [](int rv) { return rv == GNUTLS_E_AGAIN || rv == GNUTLS_E_INTERRUPTED; };
  for (int round = 0; round < 50 && (pending(r.client) || pending(r.server)); ++round) {
    if (pending(r.client)) {
      r.client = gnutls_handshake(client);
    }
    if (pending(r.server)) {
      r.server = gnutls_handshake(server);
    }
  }
  return r;
}

const std::vector<std::string> kServerAlpns = {"moq-lite-04", "moq-lite-03", "moql", "moq-00",
                                               "h3"};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cert = Certificate::generate_self_signed();
    ASSERT_TRUE(cert.has_value());
    cert_ = std::move(*cert);
    char tmpl[] = "/tmp/moqd_tls_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override {
    for (const auto& f : files_) {
      unlink(f.c_str());
    }
    rmdir(dir_.c_str());
  }

  std::string write_file(const std::string& name, const std::string& content) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << content;
    files_.push_back(p);
    return p;
  }

  TlsSession server(const std::vector<std::string>& alpns = kServerAlpns) {
    auto s = make_server_session(*cert_, alpns, nullptr, Binding::kStream);
    EXPECT_TRUE(s.has_value());
    return s ? std::move(*s) : TlsSession();
  }

  TlsSession client(const Verification& v, const std::string& name = "localhost",
                    const std::vector<std::string>& alpns = {"moql"}) {
    auto s = make_client_session(name, alpns, v, nullptr, Binding::kStream);
    EXPECT_TRUE(s.has_value());
    return s ? std::move(*s) : TlsSession();
  }

  // Handshake between a fresh server and a client verifying with `v`.
  HandshakeResult connect(const Verification& v, const std::string& name = "localhost") {
    TlsSession s = server();
    TlsSession c = client(v, name);
    if (!s || !c) {
      return {};
    }
    return handshake(c.get(), s.get());
  }

  std::unique_ptr<Certificate> cert_;
  std::string dir_;
  std::vector<std::string> files_;
};

Verification insecure() {
  return Verification{VerifyMode::kInsecure, {}, {}};
}

TEST_F(TlsTest, ServerPrecedenceSelectsAlpnAndAes128Gcm) {
  TlsSession s = server();
  TlsSession c = client(insecure(), "localhost", {"h3", "moql", "moq-lite-03"});
  ASSERT_TRUE(s && c);
  HandshakeResult r = handshake(c.get(), s.get());
  ASSERT_EQ(r.client, 0) << gnutls_strerror(r.client);
  ASSERT_EQ(r.server, 0) << gnutls_strerror(r.server);
  EXPECT_EQ(selected_alpn(s.get()), "moq-lite-03");
  EXPECT_EQ(selected_alpn(c.get()), "moq-lite-03");
  EXPECT_EQ(gnutls_protocol_get_version(c.get()), GNUTLS_TLS1_3);
  EXPECT_EQ(gnutls_cipher_get(c.get()), GNUTLS_CIPHER_AES_128_GCM);
  EXPECT_EQ(gnutls_cipher_get(s.get()), GNUTLS_CIPHER_AES_128_GCM);
}

TEST_F(TlsTest, NoCommonAlpnFailsHandshake) {
  TlsSession s = server();
  TlsSession c = client(insecure(), "localhost", {"moqt-99"});
  ASSERT_TRUE(s && c);
  HandshakeResult r = handshake(c.get(), s.get());
  EXPECT_EQ(r.server, GNUTLS_E_NO_APPLICATION_PROTOCOL);
  EXPECT_LT(r.client, 0);
  EXPECT_EQ(selected_alpn(s.get()), "");
}

// moqd's default raw QUIC list: 11 protocols, more than GnuTLS 3.7 takes in one
// gnutls_alpn_set_protocols (8). The ClientHello hook makes every one of them reachable.
const std::vector<std::string> kElevenAlpns = {
    "moq-lite-05", "moq-lite-04", "moq-lite-03", "moqt-20", "moqt-19", "moqt-18",
    "moqt-17",     "moqt-16",     "moqt-15",     "moql",    "h3"};

TEST_F(TlsTest, EveryOneOfMoreThanEightAlpnsIsReachable) {
  for (const std::string& alpn : kElevenAlpns) {
    TlsSession s = server(kElevenAlpns);
    TlsSession c = client(insecure(), "localhost", {alpn});
    ASSERT_TRUE(s && c);
    HandshakeResult r = handshake(c.get(), s.get());
    ASSERT_EQ(r.server, 0) << alpn << ": " << gnutls_strerror(r.server);
    ASSERT_EQ(r.client, 0) << alpn << ": " << gnutls_strerror(r.client);
    EXPECT_EQ(selected_alpn(s.get()), alpn);
    EXPECT_EQ(selected_alpn(c.get()), alpn);
  }
}

TEST_F(TlsTest, LongListPicksByServerPreferenceNotOfferOrder) {
  TlsSession s = server(kElevenAlpns);
  TlsSession c = client(insecure(), "localhost", {"h3", "moqt-15", "moqt-17", "moql", "moqt-16"});
  ASSERT_TRUE(s && c);
  HandshakeResult r = handshake(c.get(), s.get());
  ASSERT_EQ(r.server, 0) << gnutls_strerror(r.server);
  EXPECT_EQ(selected_alpn(s.get()), "moqt-17");
  EXPECT_EQ(selected_alpn(c.get()), "moqt-17");
}

TEST_F(TlsTest, LongListWithNoCommonAlpnFailsHandshake) {
  TlsSession s = server(kElevenAlpns);
  TlsSession c = client(insecure(), "localhost", {"moqt-99", "h2", "moqt-1"});
  ASSERT_TRUE(s && c);
  HandshakeResult r = handshake(c.get(), s.get());
  EXPECT_EQ(r.server, GNUTLS_E_NO_APPLICATION_PROTOCOL);
  EXPECT_LT(r.client, 0);
  EXPECT_EQ(selected_alpn(s.get()), "");
}

TEST_F(TlsTest, ServerRefusesEmptyOrBadAlpnNames) {
  EXPECT_FALSE(make_server_session(*cert_, std::vector<std::string>{}, nullptr, Binding::kStream));
  EXPECT_FALSE(
      make_server_session(*cert_, std::vector<std::string>{"h3", ""}, nullptr, Binding::kStream));
  EXPECT_FALSE(make_server_session(*cert_, std::vector<std::string>{std::string(256, 'x')}, nullptr,
                                   Binding::kStream));
  // A client still offers at most 8 (GnuTLS would drop the rest silently).
  EXPECT_FALSE(
      make_client_session("localhost", kElevenAlpns, insecure(), nullptr, Binding::kStream));
}

TEST_F(TlsTest, SelectedAlpnIsEmptyBeforeHandshake) {
  TlsSession s = server();
  ASSERT_TRUE(s);
  EXPECT_EQ(selected_alpn(s.get()), "");
}

TEST_F(TlsTest, FingerprintPinAcceptsTheServersLeaf) {
  HandshakeResult r = connect(Verification{VerifyMode::kFingerprint, {}, cert_->sha256()});
  EXPECT_EQ(r.client, 0) << gnutls_strerror(r.client);
  EXPECT_EQ(r.server, 0) << gnutls_strerror(r.server);
}

TEST_F(TlsTest, FingerprintPinRejectsAnotherHash) {
  Sha256 wrong = cert_->sha256();
  wrong[31] ^= 1;
  HandshakeResult r = connect(Verification{VerifyMode::kFingerprint, {}, wrong});
  EXPECT_EQ(r.client, GNUTLS_E_CERTIFICATE_ERROR) << gnutls_strerror(r.client);
  EXPECT_LT(r.server, 0);
}

TEST_F(TlsTest, FingerprintPinIgnoresTheServerName) {
  HandshakeResult r =
      connect(Verification{VerifyMode::kFingerprint, {}, cert_->sha256()}, "example.com");
  EXPECT_EQ(r.client, 0) << gnutls_strerror(r.client);
}

TEST_F(TlsTest, InsecureAcceptsAnything) {
  HandshakeResult r = connect(insecure(), "example.com");
  EXPECT_EQ(r.client, 0) << gnutls_strerror(r.client);
  EXPECT_EQ(r.server, 0) << gnutls_strerror(r.server);
}

TEST_F(TlsTest, CaFileAcceptsTheSelfSignedCertificateForEachName) {
  Verification v{VerifyMode::kCaFile, write_file("ca.pem", cert_->cert_pem()), {}};
  for (const char* name : {"localhost", "127.0.0.1", "::1"}) {
    TlsSession s = server();
    TlsSession c = client(v, name);
    ASSERT_TRUE(s && c);
    HandshakeResult r = handshake(c.get(), s.get());
    gnutls_datum_t why{};
    gnutls_certificate_verification_status_print(gnutls_session_get_verify_cert_status(c.get()),
                                                 GNUTLS_CRT_X509, &why, 0);
    EXPECT_EQ(r.client, 0) << name << ": " << gnutls_strerror(r.client) << " "
                           << reinterpret_cast<const char*>(why.data);
    gnutls_free(why.data);
    EXPECT_EQ(r.server, 0) << name << ": " << gnutls_strerror(r.server);
  }
}

TEST_F(TlsTest, CaFileRejectsAnotherCertificate) {
  auto other = Certificate::generate_self_signed();
  ASSERT_TRUE(other.has_value());
  Verification v{VerifyMode::kCaFile, write_file("other.pem", (*other)->cert_pem()), {}};
  HandshakeResult r = connect(v);
  EXPECT_EQ(r.client, GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) << gnutls_strerror(r.client);
  EXPECT_LT(r.server, 0);
}

TEST_F(TlsTest, CaFileRejectsAWrongName) {
  Verification v{VerifyMode::kCaFile, write_file("ca.pem", cert_->cert_pem()), {}};
  HandshakeResult r = connect(v, "example.com");
  EXPECT_EQ(r.client, GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) << gnutls_strerror(r.client);
}

TEST_F(TlsTest, SystemTrustRejectsSelfSigned) {
  auto c =
      make_client_session("localhost", std::vector<std::string>{"moql"},
                          Verification{VerifyMode::kSystem, {}, {}}, nullptr, Binding::kStream);
  if (!c) {
    GTEST_SKIP() << "no system trust store on this machine";
  }
  TlsSession s = server();
  HandshakeResult r = handshake(c->get(), s.get());
  EXPECT_EQ(r.client, GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) << gnutls_strerror(r.client);
}

TEST_F(TlsTest, ClientSetupErrorsAreResults) {
  const std::vector<std::string> alpns = {"moql"};
  Verification missing{VerifyMode::kCaFile, dir_ + "/absent.pem", {}};
  EXPECT_EQ(
      make_client_session("localhost", alpns, missing, nullptr, Binding::kStream).error().code,
      ErrorCode::kTransport);
  Verification garbage{VerifyMode::kCaFile, write_file("garbage.pem", "nonsense"), {}};
  EXPECT_FALSE(make_client_session("localhost", alpns, garbage, nullptr, Binding::kStream));
  Verification ca{VerifyMode::kCaFile, write_file("ca.pem", cert_->cert_pem()), {}};
  EXPECT_FALSE(make_client_session("", alpns, ca, nullptr, Binding::kStream));
}

TEST_F(TlsTest, AlpnListBounds) {
  EXPECT_FALSE(make_server_session(*cert_, std::vector<std::string>{}, nullptr, Binding::kStream));
  // A server picks from the ClientHello, so its list may be longer than GnuTLS's 8; a client's not.
  std::vector<std::string> nine(9, "moql");
  EXPECT_TRUE(make_server_session(*cert_, nine, nullptr, Binding::kStream));
  EXPECT_FALSE(make_client_session("localhost", nine, insecure(), nullptr, Binding::kStream));
  std::vector<std::string> eight(8, "moql");
  EXPECT_TRUE(make_client_session("localhost", eight, insecure(), nullptr, Binding::kStream));
  EXPECT_FALSE(make_client_session("localhost", std::vector<std::string>{""}, insecure(), nullptr,
                                   Binding::kStream));
  EXPECT_FALSE(make_client_session("localhost", std::vector<std::string>{std::string(256, 'a')},
                                   insecure(), nullptr, Binding::kStream));
}

TEST_F(TlsTest, QuicBindingNeedsAConnRef) {
  EXPECT_FALSE(make_server_session(*cert_, kServerAlpns, nullptr, Binding::kQuic));
  EXPECT_FALSE(make_client_session("localhost", kServerAlpns, insecure(), nullptr, Binding::kQuic));
  ngtcp2_crypto_conn_ref ref{};
  auto s = make_server_session(*cert_, kServerAlpns, &ref, Binding::kQuic);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(gnutls_session_get_ptr(s->get()), &ref);
  auto c = make_client_session("localhost", kServerAlpns,
                               Verification{VerifyMode::kFingerprint, {}, cert_->sha256()}, &ref,
                               Binding::kQuic);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(gnutls_session_get_ptr(c->get()), &ref);
}

TEST_F(TlsTest, SessionsSurviveMoves) {
  TlsSession c = client(Verification{VerifyMode::kFingerprint, {}, cert_->sha256()});
  TlsSession moved = std::move(c);
  TlsSession s = server();
  HandshakeResult r = handshake(moved.get(), s.get());
  EXPECT_EQ(r.client, 0) << gnutls_strerror(r.client);
}

TEST(ParseSha256HexTest, AcceptsPlainAndColonSeparatedHex) {
  std::string hex(64, '0');
  hex[0] = 'A';
  hex[63] = 'f';
  auto v = parse_sha256_hex(hex);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ((*v)[0], 0xa0);
  EXPECT_EQ((*v)[31], 0x0f);
  std::string colons;
  for (int i = 0; i < 32; ++i) {
    colons += i ? ":ab" : "ab";
  }
  auto w = parse_sha256_hex(colons);
  ASSERT_TRUE(w.has_value());
  std::string plain;
  for (int i = 0; i < 32; ++i) {
    plain += "ab";
  }
  EXPECT_EQ(to_hex(*w), plain);
}

TEST(ParseSha256HexTest, RejectsWrongLengthOrDigits) {
  EXPECT_FALSE(parse_sha256_hex(""));
  EXPECT_FALSE(parse_sha256_hex(std::string(62, 'a')));
  EXPECT_FALSE(parse_sha256_hex(std::string(66, 'a')));
  EXPECT_FALSE(parse_sha256_hex(std::string(63, 'a') + "g"));
  EXPECT_EQ(parse_sha256_hex("zz").error().code, ErrorCode::kDecode);
}

}  // namespace
}  // namespace moqd::transport::quic
