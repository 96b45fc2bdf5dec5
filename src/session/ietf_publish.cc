// PUBLISH of an IetfSession (drafts 14..20, server role). See ietf_publish.h.
#include "session/ietf_publish.h"

#include "base/log.h"
#include "session/ietf_context.h"
#include "wire/ietf_namespace.h"

namespace moqd::session::ietf_detail {

namespace wi = wire::ietf;

namespace {
// REQUEST_ERROR / PUBLISH_ERROR codes (d14 §9.15, d16 §9.8 table).
constexpr uint64_t kErrInternal = 0x0;
constexpr uint64_t kErrUnauthorized = 0x1;
constexpr uint64_t kErrNotSupported = 0x3;
constexpr uint64_t kErrUninterested = 0x4;
constexpr uint64_t kUpdateFailed = 0x8;  // PUBLISH_DONE UPDATE_FAILED (d20 §10.12)
}  // namespace

// Keeps a PUBLISHed track open in the origin while the PUBLISH lasts (a relay-internal reader:
// it reads nothing, is not counted as a viewer and is no demand). For a d20 publisher that began
// at FORWARD 0 it also steers the publisher's Forward State by the track's demand (see
// ietf_publish.h).
class PublishService::Hold final : public model::TrackListener {
 public:
  Hold(PublishService& service, uint64_t request_id, std::string full)
      : service_(service), request_id_(request_id), full_(std::move(full)) {}
  ~Hold() override {
    cancel_pause();
    if (track_ != nullptr) {
      track_->remove_listener(this);
    }
  }
  void attach(model::Track& t) {
    track_ = &t;
    t.add_listener(this);
  }
  void on_track_data(model::Track&) override {}
  void on_track_ended(model::Track&, Error) override {
    cancel_pause();
    track_ = nullptr;
    service_.release(this);
  }
  bool is_viewer() const override { return false; }
  bool wants_data() const override { return false; }
  void on_track_demand(model::Track&, bool demanded) override {
    if (paced) {
      service_.on_demand(this, demanded);
    }
  }
  uint64_t request_id() const { return request_id_; }
  const std::string& full() const { return full_; }
  model::Track* track() const { return track_; }
  void cancel_pause() {
    if (pause_timer != 0) {
      service_.session_.timers().cancel(pause_timer);
      pause_timer = 0;
    }
  }
  bool implicit = false;  // its path is announced because of the PUBLISH
  // d20 FORWARD 0 publisher: its Forward State follows demand through our REQUEST_UPDATEs.
  bool paced = false;
  bool forward = true;      // the Forward State the publisher is in (as last asked, or its own)
  bool want = false;        // the Forward State demand asks for
  bool updating = false;    // a REQUEST_UPDATE of ours awaits its REQUEST_OK / REQUEST_ERROR
  TimerId pause_timer = 0;  // demand gone: FORWARD 0 once it runs

 private:
  PublishService& service_;
  uint64_t request_id_;
  std::string full_;
  model::Track* track_ = nullptr;
};

PublishService::PublishService(PublishContext& s) : session_(s) {}

PublishService::~PublishService() {
  closed_ = true;
  holds_.clear();
  ended_.clear();
}

void PublishService::refuse(uint64_t request_id, uint64_t code, const char* reason) {
  MOQD_LOG(kInfo, "session %llu publish id=%llu refused code=%llu: %s",
           static_cast<unsigned long long>(session_.id()),
           static_cast<unsigned long long>(request_id), static_cast<unsigned long long>(code),
           reason);
  wi::RequestError e;
  e.type = session_.row().request_ok ? wi::MessageType::kRequestError
                                     : wi::MessageType::kPublishError;
  e.request_id = request_id;
  e.error_code = code;
  e.reason = reason;
  session_.send_control(e);
}

void PublishService::on_publish(const wi::Publish& m) {
  ended_.clear();
  PublishContext& s = session_;
  if (!s.accept_peer_request_id(m.request_id)) {
    return;
  }
  if (s.is_client()) {
    refuse(m.request_id, kErrNotSupported, "moqd's client takes no PUBLISH");
    return;
  }
  if (s.upstream_by_alias(m.track_alias) != nullptr) {
    s.fail(wi::TerminationCode::kDuplicateTrackAlias, "PUBLISH with a track alias in use");
    return;
  }
  auto peer_path = wi::to_path(m.ns);
  if (!peer_path || peer_path->empty()) {
    refuse(m.request_id, kErrNotSupported, "namespace has no moqd path");
    return;
  }
  const std::string full = s.to_full(*peer_path);
  if (!s.handler().authorize(Action::kPublish, full, s.query())) {
    refuse(m.request_id, kErrUnauthorized, "unauthorized");
    return;
  }
  if (holds_.size() >= s.config().limits.max_subscriptions) {
    refuse(m.request_id, kErrInternal, "too many published tracks");
    return;
  }
  const bool implicit = !s.is_announced(full) && paths_.count(full) == 0;
  if (implicit) {
    if (s.announced_count() + paths_.size() >= s.config().limits.max_announced_paths) {
      refuse(m.request_id, kErrInternal, "too many namespaces");
      return;
    }
    if (!s.admit_announce_change()) {
      return;  // the session is closing: past --max-announce-rate
    }
    if (s.config().traffic != nullptr) {
      s.config().traffic->announces_opened.add();
    }
    s.handler().on_peer_announce(full, true, {}, s.source());
    if (s.is_closed()) {
      return;
    }
  }
  auto undo = [&] {
    if (implicit) {
      if (s.config().traffic != nullptr) {
        s.config().traffic->announces_closed.add();
      }
      s.handler().on_peer_announce(full, false, {}, s.source());
    }
  };
  if (s.origin().active_source(full) != &s.source()) {
    undo();
    refuse(m.request_id, kErrUninterested, "broadcast published through another session");
    return;
  }
  UpstreamSubscription* u =
      s.adopt_published(full, m.track, m.request_id, m.track_alias, m.track_extensions);
  if (u == nullptr) {
    undo();
    refuse(m.request_id, kErrUninterested, "track already subscribed from this session");
    return;
  }
  model::Track* t = s.origin().track(full, m.track);
  if (t == nullptr) {
    s.drop_published(u);
    undo();
    refuse(m.request_id, kErrInternal, "broadcast not active");
    return;
  }
  if (implicit) {
    ++paths_[full];
  } else if (paths_.count(full) != 0) {
    ++paths_[full];
  }
  auto hold = std::make_unique<Hold>(*this, m.request_id, full);
  hold->implicit = paths_.count(full) != 0;
  // d20 (#1834): the answer cannot set FORWARD, so a publisher that began at FORWARD 0 stays there
  // until our REQUEST_UPDATE; on 14..19 PUBLISH_OK / REQUEST_OK answers FORWARD 1 below.
  hold->paced = s.row().number >= 20 && !m.forward;
  hold->forward = !hold->paced;
  Hold* h = hold.get();
  holds_[m.request_id] = std::move(hold);
  // add_listener starts the source: the UpstreamSubscription binds the track (no SUBSCRIBE).
  h->attach(*t);

  wi::PublishOk ok;
  ok.request_id = m.request_id;
  ok.forward = true;
  if (s.row().number < 20) {
    ok.subscriber_priority = s.config().upstream_priority;
    // Whole groups only: moqd's model numbers a group's objects from 0 (a stream that starts in
    // the middle of a group is refused by its reader anyway). d20 (#1834): the publisher's
    // settings stand, PUBLISH_OK carries none of these.
    ok.filter = wi::Filter{wi::FilterType::kNextGroupStart, {}, 0, 0, std::nullopt};
  }
  if (!s.row().subscribe_params) {
    ok.group_order = m.group_order != 0 ? m.group_order : 1;  // d14: 1..2 required
  }
  s.send_control(ok);
  MOQD_LOG(kDebug, "session %llu publish path=%s track=%s alias=%llu",
           static_cast<unsigned long long>(s.id()), full.c_str(), m.track.c_str(),
           static_cast<unsigned long long>(m.track_alias));
  // SUBGROUP streams that overtook the PUBLISH on the control stream.
  s.retry_held_subgroups();
  if (h->paced && h->track() != nullptr && h->track()->demand_count() > 0) {
    on_demand(h, true);  // the track already had readers: start it after the REQUEST_OK
  }
}

void PublishService::on_demand(Hold* h, bool demanded) {
  h->cancel_pause();
  if (demanded) {
    h->want = true;
    steer(h);
    return;
  }
  // The last reader left: pause the publisher after the track's linger (--upstream-linger, after
  // which moqd would UNSUBSCRIBE a track it subscribed upstream), so a viewer that comes back
  // meanwhile (a reload, a rendition switch) finds it running and needs no new group.
  model::Track* t = h->track();
  h->pause_timer = session_.timers().schedule(
      t != nullptr ? t->linger() : Duration::zero(), [this, h] {
        h->pause_timer = 0;
        h->want = false;
        steer(h);
      });
}

void PublishService::steer(Hold* h) {
  if (h->updating || h->want == h->forward || closed_ || session_.is_closed()) {
    return;  // one REQUEST_UPDATE in flight at a time: within any MAX_REQUEST_UPDATES (d20 §10.3)
  }
  // d20 §10.1: a REQUEST_UPDATE consumes a Request ID of ours. 17+ have no MAX_REQUEST_ID, so one
  // is always there; were it not, the next change of demand tries again.
  std::optional<uint64_t> id = session_.take_request_id();
  if (!id) {
    return;
  }
  wi::SubscribeUpdate u;
  u.request_id = *id;
  u.existing_request_id = h->request_id();  // 17+: not on the wire; the stream it goes on
  u.params.push_back(wi::Parameter{wi::kParamForward, h->want ? 1u : 0u, {}});
  h->forward = h->want;
  h->updating = true;
  MOQD_LOG(kDebug, "session %llu publish id=%llu REQUEST_UPDATE id=%llu FORWARD %d",
           static_cast<unsigned long long>(session_.id()),
           static_cast<unsigned long long>(h->request_id()), static_cast<unsigned long long>(*id),
           h->want ? 1 : 0);
  session_.send_control(u);
}

bool PublishService::on_stream_message(uint64_t request_id, wi::ControlMessage m) {
  PublishContext& s = session_;
  auto it = holds_.find(request_id);
  Hold* h = it != holds_.end() ? it->second.get() : nullptr;
  if (h != nullptr && h->updating &&
      (std::holds_alternative<wi::RequestOk>(m) || std::holds_alternative<wi::RequestError>(m))) {
    // d20 §10.9: the publisher answers each REQUEST_UPDATE with exactly one of them.
    h->updating = false;
    if (const auto* e = std::get_if<wi::RequestError>(&m)) {
      // d20 §10.9: a failed update terminates the subscription; the publisher follows with
      // PUBLISH_DONE UPDATE_FAILED. moqd does not wait for it: the track ends as on a PUBLISH_DONE
      // with no Stream Count (its viewers get what arrived), and moqd closes the stream.
      MOQD_LOG(kInfo, "session %llu publish id=%llu REQUEST_UPDATE refused code=%llu: %s",
               static_cast<unsigned long long>(s.id()),
               static_cast<unsigned long long>(request_id),
               static_cast<unsigned long long>(e->error_code), e->reason.c_str());
      s.on_control_message(wi::PublishDone{request_id, kUpdateFailed, 0, "REQUEST_UPDATE refused"});
      return true;
    }
    steer(h);  // demand changed while the update was in flight
    return false;
  }
  if (h == nullptr &&
      (std::holds_alternative<wi::RequestOk>(m) || std::holds_alternative<wi::RequestError>(m))) {
    return false;  // the answer to an update that crossed the track's end (moqd's FIN) on the wire
  }
  auto* done = std::get_if<wi::PublishDone>(&m);
  if (done == nullptr) {
    s.fail(wi::TerminationCode::kProtocolViolation, "unexpected message on a PUBLISH stream");
    return false;
  }
  done->request_id = request_id;  // d17+: the stream says which request
  s.on_control_message(std::move(m));
  return true;
}

void PublishService::on_stream_closed(PublishContext& s, uint64_t request_id, bool done) {
  if (!done) {
    // No PUBLISH_DONE: its streams may still arrive; the upstream subscription waits for them as
    // for a Stream Count it was not told (0), bounded by its timers.
    s.on_control_message(wi::PublishDone{request_id, kErrInternal, 0, "PUBLISH stream closed"});
  }
}

void PublishService::release(Hold* h) {
  auto it = holds_.find(h->request_id());
  if (it == holds_.end() || it->second.get() != h) {
    return;
  }
  ended_.push_back(std::move(it->second));
  holds_.erase(it);
  if (closed_ || session_.is_closed()) {
    return;  // the session withdraws its paths (take_paths)
  }
  if (h->implicit) {
    auto p = paths_.find(h->full());
    if (p != paths_.end() && --p->second == 0) {
      paths_.erase(p);
      withdraw_if_unused(h->full());
    }
  }
}

void PublishService::withdraw_if_unused(const std::string& full) {
  if (session_.is_announced(full)) {
    return;  // PUBLISH_NAMESPACEd meanwhile: it stays
  }
  if (!session_.admit_announce_change()) {
    return;
  }
  if (session_.config().traffic != nullptr) {
    session_.config().traffic->announces_closed.add();
  }
  session_.handler().on_peer_announce(full, false, {}, session_.source());
}

std::vector<std::string> PublishService::take_paths() {
  std::vector<std::string> out;
  for (const auto& [path, n] : paths_) {
    out.push_back(path);
  }
  paths_.clear();
  return out;
}

}  // namespace moqd::session::ietf_detail
