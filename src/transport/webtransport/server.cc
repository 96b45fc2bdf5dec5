#include "transport/webtransport/server.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "base/log.h"
#include "transport/webtransport/qpack.h"

namespace moqd::transport::webtransport {

namespace {

// Control-stream frames are small (SETTINGS, GOAWAY); anything larger is an attack.
constexpr size_t kMaxControlFrame = 16 << 10;
// DATA frames on the CONNECT stream carry capsules; ours are under 1.1 KiB.
constexpr size_t kMaxConnectDataFrame = 64 << 10;
constexpr size_t kMaxCapsuleValue = 4 << 10;
// After the peer ended the session, the time our own capsule and FIN get before the connection
// closes under them.
constexpr Duration kPeerEndedGrace = std::chrono::milliseconds(100);

uint64_t h3(H3Code code) { return static_cast<uint64_t>(code); }

// Frames that may not appear on a request stream (RFC 9114 §7.2), including the HTTP/2 types
// reserved in §7.2.8.
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

}  // namespace

// --- ServerStream: an HTTP/3 stream that is not (yet) a WebTransport data stream ---

class ServerStream final : public StreamVisitor {
 public:
  enum class Role {
    kUnknownUni,     // waiting for the stream type
    kUnknownBidi,    // waiting for the first frame type (0x41: WebTransport)
    kWtPending,      // 0x41 or 0x54 read: waiting for the session id
    kControl,
    kQpackEncoder,
    kQpackDecoder,
    kRequest,        // a request stream before its HEADERS
    kConnect,        // the accepted CONNECT stream: capsules
    kDone,           // answered or ignored: bytes are discarded
  };

  ServerStream(Server& server, Stream& raw)
      : server_(server), raw_(&raw), role_(raw.is_uni() ? Role::kUnknownUni : Role::kUnknownBidi) {
    raw.set_visitor(this);
  }

  Stream& raw() { return *raw_; }
  Role role() const { return role_; }
  void set_role(Role r) { role_ = r; }
  bool is_dead() const { return raw_ == nullptr; }
  // The raw stream is no longer ours (handed on or released).
  void detach() {
    if (raw_ != nullptr) {
      raw_->set_visitor(nullptr);
      raw_ = nullptr;
    }
  }

  void on_readable() override {
    while (raw_ != nullptr && !server_.failed_ && step()) {
    }
  }
  void on_writable() override {}
  void on_reset(uint64_t code) override { on_end(code); }
  void on_stop_sending(uint64_t code) override {
    if (role_ == Role::kConnect) {
      on_end(code);
    }
  }

 private:
  // One unit of progress; false when waiting for bytes.
  bool step();
  bool read_type();
  bool read_session_id();
  bool read_frame(size_t max_payload);
  void on_end(uint64_t code);
  // Forgets the stream and hands it back to the transport (which would otherwise keep it until
  // the connection ends): for streams we neither read nor answer.
  void drop() {
    Stream* raw = raw_;
    server_.remove_stream(*this);
    raw->release();
  }

  Server& server_;
  Stream* raw_;
  Role role_;
};

// --- WtStream: a WebTransport data stream, seen by the MoQ session ---

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
    bool local = is_server_initiated(raw_->id());
    if (!raw_->is_uni() || local) {
      if (!send_done_) {
        raw_->reset(h3(H3Code::kWtSessionGone));
      }
    }
    if (!raw_->is_uni() || !local) {
      if (!stop_sent_ && !raw_->is_fin_received()) {
        raw_->stop_sending(h3(H3Code::kWtSessionGone));
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

// --- WtSession: the accepted WebTransport session as a transport::Session ---

class WtSession final : public Session {
 public:
  WtSession(Server& server, Stream& connect, std::string protocol, std::string path)
      : server_(server),
        connect_(&connect),
        id_(connect.id()),
        protocol_(std::move(protocol)),
        path_(std::move(path)) {}
  ~WtSession() override {
    server_.timers_.cancel(pump_timer_);
    for (auto& [id, s] : streams_) {
      s->detach(connect_ != nullptr);
    }
  }

  uint64_t id() const { return id_; }
  bool is_ended() const { return ended_; }
  Stream* connect_stream() { return connect_; }
  SessionVisitor* visitor() { return visitor_; }

  // A peer-opened stream for this session, its preamble consumed.
  void add_incoming(Stream& raw) {
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

  // The session is over (capsule, FIN, reset or our close()): streams are abandoned now and
  // on_closed() is delivered from the loop.
  void end(uint64_t code, std::string_view reason) {
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

  // The QUIC connection is gone: every raw stream is invalid now.
  void on_transport_closed(uint64_t code, std::string_view reason) {
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

  void forget(WtStream& s, StreamId id) {
    auto it = streams_.find(id);
    if (it != streams_.end() && it->second.get() == &s) {
      graveyard_.push_back(std::move(it->second));
      streams_.erase(it);
      schedule_pump();
    }
  }

  // transport::Session
  void set_visitor(SessionVisitor* visitor) override { visitor_ = visitor; }
  Stream* open_bidi() override { return open(false); }
  Stream* open_uni() override { return open(true); }
  void close(uint64_t code, std::string_view reason) override {
    if (ended_) {
      return;
    }
    if (connect_ != nullptr) {
      uint32_t code32 = static_cast<uint32_t>(std::min<uint64_t>(code, UINT32_MAX));
      connect_->write(Bytes::copy(close_session_data_frame(code32, reason)));
      connect_->finish();
    }
    end(code, reason);
    server_.close_connection_later();
  }
  std::string_view protocol() const override { return protocol_; }
  std::string_view path() const override { return path_; }
  std::string_view peer() const override { return server_.quic_.peer(); }
  std::string_view kind() const override { return "webtransport"; }
  uint64_t bytes_sent() const override { return server_.quic_.bytes_sent(); }
  size_t unsent_bytes() const override { return server_.quic_.unsent_bytes(); }
  size_t max_datagram_size() const override {
    if (ended_ || !server_.peer_settings_.h3_datagram) {
      return 0;
    }
    size_t max = server_.quic_.max_datagram_size();
    size_t prefix = varint_size(id_ / 4);
    return max > prefix ? max - prefix : 0;
  }
  bool send_datagram(std::span<const uint8_t> payload) override {
    if (payload.size() > max_datagram_size()) {
      return false;
    }
    std::vector<uint8_t> d;
    Writer w(d);
    write_datagram(w, id_, payload);
    return server_.quic_.send_datagram(d);
  }

 private:
  Stream* open(bool uni) {
    if (ended_) {
      return nullptr;
    }
    Stream* raw = uni ? server_.quic_.open_uni() : server_.quic_.open_bidi();
    if (raw == nullptr) {
      return nullptr;
    }
    raw->write(Bytes::copy(wt_stream_preamble(uni, id_)));
    auto owned = std::make_unique<WtStream>(*this, *raw);
    WtStream* s = owned.get();
    streams_[raw->id()] = std::move(owned);
    return s;
  }

  void schedule_pump() {
    if (pump_timer_ == 0) {
      pump_timer_ = server_.timers_.schedule(Duration::zero(), [this] {
        pump_timer_ = 0;
        pump();
      });
    }
  }

  void pump() {
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

  void deliver_closed() {
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

  friend class WtStream;
  Server& server_;
  Stream* connect_;
  const uint64_t id_;
  std::string protocol_;
  std::string path_;
  SessionVisitor* visitor_ = nullptr;
  std::unordered_map<StreamId, std::unique_ptr<WtStream>> streams_;
  std::vector<std::unique_ptr<WtStream>> graveyard_;  // released in a call, freed from the loop
  std::vector<StreamId> kicks_;
  TimerId pump_timer_ = 0;
  bool ended_ = false;
  bool closed_delivered_ = false;
  uint64_t close_code_ = 0;
  std::string close_reason_;
};

void WtStream::release() {
  StreamId sid = id();
  if (raw_ != nullptr) {
    bool local = is_server_initiated(raw_->id());
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


// --- ServerStream steps ---

bool ServerStream::step() {
  switch (role_) {
    case Role::kUnknownUni:
    case Role::kUnknownBidi:
      return read_type();
    case Role::kWtPending:
      return read_session_id();
    case Role::kControl:
      return read_frame(kMaxControlFrame);
    case Role::kRequest:
      if (!server_.settings_received_) {
        server_.defer_request(*this);  // WebTransport needs the client's SETTINGS first
        return false;
      }
      return read_frame(server_.config_.max_field_section_size);
    case Role::kQpackEncoder: {
      auto data = raw_->peek();
      if (!data.empty()) {
        auto r = server_.qpack_->read_encoder_stream(data);
        raw_->consume(data.size());
        if (!r) {
          server_.fail(r.error());
          return false;
        }
      }
      if (raw_->has_peer_fin()) {
        server_.fail({H3Code::kClosedCriticalStream, "QPACK encoder stream closed"});
      }
      return false;
    }
    case Role::kQpackDecoder:
      // We never insert into a dynamic table, so the peer's acknowledgements carry nothing.
      raw_->consume(raw_->peek().size());
      if (raw_->has_peer_fin()) {
        server_.fail({H3Code::kClosedCriticalStream, "QPACK decoder stream closed"});
      }
      return false;
    case Role::kConnect:
      server_.on_connect_data(*this);
      return false;
    case Role::kDone:
      raw_->consume(raw_->peek().size());
      return false;
  }
  return false;
}

bool ServerStream::read_type() {
  auto head = raw_->peek();
  MOQD_LOG(kDebug, "webtransport: stream=%llu starts=%s",
           static_cast<unsigned long long>(raw_->id()),
           to_hex(head.first(std::min<size_t>(head.size(), 16))).c_str());
  auto t = parse_varint(head);
  if (!t) {
    if (raw_->has_peer_fin()) {
      drop();  // ended before saying what it is
    }
    return false;
  }
  if (role_ == Role::kUnknownBidi) {
    if (t->value == kWebTransportBidiSignal) {
      raw_->consume(t->consumed);
      role_ = Role::kWtPending;
    } else {
      role_ = Role::kRequest;  // the varint is the first frame's type: leave it for read_frame
    }
    return true;
  }
  raw_->consume(t->consumed);
  switch (t->value) {
    case kStreamControl:
      if (server_.peer_control_seen_) {
        server_.fail({H3Code::kStreamCreationError, "second control stream"});
        return false;
      }
      server_.peer_control_seen_ = true;
      role_ = Role::kControl;
      return true;
    case kStreamQpackEncoder:
      // RFC 9204 §4.2: a second instance of either QPACK stream is a connection error.
      if (std::exchange(server_.peer_qpack_encoder_seen_, true)) {
        server_.fail({H3Code::kStreamCreationError, "second QPACK encoder stream"});
        return false;
      }
      role_ = Role::kQpackEncoder;
      return true;
    case kStreamQpackDecoder:
      if (std::exchange(server_.peer_qpack_decoder_seen_, true)) {
        server_.fail({H3Code::kStreamCreationError, "second QPACK decoder stream"});
        return false;
      }
      role_ = Role::kQpackDecoder;
      return true;
    case kStreamWebTransportUni:
      role_ = Role::kWtPending;
      return true;
    case kStreamPush:
      server_.fail({H3Code::kStreamCreationError, "push stream from a client"});
      return false;
    default:
      // Unknown and reserved types are ignored (RFC 9114 §6.2).
      raw_->stop_sending(h3(H3Code::kStreamCreationError));
      drop();
      return false;
  }
}

bool ServerStream::read_session_id() {
  auto id = parse_varint(raw_->peek());
  if (!id) {
    if (raw_->has_peer_fin()) {
      drop();
    }
    return false;
  }
  raw_->consume(id->consumed);
  Stream& raw = *raw_;
  server_.remove_stream(*this);  // detaches: the raw stream becomes a WebTransport stream
  server_.adopt_wt_stream(raw, id->value);
  return false;
}

bool ServerStream::read_frame(size_t max_payload) {
  auto f = parse_frame(raw_->peek(), max_payload);
  if (!f) {
    if (role_ == Role::kRequest && f.error().code == H3Code::kExcessiveLoad) {
      server_.answer(*this, 431, "header section too large");
    } else {
      server_.fail(f.error());
    }
    return false;
  }
  if (!*f) {
    if (raw_->has_peer_fin()) {
      if (role_ == Role::kControl) {
        server_.fail({H3Code::kClosedCriticalStream, "control stream closed"});
      } else {
        drop();  // a request cut short: nothing to answer
      }
    }
    return false;
  }
  Frame frame = (*f)->value;
  size_t consumed = (*f)->consumed;
  if (role_ == Role::kControl) {
    // The frame's payload points into the stream's buffer: handle it before consuming.
    server_.on_control_frame(frame);
    if (raw_ != nullptr) {
      raw_->consume(consumed);
    }
    return raw_ != nullptr && !server_.closed_;
  }
  // A request stream.
  if (frame.type == kFrameHeaders) {
    server_.on_request_headers(*this, frame);
    if (raw_ != nullptr) {
      raw_->consume(consumed);
    }
    return raw_ != nullptr && role_ == Role::kConnect;
  }
  if (frame.type == kFrameData || is_control_only_frame(frame.type)) {
    server_.fail({H3Code::kFrameUnexpected, "unexpected frame before HEADERS"});
    return false;
  }
  raw_->consume(consumed);  // unknown and reserved frames are skipped (RFC 9114 §9)
  return true;
}

void ServerStream::on_end(uint64_t code) {
  switch (role_) {
    case Role::kControl:
    case Role::kQpackEncoder:
    case Role::kQpackDecoder:
      server_.fail({H3Code::kClosedCriticalStream, "critical stream reset"});
      return;
    case Role::kConnect:
      server_.on_session_ended(h3_to_wt_code(code).value_or(0), "CONNECT stream reset");
      return;
    default:
      drop();
      return;
  }
}

// --- Server ---

Server::Server(Session& quic, Timers& timers, ServerObserver& observer, ServerConfig config)
    : quic_(quic), timers_(timers), observer_(observer), config_(std::move(config)) {
  quic_.set_visitor(this);
  auto q = QpackDecoder::create();
  if (!q) {
    fail(q.error());
    return;
  }
  qpack_ = std::move(*q);
  open_control_stream();
  // A connection that never asks for a session holds its state until the idle timeout; do not
  // wait that long.
  session_timer_ = timers_.schedule(config_.session_timeout, [this] {
    session_timer_ = 0;
    if (session_ == nullptr) {
      fail({H3Code::kNoError, "no WebTransport session requested"});
    }
  });
}

Server::~Server() {
  if (!closed_) {
    quic_.set_visitor(nullptr);
  }
  timers_.cancel(session_timer_);
  timers_.cancel(linger_timer_);
  timers_.cancel(pump_timer_);
  session_.reset();
  for (auto& s : streams_) {
    s->detach();
  }
}

Session* Server::session() { return session_.get(); }

void Server::open_control_stream() {
  if (control_ != nullptr || closed_) {
    return;
  }
  control_ = quic_.open_uni();
  if (control_ != nullptr) {
    control_->write(Bytes::copy(server_control_stream_preamble(1)));
  }
}

void Server::fail(const H3Error& error) {
  if (closed_ || failed_) {
    return;
  }
  failed_ = true;
  MOQD_LOG(kDebug, "webtransport: connection error peer=%s code=0x%llx (%s)",
           std::string(quic_.peer()).c_str(), static_cast<unsigned long long>(error.code),
           error.detail);
  quic_.close(h3(error.code), error.detail);
}

void Server::on_incoming_stream(Stream& stream) {
  if (closed_ || failed_) {
    return;
  }
  streams_.push_back(std::make_unique<ServerStream>(*this, stream));
  streams_.back()->on_readable();  // bytes may have come with the stream
}

void Server::on_streams_available() {
  open_control_stream();
  if (session_ != nullptr && session_->visitor() != nullptr) {
    session_->visitor()->on_streams_available();
  }
}

void Server::on_closed(uint64_t code, std::string_view reason) {
  closed_ = true;
  control_ = nullptr;
  for (auto& s : streams_) {
    s->detach();
  }
  held_.clear();
  deferred_requests_.clear();
  if (session_ != nullptr) {
    session_->on_transport_closed(code, reason);
  }
}

void Server::on_datagram(std::span<const uint8_t> payload) {
  MOQD_LOG(kDebug, "webtransport: peer=%s datagram=%s", std::string(quic_.peer()).c_str(),
           to_hex(payload.first(std::min<size_t>(payload.size(), 64))).c_str());
  auto d = parse_datagram(payload);
  if (!d) {
    fail(d.error());
    return;
  }
  if (session_ != nullptr && !session_->is_ended() && d->session_id == session_->id() &&
      session_->visitor() != nullptr) {
    session_->visitor()->on_datagram(d->payload);
  }
  // A datagram for no session we have is dropped (RFC 9297 §2.1 allows buffering; we do not).
}

void Server::drain() {
  if (draining_ || closed_) {
    return;
  }
  draining_ = true;
  if (control_ != nullptr) {
    // GOAWAY names the first request stream we will not serve: every id past the session's.
    uint64_t next = session_ != nullptr ? session_->id() + 4 : 0;
    std::vector<uint8_t> goaway;
    Writer w(goaway);
    std::vector<uint8_t> payload;
    Writer(payload).varint(next);
    write_frame(w, kFrameGoaway, payload);
    control_->write(Bytes::copy(goaway));
  }
  if (session_ != nullptr && !session_->is_ended() && session_->connect_stream() != nullptr) {
    session_->connect_stream()->write(Bytes::copy(drain_session_data_frame()));
  }
}

void Server::on_control_frame(const Frame& frame) {
  if (!settings_received_) {
    if (frame.type != kFrameSettings) {
      fail({H3Code::kMissingSettings, "first control frame is not SETTINGS"});
      return;
    }
    auto settings = parse_settings(frame.payload);
    if (!settings) {
      fail(settings.error());
      return;
    }
    peer_settings_ = summarize(*settings);
    settings_received_ = true;
    MOQD_LOG(kDebug, "webtransport: peer=%s SETTINGS payload=%s",
             std::string(quic_.peer()).c_str(), to_hex(frame.payload).c_str());
    schedule_pump();  // CONNECTs that arrived before the SETTINGS can go on now
    return;
  }
  switch (frame.type) {
    case kFrameSettings:
      fail({H3Code::kFrameUnexpected, "second SETTINGS"});
      return;
    case kFrameData:
    case kFrameHeaders:
    case kFramePushPromise:
      fail({H3Code::kFrameUnexpected, "request frame on the control stream"});
      return;
    default:
      return;  // GOAWAY (the client leaves; our session ends with its CONNECT stream), others
  }
}

void Server::defer_request(ServerStream& stream) {
  if (std::find(deferred_requests_.begin(), deferred_requests_.end(), &stream) ==
      deferred_requests_.end()) {
    deferred_requests_.push_back(&stream);
  }
}

void Server::schedule_pump() {
  if (pump_timer_ == 0) {
    pump_timer_ = timers_.schedule(Duration::zero(), [this] {
      pump_timer_ = 0;
      pump();
    });
  }
}

void Server::pump() {
  graveyard_.clear();
  if (settings_received_ && !closed_) {
    std::vector<ServerStream*> deferred;
    deferred.swap(deferred_requests_);
    for (ServerStream* s : deferred) {
      if (!s->is_dead()) {
        s->on_readable();
      }
    }
  }
}

void Server::on_request_headers(ServerStream& stream, const Frame& frame) {
  MOQD_LOG(kDebug, "webtransport: peer=%s stream=%llu HEADERS field_section=%s",
           std::string(quic_.peer()).c_str(), static_cast<unsigned long long>(stream.raw().id()),
           to_hex(frame.payload).c_str());
  auto headers = qpack_->decode(frame.payload, config_.max_field_section_size);
  if (!headers) {
    if (headers.error().code == H3Code::kExcessiveLoad) {
      answer(stream, 431, "header section too large");
    } else {
      fail(headers.error());
    }
    return;
  }
  auto request = parse_connect(*headers);
  if (!request) {
    answer(stream, request.error().status, request.error().reason);
    return;
  }
  if (!peer_settings_.webtransport) {
    answer(stream, 400, "client SETTINGS do not enable WebTransport");
    return;
  }
  if (draining_) {
    answer(stream, 503, "going away");
    return;
  }
  if (session_ != nullptr) {
    answer(stream, 429, "one WebTransport session per connection");
    return;
  }
  auto protocol = select_protocol(request->available_protocols, config_.protocols);
  if (!protocol) {
    answer(stream, 400, "no common WebTransport protocol");
    return;
  }
  if (auto refusal = observer_.on_connect(*request)) {
    answer(stream, refusal->status, refusal->reason);
    return;
  }
  accept(stream, *request, *protocol);
}

void Server::answer(ServerStream& stream, int status, const char* reason) {
  observer_.on_refused(status, reason);
  HeaderList response{{":status", std::to_string(status)}};
  auto block = encode_field_section(response);
  Stream& raw = stream.raw();
  if (block) {
    std::vector<uint8_t> frame;
    Writer w(frame);
    write_frame(w, kFrameHeaders, *block);
    raw.write(Bytes::copy(frame));
  }
  raw.finish();
  // The rest of the request is not needed (RFC 9114 §4.1.2).
  raw.stop_sending(h3(H3Code::kNoError));
  stream.set_role(ServerStream::Role::kDone);
  remove_stream(stream);
  uint64_t refused_id = raw.id();
  raw.release();
  // Streams held for this request will never have a session.
  std::vector<std::pair<Stream*, uint64_t>> held;
  held.swap(held_);
  for (auto& [s, id] : held) {
    if (id == refused_id) {
      refuse_wt_stream(*s, h3(H3Code::kWtBufferedStreamRejected));
    } else {
      held_.emplace_back(s, id);
    }
  }
}

void Server::accept(ServerStream& stream, const ConnectRequest& request,
                    const std::string& protocol) {
  timers_.cancel(session_timer_);
  session_timer_ = 0;
  HeaderList response{{":status", "200"}};
  if (request.draft02) {
    response.push_back({"sec-webtransport-http3-draft", "draft02"});
  }
  if (!protocol.empty()) {
    response.push_back({"wt-protocol", protocol_header_value(protocol)});
  }
  auto block = encode_field_section(response);
  if (!block) {
    fail(block.error());
    return;
  }
  std::vector<uint8_t> frame;
  Writer w(frame);
  write_frame(w, kFrameHeaders, *block);
  Stream& raw = stream.raw();
  raw.write(Bytes::copy(frame));
  stream.set_role(ServerStream::Role::kConnect);
  session_ = std::make_unique<WtSession>(*this, raw, protocol, request.path);
  observer_.on_session(*session_, request);
  std::vector<std::pair<Stream*, uint64_t>> held;
  held.swap(held_);
  for (auto& [s, id] : held) {
    adopt_wt_stream(*s, id);
  }
}

void Server::adopt_wt_stream(Stream& raw, uint64_t session_id) {
  if (session_id % 4 != 0) {
    fail({H3Code::kIdError, "WebTransport session id is not a client bidi stream"});
    return;
  }
  if (session_ != nullptr && session_id == session_->id() && !session_->is_ended()) {
    session_->add_incoming(raw);
    return;
  }
  if (session_ == nullptr && held_.size() < config_.max_buffered_streams) {
    raw.set_visitor(nullptr);  // held: its bytes wait in the transport's receive buffer
    held_.emplace_back(&raw, session_id);
    return;
  }
  refuse_wt_stream(raw, session_ != nullptr && session_id == session_->id()
                            ? h3(H3Code::kWtSessionGone)
                            : h3(H3Code::kWtBufferedStreamRejected));
}

void Server::refuse_wt_stream(Stream& raw, uint64_t code) {
  raw.stop_sending(code);
  if (!raw.is_uni()) {
    raw.reset(code);
  }
  raw.release();
}

void Server::remove_stream(ServerStream& stream) {
  stream.detach();
  deferred_requests_.erase(
      std::remove(deferred_requests_.begin(), deferred_requests_.end(), &stream),
      deferred_requests_.end());
  auto it = std::find_if(streams_.begin(), streams_.end(),
                         [&](const auto& p) { return p.get() == &stream; });
  if (it != streams_.end()) {
    graveyard_.push_back(std::move(*it));  // we may be inside its own callback
    streams_.erase(it);
    schedule_pump();
  }
}

void Server::on_connect_data(ServerStream& stream) {
  Stream& raw = stream.raw();
  if (session_ == nullptr || session_->is_ended()) {
    raw.consume(raw.peek().size());  // after the session ended only the FIN matters
  }
  while (session_ != nullptr && !session_->is_ended()) {
    auto f = parse_frame(raw.peek(), kMaxConnectDataFrame);
    if (!f) {
      fail(f.error());
      return;
    }
    if (!*f) {
      break;
    }
    const Frame& frame = (*f)->value;
    if (frame.type == kFrameData) {
      capsule_buf_.insert(capsule_buf_.end(), frame.payload.begin(), frame.payload.end());
    } else if (is_control_only_frame(frame.type)) {
      raw.consume((*f)->consumed);
      fail({H3Code::kFrameUnexpected, "unexpected frame on the CONNECT stream"});
      return;
    }
    raw.consume((*f)->consumed);  // trailers and unknown frames are skipped
    if (!read_capsules()) {
      return;
    }
  }
  if (raw.has_peer_fin() && raw.peek().empty()) {
    peer_connect_fin_ = true;
    if (session_ != nullptr && !session_->is_ended()) {
      on_session_ended(0, "CONNECT stream finished");
    } else {
      close_connection_soon();  // our close() waited for this FIN
    }
  }
}

bool Server::read_capsules() {
  while (session_ != nullptr && !session_->is_ended()) {
    auto c = parse_capsule(capsule_buf_, kMaxCapsuleValue);
    if (!c) {
      session_fail(c.error());
      return false;
    }
    if (!*c) {
      return true;
    }
    Capsule capsule = (*c)->value;
    size_t consumed = (*c)->consumed;
    if (capsule.type == kCapsuleCloseSession) {
      auto close = parse_close_session(capsule.value);
      if (!close) {
        session_fail(close.error());
        return false;
      }
      std::string reason(close->reason);
      capsule_buf_.erase(capsule_buf_.begin(), capsule_buf_.begin() + consumed);
      on_session_ended(close->code, reason);
      return false;
    }
    // DRAIN_WEBTRANSPORT_SESSION is a hint the MoQ session has no use for; unknown capsules are
    // skipped (RFC 9297 §3.2).
    capsule_buf_.erase(capsule_buf_.begin(), capsule_buf_.begin() + consumed);
  }
  return false;
}

void Server::session_fail(const H3Error& error) {
  // A malformed capsule ends the session (and with it this one-session connection).
  if (session_ != nullptr && session_->connect_stream() != nullptr) {
    session_->connect_stream()->reset(h3(error.code));
  }
  on_session_ended(h3(error.code), error.detail);
}

void Server::on_session_ended(uint64_t code, std::string_view reason) {
  if (session_ == nullptr || session_->is_ended()) {
    return;
  }
  if (Stream* connect = session_->connect_stream()) {
    connect->finish();
  }
  session_->end(code, reason);
  close_connection_soon();
}

void Server::close_connection_later() {
  if (peer_connect_fin_) {
    close_connection_soon();
    return;
  }
  if (linger_timer_ == 0) {
    linger_timer_ = timers_.schedule(config_.close_linger, [this] {
      linger_timer_ = 0;
      quic_.close(h3(H3Code::kNoError), "WebTransport session closed");
    });
  }
}

void Server::close_connection_soon() {
  timers_.cancel(linger_timer_);
  linger_timer_ = timers_.schedule(kPeerEndedGrace, [this] {
    linger_timer_ = 0;
    quic_.close(h3(H3Code::kNoError), "WebTransport session closed");
  });
}

}  // namespace moqd::transport::webtransport
