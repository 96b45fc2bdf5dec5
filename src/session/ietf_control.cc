// IetfSession: a peer stream whose kind is not known yet (PendingStream), and SETUP on the control
// stream (drafts 14..16: CLIENT_SETUP answered with SERVER_SETUP) and what SETUP completes. The
// control stream's reader is ControlReader (ietf_handlers.h); drafts 17+'s SETUP stream is in
// ietf_request_streams.cc, the client role's CLIENT_SETUP in ietf_client.cc. See ietf_session.h.
#include "session/ietf_session.h"

#include "session/ietf_session_internal.h"

namespace moqd::session {

namespace wi = wire::ietf;

namespace ietf_detail {

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

}  // namespace ietf_detail

using namespace ietf_detail;

std::optional<wi::ControlMessage> IetfSession::read_first_message(transport::Stream& stream) {
  auto r = wi::decode_control(version_, stream.peek(), limits_, peer_form_);
  if (!r) {
    stream.release();
    fail(r.error());
    return std::nullopt;
  }
  if (!r->has_value()) {
    if (stream.has_peer_fin()) {
      stream.release();
      fail(make_error(ErrorCode::kDecode, "truncated message"));
      return std::nullopt;
    }
    adopt<PendingStream>(stream);  // read again when more arrives
    return std::nullopt;
  }
  stream.consume((*r)->consumed);
  return std::move((*r)->value);
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
           root_.c_str());
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

void IetfSession::on_subgroup_stream(transport::Stream& stream) {
  adopt<SubgroupReader>(stream)->on_readable();
}

}  // namespace moqd::session
