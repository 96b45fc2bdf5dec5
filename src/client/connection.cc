#include "client/connection.h"

#include <algorithm>
#include <charconv>

#include "base/log.h"
#include "model/path.h"
#include "session/protocols.h"

namespace moqd::client {

namespace ws = transport::websocket;

std::string Url::authority() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<Url> parse_url(std::string_view s) {
  Url u;
  auto scheme_end = s.find("://");
  if (scheme_end == std::string_view::npos) {
    return fail(ErrorCode::kProtocolViolation, "URL needs a scheme (http://host:port/path)");
  }
  u.scheme = std::string(s.substr(0, scheme_end));
  if (u.scheme != "http" && u.scheme != "https" && u.scheme != "ws" && u.scheme != "wss") {
    return fail(ErrorCode::kUnsupported, "URL scheme must be http, https, ws or wss");
  }
  s.remove_prefix(scheme_end + 3);
  auto path_start = s.find_first_of("/?");
  std::string_view authority = s.substr(0, path_start);
  std::string_view rest = path_start == std::string_view::npos ? "" : s.substr(path_start);
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return fail(ErrorCode::kProtocolViolation, "unterminated IPv6 address in URL");
    }
    u.host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      port_text = authority.substr(close + 2);
    }
  } else {
    auto colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
  }
  if (u.host.empty()) {
    return fail(ErrorCode::kProtocolViolation, "URL has no host");
  }
  if (port_text.empty()) {
    u.port = (u.scheme == "https" || u.scheme == "wss") ? 443 : 80;
  } else {
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), p);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || p == 0 || p > 65535) {
      return fail(ErrorCode::kProtocolViolation, "bad port in URL");
    }
    u.port = static_cast<uint16_t>(p);
  }
  auto q = rest.find('?');
  u.path = std::string(rest.substr(0, q));
  if (u.path.empty()) {
    u.path = "/";
  }
  if (q != std::string_view::npos) {
    u.query = std::string(rest.substr(q + 1));
  }
  return u;
}

std::string path_prefix_for(const ConnectionOptions& options) {
  if (options.transport == TransportKind::kQuic) {
    return model::normalize_path(options.url.path);
  }
  return "";
}

void Link::start_session(transport::Session& transport) {
  session::SessionConfig sc;
  sc.role = session::Role::kClient;
  sc.versions = options_.versions;
  sc.root = "";
  sc.discover_prefix = options_.discover_prefix;
  sc.hop_id = options_.hop_id;
  if (options_.limits) {
    sc.limits = *options_.limits;
  }
  sc.skips = options_.skips;
  sc.traffic = options_.traffic;
  session_ = session::make_session(transport, std::move(sc), origin_, *this, loop_, loop_);
  session_->start();
}

void Link::on_session_ready(wire::Version) {
  ready_ = true;
  if (on_ready) {
    on_ready();
  }
}

void Link::on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                            model::BroadcastSource& source) {
  if (on_announce_fn) {
    on_announce_fn(path, active, hops, source);
    return;
  }
  if (active) {
    origin_.announce(path, &source, hops);
  } else {
    origin_.unannounce(path, &source);
  }
}

void Link::on_session_closed(Error reason) { mark_closed(reason); }

void Link::mark_closed(Error reason) {
  if (closed_) {
    return;
  }
  closed_ = true;
  close_reason_ = reason;
  if (on_closed) {
    on_closed(reason);
  }
}

Connection::Connection(runtime::EventLoop& loop, model::Origin& origin, ConnectionOptions options)
    : Link(loop, origin, std::move(options)) {}

Connection::~Connection() {
  session_.reset();
  mux_.reset();
  ws_.reset();
  tcp_.reset();
}

Status Connection::connect() {
  if (options_.url.scheme == "https" || options_.url.scheme == "wss") {
    return fail(ErrorCode::kUnsupported, "TLS is not supported yet; use http:// or ws://");
  }
  auto fd = runtime::tcp_connect(options_.url.host, options_.url.port);
  if (!fd) {
    return tl::unexpected(fd.error());
  }
  tcp_ = std::make_unique<runtime::TcpConnection>(loop_, *fd, options_.url.authority());
  ws::WsClientConfig wc;
  wc.host = options_.url.authority();
  wc.target = options_.url.target();
  wc.protocols.clear();  // not WsClientConfig's default: the table's forms, most preferred first
  for (auto& token : session::websocket_subprotocols(session::client_versions(options_.versions))) {
    const std::string& f = options_.framing;
    if (f.empty() || token == f || token.starts_with(f + ".")) {
      wc.protocols.push_back(std::move(token));
    }
  }
  if (wc.protocols.empty()) {
    return fail(ErrorCode::kUnsupported, "no WebSocket subprotocol for these versions and framing");
  }
  wc.ws.close_timeout = kCloseTimeout;
  ws_ = std::make_unique<ws::WsClientConnection>(*tcp_, loop_, loop_, std::move(wc));
  ws_->set_open_callback([this](std::string_view sp) { on_upgraded(sp); });
  tcp_->set_handler(this);
  ws_->start();
  return {};
}

void Connection::on_upgraded(std::string_view subprotocol) {
  auto sp = ws::parse_subprotocol(subprotocol);
  if (!sp) {
    mark_closed(make_error(ErrorCode::kUnsupported, "relay selected an unknown subprotocol"));
    ws_->close(1002, "unknown subprotocol");
    return;
  }
  mux_ = std::make_unique<ws::MuxSession>(*ws_, loop_, sp->framing, ws::Role::kClient,
                                          sp->app_protocol, options_.url.target(),
                                          options_.url.authority());
  ws_->set_message_handler(mux_.get());
  start_session(*mux_);
}

void Connection::close() {
  if (session_ && !is_closed()) {
    session_->close(make_error(ErrorCode::kCancel, "client done"));
  } else if (tcp_) {
    tcp_->close();
  }
}

bool Connection::is_flushed() const {
  return (!mux_ || !mux_->has_unsent_data()) && (!tcp_ || tcp_->buffered() == 0);
}

bool Connection::is_transport_closed() const { return !tcp_ || tcp_closed_; }

void Connection::on_pipe_data(std::span<const uint8_t> data) { ws_->on_pipe_data(data); }
void Connection::on_pipe_writable() { ws_->on_pipe_writable(); }
void Connection::on_pipe_closed() {
  tcp_closed_ = true;
  ws_->on_pipe_closed();
  mark_closed(make_error(ErrorCode::kTransport, "connection closed"));
}


FrameReader::FrameReader(model::Track& track, const Clock& clock, Timers& timers,
                         Duration reorder_wait, FrameFn on_frame, std::function<void(Error)> on_ended,
                         size_t keep)
    : track_(&track),
      clock_(clock),
      timers_(timers),
      reorder_wait_(reorder_wait),
      keep_(keep),
      on_frame_(std::move(on_frame)),
      on_ended_(std::move(on_ended)) {
  next_arrival_ = track.late_join_arrival();
  track.add_listener(this);
  drain();
}

FrameReader::~FrameReader() {
  timers_.cancel(timer_);
  if (track_ != nullptr) {
    track_->remove_listener(this);
  }
}

void FrameReader::on_track_data(model::Track&) { drain(); }

void FrameReader::on_track_ended(model::Track&, Error reason) {
  drain();
  track_ = nullptr;
  // Nothing more will arrive: emit what is held back for reordering.
  reorder_wait_ = Duration::zero();
  drain();
  if (on_ended_) {
    on_ended_(reason);
  }
}

void FrameReader::drain() {
  if (track_ != nullptr && track_->next_arrival() != next_arrival_) {
    // Sorted only when groups arrive: stable_sort takes a temporary buffer from the heap on every
    // call, and drain runs once per turn that brings a chunk.
    for (auto& g : track_->groups_from(next_arrival_)) {
      open_.push_back(Open{model::GroupCursor(std::move(g)), clock_.now()});
    }
    next_arrival_ = track_->next_arrival();
    std::stable_sort(open_.begin(), open_.end(), [](const Open& a, const Open& b) {
      return a.cursor.group()->sequence() < b.cursor.group()->sequence();
    });
  }
  for (auto& o : open_) {
    uint64_t seq = o.cursor.group()->sequence();
    if (!may_emit(seq, o.arrived)) {
      if (timer_ == 0) {
        timer_ = timers_.schedule(o.arrived + reorder_wait_ - clock_.now(), [this] {
          timer_ = 0;
          drain();
        });
      }
      break;
    }
    if (!last_sequence_ || seq > *last_sequence_) {
      last_sequence_ = seq;
    }
    for (;;) {
      auto step = o.cursor.peek(SIZE_MAX);
      using K = model::GroupCursor::Kind;
      if (step.kind == K::kNothing) {
        break;
      }
      if (step.kind == K::kObjectStart) {
        o.frame.clear();
        o.size = step.object->size;
        o.received = 0;
        o.in_frame = true;
      } else if (step.kind == K::kChunk) {
        size_t n = std::min<size_t>(step.chunk.size(), keep_ - std::min<size_t>(keep_, o.frame.size()));
        o.frame.insert(o.frame.end(), step.chunk.data(), step.chunk.data() + n);
        o.received += step.chunk.size();
      }
      o.cursor.advance(step);
      if (o.in_frame && o.received == o.size) {
        o.in_frame = false;
        on_frame_(o.cursor.group()->sequence(), o.index++, o.frame, o.size);
      }
      if (step.kind == K::kEnd || step.kind == K::kAborted) {
        break;
      }
    }
    if (!o.cursor.group()->is_done()) {
      break;  // newer groups wait for this one
    }
  }
  std::erase_if(open_, [this](const Open& o) {
    if (!last_sequence_ || o.cursor.group()->sequence() > *last_sequence_) {
      return false;  // not reached yet
    }
    auto k = o.cursor.peek(1).kind;
    return o.cursor.group()->is_done() && k == model::GroupCursor::Kind::kNothing;
  });
}

bool FrameReader::may_emit(uint64_t sequence, Instant arrived) const {
  return !last_sequence_ || sequence <= *last_sequence_ + 1 ||
         clock_.now() - arrived >= reorder_wait_;
}

}  // namespace moqd::client
