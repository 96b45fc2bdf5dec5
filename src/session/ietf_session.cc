// IETF MoQ Transport session: drafts 14 to 20, in the server and the client role.
// See ietf_session.h. This file: the session's life (start, admission, close, handlers retired),
// the control path (send_control, the peer's control messages to their handlers), request ids,
// the peer's SUBSCRIBE and the limits shared with moq-lite. By concern, the rest: ietf_control.cc
// (peer streams, SETUP on the control stream), ietf_namespaces.cc, ietf_upstream.cc,
// ietf_request_streams.cc (drafts 17+), ietf_client.cc (the client role); what they share is
// ietf_session_internal.h.
#include "session/ietf_session.h"

#include <algorithm>
#include <atomic>

#include "base/log.h"
#include "model/path.h"
#include "session/ietf_cluster.h"
#include "session/ietf_datagram.h"
#include "session/ietf_fetch.h"
#include "session/ietf_handlers.h"
#include "session/ietf_publish.h"
#include "session/ietf_session_internal.h"
#include "wire/ietf_namespace.h"
#include "wire/ietf_properties.h"

namespace moqd::session {

namespace wi = wire::ietf;

namespace {

// Shared with the moq-lite Session's numbering only in spirit: ids are per process, for logs.
std::atomic<uint64_t> g_next_ietf_session_id{1ull << 32};

}  // namespace

using namespace ietf_detail;

IetfSession::IetfSession(transport::Session& transport, SessionConfig config,
                         model::Origin& origin, SessionHandler& handler, const Clock& clock,
                         Timers& timers, wire::Version version)
    : IetfSession(transport, std::make_unique<const SessionConfig>(std::move(config)), origin,
                  handler, clock, timers, version) {}

IetfSession::IetfSession(transport::Session& transport,
                         std::unique_ptr<const SessionConfig> owned, model::Origin& origin,
                         SessionHandler& handler, const Clock& clock, Timers& timers,
                         wire::Version version)
    : IetfSession(transport, *owned, owned->root, owned->query, origin, handler, clock, timers,
                  version) {
  owned_config_ = std::move(owned);  // config_ refers to the object, which does not move
}

IetfSession::IetfSession(transport::Session& transport, const SessionConfig& shared,
                         std::string root, std::string query, model::Origin& origin,
                         SessionHandler& handler, const Clock& clock, Timers& timers,
                         wire::Version version)
    : transport_(transport),
      config_(shared),
      root_(model::normalize_path(root)),
      query_(std::move(query)),
      origin_(origin),
      handler_(handler),
      clock_(clock),
      timers_(timers),
      id_(g_next_ietf_session_id.fetch_add(1, std::memory_order_relaxed)),
      version_(version),
      row_(wi::draft(version)) {
  transport_.set_visitor(this);
}

IetfSession::PublisherState::PublisherState(const SessionConfig& config, Instant now)
    : budget(config.limits.max_publisher_cache) {
  reset_rate_buckets(config.limits, now, ingress, announce_changes);
}

IetfSession::PublisherState::~PublisherState() = default;

void IetfSession::make_publisher_state() {
  publisher_ = std::make_unique<PublisherState>(config_, clock_.now());
}

IetfSession::~IetfSession() {
  timers_.cancel(setup_timer_);
  timers_.cancel(stall_timer_);
  timers_.cancel(retire_timer_);
  timers_.cancel(withdraw_timer_);
  if (!closed_) {
    transport_.set_visitor(nullptr);
    detach();
  }
  withdraw_peer_announcements();
  handlers_.clear();
  retired_.clear();
  if (publisher_ != nullptr) {
    // Before the budget: the subscriptions' destructors reach back into the state.
    publisher_->upstream_tracks.clear();
  }
}

void IetfSession::detach() {
  closed_ = true;
  for (auto& h : handlers_) {
    h->on_session_closed();
  }
  for (auto& h : retired_) {
    h->on_session_closed();
  }
  control_ = nullptr;
  if (publisher_ != nullptr) {
    for (auto& [key, u] : publisher_->upstream_tracks) {
      u->on_session_closed();
    }
  }
  if (fetches_) {
    fetches_->on_session_closed();
  }
  if (publishes_) {
    publishes_->on_session_closed();
  }
  if (datagrams_) {
    datagrams_->on_session_closed();
  }
}

PublishService& IetfSession::publishes() {
  if (!publishes_) {
    publishes_ = std::make_unique<PublishService>(static_cast<PublishContext&>(*this));
  }
  return *publishes_;
}

void IetfSession::on_datagram(std::span<const uint8_t> payload) {
  if (!datagrams_) {
    datagrams_ = std::make_unique<DatagramReceiver>(static_cast<IngressContext&>(*this));
  }
  datagrams_->on_datagram(payload);
}

FetchService& IetfSession::fetches() {
  if (!fetches_) {
    fetches_ = std::make_unique<FetchService>(static_cast<FetchContext&>(*this));
  }
  return *fetches_;
}

DownstreamSubscription* IetfSession::downstream(uint64_t request_id) const {
  auto it = downstream_.find(request_id);
  return it == downstream_.end() ? nullptr : it->second;
}

std::string IetfSession::to_full(const std::string& peer_path) const {
  return full_path_of(root_, peer_path);
}

std::optional<std::string> IetfSession::to_peer(const std::string& full) const {
  return peer_path_of(root_, full);
}

void IetfSession::start() {
  if (handler_.is_admission_pending()) {
    admission_pending_ = true;
    return;
  }
  continue_start();
}

void IetfSession::admit() {
  if (!admission_pending_ || closed_) {
    return;
  }
  admission_pending_ = false;
  continue_start();
  // Streams that arrived meanwhile hold their bytes: read them now.
  std::vector<Handler*> waiting;
  for (auto& h : handlers_) {
    waiting.push_back(h.get());
  }
  for (Handler* h : waiting) {
    if (!closed_) {
      h->on_readable();
    }
  }
}

void IetfSession::continue_start() {
  started_ = true;
  if (row_ == nullptr) {
    close(make_error(ErrorCode::kVersion, "IETF draft not served"));
    return;
  }
  if (!handler_.authorize(Action::kConnect, root_, query_)) {
    close(make_error(ErrorCode::kUnauthorized, "connect not authorized"));
    return;
  }
  setup_timer_ = timers_.schedule(config_.limits.setup_timeout, [this] {
    setup_timer_ = 0;
    if (!ready_) {
      fail(make_error(ErrorCode::kTimeout, "setup not completed"));
    }
  });
  if (is_client()) {
    start_client();
  } else if (row_->request_streams) {
    start_request_streams();
  }
}

void IetfSession::close(Error reason) {
  if (closed_ || closing_) {
    return;
  }
  closing_ = true;
  MOQD_LOG(kInfo, "session %llu closing peer=%s version=%s code=%u (%s) detail=%s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           wire::version_name(version_), static_cast<unsigned>(reason.code),
           error_code_name(reason.code), reason.detail);
  const uint64_t code = static_cast<uint64_t>(wi::termination_code(reason.code));
  transport_.close(code, reason.detail);
}

void IetfSession::fail(Error e) { close(e); }

void IetfSession::fail(wi::TerminationCode code, const char* detail) {
  if (closed_ || closing_) {
    return;
  }
  closing_ = true;
  MOQD_LOG(kInfo, "session %llu closing peer=%s version=%s ietf_code=0x%llx detail=%s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           wire::version_name(version_), static_cast<unsigned long long>(code), detail);
  transport_.close(static_cast<uint64_t>(code), detail);
}

bool IetfSession::send_goaway(const std::string& uri) {
  if (closed_ || !ready_ || (control_ == nullptr && setup_out_ == nullptr)) {
    return false;
  }
  send_control(wi::Goaway{uri, 0});
  MOQD_LOG(kInfo, "session %llu goaway sent uri=%s", static_cast<unsigned long long>(id_),
           uri.empty() ? "(same)" : uri.c_str());
  return true;
}

void IetfSession::send_control(const wi::ControlMessage& m) {
  if (!closed_ && row_ != nullptr && row_->request_streams) {
    send_on_request_stream(m);
    return;
  }
  if (closed_ || control_ == nullptr) {
    return;
  }
  std::vector<uint8_t> out;
  if (!wi::encode(version_, m, out)) {
    MOQD_LOG(kWarn, "session %llu control message not encodable in %s (dropped)",
             static_cast<unsigned long long>(id_), wire::version_name(version_));
    return;
  }
  control_->write(Bytes::from(out));
}

void IetfSession::retire(Handler* h) {
  for (auto it = handlers_.begin(); it != handlers_.end(); ++it) {
    if (it->get() == h) {
      retired_.push_back(std::move(*it));
      handlers_.erase(it);
      break;
    }
  }
  if (retire_timer_ == 0) {
    retire_timer_ = timers_.schedule(Duration::zero(), [this] {
      retire_timer_ = 0;
      flush_retired();
    });
  }
}

void IetfSession::flush_retired() {
  auto r = std::move(retired_);
  retired_.clear();
  r.clear();
}

void IetfSession::on_streams_available() {
  if (row_ != nullptr && row_->request_streams && started_ && setup_out_ == nullptr) {
    start_request_streams();
  }
  open_our_requests();
  if (control_waits_for_stream_ && !closed_) {
    open_client_control();
  }
  auto waiting = std::move(waiting_for_streams_);
  waiting_for_streams_.clear();
  for (DownstreamSubscription* s : waiting) {
    if (!closed_) {
      s->pump();
    }
  }
  if (fetches_ && !closed_) {
    fetches_->on_streams_available();
  }
}

void IetfSession::wait_for_streams(DownstreamSubscription* s) {
  if (std::find(waiting_for_streams_.begin(), waiting_for_streams_.end(), s) ==
      waiting_for_streams_.end()) {
    waiting_for_streams_.push_back(s);
  }
}

void IetfSession::on_closed(uint64_t code, std::string_view reason) {
  if (closed_) {
    return;
  }
  MOQD_LOG(kInfo, "session %llu end peer=%s version=%s code=%llu reason=%.*s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           wire::version_name(version_), static_cast<unsigned long long>(code),
           static_cast<int>(reason.size()), reason.data());
  detach();
  withdraw_peer_announcements();
  handler_.on_session_closed(make_error(code == 0 ? ErrorCode::kCancel : ErrorCode::kTransport,
                                        "session closed"));
}

bool IetfSession::accept_peer_request_id(uint64_t id) {
  if (row_->request_streams) {
    return accept_stream_request_id(id);
  }
  // Client-initiated requests use even ids, each the next in sequence, below the granted maximum
  // (draft-14 §9.1). The maximum is checked first: an id at or over it is TOO_MANY_REQUESTS even
  // though it is also out of sequence (the window is raised as ids are used, so an id in
  // sequence never reaches it).
  if (id >= peer_max_request_id_) {
    fail(wi::TerminationCode::kTooManyRequests, "request id over MAX_REQUEST_ID");
    return false;
  }
  if (id != peer_next_request_id_) {
    fail(wi::TerminationCode::kInvalidRequestId, "request id out of sequence");
    return false;
  }
  peer_next_request_id_ += 2;
  raise_max_request_id();
  return true;
}

void IetfSession::raise_max_request_id() {
  if (peer_max_request_id_ - peer_next_request_id_ < kRequestIdWindow / 2) {
    peer_max_request_id_ = peer_next_request_id_ + kRequestIdWindow;
    send_control(wi::MaxRequestId{false, peer_max_request_id_});
  }
}

std::optional<uint64_t> IetfSession::take_request_id() {
  if (our_next_request_id_ >= our_max_request_id_) {
    return std::nullopt;
  }
  uint64_t id = our_next_request_id_;
  our_next_request_id_ += 2;
  return id;
}

void IetfSession::on_control_message(wi::ControlMessage m) {
  std::visit(
      [this](auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, wi::Subscribe>) {
          handle_subscribe(msg);
        } else if constexpr (std::is_same_v<T, wi::Unsubscribe>) {
          handle_unsubscribe(msg);
        } else if constexpr (std::is_same_v<T, wi::PublishNamespace>) {
          handle_publish_namespace(msg);
        } else if constexpr (std::is_same_v<T, wi::PublishNamespaceDone>) {
          handle_publish_namespace_done(msg);
        } else if constexpr (std::is_same_v<T, wi::SubscribeNamespace>) {
          if (row_->subscribe_options) {
            fail(wi::TerminationCode::kProtocolViolation,
                 "SUBSCRIBE_NAMESPACE on the control stream (draft 16 uses its own stream)");
            return;
          }
          handle_subscribe_namespace(msg, nullptr);
        } else if constexpr (std::is_same_v<T, wi::SubscribeOk>) {
          handle_subscribe_ok(msg);
        } else if constexpr (std::is_same_v<T, wi::RequestError>) {
          handle_request_error(msg);
        } else if constexpr (std::is_same_v<T, wi::RequestOk>) {
          // PUBLISH_NAMESPACE_OK (d14) to the namespaces the relay announced: nothing to do.
        } else if constexpr (std::is_same_v<T, wi::PublishDone>) {
          handle_publish_done(msg);
        } else if constexpr (std::is_same_v<T, wi::MaxRequestId>) {
          handle_max_request_id(msg);
        } else if constexpr (std::is_same_v<T, wi::PublishNamespaceCancel>) {
          // The peer no longer wants a namespace the relay announced (d14): nothing is sent for it
          // after this but its DONE when it ends.
        } else if constexpr (std::is_same_v<T, wi::Goaway>) {
          if (is_client()) {
            handler_.on_goaway(msg.uri);
            return;
          }
          fail(wi::TerminationCode::kProtocolViolation, "GOAWAY from the client");
        } else if constexpr (std::is_same_v<T, wi::Namespace>) {
          on_client_namespace(msg);
        } else if constexpr (std::is_same_v<T, wi::SubscribeUpdate>) {
          fetches().on_subscribe_update(msg);
        } else if constexpr (std::is_same_v<T, wi::Fetch>) {
          fetches().on_fetch(msg);
        } else if constexpr (std::is_same_v<T, wi::FetchCancel>) {
          fetches().on_fetch_cancel(msg);
        } else if constexpr (std::is_same_v<T, wi::TrackStatus>) {
          fetches().on_track_status(msg);
        } else if constexpr (std::is_same_v<T, wi::Publish>) {
          publishes().on_publish(msg);
        } else if constexpr (std::is_same_v<T, wi::PublishOk>) {
          handle_publish_ok(msg.request_id, msg.forward);
        } else {
          fail(wi::TerminationCode::kProtocolViolation, "unexpected control message");
        }
      },
      m);
}

void IetfSession::send_request_error(uint64_t request_id, wi::MessageType type, uint64_t code,
                                     const char* reason) {
  wi::RequestError e;
  e.type = type;
  e.request_id = request_id;
  e.error_code = code;
  e.reason = reason;
  send_control(e);
}

void IetfSession::handle_subscribe(const wi::Subscribe& m) {
  if (!accept_peer_request_id(m.request_id)) {
    return;
  }
  const auto type = wi::MessageType::kRequestError;
  auto peer_path = wi::to_path(m.ns);
  if (!peer_path) {
    send_request_error(m.request_id, type, does_not_exist(row()), "namespace has no moqd path");
    return;
  }
  std::string full = to_full(*peer_path);
  if (!handler_.authorize(Action::kSubscribe, full, query_)) {
    send_request_error(m.request_id, type, kErrUnauthorized, "unauthorized");
    return;
  }
  if (downstream_.size() >= config_.limits.max_subscriptions) {
    send_request_error(m.request_id, type, kErrInternal, "too many subscriptions");
    return;
  }
  bool next_group = false;
  if (m.filter) {
    switch (m.filter->type) {
      case wi::FilterType::kLargestObject: break;
      case wi::FilterType::kNextGroupStart: next_group = true; break;
      // d20's field form: none = unfiltered (the newest group, as LargestObject); relative 0 is
      // the next group, 1 the current (newest) group, what @moq/net sends.
      case wi::FilterType::kUnfiltered: break;
      case wi::FilterType::kRelative:
        if (m.filter->relative_groups > 1) {
          send_request_error(m.request_id, type, kErrNotSupported,
                             "relative filters past the current group are not served");
          return;
        }
        next_group = m.filter->relative_groups == 0;
        break;
      default:
        send_request_error(m.request_id, type, kErrNotSupported,
                           "absolute filters are not served (moqd serves live tracks)");
        return;
    }
  }
  if (!m.forward) {
    send_request_error(m.request_id, type, kErrNotSupported, "forward=0 is not served");
    return;
  }
  model::Track* t = origin_.track(full, m.track);
  if (t == nullptr) {
    send_request_error(m.request_id, type, does_not_exist(row()), "broadcast not found");
    return;
  }
  t->raise_priority(m.subscriber_priority);
  auto* s = adopt<DownstreamSubscription>(m.request_id, *t, m.subscriber_priority, next_group);
  downstream_[m.request_id] = s;
  if (config_.traffic != nullptr) {
    config_.traffic->subscriptions_opened.add();
  }
  wi::SubscribeOk ok;
  ok.request_id = m.request_id;
  ok.track_alias = s->alias();
  ok.expires = 0;
  ok.group_order = 1;  // ascending: groups go out in arrival order
  s->begin(std::move(ok));
}

void IetfSession::handle_unsubscribe(const wi::Unsubscribe& m) {
  auto it = downstream_.find(m.request_id);
  if (it == downstream_.end()) {
    ended_unacknowledged_.erase(m.request_id);
    return;  // already ended: the peer may race our PUBLISH_DONE
  }
  DownstreamSubscription* s = it->second;
  s->unsubscribe();
}

void IetfSession::forget_downstream(DownstreamSubscription* s) {
  auto it = downstream_.find(s->request_id());
  if (it != downstream_.end() && it->second == s) {
    downstream_.erase(it);
    if (config_.traffic != nullptr) {
      config_.traffic->subscriptions_closed.add();
    }
  }
  std::erase(waiting_for_streams_, s);
}

bool IetfSession::on_publish_stream_message(uint64_t request_id, wi::ControlMessage m) {
  return publishes().on_stream_message(request_id, std::move(m));
}

void IetfSession::on_publish_stream_closed(uint64_t request_id, bool done) {
  PublishService::on_stream_closed(*this, request_id, done);
}

// --- the limits shared with moq-lite's Session (guards.h) ---
// The drafts define no termination code for a peer over a rate limit: a publisher sending faster
// than --max-publisher-rate closes with INTERNAL_ERROR (a relay policy, not a protocol
// violation); PUBLISH_NAMESPACE(_DONE) over --max-announce-rate with TOO_MANY_REQUESTS (they are
// requests); stall and idle with CONTROL_MESSAGE_TIMEOUT, as the setup timeout.

bool IetfSession::admit_ingress(uint64_t n) {
  if (publisher().ingress.take(static_cast<double>(n), clock_.now())) {
    return true;
  }
  fail(wi::TerminationCode::kInternalError, "publisher over --max-publisher-rate");
  return false;
}

bool IetfSession::admit_announce_change() {
  if (publisher().announce_changes.take(1, clock_.now())) {
    return true;
  }
  fail(wi::TerminationCode::kTooManyRequests, "announce changes over --max-announce-rate");
  return false;
}

void IetfSession::check_liveness() {
  stall_timer_ = 0;
  if (closed_ || closing_) {
    return;
  }
  LivenessSample sample;
  sample.bytes_sent = transport_.bytes_sent();
  sample.peer_streams = peer_streams_;
  sample.waiting = transport_.unsent_bytes() > 0;
  for (auto it = downstream_.begin(); !sample.waiting && it != downstream_.end(); ++it) {
    sample.waiting = it->second->has_waiting_data();
  }
  sample.busy = !downstream_.empty() ||
                (publisher_ != nullptr && (!publisher_->upstream_tracks.empty() ||
                                           !publisher_->announced_by_path.empty())) ||
                namespace_listeners_ > 0;
  switch (liveness_.check(config_.limits, clock_.now(), sample)) {
    case LivenessWatch::Verdict::kStalled:
      fail(wi::TerminationCode::kControlMessageTimeout,
           "subscriber made no progress within stall timeout");
      return;
    case LivenessWatch::Verdict::kIdle:
      fail(wi::TerminationCode::kControlMessageTimeout,
           "idle: no announce, subscription or traffic within idle timeout");
      return;
    case LivenessWatch::Verdict::kAlive:
      break;
  }
  stall_timer_ = timers_.schedule(LivenessWatch::period(config_.limits), [this] { check_liveness(); });
}

}  // namespace moqd::session
