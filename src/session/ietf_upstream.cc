// IetfSession: upstream subscriptions, the relay reading tracks the peer publishes
// (UpstreamSubscription, ietf_session_internal.h): our SUBSCRIBE sent once a request id allows
// (MAX_REQUEST_ID), the peer's SUBSCRIBE_OK / REQUEST_ERROR / PUBLISH_DONE, track aliases and the
// SUBGROUP streams held until one is known, and the tracks the peer PUBLISHes (ietf_publish.cc).
// See ietf_session.h.
#include "session/ietf_session.h"

#include "session/ietf_session_internal.h"

namespace moqd::session {

namespace wi = wire::ietf;

using namespace ietf_detail;

UpstreamSubscription* IetfSession::adopt_published(const std::string& full,
                                                   const std::string& name, uint64_t request_id,
                                                   uint64_t alias, const std::string& properties) {
  auto key = std::make_pair(full, name);
  auto it = upstream_tracks_.find(key);
  if (it != upstream_tracks_.end() && (it->second->track() != nullptr || it->second->request_id())) {
    return nullptr;
  }
  if (it == upstream_tracks_.end()) {
    it = upstream_tracks_.emplace(key, std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), full, name)).first;
  }
  UpstreamSubscription* u = it->second.get();
  u->adopt_publish(request_id, alias, properties);
  upstream_by_alias_[alias] = u;
  upstream_by_request_[request_id] = u;
  return u;
}

model::Track* IetfSession::upstream_track(uint64_t alias) {
  UpstreamSubscription* u = upstream_by_alias(alias);
  return u != nullptr ? u->track() : nullptr;
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

model::TrackSource& IetfSession::track_source(const std::string& path, const std::string& name) {
  auto key = std::make_pair(path, name);
  auto it = upstream_tracks_.find(key);
  if (it == upstream_tracks_.end()) {
    it = upstream_tracks_.emplace(key, std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), path, name)).first;
  }
  return *it->second;
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
  if (auto d = downstream_.find(m.request_id);
      d != downstream_.end() && d->second->is_awaiting_answer()) {
    d->second->refused();  // our PUBLISH refused: nothing more is sent for it
    return;
  }
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
  auto offers = std::move(offers_blocked_);
  offers_blocked_.clear();
  for (const BlockedOffer& o : offers) {
    offer_track(o.full, o.name, o.forward);
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

void IetfSession::upstream_reader(uint64_t alias, bool started) {
  if (UpstreamSubscription* u = upstream_by_alias(alias)) {
    if (started) {
      u->on_reader_started();
    } else {
      u->on_reader_done();
    }
  }
}

void IetfSession::on_subgroup_reader_done(SubgroupReader* r) { std::erase(held_subgroups_, r); }

}  // namespace moqd::session
