#include "testing/session_fixture.h"

#include <algorithm>

namespace moqd::testing {

using transport::websocket::Framing;
using transport::websocket::FrameKind;
using transport::websocket::MuxFrame;

// --- RecordingHandler ---

bool RecordingHandler::authorize(session::Action action, std::string_view path,
                                 std::string_view) {
  auth_calls.push_back({action, std::string(path)});
  switch (action) {
    case session::Action::kConnect:
      return !deny_connect;
    case session::Action::kPublish:
      return !deny_publish;
    case session::Action::kSubscribe:
    case session::Action::kDiscover:
      return !deny_subscribe;
    case session::Action::kSee:
      return true;
  }
  return false;
}

void RecordingHandler::on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                                        model::BroadcastSource& source) {
  announces.push_back({path, active, hops});
  if (active) {
    origin_.announce(path, &source, hops);
  } else {
    origin_.unannounce(path, &source);
  }
}

void RecordingHandler::on_peer_route(const std::string& path, const model::Hops& hops, uint64_t cost,
                                     model::BroadcastSource& source) {
  announces.push_back({path, true, hops});
  origin_.announce(path, &source, hops, cost);
}

void RecordingHandler::on_session_closed(Error reason) {
  closed_reason = reason;
  ++closed_count;
}

size_t RecordingHandler::auth_count(session::Action action, std::string_view path) const {
  return static_cast<size_t>(std::count_if(auth_calls.begin(), auth_calls.end(), [&](const auto& c) {
    return c.action == action && c.path == path;
  }));
}

// --- TestBroadcast ---

void TestBroadcast::Feed::start_track(model::Track& track) {
  track_ = &track;
  ++starts;
}

void TestBroadcast::Feed::stop_track(model::Track&) {
  track_ = nullptr;
  ++stops;
}

TestBroadcast::TestBroadcast(model::Origin& origin, std::string path)
    : origin_(origin), path_(std::move(path)) {
  origin_.announce(path_, this);
}

TestBroadcast::~TestBroadcast() { unannounce(); }

void TestBroadcast::unannounce() {
  if (announced_) {
    announced_ = false;
    origin_.unannounce(path_, this);
  }
}

model::TrackSource& TestBroadcast::track_source(const std::string&, const std::string& name) {
  return feeds_[name];
}

model::GroupRef TestBroadcast::write_group(const std::string& name, uint64_t sequence,
                                           const std::vector<std::string>& frames, bool finish,
                                           size_t chunk) {
  model::Track* t = feeds_[name].track();
  if (t == nullptr) {
    return model::GroupRef();
  }
  model::GroupRef g(t->begin_group(sequence));
  if (!g) {
    return g;
  }
  for (const std::string& f : frames) {
    t->begin_object(*g, f.size());
    for (size_t off = 0; off < f.size(); off += chunk) {
      size_t n = std::min(chunk, f.size() - off);
      t->append_chunk(*g, Bytes::copy(std::span(reinterpret_cast<const uint8_t*>(f.data()) + off, n)));
    }
  }
  if (finish) {
    t->finish_group(*g);
  }
  return g;
}

// --- FrameCollector ---

bool FrameCollector::subscribe(model::Origin& origin, const std::string& path,
                               const std::string& name) {
  unsubscribe();
  model::Track* t = origin.track(path, name);
  if (t == nullptr) {
    return false;
  }
  track_ = t;
  ended = false;
  end_reason.reset();
  next_arrival_ = 0;
  t->add_listener(this);
  drain();
  return true;
}

void FrameCollector::unsubscribe() {
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
}

void FrameCollector::on_track_data(model::Track&) { drain(); }

void FrameCollector::on_track_ended(model::Track&, Error reason) {
  drain();
  track_ = nullptr;
  ended = true;
  end_reason = reason;
}

void FrameCollector::drain() {
  if (track_ != nullptr) {
    for (model::GroupRef& g : track_->groups_from(next_arrival_)) {
      next_arrival_ = g->arrival() + 1;
      groups.push_back(Received{g->sequence(), {}, false, false});
      cursors_.emplace_back(groups.size() - 1, model::GroupCursor(std::move(g)));
    }
  }
  for (auto& [index, cursor] : cursors_) {
    Received& r = groups[index];
    for (auto step = cursor.peek(SIZE_MAX); step.kind != model::GroupCursor::Kind::kNothing;
         step = cursor.peek(SIZE_MAX)) {
      switch (step.kind) {
        case model::GroupCursor::Kind::kObjectStart:
          r.frames.emplace_back();
          break;
        case model::GroupCursor::Kind::kChunk:
          r.frames.back().append(reinterpret_cast<const char*>(step.chunk.data()), step.chunk.size());
          break;
        case model::GroupCursor::Kind::kEnd:
          r.finished = true;
          break;
        case model::GroupCursor::Kind::kAborted:
          r.aborted = true;
          break;
        case model::GroupCursor::Kind::kNothing:
          break;
      }
      cursor.advance(step);
    }
  }
  std::erase_if(cursors_, [](const auto& c) { return c.second.is_done(); });
}

const FrameCollector::Received* FrameCollector::group(uint64_t sequence) const {
  for (const auto& g : groups) {
    if (g.sequence == sequence) {
      return &g;
    }
  }
  return nullptr;
}

std::vector<uint64_t> FrameCollector::sequences() const {
  std::vector<uint64_t> out;
  for (const auto& g : groups) {
    out.push_back(g.sequence);
  }
  return out;
}

std::vector<uint64_t> FrameCollector::finished_sequences() const {
  std::vector<uint64_t> out;
  for (const auto& g : groups) {
    if (g.finished) {
      out.push_back(g.sequence);
    }
  }
  return out;
}

std::vector<uint64_t> FrameCollector::aborted_sequences() const {
  std::vector<uint64_t> out;
  for (const auto& g : groups) {
    if (g.aborted) {
      out.push_back(g.sequence);
    }
  }
  return out;
}

uint64_t FrameCollector::total_bytes() const {
  uint64_t n = 0;
  for (const auto& g : groups) {
    for (const auto& f : g.frames) {
      n += f.size();
    }
  }
  return n;
}

// --- RawPeer ---

RawStream::RawStream(transport::Stream& s, int* fin_clock) : stream(&s), fin_clock_(fin_clock) {
  s.set_visitor(this);
}

void RawStream::on_readable() {
  auto p = stream->peek();
  data.append(reinterpret_cast<const char*>(p.data()), p.size());
  stream->consume(p.size());
  if (!fin && stream->is_fin_received()) {
    fin = true;
    fin_index = (*fin_clock_)++;
  }
}

void RawStream::write(std::vector<uint8_t> bytes) { stream->write(Bytes::from(bytes)); }

void RawPeer::on_incoming_stream(transport::Stream& stream) {
  incoming.push_back(std::make_unique<RawStream>(stream, &fin_clock_));
}

void RawPeer::on_closed(uint64_t code, std::string_view) { closed_code = code; }

RawStream* RawPeer::open_bidi(std::vector<uint8_t> bytes) {
  transport::Stream* s = transport_.open_bidi();
  if (s == nullptr) {
    return nullptr;
  }
  opened.push_back(std::make_unique<RawStream>(*s, &fin_clock_));
  opened.back()->write(std::move(bytes));
  return opened.back().get();
}

// --- SessionPair ---

SessionPair::SessionPair(SessionPairOptions options)
    : options_(std::move(options)),
      server_origin_(std::make_unique<model::Origin>(options_.server_origin, clock_, clock_)),
      client_origin_(std::make_unique<model::Origin>(options_.client_origin, clock_, clock_)),
      server_handler_(std::make_unique<RecordingHandler>(*server_origin_)),
      client_handler_(std::make_unique<RecordingHandler>(*client_origin_)),
      muxes_(clock_, options_.protocol, options_.framing, "client", "server", options_.server_mux,
             options_.client_mux) {
  options_.server.role = session::Role::kServer;
  options_.client.role = session::Role::kClient;
  if (options_.raw_server) {
    raw_ = std::make_unique<RawPeer>(muxes_.server());
    muxes_.server().set_visitor(raw_.get());
  } else {
    server_ = std::make_unique<session::Session>(muxes_.server(), options_.server,
                                                 *server_origin_, *server_handler_, clock_, clock_);
  }
  client_ = std::make_unique<session::Session>(muxes_.client(), options_.client, *client_origin_,
                                               *client_handler_, clock_, clock_);
}

SessionPair::~SessionPair() {
  // Sessions leave their origins before the transports (muxes_, then raw_) and origins go.
  client_.reset();
  server_.reset();
}

void SessionPair::start() {
  if (server_) {
    server_->start();
  }
  client_->start();
  pump();
}

bool SessionPair::pump(size_t max_rounds) {
  int quiet = 0;
  for (size_t i = 0; i < max_rounds; ++i) {
    clock_.advance(Duration::zero());
    size_t moved = wire_held_ ? 0 : muxes_.channels().deliver();
    quiet = moved == 0 ? quiet + 1 : 0;
    if (quiet >= 2) {
      return true;
    }
  }
  return false;
}

void SessionPair::advance(Duration d) {
  // In steps, so that what one timer sends reaches the peer before the peer's next timer fires.
  constexpr Duration kStep = std::chrono::milliseconds(10);
  while (d > Duration::zero()) {
    Duration step = std::min(d, kStep);
    clock_.advance(step);
    pump();
    d -= step;
  }
}

size_t SessionPair::deliver_some(size_t max) {
  size_t moved = muxes_.channels().deliver(max);
  clock_.advance(Duration::zero());
  return moved;
}

std::vector<MuxFrame> SessionPair::sent_frames(const FakeChannel& from, FrameKind kind) const {
  std::vector<MuxFrame> out;
  for (const auto& m : from.sent()) {
    auto f = transport::websocket::decode_frame(options_.framing, m);
    if (f && f->kind == kind) {
      out.push_back(*f);
    }
  }
  return out;
}

std::vector<VersionCase> all_version_cases() {
  return {{"Lite01", "", wire::Version::kLite01},
          {"Lite02", "", wire::Version::kLite02},
          {"Lite03", "moq-lite-03", wire::Version::kLite03},
          {"Lite04", "moq-lite-04", wire::Version::kLite04},
          {"Lite05", "moq-lite-05", wire::Version::kLite05}};
}

SessionPairOptions options_for(const VersionCase& c) {
  SessionPairOptions o;
  o.protocol = c.protocol;
  if (c.version == wire::Version::kLite01) {
    o.server.versions = wire::VersionSet::none();
    o.server.versions.add(wire::Version::kLite01);
  }
  return o;
}

void PrintTo(const VersionCase& c, std::ostream* os) { *os << c.name; }

std::string pattern_bytes(size_t n, uint8_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    s[i] = static_cast<char>(static_cast<uint8_t>(i * 31 + seed + (i >> 8)));
  }
  return s;
}

}  // namespace moqd::testing
