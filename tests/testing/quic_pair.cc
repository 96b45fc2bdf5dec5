#include "testing/quic_pair.h"

#include <gtest/gtest.h>

#include "transport/quic/tls.h"

namespace moqd::test {

namespace quic = transport::quic;

namespace {
constexpr uint16_t kServerPort = 4443;
constexpr uint16_t kClientPort = 40000;
}  // namespace

void QuicPair::Side::on_handshake_completed(quic::Connection& c) {
  handshake = true;
  if (on_handshake) {
    on_handshake(c);
  }
}

QuicPair::QuicPair(uint64_t seed)
    : net_(clock_, seed),
      server_ep_(net_.add_endpoint(kServerPort)),
      client_ep_(net_.add_endpoint(kClientPort)) {
  auto cert = quic::Certificate::generate_self_signed();
  EXPECT_TRUE(cert);
  if (cert) {
    cert_ = std::move(*cert);
  }
}

QuicPair::~QuicPair() {
  // Connections reference the network and the clock: they go first.
  client.conn.reset();
  server.conn.reset();
}

quic::ConnectionContext QuicPair::context(SimNetwork::Endpoint& ep, Side& side) {
  Timers& timers = &side == &server && server_timers != nullptr ? *server_timers : clock_;
  return quic::ConnectionContext{ep, clock_, timers,
                                 [this](ngtcp2_cid* cid, uint8_t* token) { new_cid(cid, token); },
                                 &side};
}

void QuicPair::new_cid(ngtcp2_cid* cid, uint8_t* token) {
  cid->datalen = 16;
  for (size_t i = 0; i < cid->datalen; ++i) {
    cid->data[i] = static_cast<uint8_t>(next_cid_ >> (8 * (i % 8)));
  }
  cid->data[0] = static_cast<uint8_t>(next_cid_++);
  for (size_t i = 0; i < NGTCP2_STATELESS_RESET_TOKENLEN; ++i) {
    token[i] = static_cast<uint8_t>(i ^ next_cid_);
  }
}

void QuicPair::start(quic::ConnectionConfig server_config, quic::ConnectionConfig client_config) {
  server_ep_.set_receiver(
      [this, server_config](const ngtcp2_path& path, std::span<const uint8_t> pkt) {
        if (retry.enabled) {
          on_server_packet_with_retry(path, pkt, server_config);
        } else {
          on_server_packet(path, pkt, server_config);
        }
      });
  client_ep_.set_receiver([this](const ngtcp2_path& path, std::span<const uint8_t> pkt) {
    if (client.conn != nullptr && !client.conn->is_done()) {
      (void)client.conn->on_packet(path, pkt);
    }
  });
  quic::TlsFactory tls = [this](ngtcp2_crypto_conn_ref* ref) {
    return quic::make_client_session(
        "localhost", client_alpns,
        quic::Verification{quic::VerifyMode::kFingerprint, {}, cert_->sha256()}, ref);
  };
  auto c = quic::Connection::connect(client_ep_.path_to(server_ep_), tls,
                                     context(client_ep_, client), client_config);
  ASSERT_TRUE(c);
  client.conn = std::move(*c);
}

void QuicPair::on_server_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt,
                                const quic::ConnectionConfig& config) {
  if (server.conn == nullptr) {
    accept_server(path, pkt, config);
  }
  if (server.conn != nullptr && !server.conn->is_done()) {
    (void)server.conn->on_packet(path, pkt);
  }
}

void QuicPair::on_server_packet_with_retry(const ngtcp2_path& path, std::span<const uint8_t> in,
                                           const quic::ConnectionConfig& config) {
  std::vector<uint8_t> pkt(in.begin(), in.end());
  ngtcp2_pkt_hd hd;
  if (server.conn == nullptr && ngtcp2_accept(&hd, pkt.data(), pkt.size()) == 0) {
    if (retry.tamper_token && hd.tokenlen > 0) {
      pkt[static_cast<size_t>(hd.token - pkt.data()) + hd.tokenlen - 1] ^= 1;
    }
    uint8_t out[quic::kStatelessPacketBufferSize];
    if (!quic::has_retry_token(hd)) {
      ngtcp2_cid scid;
      uint8_t reset[NGTCP2_STATELESS_RESET_TOKENLEN];
      new_cid(&scid, reset);
      auto n = quic::write_retry(path, hd, scid, clock_.now(), out);
      ASSERT_TRUE(n);
      ++retry.retries_sent;
      server_ep_.send_packet(path, {out, *n});
      return;
    }
    auto info = quic::verify_retry_token(path, hd, clock_.now());
    if (!info) {
      auto n = quic::write_invalid_token_close(hd, out);
      ASSERT_TRUE(n);
      ++retry.invalid_tokens;
      server_ep_.send_packet(path, {out, *n});
      return;
    }
    EXPECT_TRUE(ngtcp2_cid_eq(&info->retry_scid, &hd.dcid));
    accept_server(path, pkt, config,
                  retry.pass_retry_info ? std::optional<quic::RetryInfo>(*info) : std::nullopt);
    ASSERT_NE(server.conn, nullptr);
  } else if (retry.deaf_after_accept) {
    return;
  }
  if (server.conn != nullptr && !server.conn->is_done()) {
    (void)server.conn->on_packet(path, pkt);
  }
}

void QuicPair::accept_server(const ngtcp2_path& path, std::span<const uint8_t> pkt,
                             const quic::ConnectionConfig& config,
                             const std::optional<quic::RetryInfo>& info) {
  quic::TlsFactory tls = [this](ngtcp2_crypto_conn_ref* ref) {
    return quic::make_server_session(*cert_, server_alpns, ref);
  };
  auto c = quic::Connection::accept(path, pkt, tls, context(server_ep_, server), config, info);
  if (c) {
    server.conn = std::move(*c);
  }
}

bool QuicPair::handshake(quic::ConnectionConfig server_config,
                         quic::ConnectionConfig client_config) {
  start(server_config, client_config);
  return run_until([&] { return client.handshake && server.handshake; });
}

bool QuicPair::run_until(const std::function<bool()>& done, Duration limit) {
  Instant end = clock_.now() + limit;
  while (!done()) {
    if (clock_.now() >= end) {
      return false;
    }
    step();
  }
  return true;
}

void QuicPair::run_for(Duration d) {
  Instant end = clock_.now() + d;
  (void)run_until([&] { return clock_.now() >= end; }, d);
}

void QuicPair::step() {
  clock_.advance(tick);
  if (!flush_each_tick) {
    return;
  }
  for (Side* s : {&server, &client}) {
    if (s->conn != nullptr && !s->conn->is_done()) {
      s->conn->flush();
    }
  }
}

void QuicPair::set_links(const SimLinkConfig& link) {
  client_ep_.set_link(link);
  server_ep_.set_link(link);
}

}  // namespace moqd::test
