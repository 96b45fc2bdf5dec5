#include "transport/websocket/mux_session.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace moqd::transport::websocket {
namespace {

constexpr uint64_t kUnlimited = UINT64_MAX;
// RFC 6455 §5.5: a close frame's reason fits in 123 bytes.
constexpr size_t kMaxWsCloseReason = 123;
constexpr uint16_t kWsNormalClose = 1000;
constexpr uint16_t kWsNoStatus = 1005;
constexpr uint16_t kWsProtocolError = 1002;

size_t kind_index(StreamId id) { return is_uni(id) ? 1 : 0; }
uint64_t stream_index(StreamId id) { return id >> 2; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// MuxStream: thin forwarding to the session, which keeps all the rules in one place.

void MuxStream::set_visitor(StreamVisitor* visitor) {
  if (!released_) {
    visitor_ = visitor;
  }
}

void MuxStream::consume(size_t n) { session_.stream_consume(*this, n); }
Bytes MuxStream::read(size_t n) { return session_.stream_read(*this, n); }
void MuxStream::stop_sending(uint64_t code) { session_.stream_stop_sending(*this, code); }
size_t MuxStream::write_capacity() const { return session_.stream_write_capacity(*this); }
void MuxStream::write(Bytes data) { session_.stream_write(*this, std::move(data)); }
void MuxStream::finish() { session_.stream_finish(*this); }
void MuxStream::reset(uint64_t code) { session_.stream_reset(*this, code); }
void MuxStream::set_send_order(uint64_t order) { session_.stream_set_send_order(*this, order); }
void MuxStream::release() { session_.stream_release(*this); }
bool MuxStream::confirms_receipt() const { return has_records(session_.framing_); }

// ---------------------------------------------------------------------------------------------
// Construction and session API.

MuxSession::MuxSession(MessageChannel& channel, Timers& timers, Framing framing, Role role,
                       std::string protocol, std::string path, std::string peer, Config config)
    : channel_(channel),
      timers_(timers),
      framing_(framing),
      kind_("websocket/" + std::string(framing_name(framing))),
      close_layout_(close_layout_for(framing)),
      role_(role),
      protocol_(std::move(protocol)),
      path_(std::move(path)),
      peer_(std::move(peer)),
      config_(config),
      budget_(config.stream_queue_target, config.send_buffer) {
  // Both framings bound the peer's streams open at once; only qmux-00 tells the peer.
  max_peer_streams_[0] = config_.max_streams_bidi;
  max_peer_streams_[1] = config_.max_streams_uni;
  if (!is_qmux()) {
    conn_send_max_ = kUnlimited;
    peer_max_streams_[0] = peer_max_streams_[1] = kUnlimited;
    return;
  }
  conn_recv_credit_ = CreditWindow(config_.max_data);
  TransportParameters ours;
  ours.initial_max_data = config_.max_data;
  ours.initial_max_stream_data_bidi_local = config_.max_stream_data;
  ours.initial_max_stream_data_bidi_remote = config_.max_stream_data;
  ours.initial_max_stream_data_uni = config_.max_stream_data;
  ours.initial_max_streams_bidi = config_.max_streams_bidi;
  ours.initial_max_streams_uni = config_.max_streams_uni;
  // §4.5: the client cannot open anything until it has these, so they go first.
  send_control(encode_transport_parameters(ours));
}

MuxSession::~MuxSession() {
  timers_.cancel(flush_timer_);
  if (state_ == State::kOpen) {
    state_ = State::kClosing;
    close_code_ = static_cast<uint64_t>(ErrorCode::kClosed);
    close_reason_ = "session destroyed";
  }
  deliver_closed();
}

std::string_view MuxSession::kind() const { return kind_; }

void MuxSession::close(uint64_t code, std::string_view reason) {
  begin_close(code, reason, true, kWsNormalClose);
  schedule_flush();
}

bool MuxSession::is_local(StreamId id) const {
  return is_server_initiated(id) == (role_ == Role::kServer);
}

Stream* MuxSession::open_stream(bool uni) {
  if (state_ != State::kOpen) {
    return nullptr;
  }
  size_t k = uni ? 1 : 0;
  if (next_local_[k] >= peer_max_streams_[k]) {
    streams_blocked_ = true;
    return nullptr;
  }
  StreamId id = (next_local_[k]++ << 2) | (uni ? 2 : 0) | (role_ == Role::kServer ? 1 : 0);
  return &create_stream(id);
}

MuxStream& MuxSession::create_stream(StreamId id) {
  MuxStream& s = streams_.add(id, std::make_unique<MuxStream>(*this, id));
  s.send_max_ = initial_send_max(id);
  s.recv_credit_ = CreditWindow(is_qmux() ? config_.max_stream_data : kUnlimited);
  return s;
}

// RFC 9000 §18.2: our send limit on a stream is the peer's limit for streams of that kind, seen
// from the peer's side ("local" = opened by the peer).
uint64_t MuxSession::initial_send_max(StreamId id) const {
  if (!is_qmux()) {
    return kUnlimited;
  }
  if (is_uni(id)) {
    return peer_params_.initial_max_stream_data_uni;
  }
  return is_local(id) ? peer_params_.initial_max_stream_data_bidi_remote
                      : peer_params_.initial_max_stream_data_bidi_local;
}

// ---------------------------------------------------------------------------------------------
// Receiving.

void MuxSession::on_message(std::span<const uint8_t> message) {
  if (state_ != State::kOpen) {
    return;  // after close, frames are dropped
  }
  // qmux-01/02: a record of frames back to back; else one frame, trailing bytes ignored.
  do {
    auto frame = decode_frame(framing_, message);
    if (!frame) {
      fail(kMuxProtocolError, frame.error().detail);
      break;
    }
    if (Status st = handle_frame(*frame); !st) {
      fail(kMuxProtocolError, st.error().detail);
      break;
    }
    message = message.subspan(std::min(frame->size, message.size()));
  } while (has_records(framing_) && !message.empty() && state_ == State::kOpen);
  after_dispatch();
}

Status MuxSession::handle_frame(const MuxFrame& f) {
  switch (f.kind) {
    case FrameKind::kStream:
      return on_stream_frame(f);
    case FrameKind::kResetStream:
      return on_reset_frame(f);
    case FrameKind::kStopSending:
      return on_stop_sending_frame(f);
    case FrameKind::kClose:
      begin_close(f.code,
                  std::string_view(reinterpret_cast<const char*>(f.data.data()), f.data.size()),
                  false, kWsNormalClose);
      return {};
    case FrameKind::kMaxData:
      conn_send_max_ = std::max(conn_send_max_, f.value);
      return {};
    case FrameKind::kMaxStreamData:
      return on_max_stream_data_frame(f);
    case FrameKind::kMaxStreamsBidi:
    case FrameKind::kMaxStreamsUni:
      on_max_streams(f.kind == FrameKind::kMaxStreamsUni, f.value);
      return {};
    case FrameKind::kTransportParameters:
      return on_transport_parameters(f.params);
    case FrameKind::kPing:
      send_control(encode_ping_response(f.value));
      return {};
    case FrameKind::kPingResponse:
      on_ping_response(f.value);
      return {};
    case FrameKind::kIgnored:
      return {};
  }
  return {};
}

Result<MuxStream*> MuxSession::stream_for_frame(StreamId id, bool peer_sends) {
  size_t k = kind_index(id);
  uint64_t index = stream_index(id);
  if (is_local(id)) {
    if (is_uni(id) && peer_sends) {
      return moqd::fail(ErrorCode::kProtocolViolation, "peer sent on our uni stream");
    }
    if (index >= next_local_[k]) {
      return moqd::fail(ErrorCode::kProtocolViolation, "frame for a stream we did not open");
    }
    return find(id);
  }
  if (is_uni(id) && !peer_sends) {
    return moqd::fail(ErrorCode::kProtocolViolation, "send-side frame on peer uni stream");
  }
  if (index < next_peer_[k]) {
    return find(id);
  }
  // Also in the legacy framing: one frame with a huge id would otherwise open every lower id.
  if (index >= max_peer_streams_[k]) {
    return moqd::fail(ErrorCode::kBoundsExceeded, "stream limit exceeded");
  }
  // §4.3: peer streams open implicitly and in order; lower ids of the kind open with it.
  while (next_peer_[k] <= index && state_ == State::kOpen) {
    StreamId next = (next_peer_[k]++ << 2) | (id & 3);
    MuxStream& s = create_stream(next);
    if (visitor_ != nullptr) {
      visitor_->on_incoming_stream(s);
    }
  }
  return find(id);
}

Status MuxSession::on_stream_frame(const MuxFrame& f) {
  if (f.has_offset) {
    close_layout_ = CloseLayout::kRfc9000;  // only @moq/qmux 0.3.3 sends offsets
  }
  auto found = stream_for_frame(f.stream_id, true);
  if (!found) {
    return tl::unexpected(found.error());
  }
  uint64_t len = f.data.size();
  if (is_qmux() && conn_received_ + len > conn_recv_credit_.limit()) {
    return moqd::fail(ErrorCode::kBoundsExceeded, "flow control error");
  }
  // The legacy framing has no flow control: bound what the peer can make us buffer unread by the
  // same connection window.
  if (!is_qmux() && conn_received_ - conn_consumed_ + len > config_.max_data) {
    return moqd::fail(ErrorCode::kBoundsExceeded, "receive buffer limit exceeded");
  }
  MuxStream* s = *found;
  if (s == nullptr || state_ != State::kOpen || s->fin_received_ || s->reset_received_) {
    discard_incoming(len);
    return {};
  }
  if (is_qmux() && s->recv_.received() + len > s->recv_credit_.limit()) {
    return moqd::fail(ErrorCode::kBoundsExceeded, "flow control error");
  }
  // Over an ordered WebSocket a frame can only continue its stream: a repeated or skipped offset
  // would corrupt it silently. Without OFF a frame continues the stream (moqd and @moq/qmux 0.2
  // omit OFF; 0.3.3 sends it).
  if (f.has_offset && f.value != s->recv_.received()) {
    return moqd::fail(ErrorCode::kProtocolViolation, "stream frame offset does not continue the stream");
  }
  conn_received_ += len;
  if (s->stop_sent_ || s->released_) {
    s->recv_.discard(len);
    conn_consumed_ += len;
    grant_connection_credit();
  } else {
    s->recv_.append(f.data);
  }
  s->fin_received_ = f.fin;
  if (f.fin) {
    maybe_count_released(*s);
  }
  if ((len > 0 || f.fin) && s->visitor_ != nullptr) {
    s->visitor_->on_readable();
  }
  return {};
}

// Bytes for a stream that is gone still use connection credit on the peer's side; return it.
void MuxSession::discard_incoming(uint64_t len) {
  conn_received_ += len;
  conn_consumed_ += len;
  grant_connection_credit();
}

Status MuxSession::on_reset_frame(const MuxFrame& f) {
  auto found = stream_for_frame(f.stream_id, true);
  if (!found) {
    return tl::unexpected(found.error());
  }
  MuxStream* s = *found;
  if (s == nullptr || state_ != State::kOpen || s->reset_received_) {
    return {};
  }
  drop_unread(*s);
  s->reset_received_ = true;
  s->fin_received_ = false;
  maybe_count_released(*s);
  if (s->visitor_ != nullptr) {
    s->visitor_->on_reset(f.code);
  }
  return {};
}

Status MuxSession::on_stop_sending_frame(const MuxFrame& f) {
  auto found = stream_for_frame(f.stream_id, false);
  if (!found) {
    return tl::unexpected(found.error());
  }
  MuxStream* s = *found;
  if (s == nullptr || state_ != State::kOpen || s->reset_sent_ || s->fin_sent_) {
    return {};
  }
  stream_reset(*s, f.code);
  if (s->visitor_ != nullptr) {
    s->visitor_->on_stop_sending(f.code);
  }
  return {};
}

Status MuxSession::on_max_stream_data_frame(const MuxFrame& f) {
  auto found = stream_for_frame(f.stream_id, false);
  if (!found) {
    return tl::unexpected(found.error());
  }
  MuxStream* s = *found;
  if (s != nullptr && f.value > s->send_max_) {
    s->send_max_ = f.value;
    make_ready(*s);
  }
  return {};
}

void MuxSession::on_max_streams(bool uni, uint64_t max) {
  uint64_t& limit = peer_max_streams_[uni ? 1 : 0];
  if (max <= limit) {
    return;
  }
  limit = max;
  if (streams_blocked_) {
    streams_blocked_ = false;
    streams_available_pending_ = true;
  }
}

Status MuxSession::on_transport_parameters(const TransportParameters& p) {
  if (!is_qmux() || peer_params_received_) {
    return moqd::fail(ErrorCode::kProtocolViolation, "unexpected transport parameters");
  }
  peer_params_received_ = true;
  peer_params_ = p;
  conn_send_max_ = std::max(conn_send_max_, p.initial_max_data);
  for (auto& [id, s] : streams_) {
    s->send_max_ = std::max(s->send_max_, initial_send_max(id));
    make_ready(*s);
  }
  on_max_streams(false, p.initial_max_streams_bidi);
  on_max_streams(true, p.initial_max_streams_uni);
  return {};
}

// ---------------------------------------------------------------------------------------------
// Stream operations.

void MuxSession::stream_consume(MuxStream& s, size_t n) { stream_credit(s, s.recv_.consume(n)); }

Bytes MuxSession::stream_read(MuxStream& s, size_t n) {
  Bytes out = s.recv_.take(n);
  stream_credit(s, out.size());
  return out;
}

// `n` bytes of the stream were read: credit for them, per stream and for the connection.
void MuxSession::stream_credit(MuxStream& s, size_t n) {
  if (n == 0) {
    return;
  }
  conn_consumed_ += n;
  grant_stream_credit(s);
  grant_connection_credit();
}

void MuxSession::stream_stop_sending(MuxStream& s, uint64_t code) {
  if (!has_recv_side(s.id_) || s.stop_sent_ || state_ != State::kOpen) {
    return;
  }
  s.stop_sent_ = true;
  drop_unread(s);
  if (!s.fin_received_ && !s.reset_received_) {
    send_control(encode_stop_sending(framing_, s.id_, code));
  }
  maybe_count_released(s);
}

size_t MuxSession::stream_write_capacity(const MuxStream& s) const {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_) {
    return 0;
  }
  return budget_.capacity(s.id_, s.queued_, s.budget_);
}

void MuxSession::stream_write(MuxStream& s, Bytes data) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_ ||
      data.empty()) {
    return;
  }
  size_t n = data.size();
  s.queued_ += n;
  s.send_queue_.push_back(std::move(data));
  budget_.on_queued(n, s.queued_, s.budget_);
  make_ready(s);
  schedule_flush();
}

void MuxSession::stream_finish(MuxStream& s) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_) {
    return;
  }
  s.fin_queued_ = true;
  make_ready(s);
  maybe_count_released(s);
  schedule_flush();
}

void MuxSession::stream_reset(MuxStream& s, uint64_t code) {
  if (state_ != State::kOpen || !has_send_side(s.id_) || s.fin_sent_ || s.reset_sent_) {
    return;
  }
  s.send_queue_.clear();
  budget_.on_dropped(s.queued_, s.budget_);
  s.queued_ = 0;
  s.reset_sent_ = true;
  ready_.remove(s.id_, s.sched_);
  send_control(encode_reset_stream(framing_, s.id_, code, s.send_offset_));
  maybe_count_released(s);
  maybe_reap(s);
}

void MuxSession::stream_set_send_order(MuxStream& s, uint64_t order) {
  ready_.set_order(s.id_, s.sched_, order);
}

void MuxSession::stream_release(MuxStream& s) {
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
  maybe_count_released(s);
  maybe_reap(s);
}

// ---------------------------------------------------------------------------------------------
// Credit.

void MuxSession::grant_stream_credit(MuxStream& s) {
  if (!is_qmux() || s.fin_received_ || s.reset_received_ || s.stop_sent_ ||
      !s.recv_credit_.extend(s.recv_.consumed(), config_.max_stream_data)) {
    return;
  }
  send_control(encode_max_stream_data(s.id_, s.recv_credit_.limit()));
}

void MuxSession::grant_connection_credit() {
  if (!is_qmux() || !conn_recv_credit_.extend(conn_consumed_, config_.max_data)) {
    return;
  }
  send_control(encode_max_data(conn_recv_credit_.limit()));
}

// A peer-initiated stream whose receive side and send side have both ended frees a slot; the
// peer learns of new slots in batches of half the initial limit (at least one).
void MuxSession::maybe_count_released(MuxStream& s) {
  bool recv_done = s.fin_received_ || s.reset_received_ || s.stop_sent_;
  bool send_done = !has_send_side(s.id_) || s.fin_queued_ || s.reset_sent_;
  if (is_local(s.id_) || s.counted_released_ || !recv_done || !send_done) {
    return;
  }
  s.counted_released_ = true;
  size_t k = kind_index(s.id_);
  ++released_peer_streams_[k];
  uint64_t initial = k == 0 ? config_.max_streams_bidi : config_.max_streams_uni;
  uint64_t allowed = initial + released_peer_streams_[k];
  if (!is_qmux()) {
    max_peer_streams_[k] = allowed;  // no MAX_STREAMS frame: the window just slides
    return;
  }
  if (allowed - max_peer_streams_[k] >= std::max<uint64_t>(1, initial / 2)) {
    max_peer_streams_[k] = allowed;
    send_control(encode_max_streams(k == 1, allowed));
  }
}

void MuxSession::drop_unread(MuxStream& s) {
  conn_consumed_ += s.recv_.drop();
  grant_connection_credit();
}

// ---------------------------------------------------------------------------------------------
// Scheduling and sending.

bool MuxSession::is_send_done(const MuxStream& s) const {
  return !has_send_side(s.id_) || s.reset_sent_ || s.fin_sent_;
}

bool MuxSession::has_send_work(const MuxStream& s) const {
  if (s.reset_sent_ || s.fin_sent_) {
    return false;
  }
  if (s.queued_ > 0) {
    return s.send_max_ > s.send_offset_;
  }
  return s.fin_queued_;
}

void MuxSession::make_ready(MuxStream& s) {
  if (has_send_work(s)) {
    ready_.push_back(s.id_, s.sched_);
  }
}

// The per-connection scheduler: one frame at a time from the highest send order, round robin
// among equals, while the channel is below its high-water mark.
void MuxSession::pump() {
  while (state_ == State::kOpen && !channel_closed_ && !ready_.empty() &&
         channel_.buffered() < config_.channel_high_water) {
    MuxStream* s = ready_.pop([this](StreamId id) { return find(id); }, &MuxStream::sched_);
    if (s == nullptr) {
      break;
    }
    if (!send_stream_frame(*s)) {
      // Connection credit is exhausted: resume on MAX_DATA, with this stream keeping its turn.
      if (has_send_work(*s)) {
        ready_.push_front(s->id_, s->sched_);
      }
      break;
    }
    make_ready(*s);
    maybe_reap(*s);
  }
}

bool MuxSession::send_stream_frame(MuxStream& s) {
  if (s.queued_ == 0) {
    Bytes header = encode_stream_header(framing_, s.id_, 0, true);
    s.fin_sent_ = true;
    sent_pending_.push_back(s.id_);
    send_message(std::span<const Bytes>(&header, 1));
    return true;
  }
  Bytes& front = s.send_queue_.front();
  uint64_t credit = std::min(s.send_max_ - s.send_offset_, conn_send_max_ - conn_sent_);
  size_t n = static_cast<size_t>(std::min<uint64_t>({front.size(), kMaxStreamPayload, credit}));
  if (n == 0) {
    return false;
  }
  Bytes parts[2];
  parts[1] = front.slice(0, n);
  if (n == front.size()) {
    s.send_queue_.pop_front();
  } else {
    front = front.slice(n);
  }
  s.queued_ -= n;
  budget_.on_sent(n);
  s.send_offset_ += n;
  conn_sent_ += n;
  budget_.take_session_writable([this](StreamId id) {
    if (MuxStream* b = find(id); b != nullptr) {
      b->budget_.blocked_on_session = false;
      writable_pending_.push_back(id);
    }
  });
  bool fin = s.fin_queued_ && s.queued_ == 0;
  s.fin_sent_ = fin;
  if (s.queued_ == 0 && (!s.fin_queued_ || fin)) {
    sent_pending_.push_back(s.id_);
  }
  parts[0] = encode_stream_header(framing_, s.id_, n, fin);
  if (budget_.take_stream_writable(s.queued_, s.budget_)) {
    writable_pending_.push_back(s.id_);
  }
  send_message(parts);
  return true;
}

void MuxSession::send_control(Bytes frame) { send_message(std::span<const Bytes>(&frame, 1)); }

void MuxSession::send_message(std::span<const Bytes> parts) {
  if (channel_closed_) {
    return;
  }
  in_channel_call_ = true;
  channel_.send_message(parts);
  in_channel_call_ = false;
}

void MuxSession::schedule_flush() {
  if (flush_timer_ != 0) {
    return;
  }
  flush_timer_ = timers_.schedule(Duration::zero(), [this] {
    flush_timer_ = 0;
    on_flush();
  });
}

void MuxSession::on_flush() {
  if (state_ == State::kClosing) {
    deliver_closed();
    return;
  }
  pump();
  deliver_writable();
  reap();
}

void MuxSession::on_channel_writable() {
  if (state_ != State::kOpen) {
    return;
  }
  pump();
  deliver_writable();
  reap();
}

// Runs after a peer frame was handled: callbacks are allowed here (we are called from the loop).
void MuxSession::after_dispatch() {
  if (state_ == State::kOpen && streams_available_pending_) {
    streams_available_pending_ = false;
    if (visitor_ != nullptr) {
      visitor_->on_streams_available();
    }
  }
  if (state_ != State::kOpen) {
    deliver_closed();
    return;
  }
  pump();
  deliver_writable();
  reap();
}

void MuxSession::deliver_writable() {
  std::vector<StreamId> ids;
  ids.swap(writable_pending_);
  for (StreamId id : ids) {
    MuxStream* s = find(id);
    if (state_ != State::kOpen) {
      return;
    }
    if (s != nullptr && s->visitor_ != nullptr && !s->budget_.exhausted) {
      s->visitor_->on_writable();
    }
  }
  ids.clear();
  ids.swap(sent_pending_);
  ask_receipt(ids);
  for (StreamId id : ids) {
    MuxStream* s = find(id);
    if (state_ != State::kOpen) {
      return;
    }
    if (s != nullptr && s->visitor_ != nullptr && !s->reset_sent_ && s->queued_ == 0) {
      s->visitor_->on_sent();
    }
  }
  ids.clear();
  ids.swap(received_pending_);
  for (StreamId id : ids) {
    MuxStream* s = find(id);
    if (state_ != State::kOpen) {
      return;
    }
    if (s != nullptr && s->visitor_ != nullptr && !s->reset_sent_) {
      s->visitor_->on_received();
    }
  }
}

// One QX_PING for every stream whose FIN has just been handed to the channel and that someone
// still holds (released streams are reaped, nobody waits for them): it follows their last bytes
// on the same ordered connection, so its response confirms them all.
void MuxSession::ask_receipt(std::span<const StreamId> sent) {
  if (!has_records(framing_) || channel_closed_) {
    return;
  }
  bool ask = false;
  for (StreamId id : sent) {
    MuxStream* s = find(id);
    if (s != nullptr && s->fin_sent_ && !s->reset_sent_ && !s->released_ && !s->receipt_asked_) {
      s->receipt_asked_ = true;
      receipt_asked_.emplace_back(next_ping_, id);
      ask = true;
    }
  }
  if (ask) {
    send_control(encode_ping_request(next_ping_++));
  }
}

// A response to a sequence we never sent (or a repeated one) confirms nothing.
void MuxSession::on_ping_response(uint64_t sequence) {
  if (sequence >= next_ping_) {
    return;
  }
  size_t n = 0;
  while (n < receipt_asked_.size() && receipt_asked_[n].first <= sequence) {
    if (MuxStream* s = find(receipt_asked_[n].second); s != nullptr) {
      s->receipt_confirmed_ = true;
      received_pending_.push_back(s->id_);
    }
    ++n;
  }
  receipt_asked_.erase(receipt_asked_.begin(), receipt_asked_.begin() + static_cast<ptrdiff_t>(n));
}

// A released stream is freed once its send side has drained; deletion waits for reap() so that
// no stream is destroyed while one of its methods is on the stack.
void MuxSession::maybe_reap(MuxStream& s) {
  if (s.released_ && is_send_done(s)) {
    streams_.doom(s.id_);
    schedule_flush();
  }
}

void MuxSession::reap() {
  streams_.reap([this](const MuxStream& s) { return s.released_ && is_send_done(s); },
                [this](MuxStream& s) { ready_.remove(s.id_, s.sched_); });
}

// ---------------------------------------------------------------------------------------------
// Closing.

void MuxSession::begin_close(uint64_t code, std::string_view reason, bool send_frame,
                             uint16_t ws_code) {
  if (state_ != State::kOpen) {
    return;
  }
  state_ = State::kClosing;
  close_code_ = code;
  close_reason_ = std::string(reason);
  ready_.clear();
  writable_pending_.clear();
  sent_pending_.clear();
  if (send_frame) {
    send_control(encode_close(framing_, code, reason, close_layout_));
  }
  if (!channel_closed_) {
    in_channel_call_ = true;
    channel_.close(ws_code, reason.substr(0, std::min(reason.size(), kMaxWsCloseReason)));
    in_channel_call_ = false;
  }
}

void MuxSession::fail(uint64_t code, std::string_view reason) {
  begin_close(code, reason, true, kWsProtocolError);
}

void MuxSession::on_channel_closed(uint16_t code, std::string_view reason) {
  channel_closed_ = true;
  if (state_ == State::kOpen) {
    state_ = State::kClosing;
    close_code_ = code == kWsNormalClose || code == kWsNoStatus ? 0 : code;
    close_reason_ = std::string(reason);
    ready_.clear();
  }
  if (in_channel_call_) {
    schedule_flush();  // we are inside our own call into the channel: report from the loop
  } else {
    deliver_closed();
  }
}

void MuxSession::deliver_closed() {
  if (state_ != State::kClosing) {
    return;
  }
  state_ = State::kClosed;
  if (visitor_ != nullptr) {
    visitor_->on_closed(close_code_, close_reason_);
  }
  ready_.clear();
  streams_.clear_doomed();
  writable_pending_.clear();
  sent_pending_.clear();
  budget_.clear();
  streams_.clear();
}

bool MuxSession::has_unsent_data() const {
  for (const auto& [id, stream] : streams_) {
    if (stream->queued_ > 0 || (stream->fin_queued_ && !stream->fin_sent_)) {
      return true;
    }
  }
  return false;
}

}  // namespace moqd::transport::websocket
