// IetfSession, drafts 17+ (Draft::request_streams): SETUP on a uni stream each way, and a bidi
// stream per request instead of the control stream. A peer's request stream is read here up to its
// first message, then carried by a RequestStream (ietf_handlers.h); our SUBSCRIBEs, our PUBLISHes
// (offer_track) and a client's PUBLISH_NAMESPACEs each open one. See ietf_session.h.
#include "session/ietf_session.h"

#include "session/ietf_session_internal.h"

namespace moqd::session {

namespace wi = wire::ietf;

using namespace ietf_detail;

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
  std::optional<wi::ControlMessage> first = read_first_message(stream);
  if (!first) {
    return;
  }
  wi::ControlMessage m = std::move(*first);
  if (auto* sn = std::get_if<wi::SubscribeNamespace>(&m)) {
    wi::SubscribeNamespace copy = std::move(*sn);
    // Answered on its own stream, as in 16; SUBSCRIBE_TRACKS (18+) alike, with PUBLISHes.
    handle_subscribe_namespace(copy, &stream);
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
  if (std::holds_alternative<wi::Subscribe>(m) || std::holds_alternative<wi::PublishNamespace>(m) ||
      std::holds_alternative<wi::Publish>(m)) {
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
        } else if constexpr (std::is_same_v<T, wi::SubscribeUpdate>) {
          id = msg.existing_request_id;  // d20: ours, on the stream of the peer's PUBLISH it updates
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
    const auto kind = std::holds_alternative<wi::Subscribe>(m)   ? RequestStream::Kind::kOurSubscribe
                      : std::holds_alternative<wi::Publish>(m) ? RequestStream::Kind::kOurPublish
                                                               : RequestStream::Kind::kOurPublishNamespace;
    const uint64_t id = request_id_of(m);
    auto* r = adopt<RequestStream>(*s, kind, id);
    requests_[id] = r;
    r->send(m, false);
  }
}

}  // namespace moqd::session
