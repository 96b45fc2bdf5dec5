#include "session/session.h"

#include <algorithm>
#include <atomic>

#include "base/log.h"
#include "model/path.h"
#include "session/handlers.h"

namespace moqd::session {
namespace {
std::atomic<uint64_t> g_next_session_id{1};

const char* version_or_none(std::optional<wire::Version> v) {
  return v ? wire::version_name(*v) : "none";
}
}  // namespace

Session::Session(transport::Session& transport, SessionConfig config, model::Origin& origin,
                 SessionHandler& handler, const Clock& clock, Timers& timers)
    : Session(transport, std::make_unique<const SessionConfig>(std::move(config)), origin, handler,
              clock, timers) {}

Session::Session(transport::Session& transport, std::unique_ptr<const SessionConfig> owned,
                 model::Origin& origin, SessionHandler& handler, const Clock& clock,
                 Timers& timers)
    : Session(transport, *owned, owned->root, owned->query, origin, handler, clock, timers) {
  owned_config_ = std::move(owned);  // config_ refers to the object, which does not move
}

Session::Session(transport::Session& transport, const SessionConfig& shared, std::string root,
                 std::string query, model::Origin& origin, SessionHandler& handler,
                 const Clock& clock, Timers& timers)
    : transport_(transport),
      config_(shared),
      root_(model::normalize_path(root)),
      query_(std::move(query)),
      origin_(origin),
      handler_(handler),
      clock_(clock),
      timers_(timers),
      id_(g_next_session_id.fetch_add(1, std::memory_order_relaxed)) {
  transport_.set_visitor(this);
}

Session::PublisherState::PublisherState(const SessionConfig& config, Instant now)
    : budget(config.limits.max_publisher_cache) {
  reset_rate_buckets(config.limits, now, ingress, announce_changes);
}

void Session::make_publisher_state() {
  publisher_ = std::make_unique<PublisherState>(config_, clock_.now());
}

Session::~Session() {
  timers_.cancel(setup_timer_);
  timers_.cancel(stall_timer_);
  timers_.cancel(sweep_timer_);
  if (!closed_) {
    transport_.set_visitor(nullptr);
    detach_from_transport();
  }
  withdraw_peer_announcements();
  handlers_.clear();
  if (publisher_ != nullptr) {
    // Before the budget: the tracks' destructors reach back into the state (forget_upstream).
    publisher_->upstream_tracks.clear();
  }
}

void Session::detach_from_transport() {
  closed_ = true;
  for (auto& h : handlers_) {
    h->on_session_closed();
  }
  if (publisher_ != nullptr) {
    for (auto& [key, u] : publisher_->upstream_tracks) {
      u->on_session_closed();
    }
  }
}

void Session::withdraw_peer_announcements() {
  if (publisher_ == nullptr) {
    return;
  }
  auto announced = std::move(publisher_->peer_announced);
  publisher_->peer_announced.clear();
  for (const auto& path : announced) {
    if (config_.traffic != nullptr) {
      config_.traffic->announces_closed.add();
    }
    handler_.on_peer_announce(path, false, {}, *this);
  }
}

std::string Session::Context::to_full(std::string_view peer_path) const {
  return full_path_of(s_.root_, peer_path);
}

std::optional<std::string> Session::Context::to_peer(std::string_view full_path) const {
  return peer_path_of(s_.root_, full_path);
}

bool Session::Context::authorize(Action action, std::string_view full_path) {
  return s_.handler_.authorize(action, full_path, s_.query_);
}

bool Session::Context::add_announce_stream() {
  if (s_.announce_streams_ >= s_.config_.limits.max_announce_streams) {
    return false;
  }
  ++s_.announce_streams_;
  return true;
}

void Session::Context::adopt(std::unique_ptr<StreamHandler> h) {
  s_.handlers_.push_back(std::move(h));
}

void Session::start() {
  if (handler_.is_admission_pending()) {
    // The owner decides later (an auth service): peer streams wait in PendingStream until admit().
    admission_pending_ = true;
    return;
  }
  continue_start();
}

void Session::admit() {
  if (!admission_pending_ || closed_) {
    return;
  }
  admission_pending_ = false;
  continue_start();
  if (closing_) {
    return;  // refused: close() is under way
  }
  // Streams that arrived meanwhile hold their bytes: read them now.
  std::vector<StreamHandler*> waiting;
  for (auto& h : handlers_) {
    waiting.push_back(h.get());
  }
  for (StreamHandler* h : waiting) {
    if (!closed_ && !h->is_retired()) {
      h->on_readable();
    }
  }
}

void Session::continue_start() {
  if (!handler_.authorize(Action::kConnect, root_, query_)) {
    close(make_error(ErrorCode::kUnauthorized, "connect not authorized"));
    return;
  }
  std::string_view protocol = transport_.protocol();
  if (const wire::ProtocolInfo* row = wire::protocol_for_alpn(protocol)) {
    if (!row->served || !config_.versions.contains(row->version)) {
      close(make_error(ErrorCode::kVersion, "protocol not enabled"));
      return;
    }
    on_setup_complete(row->version);
    return;
  }
  if (!protocol.empty() && protocol != wire::kSetupAlpn) {
    close(make_error(ErrorCode::kVersion, "unsupported protocol"));
    return;
  }
  setup_timer_ = timers_.schedule(config_.limits.setup_timeout, [this] {
    setup_timer_ = 0;
    if (!version_) {
      fail(make_error(ErrorCode::kTimeout, "setup not completed"));
    }
  });
  if (config_.role == Role::kClient) {
    open_setup_stream();
  }
}

void Session::open_setup_stream() {
  // Over qmux-00 no stream can be opened before the peer's transport parameters arrive; then
  // on_streams_available() calls here again.
  transport::Stream* stream = transport_.open_bidi();
  if (stream == nullptr) {
    setup_waits_for_stream_ = true;
    return;
  }
  setup_waits_for_stream_ = false;
  ctx_.make<SetupClient>(*stream);
}

void Session::on_setup_complete(wire::Version version) {
  version_ = version;
  timers_.cancel(setup_timer_);
  setup_timer_ = 0;
  MOQD_LOG(kInfo, "session %llu start peer=%s transport=%s version=%s path=/%s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           std::string(transport_.kind()).c_str(), wire::version_name(version),
           root_.c_str());
  liveness_.start(clock_.now());
  stall_timer_ = timers_.schedule(Duration::zero(), [this] { check_stalls(); });
  if (wire::is_lite05(version)) {
    open_lite_setup_stream();
  }
  if (config_.discover_prefix) {
    open_discovery();
  }
  handler_.on_session_ready(version);
  // Streams that overtook SETUP were held unread: read them now, in the order they arrived.
  for (size_t i = 0; i < handlers_.size() && !closed_; ++i) {
    if (!handlers_[i]->is_retired()) {
      handlers_[i]->on_session_ready();
    }
  }
}

void Session::open_lite_setup_stream() {
  // Over qmux-00 no stream opens before the peer's transport parameters: on_streams_available()
  // calls here again.
  transport::Stream* stream = transport_.open_uni();
  if (stream == nullptr) {
    lite_setup_waits_for_stream_ = true;
    return;
  }
  lite_setup_waits_for_stream_ = false;
  // Our Origin, so that the peer can drop announcements that already crossed us. No Probe: moqd
  // never sends PROBEs, so the peer must not open a probe stream to wait for them.
  wire::LiteSetup setup;
  if (config_.hop_id != 0) {
    setup.add_varint(wire::LiteSetup::kOrigin, config_.hop_id);
  }
  std::vector<uint8_t> out;
  Writer(out).varint(static_cast<uint64_t>(wire::UniType::kSetup));
  wire::encode(*version_, setup, out);
  stream->write(Bytes::from(out));
  stream->finish();
  stream->release();
}

void Session::open_discovery() {
  // lite-03+ is ready at start(), before qmux-00 lets us open a stream: wait for
  // on_streams_available() then, as open_setup_stream() does.
  transport::Stream* stream = transport_.open_bidi();
  if (stream == nullptr) {
    discovery_waits_for_stream_ = true;
    return;
  }
  discovery_waits_for_stream_ = false;
  ctx_.make<AnnounceRequester>(*stream, *config_.discover_prefix);
}

void Session::close(Error reason) {
  if (closed_) {
    return;
  }
  closing_ = true;
  MOQD_LOG(kInfo, "session %llu closing peer=%s version=%s code=%u (%s) detail=%s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           version_or_none(version_), static_cast<unsigned>(reason.code),
           error_code_name(reason.code), reason.detail);
  transport_.close(static_cast<uint64_t>(reason.code), reason.detail);
}

void Session::fail(Error e) { close(e); }

void Session::on_incoming_stream(transport::Stream& stream) {
  if (closed_) {
    return;
  }
  ++peer_streams_;
  ctx_.make<PendingStream>(stream);
}

void Session::on_streams_available() {
  if (setup_waits_for_stream_) {
    open_setup_stream();
  }
  if (lite_setup_waits_for_stream_ && !closed_) {
    open_lite_setup_stream();
  }
  if (discovery_waits_for_stream_ && !closed_) {
    open_discovery();
  }
  if (publisher_ != nullptr && !publisher_->upstreams_waiting.empty()) {
    auto upstreams = std::move(publisher_->upstreams_waiting);
    publisher_->upstreams_waiting.clear();
    for (UpstreamTrack* u : upstreams) {
      u->open_subscribe_stream();
    }
  }
  auto waiting = std::move(waiting_for_streams_);
  waiting_for_streams_.clear();
  for (Subscription* s : waiting) {
    s->pump();
  }
}

void Session::Context::wait_for_streams(UpstreamTrack* u) {
  auto& waiting = s_.publisher().upstreams_waiting;
  if (std::find(waiting.begin(), waiting.end(), u) == waiting.end()) {
    waiting.push_back(u);
  }
}

void Session::Context::wait_for_streams(Subscription* sub) {
  auto& waiting = s_.waiting_for_streams_;
  if (std::find(waiting.begin(), waiting.end(), sub) == waiting.end()) {
    waiting.push_back(sub);
  }
}

void Session::Context::add_subscription(Subscription* sub) {
  s_.subscriptions_.push_back(sub);
  if (s_.config_.traffic != nullptr) {
    s_.config_.traffic->subscriptions_opened.add();
  }
}

void Session::Context::forget_subscription(Subscription* sub) {
  if (std::erase(s_.subscriptions_, sub) > 0 && s_.config_.traffic != nullptr) {
    s_.config_.traffic->subscriptions_closed.add();
  }
  std::erase(s_.waiting_for_streams_, sub);
}

void Session::Context::forget_upstream(UpstreamTrack* u) {
  if (s_.publisher_ == nullptr) {
    return;
  }
  auto& p = *s_.publisher_;
  std::erase(p.upstreams_waiting, u);
  for (auto it = p.upstreams.begin(); it != p.upstreams.end(); ++it) {
    if (it->second == u) {
      p.upstreams.erase(it);
      return;
    }
  }
}

UpstreamTrack* Session::Context::upstream_by_id(uint64_t id) {
  if (s_.publisher_ == nullptr) {
    return nullptr;
  }
  auto it = s_.publisher_->upstreams.find(id);
  return it == s_.publisher_->upstreams.end() ? nullptr : it->second;
}

void Session::on_closed(uint64_t code, std::string_view reason) {
  if (closed_) {
    return;
  }
  MOQD_LOG(kInfo, "session %llu end peer=%s version=%s code=%llu reason=%.*s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           version_or_none(version_), static_cast<unsigned long long>(code),
           static_cast<int>(reason.size()), reason.data());
  detach_from_transport();
  withdraw_peer_announcements();
  ErrorCode ec = code <= static_cast<uint64_t>(ErrorCode::kGoingAway) ? static_cast<ErrorCode>(code)
                                                                        : ErrorCode::kTransport;
  handler_.on_session_closed(make_error(ec, "session closed"));
}

bool Session::admit_ingress(uint64_t n) {
  if (publisher().ingress.take(static_cast<double>(n), clock_.now())) {
    return true;
  }
  fail(make_error(ErrorCode::kBoundsExceeded, "publisher over --max-publisher-rate"));
  return false;
}

model::TrackSource& Session::track_source(const std::string& path, const std::string& name) {
  auto key = std::make_pair(path, name);
  auto& tracks = publisher().upstream_tracks;
  auto it = tracks.find(key);
  if (it == tracks.end()) {
    it = tracks.emplace(key, std::make_unique<UpstreamTrack>(ctx_, path, name)).first;
  }
  return *it->second;
}

bool Session::admit_announce_change() {
  if (config_.role != Role::kServer || publisher().announce_changes.take(1, clock_.now())) {
    return true;
  }
  fail(make_error(ErrorCode::kBoundsExceeded, "announce changes over --max-announce-rate"));
  return false;
}

void Session::announce_from_peer(const std::string& full, bool active, const model::Hops& hops) {
  if (closing_ || !admit_announce_change()) {
    return;
  }
  auto& peer_announced = publisher().peer_announced;
  if (active) {
    if (peer_announced.contains(full)) {
      // A relay peer's new hop list for a broadcast it announced (a warm copy came or went), or a
      // lite-05 restart: an update of the route, for a relay; clients keep no hops.
      if (config_.hop_id != 0) {
        handler_.on_peer_announce(full, true, hops, *this);
      }
      return;
    }
    size_t bound = config_.role == Role::kServer ? config_.limits.max_announced_paths
                                                 : config_.limits.max_received_announced_paths;
    if (peer_announced.size() >= bound) {
      fail(make_error(ErrorCode::kBoundsExceeded, config_.role == Role::kServer
                                                      ? "too many announced broadcasts"
                                                      : "too many broadcasts received"));
      return;
    }
    peer_announced.insert(full);
    if (config_.traffic != nullptr) {
      config_.traffic->announces_opened.add();
    }
  } else {
    if (peer_announced.erase(full) == 0) {
      return;
    }
    if (config_.traffic != nullptr) {
      config_.traffic->announces_closed.add();
    }
  }
  handler_.on_peer_announce(full, active, hops, *this);
}

void Session::retire(StreamHandler* h) {
  if (!h->mark_retired()) {
    return;
  }
  retired_.push_back(h);
  if (sweep_timer_ == 0) {
    sweep_timer_ = timers_.schedule(Duration::zero(), [this] {
      sweep_timer_ = 0;
      sweep();
    });
  }
}

void Session::sweep() {
  auto retired = std::move(retired_);
  retired_.clear();
  for (StreamHandler* h : retired) {
    std::erase_if(handlers_, [h](const auto& p) { return p.get() == h; });
  }
}

// Stall and idle detection: LivenessWatch (guards.h) decides from this session's answers.
void Session::check_stalls() {
  stall_timer_ = 0;
  LivenessSample sample;
  sample.bytes_sent = transport_.bytes_sent();
  sample.peer_streams = peer_streams_;
  sample.waiting = transport_.unsent_bytes() > 0;
  for (size_t i = 0; !sample.waiting && i < subscriptions_.size(); ++i) {
    sample.waiting = subscriptions_[i]->has_waiting_data();
  }
  sample.busy = !subscriptions_.empty() ||
                (publisher_ != nullptr && (!publisher_->upstream_tracks.empty() ||
                                           !publisher_->peer_announced.empty())) ||
                announce_streams_ > 0;
  switch (liveness_.check(config_.limits, clock_.now(), sample)) {
    case LivenessWatch::Verdict::kStalled:
      fail(make_error(ErrorCode::kTimeout, "subscriber made no progress within stall timeout"));
      return;
    case LivenessWatch::Verdict::kIdle:
      fail(make_error(ErrorCode::kTimeout,
                      "idle: no announce, subscription or traffic within idle timeout"));
      return;
    case LivenessWatch::Verdict::kAlive:
      break;
  }
  stall_timer_ = timers_.schedule(LivenessWatch::period(config_.limits), [this] { check_stalls(); });
}

}  // namespace moqd::session
