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
  PublisherState& p = publisher();
  auto it = p.upstream_tracks.find(key);
  if (it != p.upstream_tracks.end() && (it->second->track() != nullptr || it->second->request_id())) {
    return nullptr;
  }
  if (it == p.upstream_tracks.end()) {
    it = p.upstream_tracks.emplace(key, std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), full, name)).first;
  }
  UpstreamSubscription* u = it->second.get();
  u->adopt_publish(request_id, alias, properties);
  p.upstream_by_alias[alias] = u;
  p.upstream_by_request[request_id] = u;
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
  if (publisher_ == nullptr || publisher_->held_subgroups.empty()) {
    return;
  }
  auto held = std::move(publisher_->held_subgroups);
  publisher_->held_subgroups.clear();
  for (SubgroupReader* r : held) {
    if (!closed_) {
      r->retry();
    }
  }
}

model::TrackSource& IetfSession::track_source(const std::string& path, const std::string& name) {
  auto key = std::make_pair(path, name);
  auto& tracks = publisher().upstream_tracks;
  auto it = tracks.find(key);
  if (it == tracks.end()) {
    it = tracks.emplace(key, std::make_unique<UpstreamSubscription>(static_cast<UpstreamContext&>(*this), path, name)).first;
  }
  return *it->second;
}

void IetfSession::handle_subscribe_ok(const wi::SubscribeOk& m) {
  if (publisher_ == nullptr) {
    return;  // no SUBSCRIBE of ours was ever sent
  }
  PublisherState& p = *publisher_;
  auto it = p.upstream_by_request.find(m.request_id);
  if (it == p.upstream_by_request.end()) {
    return;  // unsubscribed meanwhile
  }
  UpstreamSubscription* u = it->second;
  if (p.upstream_by_alias.count(m.track_alias) != 0) {
    fail(wi::TerminationCode::kDuplicateTrackAlias, "track alias already in use");
    return;
  }
  p.upstream_by_alias[m.track_alias] = u;
  u->on_ok(m.track_alias, m.track_extensions);
  retry_held_subgroups();
}

void IetfSession::handle_request_error(const wi::RequestError& m) {
  if (auto d = downstream_.find(m.request_id);
      d != downstream_.end() && d->second->is_awaiting_answer()) {
    d->second->refused();  // our PUBLISH refused: nothing more is sent for it
    return;
  }
  UpstreamSubscription* u = nullptr;
  if (publisher_ != nullptr) {
    auto it = publisher_->upstream_by_request.find(m.request_id);
    if (it != publisher_->upstream_by_request.end()) {
      u = it->second;
      publisher_->upstream_by_request.erase(it);
    }
  }
  if (u == nullptr) {
    on_client_request_error(m);
    return;
  }
  u->on_error(m);
}

void IetfSession::handle_publish_done(const wi::PublishDone& m) {
  if (publisher_ == nullptr) {
    return;
  }
  auto it = publisher_->upstream_by_request.find(m.request_id);
  if (it == publisher_->upstream_by_request.end()) {
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
  if (publisher_ != nullptr) {
    auto blocked = std::move(publisher_->upstream_blocked);
    publisher_->upstream_blocked.clear();
    for (UpstreamSubscription* u : blocked) {
      request_upstream(u);
    }
  }
  auto offers = std::move(offers_blocked_);
  offers_blocked_.clear();
  for (const BlockedOffer& o : offers) {
    offer_track(o.full, o.name, o.forward);
  }
}

void IetfSession::forget_upstream(UpstreamSubscription* u) {
  if (publisher_ == nullptr) {
    return;  // the subscriptions live in it: none to forget
  }
  PublisherState& p = *publisher_;
  std::erase(p.upstream_blocked, u);
  for (auto it = p.upstream_by_request.begin(); it != p.upstream_by_request.end();) {
    it = it->second == u ? p.upstream_by_request.erase(it) : std::next(it);
  }
  for (auto it = p.upstream_by_alias.begin(); it != p.upstream_by_alias.end();) {
    if (it->second == u && datagrams_) {
      datagrams_->forget(it->first);
    }
    it = it->second == u ? p.upstream_by_alias.erase(it) : std::next(it);
  }
  if (!withdraw_pending_.empty() && withdraw_timer_ == 0 && !closed_) {
    withdraw_timer_ = timers_.schedule(Duration::zero(), [this] {
      withdraw_timer_ = 0;
      withdraw_served();
    });
  }
}

UpstreamSubscription* IetfSession::upstream_by_alias(uint64_t alias) {
  if (publisher_ == nullptr) {
    return nullptr;
  }
  auto it = publisher_->upstream_by_alias.find(alias);
  return it == publisher_->upstream_by_alias.end() ? nullptr : it->second;
}

bool IetfSession::hold_subgroup(SubgroupReader* r, uint64_t alias) {
  if (publisher_ == nullptr || upstream_by_alias(alias) != nullptr) {
    return false;  // without the state no SUBSCRIBE of ours is outstanding
  }
  auto& held = publisher_->held_subgroups;
  for (const auto& [id, u] : publisher_->upstream_by_request) {
    if (!u->alias()) {
      if (std::find(held.begin(), held.end(), r) == held.end()) {
        held.push_back(r);
      }
      return true;
    }
  }
  return false;  // no SUBSCRIBE_OK outstanding: no alias can become known
}

void IetfSession::request_upstream(UpstreamSubscription* u) {
  PublisherState& p = publisher();
  if (!u->send_subscribe()) {
    if (std::find(p.upstream_blocked.begin(), p.upstream_blocked.end(), u) ==
        p.upstream_blocked.end()) {
      p.upstream_blocked.push_back(u);
    }
    if (!blocked_sent_) {
      // d14 §9.22: REQUESTS_BLOCKED with the Maximum Request ID we are blocked at, once per limit.
      blocked_sent_ = true;
      send_control(wi::MaxRequestId{true, our_max_request_id_});
    }
    return;
  }
  if (u->request_id()) {
    p.upstream_by_request[*u->request_id()] = u;
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

void IetfSession::on_subgroup_reader_done(SubgroupReader* r) {
  if (publisher_ != nullptr) {
    std::erase(publisher_->held_subgroups, r);
  }
}

}  // namespace moqd::session
