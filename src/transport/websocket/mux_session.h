#pragma once
// MuxSession: transport::Session over a MessageChannel (one WebSocket), in any framing of
// mux_frames.h (qmux-00/01/02, legacy webtransport). Owns its streams; owned by the WebSocket connection object, which feeds it
// messages through MessageHandler. One worker thread.
//
// Sending is pulled: write() only queues; a scheduler takes frames from the streams (higher send
// order first, round robin among equals) while channel.buffered() is below a high-water mark, and
// resumes on on_channel_writable(). Visitor calls never trigger callbacks synchronously: the work
// they cause runs from the next on_message/on_channel_writable or a 0-delay timer.
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/ring.h"
#include "transport/stream_core.h"
#include "transport/transport.h"
#include "transport/websocket/message_channel.h"
#include "transport/websocket/mux_frames.h"

namespace moqd::transport::websocket {

// Session close code for frame, stream-limit and flow-control violations (what @moq/qmux sends).
inline constexpr uint64_t kMuxProtocolError = 1002;

struct MuxConfig {
  // Receive limits advertised in qmux-00 QX_TRANSPORT_PARAMETERS and kept topped up as the
  // application consumes; ignored in the legacy framing, which has no flow control.
  uint64_t max_data = uint64_t{16} << 20;        // bytes, connection window (16 MiB)
  uint64_t max_stream_data = uint64_t{1} << 20;  // bytes, per-stream window (1 MiB)
  uint64_t max_streams_bidi = 1000;  // peer-initiated bidi streams open at once
  uint64_t max_streams_uni = 1000;   // peer-initiated uni streams open at once
  // Bytes one stream queues before write_capacity() reaches 0 (256 KiB); on_writable() fires
  // when the queue drains below half of it.
  size_t stream_queue_target = size_t{256} << 10;
  // Bytes queued over all streams before write_capacity() reports 0 (per session), so a peer that
  // stops reading leaves its backlog in the relay's shared cache rather than in send queues.
  size_t send_buffer = size_t{1} << 20;
  // The scheduler stops pulling from streams while channel.buffered() is at or above this
  // (512 KiB).
  size_t channel_high_water = size_t{512} << 10;
};

enum class Role { kServer, kClient };

class MuxSession;

// One stream of a MuxSession. Owned by the session; see transport::Stream for the contract.
class MuxStream final : public Stream {
 public:
  MuxStream(MuxSession& session, StreamId id) : session_(session), id_(id) {}

  StreamId id() const override { return id_; }
  void set_visitor(StreamVisitor* visitor) override;
  std::span<const uint8_t> peek() const override { return recv_.peek(); }
  void consume(size_t n) override;
  Bytes read(size_t n) override;
  bool is_fin_received() const override { return fin_received_ && recv_.unread() == 0; }
  bool has_peer_fin() const override { return fin_received_; }
  void stop_sending(uint64_t code) override;
  size_t write_capacity() const override;
  void write(Bytes data) override;
  void finish() override;
  void reset(uint64_t code) override;
  size_t buffered() const override { return queued_; }
  bool confirms_receipt() const override;
  bool receipt_pending() const override {
    return confirms_receipt() && fin_queued_ && !reset_sent_ && !receipt_confirmed_;
  }
  void set_send_order(uint64_t order) override;
  void release() override;

 private:
  friend class MuxSession;

  MuxSession& session_;
  const StreamId id_;
  StreamVisitor* visitor_ = nullptr;
  bool released_ = false;
  bool counted_released_ = false;  // peer-initiated: already credited back through MAX_STREAMS

  // Receive side.
  RecvBuffer recv_;
  CreditWindow recv_credit_;  // credit we granted (qmux)
  bool fin_received_ = false;
  bool reset_received_ = false;
  bool stop_sent_ = false;

  // Send side.
  Ring<Bytes> send_queue_;
  size_t queued_ = 0;
  uint64_t send_offset_ = 0;
  uint64_t send_max_ = 0;  // credit the peer granted (qmux)
  SendScheduler::Entry sched_;
  SendBudget::Entry budget_;
  bool fin_queued_ = false;
  bool fin_sent_ = false;
  bool reset_sent_ = false;
  bool receipt_asked_ = false;      // a QX_PING went out after the FIN
  bool receipt_confirmed_ = false;  // ... and its response came back
};

class MuxSession final : public Session, public MessageHandler {
 public:
  using Config = MuxConfig;

  // In qmux, sends QX_TRANSPORT_PARAMETERS at once (the first frame, as qmux-02 requires), so construct it once the WebSocket
  // handshake is done. `timers` runs deferred work (0-delay) and must outlive the session.
  MuxSession(MessageChannel& channel, Timers& timers, Framing framing, Role role,
             std::string protocol, std::string path, std::string peer, Config config = {});
  // Delivers on_closed() if it has not been delivered yet.
  ~MuxSession() override;
  MuxSession(const MuxSession&) = delete;
  MuxSession& operator=(const MuxSession&) = delete;

  // transport::Session
  void set_visitor(SessionVisitor* visitor) override { visitor_ = visitor; }
  Stream* open_bidi() override { return open_stream(false); }
  Stream* open_uni() override { return open_stream(true); }
  void close(uint64_t code, std::string_view reason) override;
  std::string_view protocol() const override { return protocol_; }
  std::string_view path() const override { return path_; }
  std::string_view peer() const override { return peer_; }
  std::string_view kind() const override;
  uint64_t bytes_sent() const override { return conn_sent_; }
  size_t unsent_bytes() const override { return budget_.unsent(); }

  // MessageHandler
  void on_message(std::span<const uint8_t> message) override;
  void on_channel_writable() override;
  // Reports on_closed() with code 0 for WebSocket 1000/1005, else the WebSocket code.
  void on_channel_closed(uint16_t code, std::string_view reason) override;

  // Streams alive (not yet released and drained), for tests and metrics.
  size_t stream_count() const { return streams_.size(); }
  // True while any stream still has bytes or a FIN waiting to go out (a graceful client waits
  // for this before it closes).
  bool has_unsent_data() const;

 private:
  friend class MuxStream;
  enum class State { kOpen, kClosing, kClosed };

  bool is_qmux() const { return websocket::is_qmux(framing_); }
  bool is_local(StreamId id) const;
  bool has_send_side(StreamId id) const { return !transport::is_uni(id) || is_local(id); }
  bool has_recv_side(StreamId id) const { return !transport::is_uni(id) || !is_local(id); }
  bool is_send_done(const MuxStream& s) const;
  bool has_send_work(const MuxStream& s) const;
  MuxStream* find(StreamId id) const { return streams_.find(id); }

  // Opening and lookup.
  Stream* open_stream(bool uni);
  MuxStream& create_stream(StreamId id);
  uint64_t initial_send_max(StreamId id) const;
  // The stream a peer frame refers to: null for a closed stream (ignore the frame); opens new
  // peer streams; an error for ids the peer may not use. `peer_sends` is true for STREAM and
  // RESET_STREAM.
  Result<MuxStream*> stream_for_frame(StreamId id, bool peer_sends);

  // Frames from the peer.
  Status handle_frame(const MuxFrame& f);
  Status on_stream_frame(const MuxFrame& f);
  Status on_reset_frame(const MuxFrame& f);
  Status on_stop_sending_frame(const MuxFrame& f);
  Status on_max_stream_data_frame(const MuxFrame& f);
  void on_max_streams(bool uni, uint64_t max);
  Status on_transport_parameters(const TransportParameters& p);
  void discard_incoming(uint64_t len);

  // Stream operations (called by MuxStream).
  void stream_consume(MuxStream& s, size_t n);
  Bytes stream_read(MuxStream& s, size_t n);
  void stream_credit(MuxStream& s, size_t n);
  void stream_stop_sending(MuxStream& s, uint64_t code);
  size_t stream_write_capacity(const MuxStream& s) const;
  void stream_write(MuxStream& s, Bytes data);
  void stream_finish(MuxStream& s);
  void stream_reset(MuxStream& s, uint64_t code);
  void stream_set_send_order(MuxStream& s, uint64_t order);
  void stream_release(MuxStream& s);

  // Flow-control credit and stream-count bookkeeping (qmux).
  void grant_stream_credit(MuxStream& s);
  void grant_connection_credit();
  void maybe_count_released(MuxStream& s);
  void drop_unread(MuxStream& s);

  // Scheduling and sending.
  void make_ready(MuxStream& s);
  void pump();
  bool send_stream_frame(MuxStream& s);
  void send_control(Bytes frame);
  void send_message(std::span<const Bytes> parts);
  void schedule_flush();
  void on_flush();
  void after_dispatch();
  void deliver_writable();
  void maybe_reap(MuxStream& s);
  void reap();

  // Closing.
  void begin_close(uint64_t code, std::string_view reason, bool send_frame, uint16_t ws_code);
  void fail(uint64_t code, std::string_view reason);
  void deliver_closed();

  MessageChannel& channel_;
  Timers& timers_;
  const Framing framing_;
  const std::string kind_;   // "websocket/qmux-02"
  CloseLayout close_layout_;  // of the APPLICATION_CLOSE we send
  const Role role_;
  const std::string protocol_;
  const std::string path_;
  const std::string peer_;
  const Config config_;
  SessionVisitor* visitor_ = nullptr;

  State state_ = State::kOpen;
  bool channel_closed_ = false;
  bool in_channel_call_ = false;  // inside channel_.send_message() or close()
  uint64_t close_code_ = 0;
  std::string close_reason_;

  StreamTable<MuxStream> streams_;
  SendBudget budget_;
  uint64_t next_local_[2] = {0, 0};  // next stream index we open, [bidi, uni]
  uint64_t next_peer_[2] = {0, 0};   // next index the peer may open implicitly

  // qmux-00 flow control. Send-side limits are the peer's; receive-side ones are ours.
  bool peer_params_received_ = false;
  TransportParameters peer_params_;
  uint64_t peer_max_streams_[2] = {0, 0};  // how many streams of each kind we may open
  uint64_t conn_send_max_ = 0;
  uint64_t conn_sent_ = 0;
  CreditWindow conn_recv_credit_;
  uint64_t conn_received_ = 0;
  uint64_t conn_consumed_ = 0;
  uint64_t max_peer_streams_[2] = {0, 0};       // limit we advertised, cumulative
  uint64_t released_peer_streams_[2] = {0, 0};  // peer streams finished so far
  bool streams_blocked_ = false;
  bool streams_available_pending_ = false;

  SendScheduler ready_;
  std::vector<StreamId> writable_pending_;
  std::vector<StreamId> sent_pending_;  // streams whose queue emptied: on_sent() to deliver
  // Receipt (qmux-01/02): the peer answers a QX_PING after handling every frame before it, so the
  // response to a ping sent after a stream's FIN means the peer has all of that stream.
  uint64_t next_ping_ = 0;
  std::vector<std::pair<uint64_t, StreamId>> receipt_asked_;  // (ping sequence, stream), sorted
  std::vector<StreamId> received_pending_;  // receipt confirmed: on_received() to deliver
  void ask_receipt(std::span<const StreamId> sent);
  void on_ping_response(uint64_t sequence);
  TimerId flush_timer_ = 0;
};

}  // namespace moqd::transport::websocket
