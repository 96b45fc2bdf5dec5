// IetfSession, the client role (`moq --versions moq-transport-14..20`). Only what a client starts differs from
// the server role: CLIENT_SETUP on a control stream we open (17+: SETUP on our uni stream, and
// each request on its own bidi stream), PUBLISH_NAMESPACE for the origin's broadcasts
// (NamespaceAnnouncer in publish mode), and SUBSCRIBE_NAMESPACE for the discovery prefix
// (NamespaceDiscovery). What follows from them runs the server role's handlers: the relay's
// SUBSCRIBEs for our tracks (handle_subscribe), our SUBSCRIBEs for announced tracks
// (UpstreamSubscription), SUBGROUP streams both ways, and a d14 relay's PUBLISH_NAMESPACE answers
// (handle_publish_namespace).
#include "session/ietf_session.h"

#include "session/ietf_discovery.h"
#include "session/ietf_session_internal.h"

namespace moqd::session {

namespace wi = wire::ietf;

using namespace ietf_detail;

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
  adopt<NamespaceAnnouncer>(nullptr, root_, 0, true)->begin();
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
  if (publisher_ == nullptr) {
    return false;
  }
  for (const auto& [key, u] : publisher_->upstream_tracks) {
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
