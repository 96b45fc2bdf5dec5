#include "transport/webtransport/session.h"

#include <algorithm>
#include <utility>

namespace moqd::transport::webtransport {

namespace {

// The CONNECT stream's DATA frames are read as they arrive, whatever their length; the capsules
// in them are parsed whole up to this value size (CLOSE_WEBTRANSPORT_SESSION is at most 1028
// bytes) and larger ones of unknown type are skipped without being buffered.
constexpr size_t kMaxCapsuleValue = 4 << 10;
// After the peer ended the session, the time our own capsule and FIN get before the connection
// closes under them.
constexpr Duration kPeerEndedGrace = std::chrono::milliseconds(100);


}  // namespace

bool is_control_only_frame(uint64_t type) {
  switch (type) {
    case kFrameCancelPush:
    case kFrameSettings:
    case kFramePushPromise:
    case kFrameGoaway:
    case kFrameMaxPushId:
    case 0x02:
    case 0x06:
    case 0x08:
    case 0x09:
      return true;
    default:
      return false;
  }
}

// --- WtStream: a WebTransport data stream, seen by the MoQ session ---

// Wraps a raw QUIC stream past its preamble; application codes travel in the HTTP/3 range
// (wt_to_h3_code). Owned by its WtSession; detached when the session or the connection ends.
class WtStream final : public Stream, public StreamVisitor {
 public:
  WtStream(WtSession& session, Stream& raw) : session_(session), raw_(&raw) {
    raw.set_visitor(this);
  }

  // Every later call is ignored. `raw_alive`: the raw stream is still valid, so stop its events.
  void detach(bool raw_alive) {
    if (raw_alive && raw_ != nullptr) {
      raw_->set_visitor(nullptr);
    }
    raw_ = nullptr;
  }
  Stream* raw() { return raw_; }

  // transport::Stream
  StreamId id() const override { return id_cache(); }
  void set_visitor(StreamVisitor* visitor) override { visitor_ = visitor; }
  std::span<const uint8_t> peek() const override {
    return raw_ != nullptr ? raw_->peek() : std::span<const uint8_t>{};
  }
  void consume(size_t n) override {
    if (raw_ != nullptr) {
      raw_->consume(n);
    }
  }
  Bytes read(size_t n) override { return raw_ != nullptr ? raw_->read(n) : Bytes(); }
  bool is_fin_received() const override { return raw_ != nullptr && raw_->is_fin_received(); }
  bool has_peer_fin() const override { return raw_ != nullptr && raw_->has_peer_fin(); }
  void stop_sending(uint64_t code) override {
    if (raw_ != nullptr && !stop_sent_) {
      stop_sent_ = true;
      raw_->stop_sending(wt_to_h3_code(code));
    }
  }
  size_t write_capacity() const override { return raw_ != nullptr ? raw_->write_capacity() : 0; }
  void write(Bytes data) override {
    if (raw_ != nullptr && !send_done_) {
      raw_->write(std::move(data));
    }
  }
  void write_pair(Bytes first, Bytes second) override {
    if (raw_ != nullptr && !send_done_) {
      raw_->write_pair(std::move(first), std::move(second));
    }
  }
  void finish() override {
    if (raw_ != nullptr && !send_done_) {
      send_done_ = true;
      raw_->finish();
    }
  }
  void reset(uint64_t code) override {
    if (raw_ != nullptr && !send_done_) {
      send_done_ = true;
      raw_->reset(wt_to_h3_code(code));
    }
  }
  size_t buffered() const override { return raw_ != nullptr ? raw_->buffered() : 0; }
  void set_send_order(uint64_t order) override {
    if (raw_ != nullptr) {
      raw_->set_send_order(order);
    }
  }
  void release() override;

  // transport::StreamVisitor (the raw stream's events), forwarded with codes translated.
  void on_readable() override {
    if (visitor_ != nullptr) {
      visitor_->on_readable();
    }
  }
  void on_writable() override {
    if (visitor_ != nullptr) {
      visitor_->on_writable();
    }
  }
  void on_reset(uint64_t code) override {
    if (visitor_ != nullptr) {
      visitor_->on_reset(h3_to_wt_code(code).value_or(0));
    }
  }
  void on_sent() override {
    if (visitor_ != nullptr) {
      visitor_->on_sent();
    }
  }
  void on_stop_sending(uint64_t code) override {
    send_done_ = true;  // the transport reset our send side already
    if (visitor_ != nullptr) {
      visitor_->on_stop_sending(h3_to_wt_code(code).value_or(0));
    }
  }

  bool has_visitor() const { return visitor_ != nullptr; }
  // Ends both directions with WT_SESSION_GONE (the session is over).
  void abandon() {
    if (raw_ == nullptr) {
      return;
    }
    bool local = session_.is_local(raw_->id());
    if (!raw_->is_uni() || local) {
      if (!send_done_) {
        raw_->reset(wire_code(H3Code::kWtSessionGone));
      }
    }
    if (!raw_->is_uni() || !local) {
      if (!stop_sent_ && !raw_->is_fin_received()) {
        raw_->stop_sending(wire_code(H3Code::kWtSessionGone));
      }
    }
    send_done_ = true;
    stop_sent_ = true;
  }

 private:
  StreamId id_cache() const {
    if (raw_ != nullptr) {
      id_ = raw_->id();
    }
    return id_;
  }

  WtSession& session_;
  Stream* raw_;
  StreamVisitor* visitor_ = nullptr;
  mutable StreamId id_ = 0;
  bool send_done_ = false;  // finished or reset (or stopped by the peer)
  bool stop_sent_ = false;
};


// --- WtSession ---

WtSession::WtSession(SessionHost& host, Stream& connect, bool server, std::string protocol,
                     std::string path)
    : host_(host),
      connect_(&connect),
      id_(connect.id()),
      server_(server),
      protocol_(std::move(protocol)),
      path_(std::move(path)) {}

WtSession::~WtSession() {
  host_.timers().cancel(pump_timer_);
  host_.timers().cancel(linger_timer_);
  for (auto& [id, s] : streams_) {
    s->detach(connect_ != nullptr);
  }
}

void WtSession::add_incoming(Stream& raw) {
  auto owned = std::make_unique<WtStream>(*this, raw);
  WtStream* s = owned.get();
  streams_[raw.id()] = std::move(owned);
  if (visitor_ != nullptr) {
    visitor_->on_incoming_stream(*s);
  }
  // Bytes after the preamble may already be buffered, and the raw stream's readable edge was
  // spent on the preamble: raise it again from the loop.
  kicks_.push_back(raw.id());
  schedule_pump();
}

void WtSession::on_connect_readable() {
  if (connect_ == nullptr) {
    return;
  }
  Stream& raw = *connect_;
  if (ended_) {
    raw.consume(raw.peek().size());  // after the session ended only the FIN matters
  }
  while (!ended_ && read_connect_stream(raw)) {
  }
  if (connect_ != nullptr && raw.has_peer_fin() && raw.peek().empty()) {
    peer_connect_fin_ = true;
    if (!ended_) {
      on_peer_ended(0, "CONNECT stream finished");
    } else {
      close_connection_after(kPeerEndedGrace);  // our close() waited for this FIN
    }
  }
}

bool WtSession::read_connect_stream(Stream& raw) {
  auto in = raw.peek();
  if (frame_left_ > 0) {  // inside a frame: DATA feeds the capsules, anything else is skipped
    size_t n = static_cast<size_t>(std::min<uint64_t>(frame_left_, in.size()));
    if (n == 0) {
      return false;
    }
    frame_left_ -= n;
    if (frame_is_data_) {
      on_capsule_bytes(in.first(n));
    }
    raw.consume(n);
    return true;
  }
  auto type = parse_varint(in);
  if (!type) {
    return false;
  }
  auto length = parse_varint(in.subspan(type->consumed));
  if (!length) {
    return false;
  }
  if (is_control_only_frame(type->value)) {
    host_.fail({H3Code::kFrameUnexpected, "unexpected frame on the CONNECT stream"});
    return false;
  }
  raw.consume(type->consumed + length->consumed);
  frame_is_data_ = type->value == kFrameData;  // trailers and unknown frames are skipped
  frame_left_ = length->value;
  return true;
}

void WtSession::on_capsule_bytes(std::span<const uint8_t> data) {
  if (capsule_skip_ > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(capsule_skip_, data.size()));
    capsule_skip_ -= n;
    data = data.subspan(n);
  }
  capsule_buf_.insert(capsule_buf_.end(), data.begin(), data.end());
  read_capsules();
}

void WtSession::read_capsules() {
  while (!ended_ && capsule_skip_ == 0) {
    auto type = parse_varint(capsule_buf_);
    if (!type) {
      return;
    }
    auto length = parse_varint(std::span(capsule_buf_).subspan(type->consumed));
    if (!length) {
      return;
    }
    size_t header = type->consumed + length->consumed;
    bool known = type->value == kCapsuleCloseSession || type->value == kCapsuleDrainSession;
    if (!known && length->value > kMaxCapsuleValue) {
      // An unknown capsule is skipped (RFC 9297 §3.2), however long, without buffering it.
      size_t here = std::min<size_t>(capsule_buf_.size() - header, length->value);
      capsule_skip_ = length->value - here;
      capsule_buf_.erase(capsule_buf_.begin(), capsule_buf_.begin() + header + here);
      continue;
    }
    auto c = parse_capsule(capsule_buf_, kMaxCapsuleValue);
    if (!c) {
      capsule_fail(c.error());
      return;
    }
    if (!*c) {
      return;
    }
    Capsule capsule = (*c)->value;
    size_t consumed = (*c)->consumed;
    if (capsule.type == kCapsuleCloseSession) {
      auto close = parse_close_session(capsule.value);
      if (!close) {
        capsule_fail(close.error());
        return;
      }
      std::string reason(close->reason);
      capsule_buf_.erase(capsule_buf_.begin(), capsule_buf_.begin() + consumed);
      on_peer_ended(close->code, reason);
      return;
    }
    // DRAIN_WEBTRANSPORT_SESSION is a hint the MoQ session has no use for; small unknown
    // capsules are skipped here.
    capsule_buf_.erase(capsule_buf_.begin(), capsule_buf_.begin() + consumed);
  }
}

void WtSession::capsule_fail(const H3Error& error) {
  if (connect_ != nullptr) {
    connect_->reset(wire_code(error.code));
  }
  on_peer_ended(wire_code(error.code), error.detail);
}

void WtSession::on_connect_reset(uint64_t code) {
  on_peer_ended(h3_to_wt_code(code).value_or(0), "CONNECT stream reset");
}

void WtSession::on_peer_ended(uint64_t code, std::string_view reason) {
  if (ended_) {
    return;
  }
  if (connect_ != nullptr) {
    connect_->finish();
  }
  end(code, reason);
  close_connection_after(kPeerEndedGrace);
}

void WtSession::on_datagram(std::span<const uint8_t> payload) {
  if (!ended_ && visitor_ != nullptr) {
    visitor_->on_datagram(payload);
  }
}

void WtSession::drain() {
  if (!ended_ && connect_ != nullptr) {
    connect_->write(Bytes::copy(drain_session_data_frame()));
  }
}

void WtSession::end(uint64_t code, std::string_view reason) {
  if (ended_) {
    return;
  }
  ended_ = true;
  close_code_ = code;
  close_reason_ = std::string(reason);
  for (auto& [id, s] : streams_) {
    s->abandon();
  }
  schedule_pump();
}

void WtSession::on_transport_closed(uint64_t code, std::string_view reason) {
  connect_ = nullptr;
  for (auto& [id, s] : streams_) {
    s->detach(false);
  }
  if (!ended_) {
    ended_ = true;
    close_code_ = code;
    close_reason_ = std::string(reason);
  }
  deliver_closed();
}

void WtSession::forget(WtStream& s, StreamId id) {
  auto it = streams_.find(id);
  if (it != streams_.end() && it->second.get() == &s) {
    graveyard_.push_back(std::move(it->second));
    streams_.erase(it);
    schedule_pump();
  }
}

void WtSession::close(uint64_t code, std::string_view reason) {
  if (ended_) {
    return;
  }
  if (connect_ != nullptr) {
    uint32_t code32 = static_cast<uint32_t>(std::min<uint64_t>(code, UINT32_MAX));
    connect_->write(Bytes::copy(close_session_data_frame(code32, reason)));
    connect_->finish();
  }
  end(code, reason);
  if (peer_connect_fin_) {
    close_connection_after(kPeerEndedGrace);
  } else if (linger_timer_ == 0) {
    close_connection_after(host_.close_linger());
  }
}

void WtSession::close_connection_after(Duration delay) {
  host_.timers().cancel(linger_timer_);
  linger_timer_ = host_.timers().schedule(delay, [this] {
    linger_timer_ = 0;
    // Not H3_NO_ERROR: Chromium reads any application CONNECTION_CLOSE as a failure
    // (QUIC_IETF_GQUIC_ERROR_MISSING), and one that reaches it after our capsule but before
    // it reported that capsule's close (a task it posts) rejects WebTransport.closed with
    // "Connection lost."; the transport's NO_ERROR makes it report the capsule's code.
    host_.quic().close_without_error(wire_code(H3Code::kNoError), "WebTransport session closed");
  });
}

size_t WtSession::max_datagram_size() const {
  if (ended_ || !host_.peer_datagrams()) {
    return 0;
  }
  size_t max = host_.quic().max_datagram_size();
  size_t prefix = varint_size(id_ / 4);
  return max > prefix ? max - prefix : 0;
}

bool WtSession::send_datagram(std::span<const uint8_t> payload) {
  if (payload.size() > max_datagram_size()) {
    return false;
  }
  std::vector<uint8_t> d;
  Writer w(d);
  write_datagram(w, id_, payload);
  return host_.quic().send_datagram(d);
}

Stream* WtSession::open(bool uni) {
  if (ended_) {
    return nullptr;
  }
  Stream* raw = uni ? host_.quic().open_uni() : host_.quic().open_bidi();
  if (raw == nullptr) {
    return nullptr;
  }
  raw->write(Bytes::copy(wt_stream_preamble(uni, id_)));
  auto owned = std::make_unique<WtStream>(*this, *raw);
  WtStream* s = owned.get();
  streams_[raw->id()] = std::move(owned);
  return s;
}

void WtSession::schedule_pump() {
  if (pump_timer_ == 0) {
    pump_timer_ = host_.timers().schedule(Duration::zero(), [this] {
      pump_timer_ = 0;
      pump();
    });
  }
}

void WtSession::pump() {
  graveyard_.clear();
  std::vector<StreamId> kicks;
  kicks.swap(kicks_);
  for (StreamId id : kicks) {
    auto it = streams_.find(id);
    if (!ended_ && it != streams_.end()) {
      Stream* raw = it->second->raw();
      if (raw != nullptr && (!raw->peek().empty() || raw->has_peer_fin())) {
        it->second->on_readable();
      }
    }
  }
  if (ended_ && !closed_delivered_) {
    deliver_closed();
  }
}

void WtSession::deliver_closed() {
  if (closed_delivered_) {
    return;
  }
  closed_delivered_ = true;
  if (visitor_ != nullptr) {
    visitor_->on_closed(close_code_, close_reason_);
  }
  // Every stream pointer is invalid now (transport.h): release what the visitor did not.
  for (auto& [id, s] : streams_) {
    if (Stream* raw = s->raw()) {
      raw->release();
    }
    s->detach(false);
  }
  streams_.clear();
}

void WtStream::release() {
  StreamId sid = id();
  if (raw_ != nullptr) {
    bool local = session_.is_local(raw_->id());
    // Stream::release() would use code 0, which is no WebTransport code: say it in our range.
    if ((!raw_->is_uni() || local) && !send_done_) {
      raw_->reset(wt_to_h3_code(0));
    }
    if ((!raw_->is_uni() || !local) && !stop_sent_ && !raw_->is_fin_received()) {
      raw_->stop_sending(wt_to_h3_code(0));
    }
    raw_->release();
    raw_ = nullptr;
  }
  visitor_ = nullptr;
  session_.forget(*this, sid);
}



}  // namespace moqd::transport::webtransport
