#include "transport/webtransport/server.h"

#include <algorithm>
#include <utility>

#include "base/log.h"
#include "transport/webtransport/peer_streams.h"
#include "transport/webtransport/qpack.h"
#include "transport/webtransport/session.h"

namespace moqd::transport::webtransport {

namespace {


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
  // Only bidi streams get it: a request the client no longer wants answered is dropped, which
  // matters for one still waiting for SETTINGS, since QUIC credits the client a new stream.
  void on_stop_sending(uint64_t code) override { on_end(code); }

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
    case Role::kQpackEncoder:
    case Role::kQpackDecoder:
      if (auto r = read_qpack_stream(*raw_,
                                     role_ == Role::kQpackEncoder ? UniStream::kQpackEncoder
                                                                  : UniStream::kQpackDecoder,
                                     *server_.qpack_);
          !r) {
        server_.fail(r.error());
      }
      return false;
    case Role::kConnect:
      server_.session_->on_connect_readable();
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
  auto kind = server_.peer_streams_.classify(t->value);
  if (!kind) {
    server_.fail(kind.error());
    return false;
  }
  switch (*kind) {
    case UniStream::kControl:
      role_ = Role::kControl;
      return true;
    case UniStream::kQpackEncoder:
      role_ = Role::kQpackEncoder;
      return true;
    case UniStream::kQpackDecoder:
      role_ = Role::kQpackDecoder;
      return true;
    case UniStream::kWebTransport:
      role_ = Role::kWtPending;
      return true;
    case UniStream::kPush:
      server_.fail({H3Code::kStreamCreationError, "push stream from a client"});
      return false;
    case UniStream::kUnknown:
      // Unknown and reserved types are ignored (RFC 9114 §6.2).
      raw_->stop_sending(wire_code(H3Code::kStreamCreationError));
      drop();
      return false;
  }
  return false;
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
      server_.session_->on_connect_reset(code);
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
  quic_.close(wire_code(error.code), error.detail);
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
  // After the session's end its visitor may be gone (transport.h).
  if (session_ != nullptr && !session_->is_ended() && session_->visitor() != nullptr) {
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
  if (session_ != nullptr && d->session_id == session_->id()) {
    session_->on_datagram(d->payload);
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
  if (session_ != nullptr) {
    session_->drain();
  }
}

void Server::on_control_frame(const Frame& frame) {
  if (auto ok = check_control_frame(frame.type, !settings_received_, /*peer_is_server=*/false);
      !ok) {
    fail(ok.error());
    return;
  }
  if (!settings_received_) {
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
  }
  // GOAWAY from the client needs nothing: our session ends with its CONNECT stream.
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
  raw.stop_sending(wire_code(H3Code::kNoError));
  stream.set_role(ServerStream::Role::kDone);
  remove_stream(stream);
  uint64_t refused_id = raw.id();
  raw.release();
  // Streams held for this request will never have a session.
  std::vector<std::pair<Stream*, uint64_t>> held;
  held.swap(held_);
  for (auto& [s, id] : held) {
    if (id == refused_id) {
      refuse_wt_stream(*s, wire_code(H3Code::kWtBufferedStreamRejected));
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
  session_ = std::make_unique<WtSession>(static_cast<SessionHost&>(*this), raw, /*server=*/true,
                                         protocol, request.path);
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
                            ? wire_code(H3Code::kWtSessionGone)
                            : wire_code(H3Code::kWtBufferedStreamRejected));
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

bool Server::peer_datagrams() const { return peer_settings_.h3_datagram; }

Duration Server::close_linger() const { return config_.close_linger; }

}  // namespace moqd::transport::webtransport
