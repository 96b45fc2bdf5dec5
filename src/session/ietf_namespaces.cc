// IetfSession: namespaces. The peer's PUBLISH_NAMESPACE / PUBLISH_NAMESPACE_DONE (its broadcasts in
// the origin, withdrawn when the session ends), and the peer's SUBSCRIBE_NAMESPACE answered from
// the origin (NamespaceAnnouncer: on the control stream 14/15, its own bidi stream 16+). See
// ietf_session.h.
#include "session/ietf_session.h"

#include <algorithm>

#include "session/ietf_session_internal.h"

namespace moqd::session {

namespace wi = wire::ietf;

namespace ietf_detail {

void NamespaceAnnouncer::on_announce(const std::string& path, bool active, const model::Hops& hops) {
  if (session_.is_closed() || (!publish_ && !namespaces_)) {
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
  if (active && !session_.handler().authorize(Action::kSee, path, session_.query())) {
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

void IetfSession::withdraw_peer_announcements() {
  flush_client_withdrawals();
  std::map<std::string, uint64_t> paths;
  if (publisher_ != nullptr) {
    paths = std::move(publisher_->announced_by_path);
    publisher_->announced_by_path.clear();
    publisher_->announced_by_id.clear();
  }
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
  std::optional<wi::ControlMessage> first = read_first_message(stream);
  if (!first) {
    return;
  }
  auto* sn = std::get_if<wi::SubscribeNamespace>(&*first);
  if (sn == nullptr) {
    stream.release();
    fail(wi::TerminationCode::kProtocolViolation, "bidi stream other than SUBSCRIBE_NAMESPACE");
    return;
  }
  wi::SubscribeNamespace m = std::move(*sn);
  handle_subscribe_namespace(m, &stream);
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
  if (!handler_.authorize(Action::kPublish, full, query_)) {
    send_request_error(m.request_id, type, kErrUnauthorized, "unauthorized");
    return;
  }
  PublisherState& p = publisher();
  if (p.announced_by_path.count(full) != 0) {
    send_request_error(m.request_id, type, kErrDuplicate, "namespace already published");
    return;
  }
  if (p.announced_by_path.size() >= config_.limits.max_announced_paths) {
    send_request_error(m.request_id, type, kErrInternal, "too many namespaces");
    return;
  }
  p.announced_by_path[full] = m.request_id;
  p.announced_by_id[m.request_id] = full;
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
  PublisherState& p = publisher();
  std::string full;
  if (row_->done_by_request_id) {
    auto it = p.announced_by_id.find(m.request_id);
    if (it == p.announced_by_id.end()) {
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
  auto it = p.announced_by_path.find(full);
  if (it == p.announced_by_path.end()) {
    return;
  }
  p.announced_by_id.erase(it->second);
  p.announced_by_path.erase(it);
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
  if (!handler_.authorize(Action::kDiscover, full, query_)) {
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
  if (row_->subscribe_options || m.tracks) {
    // d16 §9.25 / d17 §9.24 Subscribe Options: 0x00 PUBLISH, 0x01 NAMESPACE, 0x02 both (anything
    // else: both, the widest reading); 18+ (§10.19): SUBSCRIBE_TRACKS asks for PUBLISH alone,
    // SUBSCRIBE_NAMESPACE for NAMESPACE alone. PUBLISHes carry the request's FORWARD (absent: 1).
    const bool tracks = m.tracks || m.options != 1;
    const bool namespaces = !m.tracks && m.options != 0;
    bool forward = true;
    if (const wi::Parameter* f = wi::find(m.params, wi::kParamForward); f != nullptr) {
      forward = f->value != 0;
    }
    a->want(namespaces, tracks, forward);
  }
  a->begin();
}

void IetfSession::offer_track(const std::string& full, const std::string& name, bool forward) {
  if (closed_ || closing_ || origin_.active_source(full) == &source()) {
    return;  // split horizon: the peer's own tracks are not offered back to it
  }
  if (!handler_.authorize(Action::kSubscribe, full, query_)) {
    return;
  }
  model::Track* t = origin_.track(full, name);
  if (t == nullptr) {
    return;
  }
  for (const auto& [id, s] : downstream_) {
    if (s->track() == t) {
      return;  // an Established subscription already carries it (d16 §9.25)
    }
  }
  if (downstream_.size() >= config_.limits.max_subscriptions) {
    return;
  }
  auto peer = to_peer(full);
  if (!peer) {
    return;
  }
  auto id = take_request_id();
  if (!id) {
    // Offered again when MAX_REQUEST_ID rises (handle_max_request_id), once per track.
    const BlockedOffer o{full, name, forward};
    if (std::find(offers_blocked_.begin(), offers_blocked_.end(), o) == offers_blocked_.end()) {
      offers_blocked_.push_back(o);
    }
    if (!blocked_sent_) {
      blocked_sent_ = true;
      send_control(wi::MaxRequestId{true, our_max_request_id_});  // REQUESTS_BLOCKED
    }
    return;
  }
  auto* s = adopt<DownstreamSubscription>(*id, *t, uint8_t{128}, false);
  downstream_[*id] = s;
  if (config_.traffic != nullptr) {
    config_.traffic->subscriptions_opened.add();
  }
  wi::Publish p;
  p.request_id = *id;
  p.ns = wi::to_namespace(*peer);
  p.track = name;
  p.track_alias = s->alias();
  p.forward = forward;
  if (!row_->subscribe_params) {
    p.group_order = 1;  // d14 field: ascending, groups go out in arrival order
  }
  MOQD_LOG(kDebug, "session %llu PUBLISH %llu %s/%s", static_cast<unsigned long long>(id_),
           static_cast<unsigned long long>(*id), full.c_str(), name.c_str());
  s->begin_publish(std::move(p));
}

void IetfSession::handle_publish_ok(uint64_t request_id, bool forward) {
  auto it = downstream_.find(request_id);
  if (it == downstream_.end()) {
    return;  // ended (unsubscribed) before the answer came
  }
  if (!it->second->is_awaiting_answer()) {
    fail(wi::TerminationCode::kProtocolViolation, "PUBLISH_OK for a request that is not a PUBLISH");
    return;
  }
  it->second->accepted(forward);
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

}  // namespace moqd::session
