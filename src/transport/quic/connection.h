#pragma once
// Connection: one QUIC connection (ngtcp2 1.11 + GnuTLS), server or client role, exposed as a
// transport::Session. Sans-I/O: the owner feeds received datagrams to on_packet() and gets
// outgoing ones through a PacketSink; time comes from a Clock and the loss/idle/pacing timer runs
// on Timers. Owned by the worker's endpoint (or a test); one worker thread.
//
// Sending is zero-copy: Stream::write() keeps the Bytes, ngtcp2 reads them through ngtcp2_vec,
// and they are dropped only once acknowledged (acked_stream_data_offset), or when the stream is
// reset or closed, or the connection ends. No visitor callback is made from inside a visitor's
// call or from inside an ngtcp2 callback: events are queued and delivered after the packet, timer
// or deferred flush that produced them.
//
// Datagrams (RFC 9221) are copied both ways and bounded both ways: received ones wait for the loop
// in a queue that drops new arrivals past Config::datagram_queue(_bytes), and send_datagram()
// refuses past the same bounds. The write loop sends queued datagrams before stream data, within
// congestion control; one that does not get into a packet after a few tries is dropped, never
// retried forever.
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <gnutls/gnutls.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/error.h"
#include "base/ring.h"
#include "transport/quic/tls.h"
#include "transport/stream_core.h"
#include "transport/transport.h"

namespace moqd::transport::quic {

// Where a connection's datagrams go: a UDP socket in production, a SimNetwork in tests.
// A connection asks for packet_buffer(), has ngtcp2 write a packet into it, and hands that packet
// to send_packet(); a sink whose buffer is its send batch (a UdpSocket's) then takes it without a
// copy. One thread.
class PacketSink {
 public:
  virtual ~PacketSink() = default;
  // Where the next packet, of at most `len` bytes, is to be written; valid until the next call to
  // this sink. Empty when the sink can take no packet now: the writer stops, asks wait_for_room(),
  // and is run again (TurnWork) once there is room. The default is a scratch buffer of the sink's.
  virtual std::span<uint8_t> packet_buffer(size_t len);
  // Sends `pkt` to `path.remote`. `pkt` is valid only during the call; when it is the start of the
  // last packet_buffer() the sink may keep it in place.
  virtual void send_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt) = 0;
  // `writer` found packet_buffer() empty: run it (once) when room returns. Sinks that never return
  // an empty buffer ignore it.
  virtual void wait_for_room(TurnWork& /*writer*/) {}

 private:
  std::vector<uint8_t> scratch_;
};

class Connection;

// Lifecycle events for the connection's owner. Called from the loop, never re-entrantly.
class ConnectionObserver {
 public:
  virtual ~ConnectionObserver() = default;
  // The handshake finished; protocol() is now known. The owner typically attaches the MoQ
  // session (Session::set_visitor) here.
  virtual void on_handshake_completed(Connection& conn) = 0;
  // The connection is over, including its closing or draining period: the owner may destroy it,
  // even from inside this call.
  virtual void on_done(Connection& conn) = 0;
};

// Fills a new connection ID of the generator's chosen length (cid->datalen set by it) and its
// 16-byte stateless reset token. Used for our initial SCID and every NEW_CONNECTION_ID.
using CidGenerator = std::function<void(ngtcp2_cid* cid, uint8_t* reset_token)>;

// Makes the connection's TLS session (tls.h make_server_session / make_client_session, which
// also carry the ALPN list). `conn_ref` is the connection's own and lives as long as it.
using TlsFactory = std::function<Result<TlsSession>(ngtcp2_crypto_conn_ref* conn_ref)>;

struct ConnectionConfig {
  // Receive limits advertised in our transport parameters. Credit is returned as the
  // application consumes; ngtcp2 may grow windows up to the *_window limits.
  uint64_t max_data = uint64_t{16} << 20;        // bytes, connection window (16 MiB)
  uint64_t max_stream_data = uint64_t{1} << 20;  // bytes, per-stream window (1 MiB)
  uint64_t max_window = uint64_t{64} << 20;      // bytes, connection window autotune cap
  uint64_t max_stream_window = uint64_t{16} << 20;  // bytes, per-stream autotune cap
  uint64_t max_streams_bidi = 100;   // peer-initiated bidi streams open at once
  uint64_t max_streams_uni = 1000;   // peer-initiated uni streams open at once
  Duration idle_timeout = std::chrono::seconds(30);
  // A PING after this long without sending, so an idle connection stays up and a dead peer is
  // noticed within idle_timeout (relay links, relay/cluster.h); zero: none (ngtcp2's default).
  Duration keep_alive = Duration::zero();
  Duration handshake_timeout = std::chrono::seconds(10);
  // Unsent bytes one stream queues before write_capacity() reaches 0 (256 KiB); on_writable()
  // fires once it drains below half of it.
  size_t stream_queue_target = size_t{256} << 10;
  // Unsent bytes over all streams before write_capacity() reports 0 (4 MiB).
  size_t send_buffer = size_t{4} << 20;
  // RFC 9221: the largest DATAGRAM frame we accept, in our transport parameters; 0 disables
  // receiving datagrams (the peer then sees max_datagram_size() == 0).
  uint64_t max_datagram_frame_size = 65535;
  // Bounds of each datagram queue: received and not yet delivered (new arrivals past them are
  // dropped), and queued by send_datagram() and not yet sent (it returns false past them).
  size_t datagram_queue = 256;
  size_t datagram_queue_bytes = size_t{1} << 20;
  // Acknowledgement policy: an ACK goes out at once after this many ack-eliciting packets
  // (ngtcp2's default is 2; Chromium decimates to about 10 once a connection is past its first
  // packets), otherwise within max_ack_delay (our transport parameter; 25 ms as RFC 9000).
  size_t ack_thresh = 2;
  Duration max_ack_delay = std::chrono::milliseconds(25);
};

// What a connection needs from its owner. Everything referenced must outlive the connection.
struct ConnectionContext {
  PacketSink& sink;
  const Clock& clock;
  Timers& timers;
  CidGenerator new_cid;
  ConnectionObserver* observer = nullptr;
};

// Stateless Retry (RFC 9000 §8.1.2), for the endpoint in front of Connection::accept(). A token is
// sealed with a per-process random secret and binds the client's address (path.remote), the
// Retry's SCID and the client's original DCID, so any worker of the process can check it. Pure
// functions, safe from any thread.

// What a valid Retry token in a client's Initial tells the server; accept() puts both into our
// transport parameters (§7.3) and counts the client's address as validated.
struct RetryInfo {
  ngtcp2_cid original_dcid;  // the DCID of the client's first Initial, read back from the token
  ngtcp2_cid retry_scid;     // the SCID our Retry chose: the DCID of the Initial carrying the token
};

// How long a Retry token stays valid.
inline constexpr Duration kRetryTokenLifetime = std::chrono::seconds(10);
// Large enough for a Retry packet or an Initial CONNECTION_CLOSE written below.
inline constexpr size_t kStatelessPacketBufferSize = 256;

// Writes into `out` a Retry answering the Initial `hd` (decoded by ngtcp2_accept) that arrived on
// `path`, with `retry_scid` as its SCID. Returns the packet's length, or kTransport.
Result<size_t> write_retry(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd,
                           const ngtcp2_cid& retry_scid, Instant now, std::span<uint8_t> out);
// True when the Initial carries a token shaped like one of our Retry tokens; any other token (say,
// another server's NEW_TOKEN) is to be treated as no token at all (§8.1.3).
bool has_retry_token(const ngtcp2_pkt_hd& hd);
// The RetryInfo of an Initial whose token is our Retry token for this client address and DCID,
// younger than kRetryTokenLifetime; kProtocolViolation otherwise.
Result<RetryInfo> verify_retry_token(const ngtcp2_path& path, const ngtcp2_pkt_hd& hd,
                                     Instant now);
// Writes into `out` an Initial CONNECTION_CLOSE with INVALID_TOKEN answering `hd` (§8.1.2: an
// invalid Retry token closes the connection attempt). Returns its length, or kTransport.
Result<size_t> write_invalid_token_close(const ngtcp2_pkt_hd& hd, std::span<uint8_t> out);
// Writes into `out` an Initial CONNECTION_CLOSE with CONNECTION_REFUSED answering `hd` (a server
// limit refuses the attempt before any connection state exists). Returns its length, or kTransport.
Result<size_t> write_refused_close(const ngtcp2_pkt_hd& hd, std::span<uint8_t> out);

class QuicStream;

class Connection final : public Session, private TurnWork {
 public:
  using Config = ConnectionConfig;

  // Client: starts the handshake on `path` (the Initial goes out from a 0-delay timer).
  // `make_tls` makes a client session (Binding::kQuic). Fails (kTransport) when TLS or ngtcp2
  // setup fails.
  [[nodiscard]] static Result<std::unique_ptr<Connection>> connect(const ngtcp2_path& path,
                                                                   const TlsFactory& make_tls,
                                                                   ConnectionContext ctx,
                                                                   Config config = {});
  // Server: the connection for the first Initial packet `pkt` (ngtcp2_accept), with our SCID
  // from ctx.new_cid. Does not read it: hand the same packet to on_packet() next. `retry`: what
  // verify_retry_token() found in `pkt`'s token, when the endpoint validated the client with a
  // Retry. Fails (kProtocolViolation) when `pkt` is not an acceptable Initial, or (kTransport) as
  // connect().
  [[nodiscard]] static Result<std::unique_ptr<Connection>> accept(
      const ngtcp2_path& path, std::span<const uint8_t> pkt, const TlsFactory& make_tls,
      ConnectionContext ctx, Config config = {}, const std::optional<RetryInfo>& retry = {});
  // Delivers on_closed() if it has not been delivered (no CONNECTION_CLOSE is sent).
  ~Connection() override;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // One received datagram. What it brings (stream data, acknowledgements) is handed to the
  // visitor, and answered, once at the end of the loop's turn (Timers::at_turn_end), with
  // everything else that arrived in that turn. Errors mean the connection is closing or closed
  // (on_closed follows from the loop); the owner needs to do nothing but keep it until on_done.
  Status on_packet(const ngtcp2_path& path, std::span<const uint8_t> pkt);
  // Delivers pending events and writes what congestion control, pacing and flow control allow
  // (the write loop), now. The connection does this by itself, once, at the end of every turn in
  // which a packet arrived, its timer fired or a stream was written.
  void flush();

  bool is_handshake_completed() const { return handshake_completed_; }
  // Closed for the application (on_closed delivered or pending).
  bool is_closed() const { return state_ != State::kOpen; }
  bool is_done() const { return state_ == State::kDone; }
  bool is_server() const { return server_; }
  // The TLS session is still held (a server frees it once the handshake is complete).
  bool holds_tls() const { return static_cast<bool>(tls_); }
  // Stream objects alive (released ones that still hold unacked data count), for tests.
  size_t stream_count() const { return streams_.size(); }
  // True while a stream's send side, neither reset nor closed, still owes the peer something:
  // bytes not yet acknowledged, or a FIN not yet sent (on a uni stream, not yet acknowledged).
  // Checked before close(), which discards whatever lost packets still owed the peer.
  bool has_unacked_stream_data() const;
  ngtcp2_conn* native() { return conn_; }

  // transport::Session
  void set_visitor(SessionVisitor* visitor) override { visitor_ = visitor; }
  Stream* open_bidi() override { return open_stream(false); }
  Stream* open_uni() override { return open_stream(true); }
  void close(uint64_t code, std::string_view reason) override;
  // CONNECTION_CLOSE of type 0x1c with NO_ERROR; `app_code` is not sent. on_closed() gets 0.
  void close_without_error(uint64_t app_code, std::string_view reason) override;
  std::string_view protocol() const override { return protocol_; }
  std::string_view path() const override { return "/"; }
  std::string_view peer() const override { return peer_; }
  std::string_view kind() const override { return "quic"; }
  uint64_t bytes_sent() const override { return bytes_sent_; }
  size_t unsent_bytes() const override { return budget_.unsent(); }
  size_t max_datagram_size() const override;
  bool send_datagram(std::span<const uint8_t> payload) override;

  // Datagrams queued by send_datagram() and not yet sent or dropped, for tests.
  size_t queued_datagrams() const { return dgram_out_.size(); }
  // Received datagrams dropped because the receive queue was full, for tests and metrics.
  uint64_t datagrams_dropped_on_receive() const { return dgram_in_dropped_; }
  // Write passes run so far (the write loop; each ends in an ngtcp2 write call that writes
  // nothing, or at the send quantum), for tests and benchmarks.
  uint64_t write_passes() const { return stats_.passes; }
  // The write path's own counts, for tests and benchmarks (bench/quic_fanout_main.cc prints them).
  struct WriteStats {
    uint64_t passes = 0;         // write_packets() runs
    uint64_t write_calls = 0;    // ngtcp2 writev_stream / writev_datagram calls
    uint64_t empty_calls = 0;    // ... that returned 0: nothing (more) to send, or cwnd/pacing
    // Passes that sent no packet, by what asked for them: packets read only, the expiry timer
    // only, or anything else (our writes, several causes in one turn).
    uint64_t empty_passes_after_read = 0;
    uint64_t empty_passes_after_expiry = 0;
    uint64_t empty_passes_other = 0;
    uint64_t expiry_wakeups = 0;  // the expiry timer fired (handle_expiry)
    // Passes that ended idle (see arm_expiry): the timer was armed without the pacing deadline.
    uint64_t idle_passes = 0;
  };
  const WriteStats& write_stats() const { return stats_; }

 private:
  friend class QuicStream;
  struct Trampolines;  // the ngtcp2 C callbacks, forwarding to the on_* members
  enum class State { kOpen, kClosing, kDone };
  // A visitor event waiting for delivery from the loop.
  struct Event {
    enum Kind { kIncoming, kReadable, kWritable, kReset, kStopSending, kSent, kStreamsAvailable,
                kHandshake, kDatagram } kind;
    int64_t stream_id = -1;
    uint64_t code = 0;
  };

  // ngtcp2 events, from inside ngtcp2 calls: they only record state and queue events.
  void on_recv_stream_data(uint32_t flags, int64_t id, std::span<const uint8_t> data);
  void on_acked_stream_data(int64_t id, uint64_t offset, uint64_t len);
  void on_stream_open(int64_t id);
  void on_stream_close(uint32_t flags, int64_t id, uint64_t code);
  void on_stream_reset(int64_t id, uint64_t code);
  void on_extend_max_stream_data(int64_t id);
  void on_extend_max_local_streams();
  void on_handshake_completed();
  bool on_new_connection_id(ngtcp2_cid* cid, uint8_t* token, size_t cidlen);
  void on_recv_datagram(std::span<const uint8_t> data);

  Connection(bool server, ConnectionContext ctx, const Config& config, const ngtcp2_path& path);
  Status init_tls(const TlsFactory& make_tls);
  void fill_callbacks(ngtcp2_callbacks& cb) const;
  void fill_settings(ngtcp2_settings& settings, const Config& config) const;
  static void fill_params(ngtcp2_transport_params& params, const Config& config);

  ngtcp2_tstamp now_ts() const;
  QuicStream* find(int64_t id) const { return streams_.find(static_cast<StreamId>(id)); }
  QuicStream& create_stream(int64_t id);
  Stream* open_stream(bool uni);
  bool is_local(int64_t id) const {
    return is_server_initiated(static_cast<StreamId>(id)) == server_;
  }
  bool has_send_side(int64_t id) const {
    return !transport::is_uni(static_cast<StreamId>(id)) || is_local(id);
  }
  bool has_recv_side(int64_t id) const {
    return !transport::is_uni(static_cast<StreamId>(id)) || !is_local(id);
  }

  void on_read_error(int rv);
  void credit_peer_stream(QuicStream& s);

  // Stream operations (called by QuicStream).
  void stream_consume(QuicStream& s, size_t n);
  Bytes stream_read(QuicStream& s, size_t n);
  void stream_credit(QuicStream& s, size_t n);
  void stream_stop_sending(QuicStream& s, uint64_t code);
  size_t stream_write_capacity(const QuicStream& s) const;
  void stream_write(QuicStream& s, Bytes data);
  void stream_write_pair(QuicStream& s, Bytes first, Bytes second);
  void stream_finish(QuicStream& s);
  void stream_reset(QuicStream& s, uint64_t code);
  void stream_set_send_order(QuicStream& s, uint64_t order);
  void stream_release(QuicStream& s);
  void drop_unread(QuicStream& s);
  void drop_unsent(QuicStream& s);

  // Write loop.
  bool has_send_work(const QuicStream& s) const;
  void make_ready(QuicStream& s);
  size_t gather(QuicStream& s, ngtcp2_vec* vecs, size_t max_vecs, size_t max_bytes,
                size_t* total) const;
  void account_sent(QuicStream& s, size_t n, bool fin);
  // What one ngtcp2 write call left the write loop to do: call again (the packet has room, or
  // nothing was written), send the packet of *pktlen bytes in the sink's buffer, or stop (nothing more,
  // congestion/pacing limited, or the connection failed).
  enum class WriteStep { kAgain, kPacket, kStop };
  void write_packets();
  WriteStep write_stream(ngtcp2_path* path, ngtcp2_pkt_info* pi, std::span<uint8_t> dest,
                         ngtcp2_tstamp ts, size_t* pktlen);
  WriteStep write_datagram(ngtcp2_path* path, ngtcp2_pkt_info* pi, std::span<uint8_t> dest,
                           ngtcp2_tstamp ts, size_t* pktlen);
  void pop_datagram();
  bool on_write_error(QuicStream* s, int rv);
  void send(std::span<const uint8_t> pkt, const ngtcp2_path& path);

  // Timers and event delivery.
  void run_turn_work() override { after_io(); }
  // What asked for the next write pass, for WriteStats.
  enum FlushCause : uint8_t { kCauseRead = 1, kCauseExpiry = 2, kCauseOther = 4 };
  void schedule_flush(FlushCause cause = kCauseOther);
  void arm_expiry();
  void on_expiry();
  void after_io();
  void release_tls();
  void push(Event e) { events_.push_back(e); }
  void deliver_events();
  void deliver_event(const Event& e);
  void deliver_datagrams();
  void maybe_reap(QuicStream& s);
  void reap();

  // Closing.
  void close_locally(const ngtcp2_ccerr& err, uint64_t code,
                     std::string_view reason);
  void fail(int liberr);
  // `linger`: keep the connection for the closing/draining period (3 PTO) before on_done.
  void enter_closed(uint64_t code, std::string_view reason, bool linger);
  void deliver_closed();
  void finish_done();

  const bool server_;
  ConnectionContext ctx_;
  // The only settings read after the connection is made (the datagram queues' bounds); the rest of
  // its Config is handed to ngtcp2 and the send budget at creation and not kept.
  const size_t datagram_queue_;
  const size_t datagram_queue_bytes_;
  ngtcp2_crypto_conn_ref conn_ref_{};
  TlsSession tls_;
  ngtcp2_conn* conn_ = nullptr;  // deleted in the destructor, before tls_
  ngtcp2_path_storage path_;
  std::string peer_;
  std::string protocol_;
  SessionVisitor* visitor_ = nullptr;

  State state_ = State::kOpen;
  bool handshake_completed_ = false;
  bool close_pending_ = false;  // closed; on_closed() not delivered yet
  bool in_delivery_ = false;
  uint64_t close_code_ = 0;
  std::string close_reason_;
  std::vector<uint8_t> close_pkt_;  // our CONNECTION_CLOSE, re-sent while closing
  uint64_t packets_while_closing_ = 0;

  StreamTable<QuicStream> streams_;
  SendScheduler ready_;
  SendBudget budget_;
  std::vector<Event> events_;
  std::vector<Event> delivering_;  // the batch deliver_events() is working through
  bool streams_blocked_ = false;
  uint64_t bytes_sent_ = 0;

  // A datagram waiting to be sent, and the packets that went out without room for it.
  struct OutDatagram {
    std::vector<uint8_t> data;
    int misses = 0;
  };
  Ring<std::vector<uint8_t>> dgram_in_;  // received, not yet delivered
  size_t dgram_in_bytes_ = 0;
  uint64_t dgram_in_dropped_ = 0;
  Ring<OutDatagram> dgram_out_;
  size_t dgram_out_bytes_ = 0;

  WriteStats stats_;
  uint8_t flush_causes_ = 0;
  // The last write pass ended idle and nothing has asked for a pass since: idle_expiry_ is
  // ngtcp2_conn_get_expiry() as it was before that pass armed pacing (see arm_expiry).
  bool idle_ = false;
  ngtcp2_tstamp idle_expiry_ = UINT64_MAX;
  TimerId expiry_timer_ = 0;
  ngtcp2_tstamp expiry_at_ = UINT64_MAX;
  TimerId done_timer_ = 0;
};

// One stream of a Connection. Owned by the connection; see transport::Stream for the contract.
class QuicStream final : public Stream {
 public:
  QuicStream(Connection& conn, int64_t id) : conn_(conn), id_(id) {}

  StreamId id() const override { return static_cast<StreamId>(id_); }
  void set_visitor(StreamVisitor* visitor) override;
  std::span<const uint8_t> peek() const override { return recv_.peek(); }
  void consume(size_t n) override { conn_.stream_consume(*this, n); }
  Bytes read(size_t n) override { return conn_.stream_read(*this, n); }
  bool is_fin_received() const override { return fin_received_ && recv_.unread() == 0; }
  bool has_peer_fin() const override { return fin_received_; }
  void stop_sending(uint64_t code) override { conn_.stream_stop_sending(*this, code); }
  size_t write_capacity() const override { return conn_.stream_write_capacity(*this); }
  void write(Bytes data) override { conn_.stream_write(*this, std::move(data)); }
  void write_pair(Bytes first, Bytes second) override {
    conn_.stream_write_pair(*this, std::move(first), std::move(second));
  }
  void finish() override { conn_.stream_finish(*this); }
  void reset(uint64_t code) override { conn_.stream_reset(*this, code); }
  size_t buffered() const override { return static_cast<size_t>(written_ - sent_); }
  void set_send_order(uint64_t order) override { conn_.stream_set_send_order(*this, order); }
  void release() override { conn_.stream_release(*this); }

  // Send buffers still referenced (written and neither acknowledged nor dropped), for tests.
  size_t held_buffers() const { return send_queue_.size(); }

 private:
  friend class Connection;

  Connection& conn_;
  const int64_t id_;
  StreamVisitor* visitor_ = nullptr;
  bool released_ = false;
  bool closed_ = false;    // ngtcp2 closed it (stream_close)
  bool credited_ = false;  // peer-initiated: MAX_STREAMS credit returned

  // Receive side; ngtcp2 keeps the flow-control credit.
  RecvBuffer recv_;
  bool fin_received_ = false;
  bool reset_received_ = false;
  bool stop_sent_ = false;

  // Send side. send_queue_ holds every byte from offset base_ (oldest unacked Bytes) up to
  // written_; [next_idx_, next_off_] is where unsent data starts.
  Ring<Bytes> send_queue_;
  uint64_t base_ = 0;
  uint64_t acked_ = 0;
  uint64_t sent_ = 0;
  uint64_t written_ = 0;
  size_t next_idx_ = 0;
  size_t next_off_ = 0;
  SendScheduler::Entry sched_;
  SendBudget::Entry budget_;
  bool fin_queued_ = false;
  bool fin_sent_ = false;
  bool reset_sent_ = false;       // reset() by us
  bool stopped_by_peer_ = false;  // ngtcp2 reset it after the peer's STOP_SENDING
  bool stop_reported_ = false;
  bool data_blocked_ = false;  // stream flow control; waits for extend_max_stream_data
};

}  // namespace moqd::transport::quic
