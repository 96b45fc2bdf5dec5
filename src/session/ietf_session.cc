// IETF MoQ Transport session: drafts 14 to 20, in the server and the client role.
// See ietf_session.h.
#include "session/ietf_session.h"

#include <algorithm>
#include <atomic>

#include "base/log.h"
#include "model/path.h"
#include "session/ietf_cluster.h"
#include "session/ietf_fetch.h"
#include "session/ietf_datagram.h"
#include "session/ietf_handlers.h"
#include "session/ietf_publish.h"
#include "wire/ietf_namespace.h"
#include "wire/ietf_properties.h"

namespace moqd::session {

namespace wi = wire::ietf;

namespace {

// Shared with the moq-lite Session's numbering only in spirit: ids are per process, for logs.
std::atomic<uint64_t> g_next_ietf_session_id{1ull << 32};

// Request ids granted at once (MAX_REQUEST_ID), and the headroom below which more are granted.
constexpr uint64_t kRequestIdWindow = 1024;

// REQUEST_ERROR / SUBSCRIBE_ERROR codes (draft-14 §9.8, draft-16 §9.8 table).
constexpr uint64_t kErrInternal = 0x0;
constexpr uint64_t kErrUnauthorized = 0x1;
constexpr uint64_t kErrNotSupported = 0x3;
// "Does not exist": d14 SUBSCRIBE_ERROR TRACK_DOES_NOT_EXIST (§9.8) is 0x4; d15+ REQUEST_ERROR
// DOES_NOT_EXIST is 0x10 (d16 §13.1.3; 0x4 there is MALFORMED_AUTH_TOKEN).
uint64_t does_not_exist(const wi::Draft& d) { return d.request_ok ? 0x10 : 0x4; }
constexpr uint64_t kErrDuplicate = 0x5;  // PUBLISH_NAMESPACE of a namespace already announced

// The request id of a request we queue for its own stream (drafts 17+): SUBSCRIBE or, in the
// client role, PUBLISH_NAMESPACE.
uint64_t request_id_of(const wire::ietf::ControlMessage& m) {
  if (const auto* s = std::get_if<wire::ietf::Subscribe>(&m)) {
    return s->request_id;
  }
  if (const auto* p = std::get_if<wire::ietf::PublishNamespace>(&m)) {
    return p->request_id;
  }
  return 0;
}

}  // namespace

namespace ietf_detail {

// A peer stream whose role is not known yet: a bidi stream before the control stream is the
// control stream; later bidi streams (d16) carry SUBSCRIBE_NAMESPACE; uni streams carry SUBGROUPs.
class PendingStream final : public HandlerOf<ControlContext> {
 public:
  PendingStream(ControlContext& s, transport::Stream& stream) : HandlerOf(s) { attach(stream); }
  void on_readable() override;
  void on_ready() override { on_readable(); }
};

// One upstream subscription: the relay reads a track of a broadcast the peer published.
class UpstreamSubscription final : public model::TrackSource {
 public:
  UpstreamSubscription(UpstreamContext& s, std::string path, std::string name)
      : session_(s), path_(std::move(path)), name_(std::move(name)) {}
  ~UpstreamSubscription() override {
    session_.timers().cancel(done_timer_);
    session_.timers().cancel(grace_timer_);
  }

  model::Track* track() const { return track_; }
  std::optional<uint64_t> request_id() const { return request_id_; }

  void start_track(model::Track& track) override {
    track_ = &track;
    if (published_) {
      model::TrackProperties props;
      props.timescale_known = false;  // PUBLISH's Track Properties are not read here
      track.set_properties(props);
      // The peer's PUBLISH already made the subscription: its request id and alias stay.
      done_count_.reset();
      open_readers_ = 0;
      streams_seen_ = 0;
      grace_over_ = false;
      return;
    }
    request_id_.reset();
    alias_.reset();
    done_count_.reset();
    open_readers_ = 0;
    streams_seen_ = 0;
    grace_over_ = false;
    track.expect_properties();  // until SUBSCRIBE_OK (on_ok): its TIMESCALE, if any
    session_.request_upstream(this);
  }
  void stop_track(model::Track&) override {
    track_ = nullptr;
    session_.timers().cancel(done_timer_);
    session_.timers().cancel(grace_timer_);
    done_timer_ = 0;
    grace_timer_ = 0;
    if (request_id_ && !session_.is_closed()) {
      session_.send_control(wi::Unsubscribe{*request_id_});
    }
    session_.forget_upstream(this);
    request_id_.reset();
    alias_.reset();
    published_ = false;
  }
  // PUBLISH: the peer subscribed us under `alias`; start_track binds without a SUBSCRIBE.
  void adopt_publish(uint64_t request_id, uint64_t alias) {
    published_ = true;
    request_id_ = request_id;
    alias_ = alias;
  }
  void drop_publish() {
    published_ = false;
    request_id_.reset();
    alias_.reset();
  }

  // Sends SUBSCRIBE once a request id is available; false while blocked.
  bool send_subscribe() {
    if (track_ == nullptr || request_id_) {
      return true;
    }
    auto id = session_.take_request_id();
    if (!id) {
      return false;
    }
    request_id_ = id;
    auto peer = session_.to_peer(path_);
    auto ns = wi::to_namespace(peer ? *peer : path_);
    wi::Subscribe m;
    m.request_id = *id;
    m.ns = std::move(ns);
    m.track = name_;
    m.subscriber_priority = track_->priority().value_or(session_.config().upstream_priority);
    m.group_order = 0;
    m.forward = true;
    m.filter = wi::Filter{wi::FilterType::kLargestObject, {}, 0};
    if (session_.row().filter_fields) {
      // d20: "0 0" is Next Object, which @moq/net serves from the middle of the current group;
      // relative 1 is the current group from its first object (what @moq/net itself sends).
      m.filter->type = wi::FilterType::kRelative;
      m.filter->relative_groups = 1;
    }
    session_.send_control(m);
    return true;
  }

  // SUBSCRIBE_OK: the alias, and the Track Properties (17+): a TIMESCALE (0x08) gives the units
  // of the publisher's object Timestamps, which moqd then knows and passes on (to IETF
  // subscribers as TIMESCALE, to moq-lite-05 ones in TRACK_INFO); without one they are unknown.
  void on_ok(uint64_t alias, const std::string& properties) {
    alias_ = alias;
    if (track_ == nullptr) {
      return;
    }
    model::TrackProperties props;
    props.timescale_known = false;
    if (session_.row().number >= 17) {
      if (auto ts = track_timescale(properties)) {
        props.timescale = *ts;
        props.timescale_known = true;
      }
    }
    track_->set_properties(props);
  }
  void on_error(const wi::RequestError& e) {
    if (track_ != nullptr) {
      MOQD_LOG(kInfo, "session %llu upstream subscribe path=%s track=%s refused code=%llu reason=%s",
               static_cast<unsigned long long>(session_.id()), path_.c_str(), name_.c_str(),
               static_cast<unsigned long long>(e.error_code), e.reason.c_str());
      track_->end(make_error(ErrorCode::kNotFound, "publisher refused the subscription"));
    }
  }
  void on_publish_done(const wi::PublishDone& d) {
    // PUBLISH_DONE's Stream Count says how many SUBGROUP streams the publisher opened; @moq/net
    // writes 0 ("not counted"), and may write PUBLISH_DONE right after its last group, before
    // the streams of its last groups have arrived (they travel apart from the control stream).
    // The track ends once that many arrived and none is still being read, or, for 0, once no
    // stream for the track has started or ended for kQuiet and none is read; at the latest when
    // no stream activity has been seen for kLatest (a stream reset before its header arrived
    // never shows up). Both timers restart on every stream of the track (arm_done_timers).
    done_count_ = d.stream_count;
    arm_done_timers();
    maybe_end();
  }
  void on_reader_started() {
    ++open_readers_;
    ++streams_seen_;
    arm_done_timers();
  }
  void on_reader_done() {
    if (open_readers_ > 0) {
      --open_readers_;
    }
    arm_done_timers();
    maybe_end();
  }
  std::optional<uint64_t> alias() const { return alias_; }
  void on_session_closed() {
    if (track_ != nullptr) {
      model::Track* t = track_;
      t->end(make_error(ErrorCode::kClosed, "publisher session closed"));
    }
  }

 private:
  // After PUBLISH_DONE: (re)starts the quiet grace (Stream Count 0) and the latest end. An
  // @moq/net d16 publisher that ended right after several large groups lost frames in 2 runs of
  // 8 when the grace was a fixed 200 ms from PUBLISH_DONE (docs/ARCHITECTURE.md).
  static constexpr std::chrono::milliseconds kQuiet{750};
  static constexpr std::chrono::seconds kLatest{5};
  void arm_done_timers() {
    if (track_ == nullptr || !done_count_) {
      return;
    }
    if (*done_count_ == 0) {
      grace_over_ = false;
      session_.timers().cancel(grace_timer_);
      grace_timer_ = session_.timers().schedule(kQuiet, [this] {
        grace_timer_ = 0;
        grace_over_ = true;
        maybe_end();
      });
    }
    session_.timers().cancel(done_timer_);
    done_timer_ = session_.timers().schedule(kLatest, [this] {
      done_timer_ = 0;
      if (track_ != nullptr) {
        track_->end(make_error(ErrorCode::kCancel, "publisher ended the track"));
      }
    });
  }
  // TIMESCALE (0x08) in a Track Properties block (delta-coded Key-Value-Pairs to the end);
  // nullopt when absent, 0, or the block does not parse.
  std::optional<uint64_t> track_timescale(const std::string& block) const {
    const wi::VarintForm f = session_.row().varint_form;
    std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(block.data()), block.size());
    uint64_t type = 0;
    std::optional<uint64_t> found;
    while (!in.empty()) {
      auto t = wi::read_varint(f, in);
      if (!t || !t->has_value() || (*t)->value > (uint64_t{1} << 62) - 1 - type) {
        return std::nullopt;
      }
      in = in.subspan((*t)->consumed);
      type += (*t)->value;
      auto v = wi::read_varint(f, in);
      if (!v || !v->has_value()) {
        return std::nullopt;
      }
      in = in.subspan((*v)->consumed);
      if ((type & 1) != 0) {
        if ((*v)->value > in.size()) {
          return std::nullopt;
        }
        in = in.subspan(static_cast<size_t>((*v)->value));
      } else if (type == 0x08 && (*v)->value != 0) {
        found = (*v)->value;
      }
    }
    return found;
  }
  void maybe_end() {
    if (track_ != nullptr && done_count_ && open_readers_ == 0 &&
        (*done_count_ == 0 ? grace_over_ : streams_seen_ >= *done_count_)) {
      track_->end(make_error(ErrorCode::kCancel, "publisher ended the track"));
    }
  }

  UpstreamContext& session_;
  std::string path_;
  std::string name_;
  model::Track* track_ = nullptr;
  std::optional<uint64_t> request_id_;
  std::optional<uint64_t> alias_;
  std::optional<uint64_t> done_count_;
  uint64_t open_readers_ = 0;
  uint64_t streams_seen_ = 0;
  bool grace_over_ = false;
  bool published_ = false;  // fed by the peer's PUBLISH (ietf_publish.h)
  TimerId done_timer_ = 0;
  TimerId grace_timer_ = 0;
};

// SUBSCRIBE_NAMESPACE answered from the origin: the peer hears of broadcasts under its prefix.
// d14: as PUBLISH_NAMESPACE / PUBLISH_NAMESPACE_DONE on the control stream; d15: NAMESPACE /
// NAMESPACE_DONE on the control stream; d16: the same on the request's own bidi stream.
class NamespaceAnnouncer final : public HandlerOf<NamespaceContext>, public model::AnnounceListener {
 public:
  // `publish`: announce with PUBLISH_NAMESPACE in every draft (a client-role session publishing
  // its origin's broadcasts to the relay), not as answers to a SUBSCRIBE_NAMESPACE.
  NamespaceAnnouncer(NamespaceContext& s, transport::Stream* own, std::string full_prefix,
                     size_t prefix_fields, bool publish = false)
      : HandlerOf(s),
        full_prefix_(std::move(full_prefix)),
        prefix_fields_(prefix_fields),
        publish_(publish) {
    if (own != nullptr) {
      attach(*own);
      own_stream_ = true;
    }
  }
  ~NamespaceAnnouncer() override { stop(); }
  void begin() {
    listening_ = true;
    session_.count_namespace_listener(true);
    session_.origin().add_listener(full_prefix_, this);
  }
  void stop() {
    if (listening_) {
      listening_ = false;
      session_.count_namespace_listener(false);
      session_.origin().remove_listener(this);
    }
  }
  void on_session_closed() override {
    stop();
    Handler::on_session_closed();
  }
  void on_readable() override {
    if (stream_ == nullptr) {
      return;
    }
    // Nothing more is expected on a d16 SUBSCRIBE_NAMESPACE stream; its FIN or reset ends it.
    stream_->consume(stream_->peek().size());
    if (stream_->is_fin_received()) {
      stop();
      stream_->finish();
      done();
    }
  }
  void on_reset(uint64_t) override {
    stop();
    done();
  }
  void on_stop_sending(uint64_t) override {
    stop();
    done();
  }

  void on_announce(const std::string& path, bool active, const model::Hops& hops) override;

 private:
  std::string full_prefix_;
  std::map<std::string, wire::ietf::Advert> adverts_;  // cluster extension: what each path last carried
  size_t prefix_fields_;
  bool own_stream_ = false;
  bool publish_ = false;
  bool listening_ = false;
  std::set<std::string> sent_;
  std::map<std::string, uint64_t> d14_ids_;  // path -> our PUBLISH_NAMESPACE request id
};

// ---------------------------------------------------------------------------------------------

void PendingStream::on_readable() {
  if (stream_ == nullptr || session_.is_admission_pending() || session_.is_closed()) {
    return;
  }
  transport::Stream& stream = *stream_;
  if (stream.peek().empty()) {
    if (stream.is_fin_received()) {
      done();
    }
    return;
  }
  if (!session_.is_ready()) {
    return;  // held until SETUP completes
  }
  stream_ = nullptr;
  stream.set_visitor(nullptr);
  session_.retire(this);
  if (stream.is_uni()) {
    session_.on_subgroup_stream(stream);
  } else {
    session_.on_namespace_stream(stream);
  }
}

// ---------------------------------------------------------------------------------------------

void NamespaceAnnouncer::on_announce(const std::string& path, bool active, const model::Hops& hops) {
  if (session_.is_closed()) {
    return;
  }
  std::optional<wi::Advert> advert;
  if (active && session_.cluster_negotiated()) {
    advert = ietf_cluster::advert_for(hops, session_.config().ietf_relay_hops, session_.peer_relay_hops());
    active = advert.has_value();  // a path through the peer is withheld (withdrawn if sent)
    auto it = adverts_.find(path);
    if (active && it != adverts_.end() && !(it->second == *advert) && sent_.count(path) != 0) {
      sent_.erase(path);  // re-sent below with the new HOP_PATH: the draft's in-place update
    }
  }
  if (active && !session_.handler().authorize(Action::kSee, path, session_.config().query)) {
    return;
  }
  // Split horizon: the peer's own broadcasts are not announced back to it.
  if (active && session_.origin().active_source(path) == &session_.source()) {
    return;
  }
  if (active == (sent_.count(path) != 0)) {
    return;
  }
  auto peer = session_.to_peer(path);
  if (!peer) {
    return;
  }
  wi::TrackNamespace ns = wi::to_namespace(*peer);
  if (ns.size() < prefix_fields_) {
    return;
  }
  if (active) {
    sent_.insert(path);
  } else {
    sent_.erase(path);
  }
  wi::Parameters cluster_params;
  if (advert) {
    adverts_[path] = *advert;
    wi::append_advert(*advert, cluster_params);
  } else {
    adverts_.erase(path);
  }
  if (session_.row().namespace_messages && !publish_) {
    wi::Namespace n;
    n.done = !active;
    n.suffix.assign(ns.begin() + static_cast<std::ptrdiff_t>(prefix_fields_), ns.end());
    n.extended = advert.has_value();
    n.params = std::move(cluster_params);
    if (own_stream_) {
      if (stream_ != nullptr) {
        std::vector<uint8_t> out;
        wi::encode(session_.draft(), n, out);
        stream_->write(Bytes::from(out));
      }
    } else {
      session_.send_control(n);
    }
    return;
  }
  // d14: the relay publishes the namespace to the peer.
  if (active) {
    auto id = session_.take_request_id();
    if (!id) {
      MOQD_LOG(kInfo, "session %llu namespace %s not announced: peer's MAX_REQUEST_ID reached",
               static_cast<unsigned long long>(session_.id()), path.c_str());
      sent_.erase(path);
      return;
    }
    d14_ids_[path] = *id;
    session_.send_control(wi::PublishNamespace{*id, 0, ns, std::move(cluster_params)});
  } else {
    wi::PublishNamespaceDone d;
    d.ns = ns;
    d.request_id = d14_ids_[path];  // d16 names the request (a client-role publisher)
    d14_ids_.erase(path);
    session_.send_control(d);
  }
}

}  // namespace ietf_detail

using namespace ietf_detail;

// ---------------------------------------------------------------------------------------------

IetfSession::IetfSession(transport::Session& transport, SessionConfig config,
                         model::Origin& origin, SessionHandler& handler, const Clock& clock,
                         Timers& timers, wire::Version version)
    : transport_(transport),
      config_(std::move(config)),
      origin_(origin),
      handler_(handler),
      clock_(clock),
      timers_(timers),
      id_(g_next_ietf_session_id.fetch_add(1, std::memory_order_relaxed)),
      version_(version),
      row_(wi::draft(version)),
      publisher_budget_(config_.limits.max_publisher_cache) {
  config_.root = model::normalize_path(config_.root);
  const Instant now = clock_.now();
  ingress_.reset(static_cast<double>(config_.limits.max_publisher_rate),
                 static_cast<double>(config_.limits.max_publisher_rate), now);
  announce_changes_.reset(static_cast<double>(config_.limits.max_announce_rate),
                          announce_capacity(config_.limits), now);
  transport_.set_visitor(this);
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
  upstream_tracks_.clear();
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
  for (auto& [key, u] : upstream_tracks_) {
    u->on_session_closed();
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

UpstreamSubscription* IetfSession::adopt_published(const std::string& full,
                                                   const std::string& name, uint64_t request_id,
                                                   uint64_t alias) {
  auto key = std::make_pair(full, name);
  auto it = upstream_tracks_.find(key);
  if (it != upstream_tracks_.end() && (it->second->track() != nullptr || it->second->request_id())) {
    return nullptr;
  }
  if (it == upstream_tracks_.end()) {
    it = upstream_tracks_.emplace(key, std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), full, name)).first;
  }
  UpstreamSubscription* u = it->second.get();
  u->adopt_publish(request_id, alias);
  upstream_by_alias_[alias] = u;
  upstream_by_request_[request_id] = u;
  return u;
}

model::Track* IetfSession::upstream_track(uint64_t alias) {
  UpstreamSubscription* u = upstream_by_alias(alias);
  return u != nullptr ? u->track() : nullptr;
}

void IetfSession::on_datagram(std::span<const uint8_t> payload) {
  if (!datagrams_) {
    datagrams_ = std::make_unique<DatagramReceiver>(static_cast<IngressContext&>(*this));
  }
  datagrams_->on_datagram(payload);
}

void IetfSession::drop_published(UpstreamSubscription* u) {
  u->drop_publish();
  forget_upstream(u);
}

void IetfSession::retry_held_subgroups() {
  auto held = std::move(held_subgroups_);
  held_subgroups_.clear();
  for (SubgroupReader* r : held) {
    if (!closed_) {
      r->retry();
    }
  }
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

void IetfSession::withdraw_peer_announcements() {
  flush_client_withdrawals();
  auto paths = std::move(announced_by_path_);
  announced_by_path_.clear();
  announced_by_id_.clear();
  if (publishes_) {
    for (std::string& path : publishes_->take_paths()) {
      paths.emplace(std::move(path), 0);  // announced by PUBLISH alone
    }
  }
  for (const auto& [path, id] : paths) {
    if (config_.traffic != nullptr) {
      config_.traffic->announces_closed.add();
    }
    handler_.on_peer_announce(path, false, {}, *this);
  }
}

std::string IetfSession::to_full(const std::string& peer_path) const {
  return full_path_of(config_.root, peer_path);
}

std::optional<std::string> IetfSession::to_peer(const std::string& full) const {
  return peer_path_of(config_.root, full);
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
  if (!handler_.authorize(Action::kConnect, config_.root, config_.query)) {
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

void IetfSession::on_control_setup(const wi::ClientSetup& setup) {
  if (row_->setup_versions) {
    const uint64_t want = static_cast<uint64_t>(version_);
    if (std::find(setup.versions.begin(), setup.versions.end(), want) == setup.versions.end()) {
      fail(wi::TerminationCode::kVersionNegotiationFailed, "CLIENT_SETUP does not offer the draft");
      return;
    }
  }
  if (const wi::Parameter* p = wi::find(setup.params, wi::kSetupMaxRequestId)) {
    our_max_request_id_ = p->value;
  }
  peer_max_request_id_ = kRequestIdWindow;
  wi::ServerSetup reply;
  reply.version = static_cast<uint64_t>(version_);
  reply.params.push_back(wi::Parameter{wi::kSetupMaxRequestId, peer_max_request_id_, {}});
  std::vector<uint8_t> out;
  if (!wi::encode(version_, reply, out)) {
    fail(make_error(ErrorCode::kEncode, "SERVER_SETUP"));
    return;
  }
  control_->write(Bytes::from(out));
  on_setup_done();
}

void IetfSession::on_setup_done() {
  ready_ = true;
  timers_.cancel(setup_timer_);
  setup_timer_ = 0;
  MOQD_LOG(kInfo, "session %llu start peer=%s transport=%s version=%s path=/%s",
           static_cast<unsigned long long>(id_), std::string(transport_.peer()).c_str(),
           std::string(transport_.kind()).c_str(), wire::version_name(version_),
           config_.root.c_str());
  handler_.on_session_ready(version_);
  liveness_.start(clock_.now());
  stall_timer_ = timers_.schedule(Duration::zero(), [this] { check_liveness(); });
  // Streams that overtook SETUP were held unread: read them now. (A handler may retire itself,
  // which keeps it alive until the loop's next turn, or adopt new ones: iterate a snapshot.)
  std::vector<Handler*> held;
  for (auto& h : handlers_) {
    held.push_back(h.get());
  }
  for (Handler* h : held) {
    if (!closed_) {
      h->on_ready();
    }
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

void IetfSession::on_incoming_stream(transport::Stream& stream) {
  if (closed_) {
    return;
  }
  ++peer_streams_;
  if (row_ != nullptr && row_->request_streams) {
    on_incoming_stream_d17(stream);
    return;
  }
  if (!is_client() && control_ == nullptr && !stream.is_uni()) {
    control_ = &stream;
    control_reader_ = adopt<ControlReader>(stream);
    if (!admission_pending_ && started_) {
      control_reader_->on_readable();
    }
    return;
  }
  adopt<PendingStream>(stream)->on_readable();
}

void IetfSession::on_namespace_stream(transport::Stream& stream) {
  if (row_->request_streams) {
    on_request_stream(stream);
    return;
  }
  if (!row_->subscribe_options) {
    // d14/15 carry every request on the control stream: a second bidi stream is not theirs.
    stream.stop_sending(reset_code(ErrorCode::kUnexpectedStream));
    stream.reset(reset_code(ErrorCode::kUnexpectedStream));
    stream.release();
    return;
  }
  auto data = stream.peek();
  auto r = wi::decode_control(version_, data, limits_);
  if (!r) {
    stream.release();
    fail(r.error());
    return;
  }
  if (!r->has_value()) {
    if (stream.has_peer_fin()) {
      stream.release();
      fail(make_error(ErrorCode::kDecode, "truncated message"));
      return;
    }
    // Not complete yet: read again when more arrives.
    adopt<PendingStream>(stream);
    return;
  }
  auto* sn = std::get_if<wi::SubscribeNamespace>(&(*r)->value);
  if (sn == nullptr) {
    stream.release();
    fail(wi::TerminationCode::kProtocolViolation, "bidi stream other than SUBSCRIBE_NAMESPACE");
    return;
  }
  stream.consume((*r)->consumed);
  wi::SubscribeNamespace m = std::move(*sn);
  handle_subscribe_namespace(m, &stream);
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

model::TrackSource& IetfSession::track_source(const std::string& path, const std::string& name) {
  auto key = std::make_pair(path, name);
  auto it = upstream_tracks_.find(key);
  if (it == upstream_tracks_.end()) {
    it = upstream_tracks_.emplace(key, std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), path, name)).first;
  }
  return *it->second;
}

bool IetfSession::accept_peer_request_id(uint64_t id) {
  if (row_->request_streams) {
    return accept_stream_request_id(id);
  }
  // Client-initiated requests use even ids, each the next in sequence, below the granted maximum
  // (draft-14 §9.1).
  if (id != peer_next_request_id_) {
    fail(wi::TerminationCode::kInvalidRequestId, "request id out of sequence");
    return false;
  }
  if (id >= peer_max_request_id_) {
    fail(wi::TerminationCode::kTooManyRequests, "request id over MAX_REQUEST_ID");
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
  if (!handler_.authorize(Action::kSubscribe, full, config_.query)) {
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

void IetfSession::handle_publish_namespace(const wi::PublishNamespace& m) {
  if (!admit_announce_change() || !accept_peer_request_id(m.request_id)) {
    return;
  }
  const auto type = row_->request_ok ? wi::MessageType::kRequestError : wi::MessageType::kNamespace;
  model::Hops hops;
  uint64_t cost = 0;
  if (cluster_negotiated()) {
    auto in = ietf_cluster::read_inbound(version_, m.params, config_.ietf_relay_hops);
    if (!in) {
      fail(wi::termination_code(in.error().code), in.error().detail);
      return;
    }
    if (in->loop) {
      if (config_.traffic != nullptr) {
        config_.traffic->announces_looped.add();
      }
      send_request_error(m.request_id, type, kErrNotSupported, "HOP_PATH holds this relay (a loop)");
      return;
    }
    cost = ietf_cluster::route_cost(*in, peer_relay_cost_);
    hops = std::move(in->hops);
  }
  auto peer_path = wi::to_path(m.ns);
  if (!peer_path || peer_path->empty()) {
    send_request_error(m.request_id, type, kErrNotSupported, "namespace has no moqd path");
    return;
  }
  std::string full = to_full(*peer_path);
  if (!handler_.authorize(Action::kPublish, full, config_.query)) {
    send_request_error(m.request_id, type, kErrUnauthorized, "unauthorized");
    return;
  }
  if (announced_by_path_.count(full) != 0) {
    send_request_error(m.request_id, type, kErrDuplicate, "namespace already published");
    return;
  }
  if (announced_by_path_.size() >= config_.limits.max_announced_paths) {
    send_request_error(m.request_id, type, kErrInternal, "too many namespaces");
    return;
  }
  announced_by_path_[full] = m.request_id;
  announced_by_id_[m.request_id] = full;
  wi::RequestOk ok;
  ok.request_id = m.request_id;
  send_control(ok);
  if (config_.traffic != nullptr) {
    config_.traffic->announces_opened.add();
  }
  MOQD_LOG(kDebug, "session %llu publish_namespace path=%s hops=%zu", static_cast<unsigned long long>(id_),
           full.c_str(), hops.size());
  handler_.on_peer_route(full, hops, cost, *this);
}

void IetfSession::handle_publish_namespace_done(const wi::PublishNamespaceDone& m) {
  if (!admit_announce_change()) {
    return;
  }
  std::string full;
  if (row_->done_by_request_id) {
    auto it = announced_by_id_.find(m.request_id);
    if (it == announced_by_id_.end()) {
      return;
    }
    full = it->second;
  } else {
    auto peer_path = wi::to_path(m.ns);
    if (!peer_path) {
      return;
    }
    full = to_full(*peer_path);
  }
  auto it = announced_by_path_.find(full);
  if (it == announced_by_path_.end()) {
    return;
  }
  announced_by_id_.erase(it->second);
  announced_by_path_.erase(it);
  if (config_.traffic != nullptr) {
    config_.traffic->announces_closed.add();
  }
  if (is_client()) {
    client_withdraw(full);
    return;
  }
  handler_.on_peer_announce(full, false, {}, *this);
}

void IetfSession::handle_subscribe_namespace(const wi::SubscribeNamespace& m,
                                             transport::Stream* own_stream) {
  if (!accept_peer_request_id(m.request_id)) {
    if (own_stream != nullptr) {
      own_stream->release();
    }
    return;
  }
  auto reply = [&](const wi::ControlMessage& msg) {
    if (own_stream != nullptr) {
      std::vector<uint8_t> out;
      wi::encode(version_, msg, out);
      own_stream->write(Bytes::from(out));
    } else {
      send_control(msg);
    }
  };
  const auto error_type =
      row_->request_ok ? wi::MessageType::kRequestError : wi::MessageType::kSubscribeNamespaceError;
  auto refuse = [&](uint64_t code, const char* why) {
    wi::RequestError e;
    e.type = error_type;
    e.request_id = m.request_id;
    e.error_code = code;
    e.reason = why;
    reply(e);
    if (own_stream != nullptr) {
      own_stream->finish();
      own_stream->release();
    }
  };
  auto peer_prefix = wi::to_path(m.prefix);
  if (!peer_prefix) {
    refuse(kErrNotSupported, "namespace prefix has no moqd path");
    return;
  }
  std::string full = to_full(*peer_prefix);
  if (!handler_.authorize(Action::kDiscover, full, config_.query)) {
    refuse(kErrUnauthorized, "unauthorized");
    return;
  }
  wi::RequestOk ok;
  ok.type = row_->request_ok ? wi::MessageType::kRequestOk : wi::MessageType::kSubscribeNamespaceOk;
  ok.request_id = m.request_id;
  reply(ok);
  auto* a = adopt<NamespaceAnnouncer>(own_stream, full, m.prefix.size());
  if (own_stream == nullptr) {
    namespace_announcers_[m.request_id] = a;
  }
  a->begin();
}

void IetfSession::handle_subscribe_ok(const wi::SubscribeOk& m) {
  auto it = upstream_by_request_.find(m.request_id);
  if (it == upstream_by_request_.end()) {
    return;  // unsubscribed meanwhile
  }
  UpstreamSubscription* u = it->second;
  if (upstream_by_alias_.count(m.track_alias) != 0) {
    fail(wi::TerminationCode::kDuplicateTrackAlias, "track alias already in use");
    return;
  }
  upstream_by_alias_[m.track_alias] = u;
  u->on_ok(m.track_alias, m.track_extensions);
  retry_held_subgroups();
}

void IetfSession::handle_request_error(const wi::RequestError& m) {
  auto it = upstream_by_request_.find(m.request_id);
  if (it == upstream_by_request_.end()) {
    on_client_request_error(m);
    return;
  }
  UpstreamSubscription* u = it->second;
  upstream_by_request_.erase(it);
  u->on_error(m);
}

void IetfSession::handle_publish_done(const wi::PublishDone& m) {
  auto it = upstream_by_request_.find(m.request_id);
  if (it == upstream_by_request_.end()) {
    return;
  }
  it->second->on_publish_done(m);
}

void IetfSession::handle_max_request_id(const wi::MaxRequestId& m) {
  if (m.blocked) {
    return;  // REQUESTS_BLOCKED: the window above is already granted ahead of use
  }
  if (m.value < our_max_request_id_) {
    fail(wi::TerminationCode::kProtocolViolation, "MAX_REQUEST_ID decreased");
    return;
  }
  our_max_request_id_ = m.value;
  blocked_sent_ = false;
  auto blocked = std::move(upstream_blocked_);
  upstream_blocked_.clear();
  for (UpstreamSubscription* u : blocked) {
    request_upstream(u);
  }
}

void IetfSession::forget_upstream(UpstreamSubscription* u) {
  std::erase(upstream_blocked_, u);
  for (auto it = upstream_by_request_.begin(); it != upstream_by_request_.end();) {
    it = it->second == u ? upstream_by_request_.erase(it) : std::next(it);
  }
  for (auto it = upstream_by_alias_.begin(); it != upstream_by_alias_.end();) {
    if (it->second == u && datagrams_) {
      datagrams_->forget(it->first);
    }
    it = it->second == u ? upstream_by_alias_.erase(it) : std::next(it);
  }
  if (!withdraw_pending_.empty() && withdraw_timer_ == 0 && !closed_) {
    withdraw_timer_ = timers_.schedule(Duration::zero(), [this] {
      withdraw_timer_ = 0;
      withdraw_served();
    });
  }
}

UpstreamSubscription* IetfSession::upstream_by_alias(uint64_t alias) {
  auto it = upstream_by_alias_.find(alias);
  return it == upstream_by_alias_.end() ? nullptr : it->second;
}

bool IetfSession::hold_subgroup(SubgroupReader* r, uint64_t alias) {
  if (upstream_by_alias(alias) != nullptr) {
    return false;
  }
  for (const auto& [id, u] : upstream_by_request_) {
    if (!u->alias()) {
      if (std::find(held_subgroups_.begin(), held_subgroups_.end(), r) == held_subgroups_.end()) {
        held_subgroups_.push_back(r);
      }
      return true;
    }
  }
  return false;  // no SUBSCRIBE_OK outstanding: no alias can become known
}

void IetfSession::request_upstream(UpstreamSubscription* u) {
  if (!u->send_subscribe()) {
    if (std::find(upstream_blocked_.begin(), upstream_blocked_.end(), u) == upstream_blocked_.end()) {
      upstream_blocked_.push_back(u);
    }
    if (!blocked_sent_) {
      // d14 §9.22: REQUESTS_BLOCKED with the Maximum Request ID we are blocked at, once per limit.
      blocked_sent_ = true;
      send_control(wi::MaxRequestId{true, our_max_request_id_});
    }
    return;
  }
  if (u->request_id()) {
    upstream_by_request_[*u->request_id()] = u;
  }
}

void IetfSession::stop_namespace(uint64_t request_id) {
  auto it = namespace_announcers_.find(request_id);
  if (it == namespace_announcers_.end()) {
    return;
  }
  NamespaceAnnouncer* a = it->second;
  namespace_announcers_.erase(it);
  a->stop();
  retire(a);
}

void IetfSession::upstream_reader(uint64_t alias, bool started) {
  if (UpstreamSubscription* u = upstream_by_alias(alias)) {
    if (started) {
      u->on_reader_started();
    } else {
      u->on_reader_done();
    }
  }
}

void IetfSession::on_subgroup_stream(transport::Stream& stream) {
  adopt<SubgroupReader>(stream)->on_readable();
}

bool IetfSession::on_publish_stream_message(uint64_t request_id, wi::ControlMessage m) {
  return PublishService::on_stream_message(*this, request_id, std::move(m));
}

void IetfSession::on_publish_stream_closed(uint64_t request_id, bool done) {
  PublishService::on_stream_closed(*this, request_id, done);
}

void IetfSession::on_subgroup_reader_done(SubgroupReader* r) { std::erase(held_subgroups_, r); }

// --- the limits shared with moq-lite's Session (guards.h) ---
// The drafts define no termination code for a peer over a rate limit: a publisher sending faster
// than --max-publisher-rate closes with INTERNAL_ERROR (a relay policy, not a protocol
// violation); PUBLISH_NAMESPACE(_DONE) over --max-announce-rate with TOO_MANY_REQUESTS (they are
// requests); stall and idle with CONTROL_MESSAGE_TIMEOUT, as the setup timeout.

bool IetfSession::admit_ingress(uint64_t n) {
  if (ingress_.take(static_cast<double>(n), clock_.now())) {
    return true;
  }
  fail(wi::TerminationCode::kInternalError, "publisher over --max-publisher-rate");
  return false;
}

bool IetfSession::admit_announce_change() {
  if (announce_changes_.take(1, clock_.now())) {
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
  sample.busy = !downstream_.empty() || !upstream_tracks_.empty() || !announced_by_path_.empty() ||
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


// --- drafts 17+ (Draft::request_streams) ---

void IetfSession::start_request_streams() {
  // Our SETUP goes first on our first uni stream (@moq/net reads the first incoming uni stream as
  // the relay's SETUP and sends no request before it). No MAX_REQUEST_ID in 17+, no SOLICIT (moqd
  // does not SUBSCRIBE_NAMESPACE its clients); RELAY_HOPS on a cluster node (ietf_cluster.h). Kept open: GOAWAY
  // goes there, and @moq/net closes the session when it ends.
  if (setup_out_ != nullptr || closed_ || closing_) {
    return;
  }
  setup_out_ = transport_.open_uni();
  if (setup_out_ == nullptr) {
    return;  // no stream credit yet (qmux: before the peer's transport parameters): retried in
             // on_streams_available()
  }
  wi::Setup setup;
  ietf_cluster::add_setup_options(version_, config_.ietf_relay_hops, setup.options);
  std::vector<uint8_t> out;
  wi::encode(version_, setup, out);
  setup_out_->write(Bytes::from(out));
}

void IetfSession::on_incoming_stream_d17(transport::Stream& stream) {
  if (stream.is_uni() && !peer_setup_stream_) {
    // The peer's first uni stream is its SETUP stream (data streams follow our SUBSCRIBEs, which
    // follow its SETUP).
    peer_setup_stream_ = true;
    auto* r = adopt<SetupStreamReader>(stream);
    if (started_) {
      r->on_readable();
    }
    return;
  }
  adopt<PendingStream>(stream)->on_readable();
}

bool IetfSession::cluster_negotiated() const {
  return ietf_cluster::negotiated(version_, config_.ietf_relay_hops, peer_relay_hops_);
}

void IetfSession::on_peer_setup(const wi::Setup& setup) {
  if (const wi::Parameter* p = wi::find(setup.options, wi::kSetupImplementation);
      p != nullptr && p->bytes == "moq-lite-js") {
    peer_form_ = wi::Peer::kMoqNetJs;
  }
  peer_relay_hops_ = wi::relay_hops_origin(version_, setup.options);
  peer_relay_cost_ = wi::relay_cost(setup.options);
  // 17+ have no MAX_REQUEST_ID: our requests are bounded by the peer's stream credit.
  our_max_request_id_ = (uint64_t{1} << 62) - 1;
  on_setup_done();
  if (is_client() && !closed_ && !closing_) {
    start_client_requests();
  }
}

bool IetfSession::accept_stream_request_id(uint64_t id) {
  // The peer's ids have its parity and are never reused. Each request has its own stream, and streams are
  // not ordered with each other, so a later id may arrive first: the ids it skipped stay
  // acceptable, at most kRequestIdWindow of them.
  // A client's ids are even, a server's odd: peer_next_request_id_ starts at the peer's parity.
  if (id % 2 != peer_next_request_id_ % 2) {
    fail(wi::TerminationCode::kInvalidRequestId,
         is_client() ? "server request id is even" : "client request id is odd");
    return false;
  }
  if (id >= peer_next_request_id_) {
    const uint64_t skipped = (id - peer_next_request_id_) / 2;
    if (skipped > kRequestIdWindow - peer_skipped_ids_.size()) {
      fail(wi::TerminationCode::kInvalidRequestId, "request id too far ahead");
      return false;
    }
    for (uint64_t x = peer_next_request_id_; x < id; x += 2) {
      peer_skipped_ids_.insert(x);
    }
    peer_next_request_id_ = id + 2;
    return true;
  }
  if (peer_skipped_ids_.erase(id) == 1) {
    return true;
  }
  fail(wi::TerminationCode::kInvalidRequestId, "request id reused");
  return false;
}

std::optional<wi::ControlMessage> IetfSession::read_message(transport::Stream& stream, wi::Peer form) {
  auto r = wi::decode_control(version_, stream.peek(), limits_, form);
  if (!r) {
    fail(r.error());
    return std::nullopt;
  }
  if (!r->has_value()) {
    if (stream.has_peer_fin()) {
      fail(make_error(ErrorCode::kDecode, "truncated message"));
    }
    return std::nullopt;
  }
  stream.consume((*r)->consumed);
  return std::move((*r)->value);
}

void IetfSession::on_request_stream(transport::Stream& stream) {
  auto r = wi::decode_control(version_, stream.peek(), limits_, peer_form_);
  if (!r) {
    stream.release();
    fail(r.error());
    return;
  }
  if (!r->has_value()) {
    if (stream.has_peer_fin()) {
      stream.release();
      fail(make_error(ErrorCode::kDecode, "truncated message"));
      return;
    }
    adopt<PendingStream>(stream);  // read again when more arrives
    return;
  }
  const size_t consumed = (*r)->consumed;
  wi::ControlMessage m = std::move((*r)->value);
  if (auto* sn = std::get_if<wi::SubscribeNamespace>(&m)) {
    stream.consume(consumed);
    if (sn->tracks) {
      // SUBSCRIBE_TRACKS (18+): moqd has no PUBLISH to answer it with.
      if (!accept_peer_request_id(sn->request_id)) {
        stream.release();
        return;
      }
      wi::RequestError e;
      e.request_id = sn->request_id;
      e.error_code = kErrNotSupported;
      e.reason = "SUBSCRIBE_TRACKS is not served";
      std::vector<uint8_t> out;
      wi::encode(version_, e, out, peer_form_);
      stream.write(Bytes::from(out));
      stream.finish();
      stream.release();
      return;
    }
    wi::SubscribeNamespace copy = std::move(*sn);
    handle_subscribe_namespace(copy, &stream);  // answered on its own stream, as in 16
    return;
  }
  RequestStream::Kind kind;
  uint64_t id = 0;
  if (const auto* s = std::get_if<wi::Subscribe>(&m)) {
    kind = RequestStream::Kind::kPeerSubscribe;
    id = s->request_id;
  } else if (const auto* p = std::get_if<wi::PublishNamespace>(&m)) {
    kind = RequestStream::Kind::kPeerPublishNamespace;
    id = p->request_id;
  } else if (const auto* f = std::get_if<wi::Fetch>(&m)) {
    kind = RequestStream::Kind::kPeerFetch;
    id = f->request_id;
  } else if (const auto* t = std::get_if<wi::TrackStatus>(&m)) {
    kind = RequestStream::Kind::kPeerTrackStatus;
    id = t->request.request_id;
  } else if (const auto* pb = std::get_if<wi::Publish>(&m)) {
    kind = RequestStream::Kind::kPeerPublish;
    id = pb->request_id;
  } else {
    stream.release();
    fail(wi::TerminationCode::kProtocolViolation, "a request stream must start with a request");
    return;
  }
  stream.consume(consumed);
  if (requests_.count(id) != 0) {
    stream.release();
    fail(wi::TerminationCode::kInvalidRequestId, "request id reused");
    return;
  }
  // Registered first: the request's handler answers through send_control(), routed here.
  auto* rs = adopt<RequestStream>(stream, kind, id);
  requests_[id] = rs;
  on_control_message(std::move(m));
  if (!closed_) {
    rs->on_readable();  // a FIN (or REQUEST_UPDATE) that came with the request
  }
}

void IetfSession::end_request(uint64_t request_id, bool reset) {
  auto it = requests_.find(request_id);
  if (it != requests_.end() && it->second->kind() == RequestStream::Kind::kPeerFetch) {
    it->second->end(reset);
  }
}

void IetfSession::forget_request(uint64_t request_id, RequestStream* r) {
  auto it = requests_.find(request_id);
  if (it != requests_.end() && it->second == r) {
    requests_.erase(it);
  }
}

void IetfSession::send_on_request_stream(const wi::ControlMessage& m) {
  if (const auto* g = std::get_if<wi::Goaway>(&m)) {
    if (setup_out_ != nullptr) {
      std::vector<uint8_t> out;
      if (wi::encode(version_, *g, out)) {
        setup_out_->write(Bytes::from(out));
      }
    }
    return;
  }
  if (std::holds_alternative<wi::Subscribe>(m) || std::holds_alternative<wi::PublishNamespace>(m)) {
    our_requests_waiting_.push_back(m);  // each on a new bidi stream
    open_our_requests();
    return;
  }
  std::optional<uint64_t> id;
  bool last = false;
  bool cancel = false;
  std::visit(
      [&](const auto& msg) {
        using T = std::decay_t<decltype(msg)>;
        if constexpr (std::is_same_v<T, wi::Unsubscribe> ||
                      std::is_same_v<T, wi::PublishNamespaceDone>) {
          id = msg.request_id;
          cancel = true;
        } else if constexpr (std::is_same_v<T, wi::SubscribeOk> || std::is_same_v<T, wi::RequestOk> ||
                             std::is_same_v<T, wi::FetchOk> || std::is_same_v<T, wi::PublishOk>) {
          id = msg.request_id;
        } else if constexpr (std::is_same_v<T, wi::RequestError>) {
          id = msg.request_id;
          last = true;
        } else if constexpr (std::is_same_v<T, wi::PublishDone>) {
          id = msg.request_id;
          // Client role: the stream stays open until the relay closes it, which is its UNSUBSCRIBE
          // once it has read every SUBGROUP stream (see await_unsubscribe()).
          last = !is_client();
        }
      },
      m);
  if (!id) {
    // MAX_REQUEST_ID: 17+ have none (stream credit bounds requests). Nothing else is sent here.
    return;
  }
  if (cancel) {
    std::erase_if(our_requests_waiting_, [&](const wi::ControlMessage& w) {
      return request_id_of(w) == *id;
    });
  }
  auto it = requests_.find(*id);
  if (it == requests_.end()) {
    return;  // the request's stream is already gone
  }
  if (cancel) {
    it->second->cancel();
  } else {
    it->second->send(m, last);
  }
}

void IetfSession::open_our_requests() {
  while (!our_requests_waiting_.empty() && !closed_ && !closing_) {
    transport::Stream* s = transport_.open_bidi();
    if (s == nullptr) {
      return;  // on_streams_available() calls again
    }
    wi::ControlMessage m = std::move(our_requests_waiting_.front());
    our_requests_waiting_.pop_front();
    const auto kind = std::holds_alternative<wi::Subscribe>(m)
                          ? RequestStream::Kind::kOurSubscribe
                          : RequestStream::Kind::kOurPublishNamespace;
    const uint64_t id = request_id_of(m);
    auto* r = adopt<RequestStream>(*s, kind, id);
    requests_[id] = r;
    r->send(m, false);
  }
}

// ---------------------------------------------------------------------------------------------
// Client role (`moq --versions moq-transport-14..20`). Only what a client starts differs from
// the server role: CLIENT_SETUP on a control stream we open (17+: SETUP on our uni stream, and
// each request on its own bidi stream), PUBLISH_NAMESPACE for the origin's broadcasts
// (NamespaceAnnouncer in publish mode), and SUBSCRIBE_NAMESPACE for the discovery prefix
// (NamespaceDiscovery). What follows from them runs the server role's handlers: the relay's
// SUBSCRIBEs for our tracks (handle_subscribe), our SUBSCRIBEs for announced tracks
// (UpstreamSubscription), SUBGROUP streams both ways, and a d14 relay's PUBLISH_NAMESPACE answers
// (handle_publish_namespace).

namespace ietf_detail {

// Our SUBSCRIBE_NAMESPACE: the relay's REQUEST_OK or error, then NAMESPACE / NAMESPACE_DONE, on
// the request's own bidi stream (d16) or routed here from the control stream (d15). Each namespace
// learned is announced to the handler with the session as its source, and withdrawn when the
// request or the session ends.
class NamespaceDiscovery final : public HandlerOf<NamespaceContext> {
 public:
  NamespaceDiscovery(NamespaceContext& s, uint64_t request_id, wi::TrackNamespace prefix)
      : HandlerOf(s), request_id_(request_id), prefix_(std::move(prefix)) {}
  uint64_t request_id() const { return request_id_; }

  // Sends the request on `own` (d16) or on the control stream (null).
  void begin(transport::Stream* own) {
    wi::SubscribeNamespace m;
    m.request_id = request_id_;
    m.prefix = prefix_;
    m.options = 1;  // d16 Subscribe Options: NAMESPACE only (moqd subscribes to tracks itself)
    if (own == nullptr) {
      session_.send_control(m);
      return;
    }
    attach(*own);
    std::vector<uint8_t> out;
    wi::encode(session_.draft(), m, out, session_.peer_form());
    own->write(Bytes::from(out));
  }

  void on_readable() override {
    while (stream_ != nullptr && !session_.is_closed()) {
      auto data = stream_->peek();
      if (data.empty()) {
        break;
      }
      std::optional<wi::ControlMessage> m = session_.read_message(*stream_, session_.peer_form());
      if (!m) {
        return;
      }
      on_message(*m);
    }
    if (stream_ != nullptr && !session_.is_closed() && stream_->is_fin_received()) {
      end();  // the relay ended the request: what it told of is gone
    }
  }
  void on_reset(uint64_t) override { end(); }
  void on_stop_sending(uint64_t) override { end(); }
  void on_session_closed() override {
    withdraw_all();
    Handler::on_session_closed();
  }

  // One message answering this request.
  void on_message(const wi::ControlMessage& m) {
    if (const auto* n = std::get_if<wi::Namespace>(&m)) {
      on_namespace(*n);
    } else if (const auto* e = std::get_if<wi::RequestError>(&m)) {
      MOQD_LOG(kInfo, "session %llu subscribe_namespace refused code=%llu reason=%s",
               static_cast<unsigned long long>(session_.id()),
               static_cast<unsigned long long>(e->error_code), e->reason.c_str());
    } else if (!std::holds_alternative<wi::RequestOk>(m)) {
      session_.fail(wi::TerminationCode::kProtocolViolation,
                    "unexpected message on a SUBSCRIBE_NAMESPACE stream");
    }
  }

  void on_namespace(const wi::Namespace& n) {
    wi::TrackNamespace ns = prefix_;
    ns.insert(ns.end(), n.suffix.begin(), n.suffix.end());
    auto peer = wi::to_path(ns);
    if (!peer || peer->empty()) {
      return;  // no moqd path: nothing can be subscribed under it
    }
    std::string full = session_.to_full(*peer);
    if (n.done != (seen_.count(full) != 0)) {
      return;  // a repeat, or the end of a namespace never told of
    }
    if (n.done) {
      seen_.erase(full);
      session_.client_withdraw(full);
      return;
    }
    if (seen_.size() >= session_.config().limits.max_received_announced_paths) {
      session_.fail(wi::TerminationCode::kTooManyRequests, "too many announced namespaces");
      return;
    }
    seen_.insert(full);
    session_.client_announce(full);
  }

 private:
  void end() {
    withdraw_all();
    done();
  }
  void withdraw_all() {
    auto paths = std::move(seen_);
    seen_.clear();
    for (const auto& p : paths) {
      session_.handler().on_peer_announce(p, false, {}, session_.source());
    }
  }

  uint64_t request_id_;
  wi::TrackNamespace prefix_;
  std::set<std::string> seen_;
};

}  // namespace ietf_detail

void IetfSession::start_client() {
  our_next_request_id_ = 0;   // client requests: even (draft-14 §9.1; the same in 17+)
  peer_next_request_id_ = 1;  // the relay's: odd
  if (row_->request_streams) {
    // 17+: our SETUP on a uni stream; requests wait for the relay's SETUP (on_peer_setup()).
    start_request_streams();
    return;
  }
  open_client_control();
}

void IetfSession::open_client_control() {
  transport::Stream* stream = transport_.open_bidi();
  if (stream == nullptr) {
    control_waits_for_stream_ = true;
    return;
  }
  control_waits_for_stream_ = false;
  control_ = stream;
  control_reader_ = adopt<ControlReader>(*stream);
  peer_max_request_id_ = peer_next_request_id_ + kRequestIdWindow;
  wi::ClientSetup setup;
  if (row_->setup_versions) {
    setup.versions.push_back(static_cast<uint64_t>(version_));
  }
  setup.params.push_back(wi::Parameter{wi::kSetupMaxRequestId, peer_max_request_id_, {}});
  std::vector<uint8_t> out;
  if (!wi::encode(version_, setup, out)) {
    fail(make_error(ErrorCode::kEncode, "CLIENT_SETUP"));
    return;
  }
  control_->write(Bytes::from(out));
}

void IetfSession::on_server_setup(const wi::ControlMessage& m) {
  const auto* setup = std::get_if<wi::ServerSetup>(&m);
  if (setup == nullptr) {
    fail(wi::TerminationCode::kProtocolViolation, "first message is not SERVER_SETUP");
    return;
  }
  if (row_->setup_versions && setup->version != static_cast<uint64_t>(version_)) {
    fail(wi::TerminationCode::kVersionNegotiationFailed, "SERVER_SETUP selected another version");
    return;
  }
  if (const wi::Parameter* p = wi::find(setup->params, wi::kSetupMaxRequestId)) {
    our_max_request_id_ = p->value;
  }
  on_setup_done();
  if (!closed_ && !closing_) {
    start_client_requests();
  }
}

void IetfSession::start_client_requests() {
  adopt<NamespaceAnnouncer>(nullptr, config_.root, 0, true)->begin();
  if (!config_.discover_prefix || closed_ || closing_) {
    return;
  }
  auto id = take_request_id();
  if (!id) {
    fail(make_error(ErrorCode::kBoundsExceeded, "relay's MAX_REQUEST_ID allows no discovery"));
    return;
  }
  wi::TrackNamespace prefix = wi::to_namespace(model::normalize_path(*config_.discover_prefix));
  auto* d = adopt<NamespaceDiscovery>(*id, std::move(prefix));
  if (!row_->subscribe_options && !row_->request_streams) {
    discovery_ = d;  // d14/15: answers come on the control stream
    d->begin(nullptr);
    return;
  }
  transport::Stream* stream = transport_.open_bidi();
  if (stream == nullptr) {
    fail(make_error(ErrorCode::kClosed, "no stream for SUBSCRIBE_NAMESPACE"));
    return;
  }
  d->begin(stream);
}

void IetfSession::await_unsubscribe(uint64_t request_id) {
  if (is_client() && !closed_) {
    ended_unacknowledged_.insert(request_id);
  }
}

void IetfSession::client_announce(const std::string& full) {
  if (withdraw_pending_.erase(full) != 0) {
    return;  // withdrawn and back before its subscriptions ended: it never went away here
  }
  handler_.on_peer_announce(full, true, {}, *this);
}

bool IetfSession::has_live_upstream(const std::string& full) const {
  for (const auto& [key, u] : upstream_tracks_) {
    if (key.first == full && u->track() != nullptr) {
      return true;
    }
  }
  return false;
}

void IetfSession::client_withdraw(const std::string& full) {
  if (has_live_upstream(full)) {
    withdraw_pending_.insert(full);  // forget_upstream() looks again
    return;
  }
  handler_.on_peer_announce(full, false, {}, *this);
}

void IetfSession::withdraw_served() {
  std::vector<std::string> served;
  for (const auto& p : withdraw_pending_) {
    if (!has_live_upstream(p)) {
      served.push_back(p);
    }
  }
  for (const auto& p : served) {
    withdraw_pending_.erase(p);
    handler_.on_peer_announce(p, false, {}, *this);
  }
}

void IetfSession::flush_client_withdrawals() {
  auto pending = std::move(withdraw_pending_);
  withdraw_pending_.clear();
  for (const auto& p : pending) {
    handler_.on_peer_announce(p, false, {}, *this);
  }
}

void IetfSession::on_client_namespace(const wi::Namespace& m) {
  if (!is_client() || discovery_ == nullptr) {
    fail(wi::TerminationCode::kProtocolViolation, "NAMESPACE without a SUBSCRIBE_NAMESPACE");
    return;
  }
  discovery_->on_namespace(m);
}

void IetfSession::on_client_request_error(const wi::RequestError& m) {
  if (!is_client()) {
    return;
  }
  if (discovery_ != nullptr && m.request_id == discovery_->request_id()) {
    discovery_->on_message(m);
    return;
  }
  MOQD_LOG(kInfo, "session %llu request %llu refused by the relay code=%llu reason=%s",
           static_cast<unsigned long long>(id_), static_cast<unsigned long long>(m.request_id),
           static_cast<unsigned long long>(m.error_code), m.reason.c_str());
}

}  // namespace moqd::session
