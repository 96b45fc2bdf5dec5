#include "transport/webtransport/client.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "base/log.h"
#include "transport/webtransport/peer_streams.h"
#include "transport/webtransport/qpack.h"

namespace moqd::transport::webtransport {

namespace {



bool enables_connect_protocol(std::span<const Setting> settings) {
  return std::any_of(settings.begin(), settings.end(), [](const Setting& s) {
    return s.id == kSettingEnableConnectProtocol && s.value == 1;
  });
}

std::optional<std::string_view> find_field(const HeaderList& headers, std::string_view name) {
  for (const auto& f : headers) {
    if (f.name == name) {
      return f.value;
    }
  }
  return std::nullopt;
}

std::optional<int> parse_status(std::string_view s) {
  int status = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), status);
  if (ec != std::errc() || end != s.data() + s.size() || s.size() != 3) {
    return std::nullopt;
  }
  return status;
}

}  // namespace

// --- ClientStream: an HTTP/3 stream that is not (yet) a WebTransport data stream ---

class ClientStream final : public StreamVisitor {
 public:
  enum class Role {
    kUnknownUni,   // waiting for the stream type
    kUnknownBidi,  // a server-opened bidi stream: must start with 0x41
    kWtPending,    // 0x41 or 0x54 read: waiting for the session id
    kControl,
    kQpackEncoder,
    kQpackDecoder,
    kConnect,  // our CONNECT, waiting for the response HEADERS
    kSession,  // the CONNECT stream of the established session: capsules
  };

  ClientStream(Client& client, Stream& raw, Role role) : client_(client), raw_(&raw), role_(role) {
    raw.set_visitor(this);
  }

  Stream& raw() { return *raw_; }
  void set_role(Role r) { role_ = r; }
  void detach() {
    if (raw_ != nullptr) {
      raw_->set_visitor(nullptr);
      raw_ = nullptr;
    }
  }

  void on_readable() override {
    while (raw_ != nullptr && !client_.failed_ && !client_.closed_ && step()) {
    }
  }
  void on_writable() override {}
  void on_reset(uint64_t code) override { on_end(code); }
  void on_stop_sending(uint64_t code) override {
    if (role_ == Role::kConnect || role_ == Role::kSession) {
      on_end(code);
    }
  }

 private:
  bool step();
  bool read_type();
  bool read_session_id();
  bool read_control_frame();
  bool read_response();
  void on_end(uint64_t code);
  void drop() {
    Stream* raw = raw_;
    client_.remove_stream(*this);
    raw->release();
  }

  Client& client_;
  Stream* raw_;
  Role role_;
};

bool ClientStream::step() {
  switch (role_) {
    case Role::kUnknownUni:
    case Role::kUnknownBidi:
      return read_type();
    case Role::kWtPending:
      return read_session_id();
    case Role::kControl:
      return read_control_frame();
    case Role::kQpackEncoder:
    case Role::kQpackDecoder:
      if (auto r = read_qpack_stream(*raw_,
                                     role_ == Role::kQpackEncoder ? UniStream::kQpackEncoder
                                                                  : UniStream::kQpackDecoder,
                                     *client_.qpack_);
          !r) {
        client_.fail(r.error());
      }
      return false;
    case Role::kConnect:
      return read_response();
    case Role::kSession:
      client_.session_->on_connect_readable();
      return false;
  }
  return false;
}

bool ClientStream::read_type() {
  auto t = parse_varint(raw_->peek());
  if (!t) {
    if (raw_->has_peer_fin()) {
      drop();  // ended before saying what it is
    }
    return false;
  }
  if (role_ == Role::kUnknownBidi) {
    // RFC 9114 §6.1: a server-opened bidi stream is an error unless an extension (WebTransport's
    // 0x41) says otherwise.
    if (t->value != kWebTransportBidiSignal) {
      client_.fail({H3Code::kStreamCreationError, "server-opened bidi stream"});
      return false;
    }
    raw_->consume(t->consumed);
    role_ = Role::kWtPending;
    return true;
  }
  raw_->consume(t->consumed);
  auto kind = client_.peer_streams_.classify(t->value);
  if (!kind) {
    client_.fail(kind.error());
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
      // RFC 9114 §4.6: we never sent MAX_PUSH_ID.
      client_.fail({H3Code::kIdError, "push stream without MAX_PUSH_ID"});
      return false;
    case UniStream::kUnknown:
      // Unknown and reserved types are ignored (RFC 9114 §6.2).
      raw_->stop_sending(wire_code(H3Code::kStreamCreationError));
      drop();
      return false;
  }
  return false;
}

bool ClientStream::read_session_id() {
  auto id = parse_varint(raw_->peek());
  if (!id) {
    if (raw_->has_peer_fin()) {
      drop();
    }
    return false;
  }
  raw_->consume(id->consumed);
  Stream& raw = *raw_;
  client_.remove_stream(*this);  // detaches: the raw stream becomes a WebTransport stream
  client_.adopt_wt_stream(raw, id->value);
  return false;
}

bool ClientStream::read_control_frame() {
  auto f = parse_frame(raw_->peek(), kMaxControlFrame);
  if (!f) {
    client_.fail(f.error());
    return false;
  }
  if (!*f) {
    if (raw_->has_peer_fin()) {
      client_.fail({H3Code::kClosedCriticalStream, "control stream closed"});
    }
    return false;
  }
  size_t consumed = (*f)->consumed;
  // The frame's payload points into the stream's buffer: handle it before consuming.
  client_.on_control_frame((*f)->value);
  if (raw_ == nullptr || client_.failed_ || client_.closed_) {
    return false;
  }
  raw_->consume(consumed);
  return true;
}

bool ClientStream::read_response() {
  auto f = parse_frame(raw_->peek(), client_.config_.max_field_section_size);
  if (!f) {
    client_.fail(f.error());
    return false;
  }
  if (!*f) {
    if (raw_->has_peer_fin()) {
      client_.report_failure(0, "the CONNECT stream ended without a response");
    }
    return false;
  }
  Frame frame = (*f)->value;
  size_t consumed = (*f)->consumed;
  if (frame.type == kFrameHeaders) {
    client_.on_response(frame);
    if (raw_ != nullptr) {
      raw_->consume(consumed);
    }
    return raw_ != nullptr;  // a 1xx answer (more HEADERS follow) or the session's capsules
  }
  if (frame.type == kFrameData || is_control_only_frame(frame.type)) {
    client_.fail({H3Code::kFrameUnexpected, "unexpected frame before the response HEADERS"});
    return false;
  }
  raw_->consume(consumed);  // unknown and reserved frames are skipped (RFC 9114 §9)
  return true;
}

void ClientStream::on_end(uint64_t code) {
  switch (role_) {
    case Role::kControl:
    case Role::kQpackEncoder:
    case Role::kQpackDecoder:
      client_.fail({H3Code::kClosedCriticalStream, "critical stream reset"});
      return;
    case Role::kConnect:
      client_.report_failure(0, "the CONNECT stream was reset");
      return;
    case Role::kSession:
      client_.session_->on_connect_reset(code);
      return;
    default:
      drop();
      return;
  }
}

// --- Client ---

Client::Client(Session& quic, Timers& timers, ClientObserver& observer, ClientConfig config)
    : quic_(quic), timers_(timers), observer_(observer), config_(std::move(config)) {
  quic_.set_visitor(this);
  auto q = QpackDecoder::create();
  if (!q) {
    fail(q.error());
    return;
  }
  qpack_ = std::move(*q);
  open_control_stream();
}

void Client::open_control_stream() {
  if (control_ != nullptr || closed_ || failed_) {
    return;
  }
  // Without credit yet, on_streams_available() tries again: failing here would call the
  // observer from inside our constructor.
  control_ = quic_.open_uni();
  if (control_ != nullptr) {
    control_->write(Bytes::copy(client_control_stream_preamble()));
  }
}

Client::~Client() {
  if (!closed_) {
    quic_.set_visitor(nullptr);
  }
  timers_.cancel(pump_timer_);
  session_.reset();
  for (auto& s : streams_) {
    s->detach();
  }
}

Session* Client::session() { return session_.get(); }

void Client::fail(const H3Error& error) {
  if (closed_ || failed_) {
    return;
  }
  failed_ = true;
  MOQD_LOG(kDebug, "webtransport client: connection error code=0x%llx (%s)",
           static_cast<unsigned long long>(error.code), error.detail);
  quic_.close(wire_code(error.code), error.detail);
  report_failure(0, error.detail);
}

void Client::report_failure(int status, const char* reason) {
  if (!failed_ && !closed_) {
    failed_ = true;
    quic_.close(wire_code(H3Code::kNoError), "no WebTransport session");
  }
  for (auto& [raw, id] : held_) {
    if (!closed_) {
      refuse_wt_stream(*raw, wire_code(H3Code::kWtBufferedStreamRejected));
    }
  }
  held_.clear();
  if (!std::exchange(reported_, true)) {
    observer_.on_failed(status, reason);
  }
}

void Client::on_incoming_stream(Stream& stream) {
  if (closed_ || failed_) {
    return;
  }
  auto role = stream.is_uni() ? ClientStream::Role::kUnknownUni : ClientStream::Role::kUnknownBidi;
  streams_.push_back(std::make_unique<ClientStream>(*this, stream, role));
  streams_.back()->on_readable();  // bytes may have come with the stream
}

void Client::on_streams_available() {
  open_control_stream();
  if (settings_received_ && connect_ == nullptr && session_ == nullptr && !reported_) {
    send_connect();
  }
  // After the session's end its visitor may be gone (transport.h).
  if (session_ != nullptr && !session_->is_ended() && session_->visitor() != nullptr) {
    session_->visitor()->on_streams_available();
  }
}

void Client::on_closed(uint64_t code, std::string_view reason) {
  closed_ = true;
  control_ = nullptr;
  connect_ = nullptr;
  for (auto& s : streams_) {
    s->detach();
  }
  held_.clear();
  if (session_ != nullptr) {
    session_->on_transport_closed(code, reason);
  } else {
    report_failure(0, "the connection closed before the WebTransport session was established");
  }
}

void Client::on_datagram(std::span<const uint8_t> payload) {
  auto d = parse_datagram(payload);
  if (!d) {
    fail(d.error());
    return;
  }
  if (session_ != nullptr && d->session_id == session_->id()) {
    session_->on_datagram(d->payload);
  }
}

void Client::on_control_frame(const Frame& frame) {
  if (auto ok = check_control_frame(frame.type, !settings_received_, /*peer_is_server=*/true);
      !ok) {
    fail(ok.error());
    return;
  }
  if (!settings_received_) {
    on_settings(frame.payload);
  } else if (frame.type == kFrameGoaway) {
    on_goaway(frame.payload);
  }
}

// RFC 9114 §5.2: the id names the first client request the server will not process; it must be a
// client bidi stream id and may only go down. A session already answered is unaffected (it ends
// with its CONNECT stream); a CONNECT at or past the id will never be answered, so it fails now.
void Client::on_goaway(std::span<const uint8_t> payload) {
  auto id = parse_varint(payload);
  if (!id || id->consumed != payload.size() || id->value % 4 != 0 ||
      id->value > last_goaway_) {
    fail({H3Code::kIdError, "bad GOAWAY id"});
    return;
  }
  last_goaway_ = id->value;
  bool unanswered = connect_ != nullptr && connect_->raw().id() >= id->value;
  bool unsent = connect_ == nullptr && session_ == nullptr;
  if (unanswered || unsent) {
    report_failure(0, "the server is going away");
  }
}

void Client::on_settings(std::span<const uint8_t> payload) {
  auto settings = parse_settings(payload);
  if (!settings) {
    fail(settings.error());
    return;
  }
  peer_settings_ = summarize(*settings);
  settings_received_ = true;
  if (!enables_connect_protocol(*settings) || !peer_settings_.webtransport) {
    report_failure(0, "the server's SETTINGS do not enable WebTransport");
    return;
  }
  send_connect();
}

void Client::send_connect() {
  Stream* raw = quic_.open_bidi();
  if (raw == nullptr) {
    return;  // on_streams_available() tries again
  }
  HeaderList request{{":method", "CONNECT"},
                     {":scheme", "https"},
                     {":authority", config_.authority},
                     {":path", config_.path},
                     {":protocol", "webtransport"},
                     {"sec-webtransport-http3-draft02", "1"}};
  if (!config_.protocols.empty()) {
    std::string list;
    for (const auto& p : config_.protocols) {
      list += (list.empty() ? "" : ", ") + protocol_header_value(p);
    }
    request.push_back({"wt-available-protocols", list});
  }
  auto block = encode_field_section(request);
  if (!block) {
    raw->release();
    fail(block.error());
    return;
  }
  std::vector<uint8_t> frame;
  Writer w(frame);
  write_frame(w, kFrameHeaders, *block);
  raw->write(Bytes::copy(frame));
  streams_.push_back(std::make_unique<ClientStream>(*this, *raw, ClientStream::Role::kConnect));
  connect_ = streams_.back().get();
}

void Client::on_response(const Frame& frame) {
  auto headers = qpack_->decode(frame.payload, config_.max_field_section_size);
  if (!headers) {
    fail(headers.error());
    return;
  }
  auto status_field = find_field(*headers, ":status");
  auto status = status_field ? parse_status(*status_field) : std::nullopt;
  if (!status || *status < 100) {
    fail({H3Code::kMessageError, "malformed CONNECT response"});
    return;
  }
  if (*status < 200) {
    return;  // an interim answer: the final one follows
  }
  if (*status >= 300) {
    MOQD_LOG(kDebug, "webtransport client: CONNECT %s answered %d", config_.path.c_str(), *status);
    report_failure(*status, "the server refused the WebTransport CONNECT");
    return;
  }
  std::string protocol;
  if (auto value = find_field(*headers, "wt-protocol")) {
    auto list = parse_protocol_list(*value);
    if (!list || list->size() != 1 ||
        std::find(config_.protocols.begin(), config_.protocols.end(), list->front()) ==
            config_.protocols.end()) {
      report_failure(0, "the server chose a WebTransport protocol we did not offer");
      return;
    }
    protocol = list->front();
  }
  establish(std::move(protocol));
}

void Client::establish(std::string protocol) {
  connect_->set_role(ClientStream::Role::kSession);
  Stream& raw = connect_->raw();
  connect_ = nullptr;
  session_ = std::make_unique<WtSession>(static_cast<SessionHost&>(*this), raw,
                                         /*server=*/false, std::move(protocol), config_.path);
  reported_ = true;
  observer_.on_session(*session_);
  std::vector<std::pair<Stream*, uint64_t>> held;
  held.swap(held_);
  for (auto& [s, id] : held) {
    adopt_wt_stream(*s, id);
  }
}

void Client::adopt_wt_stream(Stream& raw, uint64_t session_id) {
  if (session_id % 4 != 0) {
    fail({H3Code::kIdError, "WebTransport session id is not a client bidi stream"});
    return;
  }
  if (session_ != nullptr && session_id == session_->id() && !session_->is_ended()) {
    session_->add_incoming(raw);
    return;
  }
  bool ours = connect_ != nullptr && session_id == connect_->raw().id();
  if (ours && held_.size() < config_.max_buffered_streams) {
    raw.set_visitor(nullptr);  // held: its bytes wait in the transport's receive buffer
    held_.emplace_back(&raw, session_id);
    return;
  }
  refuse_wt_stream(raw, session_ != nullptr && session_id == session_->id()
                            ? wire_code(H3Code::kWtSessionGone)
                            : wire_code(H3Code::kWtBufferedStreamRejected));
}

void Client::remove_stream(ClientStream& stream) {
  stream.detach();
  auto it = std::find_if(streams_.begin(), streams_.end(),
                         [&](const auto& p) { return p.get() == &stream; });
  if (it != streams_.end()) {
    graveyard_.push_back(std::move(*it));  // we may be inside its own callback
    streams_.erase(it);
    schedule_pump();
  }
}

void Client::schedule_pump() {
  if (pump_timer_ == 0) {
    pump_timer_ = timers_.schedule(Duration::zero(), [this] {
      pump_timer_ = 0;
      graveyard_.clear();
    });
  }
}

}  // namespace moqd::transport::webtransport
