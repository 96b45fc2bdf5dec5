#include "transport/quic/connection.h"

#include <arpa/inet.h>
#include <gnutls/crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "transport/quic/heap.h"
#include "transport/quic/lazy_keys.h"

namespace moqd::transport::quic {
namespace {

// Vectors handed to one writev_stream call, at most ngtcp2's NGTCP2_MAX_STREAM_DATACNT (256). A
// stream of tiny writes (a chat message is a FRAME header and a 16-byte payload: two vectors of
// 1 and 16 bytes) fills a 1,452-byte packet with ~160 of them; every vector fewer than a packet's
// worth costs another writev_stream call, another STREAM frame and another ACK callback.
constexpr size_t kMaxVecs = 256;
// RFC 9000 §7.2: a client's first Destination Connection ID is at least 8 random bytes.
constexpr size_t kClientDcidLen = 18;
// Large enough for any packet ngtcp2 1.11 writes (max_tx_udp_payload_size defaults to 1452 and
// PMTUD probes stay within it).
constexpr size_t kMaxPacketSize = 1500;
// RFC 9000 §10.2: keep a closing or draining connection for three PTOs.
constexpr uint64_t kClosingPtos = 3;
// QUIC CRYPTO_ERROR range (RFC 9001 §4.8): 0x100 + TLS alert.
constexpr uint64_t kCryptoErrorBase = 0x100;

// A packet that went out without room for the oldest queued datagram counts a miss; after this
// many it is dropped, so that a datagram never waits behind retransmissions for ever.
constexpr int kMaxDatagramMisses = 3;
// What a 1-RTT packet spends besides a DATAGRAM frame's payload, taken at its worst so that a
// datagram of max_datagram_size() fits an otherwise empty packet whatever ngtcp2 picks: short
// header (1 byte flags, a DCID of up to 20 bytes, a packet number of up to 4), the 16-byte AEAD
// tag of every QUIC v1 cipher, and the frame's type byte plus an 8-byte length varint.
constexpr size_t kDatagramPacketOverhead = 1 + NGTCP2_MAX_CIDLEN + 4 + 16 + 1 + 8;

constexpr uint64_t kTimeoutCode = static_cast<uint64_t>(ErrorCode::kTimeout);
constexpr uint64_t kClosedCode = static_cast<uint64_t>(ErrorCode::kClosed);

ngtcp2_tstamp to_ts(Instant t) {
  return static_cast<ngtcp2_tstamp>(t.time_since_epoch().count()) * NGTCP2_MICROSECONDS;
}

ngtcp2_duration to_ngtcp2(Duration d) {
  return static_cast<ngtcp2_duration>(d.count()) * NGTCP2_MICROSECONDS;
}

Duration from_ngtcp2_ceil(uint64_t ns) {
  return Duration((ns + NGTCP2_MICROSECONDS - 1) / NGTCP2_MICROSECONDS);
}

std::string format_addr(const ngtcp2_addr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.addr == nullptr) {
    return "";
  }
  if (a.addr->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(a.addr);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
    return std::string(buf) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (a.addr->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "?";
}

size_t varint_len(uint64_t n) {
  return n < 64 ? 1 : n < 16384 ? 2 : n < (uint64_t{1} << 30) ? 4 : 8;
}

// The largest payload whose DATAGRAM frame (type, length varint, payload) is within `frame_size`.
uint64_t payload_within_frame(uint64_t frame_size) {
  for (size_t len : {1, 2, 4, 8}) {
    if (frame_size >= 1 + len && varint_len(frame_size - 1 - len) <= len) {
      return frame_size - 1 - len;
    }
  }
  return 0;
}

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

std::span<uint8_t> PacketSink::packet_buffer(size_t len) {
  scratch_.resize(len);
  return scratch_;
}

// ---------------------------------------------------------------------------------------------
// ngtcp2 callbacks: cast, forward, map failure.

struct Connection::Trampolines {
  static Connection& self(void* user_data) { return *static_cast<Connection*>(user_data); }

  static int recv_stream_data(ngtcp2_conn*, uint32_t flags, int64_t id, uint64_t,
                              const uint8_t* data, size_t len, void* ud, void*) {
    self(ud).on_recv_stream_data(flags, id, {data, len});
    return 0;
  }
  static int acked_stream_data_offset(ngtcp2_conn*, int64_t id, uint64_t offset, uint64_t len,
                                      void* ud, void*) {
    self(ud).on_acked_stream_data(id, offset, len);
    return 0;
  }
  static int stream_open(ngtcp2_conn*, int64_t id, void* ud) {
    self(ud).on_stream_open(id);
    return 0;
  }
  static int stream_close(ngtcp2_conn*, uint32_t flags, int64_t id, uint64_t code, void* ud,
                          void*) {
    self(ud).on_stream_close(flags, id, code);
    return 0;
  }
  static int stream_reset(ngtcp2_conn*, int64_t id, uint64_t, uint64_t code, void* ud, void*) {
    self(ud).on_stream_reset(id, code);
    return 0;
  }
  static int extend_max_stream_data(ngtcp2_conn*, int64_t id, uint64_t, void* ud, void*) {
    self(ud).on_extend_max_stream_data(id);
    return 0;
  }
  static int extend_max_local_streams(ngtcp2_conn*, uint64_t, void* ud) {
    self(ud).on_extend_max_local_streams();
    return 0;
  }
  static int handshake_completed(ngtcp2_conn*, void* ud) {
    self(ud).on_handshake_completed();
    return 0;
  }
  static int get_new_connection_id(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t cidlen,
                                    void* ud) {
    return self(ud).on_new_connection_id(cid, token, cidlen) ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
  }
  // Once the server has released its TLS session (release_tls), TLS has nothing more to say on
  // this connection: a peer that sends post-handshake CRYPTO data gets the connection closed.
  static int recv_crypto_data(ngtcp2_conn* conn, ngtcp2_encryption_level level, uint64_t offset,
                              const uint8_t* data, size_t len, void* ud) {
    if (!self(ud).tls_) {
      return NGTCP2_ERR_CALLBACK_FAILURE;
    }
    return ngtcp2_crypto_recv_crypto_data_cb(conn, level, offset, data, len, ud);
  }
  static int recv_datagram(ngtcp2_conn*, uint32_t, const uint8_t* data, size_t len, void* ud) {
    self(ud).on_recv_datagram({data, len});
    return 0;
  }
  static void rand(uint8_t* dest, size_t len, const ngtcp2_rand_ctx*) {
    gnutls_rnd(GNUTLS_RND_RANDOM, dest, len);
  }
  static ngtcp2_conn* get_conn(ngtcp2_crypto_conn_ref* ref) {
    return static_cast<Connection*>(ref->user_data)->conn_;
  }
};

void QuicStream::set_visitor(StreamVisitor* visitor) {
  if (!released_) {
    visitor_ = visitor;
  }
}

// ---------------------------------------------------------------------------------------------
// Construction.

Connection::Connection(bool server, ConnectionContext ctx, const Config& config,
                       const ngtcp2_path& path)
    : server_(server),
      ctx_(std::move(ctx)),
      datagram_queue_(config.datagram_queue),
      datagram_queue_bytes_(config.datagram_queue_bytes),
      budget_(config.stream_queue_target, config.send_buffer) {
  conn_ref_.get_conn = Trampolines::get_conn;
  conn_ref_.user_data = this;
  ngtcp2_path_storage_init(&path_, path.local.addr, path.local.addrlen, path.remote.addr,
                           path.remote.addrlen, nullptr);
  peer_ = format_addr(path.remote);
}

void Connection::fill_callbacks(ngtcp2_callbacks& cb) const {
  cb = {};
  if (server_) {
    cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
  } else {
    cb.client_initial = ngtcp2_crypto_client_initial_cb;
    cb.recv_retry = ngtcp2_crypto_recv_retry_cb;
  }
  cb.recv_crypto_data = Trampolines::recv_crypto_data;
  // The next 1-RTT keys' GnuTLS contexts are made on first use (transport/quic/lazy_keys.h).
  cb.encrypt = lazy_encrypt;
  cb.decrypt = lazy_decrypt;
  cb.hp_mask = ngtcp2_crypto_hp_mask_cb;
  cb.update_key = lazy_update_key;
  cb.delete_crypto_aead_ctx = lazy_delete_aead_ctx;
  cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
  cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
  cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
  cb.rand = Trampolines::rand;
  cb.get_new_connection_id = Trampolines::get_new_connection_id;
  cb.recv_stream_data = Trampolines::recv_stream_data;
  cb.acked_stream_data_offset = Trampolines::acked_stream_data_offset;
  cb.stream_open = Trampolines::stream_open;
  cb.stream_close = Trampolines::stream_close;
  cb.stream_reset = Trampolines::stream_reset;
  cb.extend_max_stream_data = Trampolines::extend_max_stream_data;
  cb.extend_max_local_streams_bidi = Trampolines::extend_max_local_streams;
  cb.extend_max_local_streams_uni = Trampolines::extend_max_local_streams;
  cb.handshake_completed = Trampolines::handshake_completed;
  cb.recv_datagram = Trampolines::recv_datagram;
}

void Connection::fill_settings(ngtcp2_settings& settings, const Config& config) const {
  ngtcp2_settings_default(&settings);
  settings.initial_ts = now_ts();
  settings.max_window = config.max_window;
  settings.max_stream_window = config.max_stream_window;
  settings.handshake_timeout = to_ngtcp2(config.handshake_timeout);
  settings.ack_thresh = config.ack_thresh;
}

void Connection::fill_params(ngtcp2_transport_params& params, const Config& config) {
  ngtcp2_transport_params_default(&params);
  params.initial_max_data = config.max_data;
  params.initial_max_stream_data_bidi_local = config.max_stream_data;
  params.initial_max_stream_data_bidi_remote = config.max_stream_data;
  params.initial_max_stream_data_uni = config.max_stream_data;
  params.initial_max_streams_bidi = config.max_streams_bidi;
  params.initial_max_streams_uni = config.max_streams_uni;
  params.max_idle_timeout = to_ngtcp2(config.idle_timeout);
  params.max_datagram_frame_size = config.max_datagram_frame_size;
  params.max_ack_delay = to_ngtcp2(config.max_ack_delay);
}

Status Connection::init_tls(const TlsFactory& make_tls) {
  auto tls = make_tls(&conn_ref_);
  if (!tls) {
    return tl::unexpected(tls.error());
  }
  tls_ = std::move(*tls);
  return {};
}

Result<std::unique_ptr<Connection>> Connection::connect(const ngtcp2_path& path,
                                                        const TlsFactory& make_tls,
                                                        ConnectionContext ctx, Config config) {
  std::unique_ptr<Connection> c(new Connection(false, std::move(ctx), config, path));
  if (Status st = c->init_tls(make_tls); !st) {
    return tl::unexpected(st.error());
  }
  ngtcp2_cid dcid{};
  dcid.datalen = kClientDcidLen;
  gnutls_rnd(GNUTLS_RND_RANDOM, dcid.data, dcid.datalen);
  ngtcp2_cid scid{};
  uint8_t token[NGTCP2_STATELESS_RESET_TOKENLEN];
  c->ctx_.new_cid(&scid, token);
  ngtcp2_callbacks cb;
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  c->fill_callbacks(cb);
  c->fill_settings(settings, config);
  c->fill_params(params, config);
  if (ngtcp2_conn_client_new(&c->conn_, &dcid, &scid, &c->path_.path, NGTCP2_PROTO_VER_V1, &cb,
                             &settings, &params, counting_mem(), c.get()) != 0) {
    return moqd::fail(ErrorCode::kTransport, "ngtcp2_conn_client_new failed");
  }
  ngtcp2_conn_set_tls_native_handle(c->conn_, c->tls_.get());
  if (config.keep_alive > Duration::zero()) {
    ngtcp2_conn_set_keep_alive_timeout(c->conn_, to_ngtcp2(config.keep_alive));
  }
  c->schedule_flush();  // the Initial goes out from the loop
  return c;
}

Result<std::unique_ptr<Connection>> Connection::accept(const ngtcp2_path& path,
                                                       std::span<const uint8_t> pkt,
                                                       const TlsFactory& make_tls,
                                                       ConnectionContext ctx, Config config,
                                                       const std::optional<RetryInfo>& retry) {
  ngtcp2_pkt_hd hd;
  if (ngtcp2_accept(&hd, pkt.data(), pkt.size()) != 0) {
    return moqd::fail(ErrorCode::kProtocolViolation, "not an acceptable Initial packet");
  }
  std::unique_ptr<Connection> c(new Connection(true, std::move(ctx), config, path));
  if (Status st = c->init_tls(make_tls); !st) {
    return tl::unexpected(st.error());
  }
  ngtcp2_cid scid{};
  ngtcp2_callbacks cb;
  ngtcp2_settings settings;
  ngtcp2_transport_params params;
  c->fill_callbacks(cb);
  c->fill_settings(settings, config);
  c->fill_params(params, config);
  c->ctx_.new_cid(&scid, params.stateless_reset_token);
  params.stateless_reset_token_present = 1;
  // A server must say original_dcid is present: ngtcp2_conn_server_new asserts on it.
  params.original_dcid = hd.dcid;
  params.original_dcid_present = 1;
  if (retry) {
    params.original_dcid = retry->original_dcid;
    params.retry_scid = retry->retry_scid;
    params.retry_scid_present = 1;
    // A validated Retry token lifts the anti-amplification limit, but only with its length and
    // type: a token without tokenlen is ignored silently.
    settings.token = hd.token;
    settings.tokenlen = hd.tokenlen;
    settings.token_type = NGTCP2_TOKEN_TYPE_RETRY;
  }
  if (ngtcp2_conn_server_new(&c->conn_, &hd.scid, &scid, &c->path_.path, hd.version, &cb,
                             &settings, &params, counting_mem(), c.get()) != 0) {
    return moqd::fail(ErrorCode::kTransport, "ngtcp2_conn_server_new failed");
  }
  ngtcp2_conn_set_tls_native_handle(c->conn_, c->tls_.get());
  return c;
}

// ---------------------------------------------------------------------------------------------
// Stateless Retry.

namespace {

constexpr size_t kRetrySecretLength = 32;

const std::array<uint8_t, kRetrySecretLength>& retry_secret() {
  static const std::array<uint8_t, kRetrySecretLength> secret = [] {
    std::array<uint8_t, kRetrySecretLength> s{};
    gnutls_rnd(GNUTLS_RND_KEY, s.data(), s.size());
    return s;
  }();
  return secret;
}

}  // namespace

Result<size_t> write_retry(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd,
                           const ngtcp2_cid& retry_scid, Instant now, std::span<uint8_t> out) {
  const auto& secret = retry_secret();
  uint8_t token[NGTCP2_CRYPTO_MAX_RETRY_TOKENLEN];
  ngtcp2_ssize tokenlen = ngtcp2_crypto_generate_retry_token(
      token, secret.data(), secret.size(), hd.version, path.remote.addr, path.remote.addrlen,
      &retry_scid, &hd.dcid, to_ts(now));
  if (tokenlen < 0) {
    return moqd::fail(ErrorCode::kTransport, "cannot generate a Retry token");
  }
  ngtcp2_ssize n = ngtcp2_crypto_write_retry(out.data(), out.size(), hd.version, &hd.scid,
                                             &retry_scid, &hd.dcid, token,
                                             static_cast<size_t>(tokenlen));
  if (n < 0) {
    return moqd::fail(ErrorCode::kTransport, "cannot write a Retry packet");
  }
  return static_cast<size_t>(n);
}

bool has_retry_token(const ngtcp2_pkt_hd& hd) {
  return hd.tokenlen > 0 && hd.token[0] == NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY;
}

Result<RetryInfo> verify_retry_token(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd,
                                     Instant now) {
  if (!has_retry_token(hd)) {
    return moqd::fail(ErrorCode::kProtocolViolation, "no Retry token");
  }
  const auto& secret = retry_secret();
  RetryInfo info{};
  if (ngtcp2_crypto_verify_retry_token(&info.original_dcid, hd.token, hd.tokenlen,
                                       secret.data(), secret.size(), hd.version, path.remote.addr,
                                       path.remote.addrlen, &hd.dcid,
                                       to_ngtcp2(kRetryTokenLifetime), to_ts(now)) != 0) {
    return moqd::fail(ErrorCode::kProtocolViolation, "invalid or expired Retry token");
  }
  info.retry_scid = hd.dcid;
  return info;
}

namespace {
Result<size_t> write_initial_close(const ngtcp2_pkt_hd& hd, uint64_t code, std::span<uint8_t> out) {
  ngtcp2_ssize n = ngtcp2_crypto_write_connection_close(out.data(), out.size(), hd.version,
                                                        &hd.scid, &hd.dcid, code, nullptr, 0);
  if (n < 0) {
    return moqd::fail(ErrorCode::kTransport, "cannot write CONNECTION_CLOSE");
  }
  return static_cast<size_t>(n);
}
}  // namespace

Result<size_t> write_invalid_token_close(const ngtcp2_pkt_hd& hd, std::span<uint8_t> out) {
  return write_initial_close(hd, NGTCP2_INVALID_TOKEN, out);
}

Result<size_t> write_refused_close(const ngtcp2_pkt_hd& hd, std::span<uint8_t> out) {
  return write_initial_close(hd, NGTCP2_CONNECTION_REFUSED, out);
}

Connection::~Connection() {
  ctx_.timers.cancel(expiry_timer_);
  ctx_.timers.cancel(done_timer_);
  if (state_ == State::kOpen && conn_ != nullptr) {
    state_ = State::kClosing;
    close_pending_ = true;
    close_code_ = kClosedCode;
    close_reason_ = "session destroyed";
  }
  deliver_closed();
  streams_.clear();
  if (conn_ != nullptr) {
    ngtcp2_conn_del(conn_);
  }
}

ngtcp2_tstamp Connection::now_ts() const { return to_ts(ctx_.clock.now()); }

// ---------------------------------------------------------------------------------------------
// Packets in.

Status Connection::on_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) {
  if (state_ != State::kOpen) {
    // RFC 9000 §10.2.1: answer a closing peer with our CONNECTION_CLOSE, exponentially less often.
    ++packets_while_closing_;
    if (!close_pkt_.empty() && (packets_while_closing_ & (packets_while_closing_ - 1)) == 0) {
      send(close_pkt_, path_.path);
    }
    return moqd::fail(ErrorCode::kClosed, "connection closed");
  }
  ngtcp2_pkt_info pi{};
  int rv = ngtcp2_conn_read_pkt(conn_, &path, &pi, pkt.data(), pkt.size(), now_ts());
  Status st;
  if (rv != 0) {
    on_read_error(rv);
    st = moqd::fail(ErrorCode::kTransport, "connection closed by packet");
  }
  // ngtcp2 wants a write pass after every read before its timer is armed: the turn's end does
  // both, once for all the packets of the turn.
  schedule_flush(kCauseRead);
  return st;
}

void Connection::on_read_error(int rv) {
  switch (rv) {
    case NGTCP2_ERR_DRAINING: {
      const ngtcp2_ccerr* err = ngtcp2_conn_get_ccerr(conn_);
      std::string reason(reinterpret_cast<const char*>(err->reason), err->reasonlen);
      enter_closed(err->error_code, reason, true);
      return;
    }
    case NGTCP2_ERR_DROP_CONN:
      enter_closed(static_cast<uint64_t>(ErrorCode::kTransport), "dropped", false);
      return;
    case NGTCP2_ERR_CRYPTO: {
      uint8_t alert = ngtcp2_conn_get_tls_alert(conn_);
      ngtcp2_ccerr err;
      ngtcp2_ccerr_default(&err);
      ngtcp2_ccerr_set_tls_alert(&err, alert, nullptr, 0);
      close_locally(err, kCryptoErrorBase + alert, "tls handshake failed");
      return;
    }
    default:
      fail(rv);
  }
}

// ---------------------------------------------------------------------------------------------
// ngtcp2 events.

void Connection::on_recv_stream_data(uint32_t flags, int64_t id, std::span<const uint8_t> data) {
  QuicStream* s = find(id);
  if (s == nullptr || s->stop_sent_ || s->released_) {
    ngtcp2_conn_extend_max_stream_offset(conn_, id, data.size());
    ngtcp2_conn_extend_max_offset(conn_, data.size());
    return;
  }
  s->recv_.append(data);
  if ((flags & NGTCP2_STREAM_DATA_FLAG_FIN) != 0) {
    s->fin_received_ = true;
  }
  if (!data.empty() || s->fin_received_) {
    push({Event::kReadable, id});
  }
}

void Connection::on_acked_stream_data(int64_t id, uint64_t offset, uint64_t len) {
  QuicStream* s = find(id);
  if (s == nullptr) {
    return;
  }
  s->acked_ = std::max(s->acked_, offset + len);
  while (!s->send_queue_.empty() && s->base_ + s->send_queue_.front().size() <= s->acked_ &&
         s->next_idx_ > 0) {
    s->base_ += s->send_queue_.front().size();
    s->send_queue_.pop_front();
    --s->next_idx_;
  }
}

void Connection::on_stream_open(int64_t id) {
  create_stream(id);
  push({Event::kIncoming, id});
}

// The peer may open one more stream of the kind once one of its streams is finished.
void Connection::credit_peer_stream(QuicStream& s) {
  if (s.credited_ || is_local(s.id_)) {
    return;
  }
  s.credited_ = true;
  if (transport::is_uni(static_cast<StreamId>(s.id_))) {
    ngtcp2_conn_extend_max_streams_uni(conn_, 1);
  } else {
    ngtcp2_conn_extend_max_streams_bidi(conn_, 1);
  }
}

void Connection::on_stream_close(uint32_t flags, int64_t id, uint64_t code) {
  QuicStream* s = find(id);
  if (s == nullptr) {
    return;  // reaped, so already closed and credited
  }
  credit_peer_stream(*s);
  s->closed_ = true;
  // ngtcp2 1.11 has no recv_stop_sending callback (it arrives in 1.24): a send side that we
  // neither finished (and had acknowledged) nor reset can only have been ended by the peer's
  // STOP_SENDING.
  bool send_done = s->reset_sent_ || (s->fin_sent_ && s->acked_ >= s->written_);
  if (has_send_side(id) && (s->stopped_by_peer_ || !send_done) && !s->stop_reported_) {
    s->stop_reported_ = true;
    uint64_t c = (flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) != 0 ? code : 0;
    push({Event::kStopSending, id, c});
  }
  drop_unsent(*s);
  s->send_queue_.clear();
  s->next_idx_ = 0;
  s->next_off_ = 0;
  ready_.remove(s->id(), s->sched_);
  maybe_reap(*s);
}

void Connection::on_stream_reset(int64_t id, uint64_t code) {
  QuicStream* s = find(id);
  if (s == nullptr || s->reset_received_) {
    return;
  }
  s->reset_received_ = true;
  s->fin_received_ = false;
  drop_unread(*s);
  push({Event::kReset, id, code});
}

void Connection::on_extend_max_stream_data(int64_t id) {
  if (QuicStream* s = find(id); s != nullptr && s->data_blocked_) {
    s->data_blocked_ = false;
    make_ready(*s);
  }
}

void Connection::on_extend_max_local_streams() {
  if (streams_blocked_) {
    streams_blocked_ = false;
    push({Event::kStreamsAvailable});
  }
}

void Connection::on_handshake_completed() {
  handshake_completed_ = true;
  protocol_ = selected_alpn(tls_.get());
  push({Event::kHandshake});
}

bool Connection::on_new_connection_id(ngtcp2_cid* cid, uint8_t* token, size_t cidlen) {
  ctx_.new_cid(cid, token);
  return cid->datalen == cidlen;
}

// Past the queue's bounds the new datagram is dropped: the visitor is behind, and datagrams are
// unreliable anyway.
void Connection::on_recv_datagram(std::span<const uint8_t> data) {
  if (dgram_in_.size() >= datagram_queue_ ||
      dgram_in_bytes_ + data.size() > datagram_queue_bytes_) {
    ++dgram_in_dropped_;
    return;
  }
  if (dgram_in_.empty()) {
    push({Event::kDatagram});  // one event delivers everything queued by then
  }
  dgram_in_.emplace_back(data.begin(), data.end());
  dgram_in_bytes_ += data.size();
}

// ---------------------------------------------------------------------------------------------
// Datagrams out.

size_t Connection::max_datagram_size() const {
  if (state_ != State::kOpen || !handshake_completed_) {
    return 0;
  }
  const ngtcp2_transport_params* remote = ngtcp2_conn_get_remote_transport_params(conn_);
  if (remote == nullptr || remote->max_datagram_frame_size == 0) {
    return 0;
  }
  size_t packet = std::min(ngtcp2_conn_get_path_max_tx_udp_payload_size(conn_), kMaxPacketSize);
  if (remote->max_udp_payload_size != 0) {
    packet = static_cast<size_t>(std::min<uint64_t>(packet, remote->max_udp_payload_size));
  }
  size_t by_packet = packet > kDatagramPacketOverhead ? packet - kDatagramPacketOverhead : 0;
  return static_cast<size_t>(
      std::min<uint64_t>(by_packet, payload_within_frame(remote->max_datagram_frame_size)));
}

bool Connection::send_datagram(std::span<const uint8_t> payload) {
  if (payload.size() > max_datagram_size() || dgram_out_.size() >= datagram_queue_ ||
      dgram_out_bytes_ + payload.size() > datagram_queue_bytes_) {
    return false;  // max_datagram_size() is 0 when closed or unsupported
  }
  dgram_out_.push_back(OutDatagram{std::vector<uint8_t>(payload.begin(), payload.end())});
  dgram_out_bytes_ += payload.size();
  schedule_flush();
  return true;
}

void Connection::pop_datagram() {
  dgram_out_bytes_ -= dgram_out_.front().data.size();
  dgram_out_.pop_front();
}

// Offers the oldest queued datagram to ngtcp2, coalescing with what follows (FLAG_MORE).
Connection::WriteStep Connection::write_datagram(ngtcp2_path* path, ngtcp2_pkt_info* pi,
                                                 std::span<uint8_t> dest, ngtcp2_tstamp ts,
                                                 size_t* pktlen) {
  OutDatagram& d = dgram_out_.front();
  ngtcp2_vec vec{d.data.data(), d.data.size()};
  size_t nvec = d.data.empty() ? 0 : 1;  // ngtcp2 asserts on an empty vector
  int accepted = 0;
  ++stats_.write_calls;
  ngtcp2_ssize n =
      ngtcp2_conn_writev_datagram(conn_, path, pi, dest.data(), dest.size(), &accepted,
                                  NGTCP2_WRITE_DATAGRAM_FLAG_MORE, 0, &vec, nvec, ts);
  if (n == NGTCP2_ERR_WRITE_MORE) {
    pop_datagram();  // in the packet, which has room for more
    return WriteStep::kAgain;
  }
  if (n == NGTCP2_ERR_INVALID_ARGUMENT || n == NGTCP2_ERR_INVALID_STATE) {
    pop_datagram();  // over the peer's limit, or no datagrams: checked before writing anything
    return WriteStep::kAgain;
  }
  if (n < 0) {
    fail(static_cast<int>(n));
    return WriteStep::kStop;
  }
  if (n == 0) {
    ++stats_.empty_calls;
    // Congestion or pacing limited, unless the path shrank below this datagram since it was
    // queued: then it would never fit.
    if (d.data.size() <= max_datagram_size()) {
      return WriteStep::kStop;
    }
    pop_datagram();
    return WriteStep::kAgain;
  }
  if (accepted != 0 || ++d.misses >= kMaxDatagramMisses) {
    pop_datagram();
  }
  *pktlen = static_cast<size_t>(n);
  return WriteStep::kPacket;
}

// ---------------------------------------------------------------------------------------------
// Streams.

bool Connection::has_unacked_stream_data() const {
  for (const auto& [id, s] : streams_) {
    // A stream ngtcp2 closed will send nothing more, acknowledged or not.
    if (!has_send_side(id) || s->closed_ || s->reset_sent_ || s->stopped_by_peer_) {
      continue;
    }
    // ngtcp2 1.11 reports a FIN's acknowledgement only by closing the stream, which for a bidi
    // stream also waits on the receive side: there the FIN counts once sent.
    bool uni = transport::is_uni(static_cast<StreamId>(id));
    bool fin_unacked = s->fin_queued_ && (uni || !s->fin_sent_);
    if (s->acked_ < s->written_ || fin_unacked) {
      return true;
    }
  }
  return false;
}

QuicStream& Connection::create_stream(int64_t id) {
  return streams_.add(static_cast<StreamId>(id), std::make_unique<QuicStream>(*this, id));
}

Stream* Connection::open_stream(bool uni) {
  if (state_ != State::kOpen) {
    return nullptr;
  }
  int64_t id = -1;
  int rv = uni ? ngtcp2_conn_open_uni_stream(conn_, &id, nullptr)
               : ngtcp2_conn_open_bidi_stream(conn_, &id, nullptr);
  if (rv != 0) {
    streams_blocked_ = streams_blocked_ || rv == NGTCP2_ERR_STREAM_ID_BLOCKED;
    return nullptr;
  }
  return &create_stream(id);
}

void Connection::stream_consume(QuicStream& s, size_t n) { stream_credit(s, s.recv_.consume(n)); }

Bytes Connection::stream_read(QuicStream& s, size_t n) {
  Bytes out = s.recv_.take(n);
  stream_credit(s, out.size());
  return out;
}

// `n` bytes of the stream were read: the peer may send that many more.
void Connection::stream_credit(QuicStream& s, size_t n) {
  if (n > 0 && state_ == State::kOpen) {
    ngtcp2_conn_extend_max_stream_offset(conn_, s.id_, n);
    ngtcp2_conn_extend_max_offset(conn_, n);
    schedule_flush();  // MAX_(STREAM_)DATA may be due
  }
}

// Bytes handed to us but never consumed still count against the peer's connection credit.
void Connection::drop_unread(QuicStream& s) {
  size_t n = s.recv_.drop();
  if (n > 0 && state_ == State::kOpen) {
    ngtcp2_conn_extend_max_offset(conn_, n);
    schedule_flush();
  }
}

void Connection::stream_stop_sending(QuicStream& s, uint64_t code) {
  if (!has_recv_side(s.id_) || s.stop_sent_ || state_ != State::kOpen) {
    return;
  }
  s.stop_sent_ = true;
  drop_unread(s);
  if (!s.fin_received_ && !s.reset_received_ && !s.closed_) {
    ngtcp2_conn_shutdown_stream_read(conn_, 0, s.id_, code);
    schedule_flush();
  }
}

size_t Connection::stream_write_capacity(const QuicStream& s) const {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_ ||
      s.stopped_by_peer_ || s.closed_) {
    return 0;
  }
  return budget_.capacity(s.id(), s.buffered(), s.budget_);
}

void Connection::stream_write(QuicStream& s, Bytes data) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_ ||
      s.stopped_by_peer_ || s.closed_ || data.empty()) {
    return;
  }
  size_t n = data.size();
  s.written_ += n;
  s.send_queue_.push_back(std::move(data));
  budget_.on_queued(n, s.buffered(), s.budget_);
  make_ready(s);
  schedule_flush();
}

void Connection::stream_write_pair(QuicStream& s, Bytes first, Bytes second) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_ ||
      s.stopped_by_peer_ || s.closed_) {
    return;
  }
  size_t n = first.size() + second.size();
  if (n == 0) {
    return;
  }
  // Empty Bytes never enter the queue: gather() and the ACK walk assume every entry has bytes.
  if (!first.empty()) {
    s.send_queue_.push_back(std::move(first));
  }
  if (!second.empty()) {
    s.send_queue_.push_back(std::move(second));
  }
  s.written_ += n;
  budget_.on_queued(n, s.buffered(), s.budget_);
  make_ready(s);
  schedule_flush();
}

void Connection::stream_finish(QuicStream& s) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_ ||
      s.stopped_by_peer_ || s.closed_) {
    return;
  }
  s.fin_queued_ = true;
  make_ready(s);
  schedule_flush();
}

// Unsent bytes are ours alone and go at once. Sent ones stay until acknowledged or the stream
// closes: ngtcp2 promises to touch a stream's data no more only after stream_close (1.3+ no
// longer retransmits STREAM frames of a reset stream, but the contract is still the close).
void Connection::drop_unsent(QuicStream& s) {
  budget_.on_dropped(s.buffered(), s.budget_);
  if (s.next_idx_ < s.send_queue_.size()) {
    size_t keep = s.next_idx_;
    if (s.next_off_ > 0) {
      s.send_queue_[keep] = s.send_queue_[keep].slice(0, s.next_off_);
      ++keep;
      s.next_idx_ = keep;
      s.next_off_ = 0;
    }
    s.send_queue_.truncate(keep);
  }
  s.written_ = s.sent_;
  ready_.remove(s.id(), s.sched_);
}

void Connection::stream_reset(QuicStream& s, uint64_t code) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.reset_sent_ || s.closed_ ||
      (s.fin_sent_ && s.acked_ >= s.written_)) {
    return;
  }
  s.reset_sent_ = true;
  drop_unsent(s);
  ngtcp2_conn_shutdown_stream_write(conn_, 0, s.id_, code);
  schedule_flush();
}

void Connection::stream_set_send_order(QuicStream& s, uint64_t order) {
  ready_.set_order(s.id(), s.sched_, order);
}

void Connection::stream_release(QuicStream& s) {
  if (s.released_) {
    return;
  }
  if (has_send_side(s.id_) && !s.fin_queued_) {
    stream_reset(s, 0);
  }
  if (has_recv_side(s.id_)) {
    stream_stop_sending(s, 0);
    drop_unread(s);
  }
  s.released_ = true;
  s.visitor_ = nullptr;
  maybe_reap(s);
}

// ---------------------------------------------------------------------------------------------
// The write loop.

bool Connection::has_send_work(const QuicStream& s) const {
  if (s.reset_sent_ || s.stopped_by_peer_ || s.closed_ || s.data_blocked_) {
    return false;
  }
  return s.sent_ < s.written_ || (s.fin_queued_ && !s.fin_sent_);
}

void Connection::make_ready(QuicStream& s) {
  if (has_send_work(s)) {
    ready_.push_back(s.id(), s.sched_);
  }
}

// Stops at `max_vecs` vectors or once `max_bytes` are gathered: more than a packet holds would
// only be walked again by the next call.
size_t Connection::gather(QuicStream& s, ngtcp2_vec* vecs, size_t max_vecs, size_t max_bytes,
                          size_t* total) const {
  size_t n = 0;
  *total = 0;
  size_t off = s.next_off_;
  for (size_t i = s.next_idx_; i < s.send_queue_.size() && n < max_vecs && *total < max_bytes;
       ++i) {
    const Bytes& b = s.send_queue_[i];
    vecs[n].base = const_cast<uint8_t*>(b.data() + off);
    vecs[n].len = b.size() - off;
    *total += vecs[n].len;
    ++n;
    off = 0;
  }
  return n;
}

void Connection::account_sent(QuicStream& s, size_t n, bool fin) {
  const size_t n_sent = n;
  s.sent_ += n;
  budget_.on_sent(n);
  bytes_sent_ += n;
  while (n > 0) {
    size_t left = s.send_queue_[s.next_idx_].size() - s.next_off_;
    size_t step = std::min(left, n);
    s.next_off_ += step;
    n -= step;
    if (s.next_off_ == s.send_queue_[s.next_idx_].size()) {
      ++s.next_idx_;
      s.next_off_ = 0;
    }
  }
  const bool fin_now = fin && !s.fin_sent_;
  s.fin_sent_ = s.fin_sent_ || fin;
  if ((n_sent > 0 || fin_now) && s.buffered() == 0 && (!s.fin_queued_ || s.fin_sent_)) {
    push({Event::kSent, s.id_});
  }
  if (budget_.take_stream_writable(s.buffered(), s.budget_)) {
    push({Event::kWritable, s.id_});
  }
  budget_.take_session_writable([this](StreamId id) {
    if (QuicStream* b = find(static_cast<int64_t>(id)); b != nullptr) {
      b->budget_.blocked_on_session = false;
      push({Event::kWritable, b->id_});
    }
  });
}

// The ngtcp2 recipe: coalesce frames into packets with the MORE flags, datagrams first, then
// stream data, up to the send quantum; then arm pacing with update_pkt_tx_time.
//
// Each packet is written straight into the sink's buffer (the UDP socket's send batch), so the
// bytes ngtcp2 encrypts are the bytes the kernel reads. A sink with no room stops the loop; it
// runs this connection again when it has.
void Connection::write_packets() {
  if (state_ != State::kOpen) {
    return;
  }
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  ngtcp2_tstamp ts = now_ts();
  // The room offered is the largest packet ngtcp2 may write, not the path's current size: ngtcp2
  // keeps ordinary packets within the path's size itself, and a PMTUD probe (1,452 bytes, sent
  // only when it fits) is what raises that size from 1,200.
  size_t max_udp = ngtcp2_conn_get_max_tx_udp_payload_size(conn_);
  size_t dest_len = std::min(max_udp, kMaxPacketSize);
  size_t max_pkts = std::max<size_t>(1, ngtcp2_conn_get_send_quantum(conn_) / max_udp);
  size_t pkts = 0;
  ++stats_.passes;
  const uint8_t causes = flush_causes_;
  flush_causes_ = 0;
  bool drained = false;  // the loop ended on a write call that wrote nothing
  for (;;) {
    std::span<uint8_t> dest = ctx_.sink.packet_buffer(dest_len);
    if (dest.size() < dest_len) {
      ctx_.sink.wait_for_room(*this);
      break;
    }
    size_t len = 0;
    WriteStep step = dgram_out_.empty() ? write_stream(&ps.path, &pi, dest, ts, &len)
                                        : write_datagram(&ps.path, &pi, dest, ts, &len);
    if (state_ != State::kOpen) {
      return;  // failed
    }
    if (step == WriteStep::kAgain) {
      continue;
    }
    if (step == WriteStep::kStop) {
      drained = true;  // nothing more, or congestion/pacing limited
      break;
    }
    send(dest.first(len), ps.path);
    if (++pkts >= max_pkts) {
      break;
    }
  }
  if (pkts == 0) {
    ++(causes == kCauseRead     ? stats_.empty_passes_after_read
       : causes == kCauseExpiry ? stats_.empty_passes_after_expiry
                                : stats_.empty_passes_other);
  }
  // Idle: the last call wrote nothing and nothing of ours waits. Its pacing check cleared an
  // expired pacing deadline (a deadline still in the future stays, and get_expiry below counts
  // it), so get_expiry() read before update_pkt_tx_time is every deadline but this pass's new
  // pacing one; see arm_expiry for why that one gates nothing here.
  idle_ = drained && ready_.empty() && dgram_out_.empty();
  if (idle_) {
    idle_expiry_ = ngtcp2_conn_get_expiry(conn_);
    ++stats_.idle_passes;
  }
  ngtcp2_conn_update_pkt_tx_time(conn_, ts);
}

// One writev_stream call for the next ready stream (or none: control frames and ACKs only).
Connection::WriteStep Connection::write_stream(ngtcp2_path* path, ngtcp2_pkt_info* pi,
                                               std::span<uint8_t> dest, ngtcp2_tstamp ts,
                                               size_t* pktlen) {
  ngtcp2_vec vecs[kMaxVecs];
  size_t total = 0;
  size_t nvec = 0;
  int64_t sid = -1;
  uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE;
  QuicStream* s = ready_.pop([this](StreamId id) { return find(static_cast<int64_t>(id)); },
                             &QuicStream::sched_);
  if (s != nullptr) {
    sid = s->id_;
    nvec = gather(*s, vecs, kMaxVecs, dest.size(), &total);
    bool all = s->sent_ + total == s->written_;
    if (s->fin_queued_ && all) {
      flags |= NGTCP2_WRITE_STREAM_FLAG_FIN;
    }
    if (all && ready_.empty()) {
      // The last data queued: with MORE, a packet it leaves room in comes back as WRITE_MORE
      // and needs one more call, with no stream, only to be closed.
      flags &= ~uint32_t{NGTCP2_WRITE_STREAM_FLAG_MORE};
    }
  }
  ngtcp2_ssize datalen = -1;
  ++stats_.write_calls;
  ngtcp2_ssize n = ngtcp2_conn_writev_stream(conn_, path, pi, dest.data(), dest.size(), &datalen,
                                             flags, sid, vecs, nvec, ts);
  if (s != nullptr && datalen >= 0) {
    bool fin = (flags & NGTCP2_WRITE_STREAM_FLAG_FIN) != 0 &&
               static_cast<size_t>(datalen) == total;
    account_sent(*s, static_cast<size_t>(datalen), fin);
  }
  if (n < 0) {
    return on_write_error(s, static_cast<int>(n)) ? WriteStep::kAgain : WriteStep::kStop;
  }
  if (s != nullptr) {
    make_ready(*s);  // to the back of its order: round robin
  }
  if (n == 0) {
    ++stats_.empty_calls;
    return WriteStep::kStop;
  }
  *pktlen = static_cast<size_t>(n);
  return WriteStep::kPacket;
}

// Returns false when the connection failed.
bool Connection::on_write_error(QuicStream* s, int rv) {
  switch (rv) {
    case NGTCP2_ERR_WRITE_MORE:
      if (s != nullptr) {
        make_ready(*s);
      }
      return true;
    case NGTCP2_ERR_STREAM_DATA_BLOCKED:
      if (s != nullptr) {
        s->data_blocked_ = true;  // until extend_max_stream_data
      }
      return true;
    case NGTCP2_ERR_STREAM_SHUT_WR:
      if (s != nullptr) {
        s->stopped_by_peer_ = !s->reset_sent_;  // the peer's STOP_SENDING
        drop_unsent(*s);
      }
      return true;
    default:
      fail(rv);
      return false;
  }
}

void Connection::send(std::span<const uint8_t> pkt, const ngtcp2_path& path) {
  ctx_.sink.send_packet(path, pkt);
}

// ---------------------------------------------------------------------------------------------
// Timers and event delivery.

void Connection::flush() { after_io(); }

void Connection::schedule_flush(FlushCause cause) {
  flush_causes_ |= cause;
  idle_ = false;  // whatever asked for this pass may have given ngtcp2 something to send
  ctx_.timers.at_turn_end(*this);
}

// ngtcp2_conn_get_expiry includes the pacing deadline that update_pkt_tx_time sets after every
// pass that sent a packet, and only a write call or handle_expiry clears it: a connection that
// sent a frame and has nothing more would wake once per frame only to find nothing to write.
// After an idle pass (write_packets) the timer is armed from idle_expiry_, every other deadline,
// instead. Pacing gates only a packet ngtcp2 has and could send but for pacing; there is none:
//  - the pass's last call wrote nothing with pacing allowing it (had pacing refused it, its
//    deadline is still set and in idle_expiry_), so ngtcp2 had nothing, or congestion control
//    held it (lost data, probes, our data): the window reopens only on an acknowledgement (a read,
//    which runs a pass) or on a loss-detection or lost-packet deadline (in idle_expiry_);
//  - what ngtcp2 makes by itself comes from a read (ACKs, PATH_RESPONSE, HANDSHAKE_DONE,
//    NEW_CONNECTION_ID, lost frames declared on an ACK, window updates it autotunes) or from its
//    other deadlines (ACK delay, loss detection and PTO probes, keep-alive PING, PMTUD probes,
//    path validation, CID retirement, idle and handshake timeouts), all in idle_expiry_;
//  - what we give it (stream data, flow-control credit, stream shutdowns, closes) goes through
//    schedule_flush, which ends the idle state, and its pass arms the timer again.
// The pass the wake-up would have run ends in a call that writes nothing, which marks the rate
// sample app-limited at delivered + bytes_in_flight, as the idle pass's last call already did with
// the same two numbers (only a read or a loss deadline moves them). Not waking at the deadline
// makes ngtcp2 count the time since it as pacing compensation at the next write, which lets later
// packets go out sooner (within the congestion window); waking there and finding nothing counts
// the timer's lateness the same way.
void Connection::arm_expiry() {
  ngtcp2_tstamp at = idle_ ? idle_expiry_ : ngtcp2_conn_get_expiry(conn_);
  if (at == expiry_at_ && expiry_timer_ != 0) {
    return;
  }
  ctx_.timers.cancel(expiry_timer_);
  expiry_timer_ = 0;
  expiry_at_ = at;
  if (at == UINT64_MAX) {
    return;
  }
  ngtcp2_tstamp now = now_ts();
  expiry_timer_ = ctx_.timers.schedule(from_ngtcp2_ceil(at > now ? at - now : 0), [this] {
    expiry_timer_ = 0;
    expiry_at_ = UINT64_MAX;
    on_expiry();
  });
}

void Connection::on_expiry() {
  if (state_ != State::kOpen) {
    return;
  }
  ++stats_.expiry_wakeups;
  int rv = ngtcp2_conn_handle_expiry(conn_, now_ts());
  if (rv == NGTCP2_ERR_IDLE_CLOSE || rv == NGTCP2_ERR_HANDSHAKE_TIMEOUT) {
    // Closed silently (RFC 9000 §10.1): nothing to send, no closing period.
    enter_closed(kTimeoutCode,
                 rv == NGTCP2_ERR_IDLE_CLOSE ? "idle timeout" : "handshake timeout", false);
  } else if (rv != 0) {
    fail(rv);
  }
  if (state_ != State::kOpen) {
    after_io();  // closed: delivered now
    return;
  }
  // The write pass ngtcp2 wants after handle_expiry runs at the end of this loop turn (timers run
  // before turn work), together with the one the turn's packets or writes asked for: one pass
  // where there were two (docs/ARCHITECTURE.md, "Write passes").
  schedule_flush(kCauseExpiry);
}

// Runs from the loop after a packet, a timer or a deferred flush: events first (the visitor may
// write), then the write loop, then the events it raised.
void Connection::after_io() {
  deliver_events();
  if (state_ == State::kOpen) {
    write_packets();
    deliver_events();
    release_tls();
  }
  reap();
  if (state_ == State::kOpen) {
    arm_expiry();
  } else {
    deliver_closed();
  }
}

// A server needs its TLS session only for the handshake: QUIC has no post-handshake TLS messages
// a client sends (RFC 9001 §4.1.3), and the 1-RTT keys and their updates live in ngtcp2's crypto
// contexts. Freeing it once the handshake is complete (confirmed, for a server) saves about 8 KB
// per connection. A client keeps its session: a server may send it session tickets.
void Connection::release_tls() {
  if (!server_ || !handshake_completed_ || !tls_) {
    return;
  }
  ngtcp2_conn_set_tls_native_handle(conn_, nullptr);
  tls_ = TlsSession();
}

void Connection::deliver_events() {
  if (in_delivery_) {
    return;
  }
  in_delivery_ = true;
  // The batch and the queue trade their storage back and forth, so a connection that receives
  // packets all day allocates neither after its first few.
  while (!events_.empty() && state_ == State::kOpen) {
    delivering_.swap(events_);
    for (const Event& e : delivering_) {
      if (state_ != State::kOpen) {
        break;
      }
      deliver_event(e);
    }
    delivering_.clear();
  }
  events_.clear();
  in_delivery_ = false;
}

void Connection::deliver_event(const Event& e) {
  if (e.kind == Event::kHandshake) {
    if (ctx_.observer != nullptr) {
      ctx_.observer->on_handshake_completed(*this);
    }
    return;
  }
  if (e.kind == Event::kDatagram) {
    deliver_datagrams();
    return;
  }
  if (e.kind == Event::kStreamsAvailable) {
    if (visitor_ != nullptr) {
      visitor_->on_streams_available();
    }
    return;
  }
  QuicStream* s = find(e.stream_id);
  if (s == nullptr) {
    return;
  }
  if (e.kind == Event::kIncoming) {
    if (visitor_ != nullptr) {
      visitor_->on_incoming_stream(*s);
    }
    return;
  }
  StreamVisitor* v = s->visitor_;
  if (v == nullptr || s->released_) {
    return;
  }
  switch (e.kind) {
    case Event::kReadable:
      v->on_readable();
      break;
    case Event::kWritable:
      if (!s->budget_.exhausted) {
        v->on_writable();
      }
      break;
    case Event::kReset:
      v->on_reset(e.code);
      break;
    case Event::kStopSending:
      v->on_stop_sending(e.code);
      break;
    case Event::kSent:
      if (!s->reset_sent_ && s->buffered() == 0) {
        v->on_sent();
      }
      break;
    default:
      break;
  }
}

void Connection::deliver_datagrams() {
  Ring<std::vector<uint8_t>> batch = std::move(dgram_in_);
  dgram_in_ = Ring<std::vector<uint8_t>>();
  dgram_in_bytes_ = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (state_ != State::kOpen || visitor_ == nullptr) {
      return;
    }
    visitor_->on_datagram(batch[i]);
  }
}

// A released stream is freed once ngtcp2 is done with it; deletion waits for reap() so that no
// stream is destroyed while one of its methods, or an ngtcp2 callback about it, is on the stack.
void Connection::maybe_reap(QuicStream& s) {
  if (s.released_ && s.closed_) {
    streams_.doom(s.id());
    schedule_flush();
  }
}

void Connection::reap() {
  streams_.reap([](const QuicStream& s) { return s.released_ && s.closed_; },
                [this](QuicStream& s) { ready_.remove(s.id(), s.sched_); });
}

// ---------------------------------------------------------------------------------------------
// Closing.

void Connection::close(uint64_t code, std::string_view reason) {
  if (state_ != State::kOpen) {
    return;
  }
  ngtcp2_ccerr err;
  ngtcp2_ccerr_default(&err);
  auto r = as_bytes(reason);
  ngtcp2_ccerr_set_application_error(&err, code, r.data(), r.size());
  close_locally(err, code, reason);
}

void Connection::close_without_error(uint64_t /*app_code*/, std::string_view reason) {
  if (state_ != State::kOpen) {
    return;
  }
  ngtcp2_ccerr err;
  ngtcp2_ccerr_default(&err);
  auto r = as_bytes(reason);
  ngtcp2_ccerr_set_transport_error(&err, NGTCP2_NO_ERROR, r.data(), r.size());
  close_locally(err, NGTCP2_NO_ERROR, reason);
}

void Connection::fail(int liberr) {
  MOQD_LOG(kDebug, "quic %s: %s", peer_.c_str(), ngtcp2_strerror(liberr));
  ngtcp2_ccerr err;
  ngtcp2_ccerr_default(&err);
  ngtcp2_ccerr_set_liberr(&err, liberr, nullptr, 0);
  close_locally(err, err.error_code, ngtcp2_strerror(liberr));
}

void Connection::close_locally(const ngtcp2_ccerr& err, uint64_t code,
                               std::string_view reason) {
  if (state_ != State::kOpen) {
    return;
  }
  ngtcp2_path_storage ps;
  ngtcp2_path_storage_zero(&ps);
  ngtcp2_pkt_info pi{};
  close_pkt_.resize(kMaxPacketSize);
  ngtcp2_ssize n = ngtcp2_conn_write_connection_close(conn_, &ps.path, &pi, close_pkt_.data(),
                                                      close_pkt_.size(), &err, now_ts());
  close_pkt_.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (n > 0) {
    send(close_pkt_, ps.path);
  }
  enter_closed(code, reason, true);
}

void Connection::enter_closed(uint64_t code, std::string_view reason, bool linger) {
  if (state_ != State::kOpen) {
    return;
  }
  state_ = State::kClosing;
  close_pending_ = true;
  close_code_ = code;
  close_reason_ = std::string(reason);
  ready_.clear();
  ctx_.timers.cancel(expiry_timer_);
  expiry_timer_ = 0;
  Duration linger_for =
      linger ? from_ngtcp2_ceil(kClosingPtos * ngtcp2_conn_get_pto(conn_)) : Duration::zero();
  done_timer_ = ctx_.timers.schedule(linger_for, [this] {
    done_timer_ = 0;
    finish_done();
  });
  schedule_flush();  // on_closed() from the loop
}

void Connection::deliver_closed() {
  if (!close_pending_) {
    return;
  }
  close_pending_ = false;
  events_.clear();
  if (visitor_ != nullptr) {
    visitor_->on_closed(close_code_, close_reason_);
  }
  ready_.clear();
  streams_.clear_doomed();
  budget_.clear();
  streams_.clear();
  dgram_in_.clear();
  dgram_in_bytes_ = 0;
  dgram_out_.clear();
  dgram_out_bytes_ = 0;
}

void Connection::finish_done() {
  deliver_closed();
  state_ = State::kDone;
  unqueue();
  if (ctx_.observer != nullptr) {
    ctx_.observer->on_done(*this);  // may destroy this connection: nothing may follow
  }
}

}  // namespace moqd::transport::quic
