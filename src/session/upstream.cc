// Upstream subscriptions: SUBSCRIBE sent to the peer for a track of a broadcast it announced, and
// the group streams it sends back, written into the origin's track as they arrive.
#include "base/log.h"
#include "session/handlers.h"

namespace moqd::session {

UpstreamTrack::UpstreamTrack(Session& s, std::string path, std::string name)
    : session_(s), path_(std::move(path)), name_(std::move(name)) {}

UpstreamTrack::~UpstreamTrack() {
  if (track_ != nullptr) {
    // The session is going away while the track still expects data.
    model::Track* t = track_;
    track_ = nullptr;
    session_.forget_upstream(this);
    t->set_source(nullptr);
    t->end(make_error(ErrorCode::kClosed, "publisher session ended"));
  }
  release_stream();
}

void UpstreamTrack::start_track(model::Track& track) {
  track_ = &track;
  got_ok_ = false;
  auto peer_path = session_.to_peer(path_);
  transport::Stream* stream = peer_path ? session_.transport().open_bidi() : nullptr;
  if (stream == nullptr) {
    end_track(make_error(ErrorCode::kTransport, "cannot open subscribe stream"));
    return;
  }
  stream_ = stream;
  stream->set_visitor(this);
  id_ = session_.next_upstream_id();
  session_.register_upstream(id_, this);
  wire::Subscribe req;
  req.id = id_;
  req.broadcast = *peer_path;
  req.track = name_;
  req.priority = session_.config().upstream_priority;
  std::vector<uint8_t> out;
  out.push_back(static_cast<uint8_t>(wire::BidiType::kSubscribe));
  wire::encode(*session_.version(), req, out);
  stream->write(Bytes::from(out));
  MOQD_LOG(kDebug, "session %llu subscribe upstream id=%llu broadcast=%s track=%s",
           static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(id_),
           path_.c_str(), name_.c_str());
}

void UpstreamTrack::stop_track(model::Track&) {
  track_ = nullptr;
  session_.forget_upstream(this);
  if (stream_ != nullptr) {
    stream_->finish();  // unsubscribe: FIN our side (protocol/README.md §3.5.1)
  }
  release_stream();
}

void UpstreamTrack::release_stream() {
  if (stream_ != nullptr) {
    stream_->set_visitor(nullptr);
    stream_->release();
    stream_ = nullptr;
  }
}

void UpstreamTrack::on_session_closed() {
  stream_ = nullptr;
  session_.forget_upstream(this);
}

void UpstreamTrack::end_track(Error e) {
  model::Track* t = track_;
  track_ = nullptr;
  session_.forget_upstream(this);
  release_stream();
  if (t != nullptr) {
    t->end(e);
  }
}

void UpstreamTrack::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (!got_ok_) {
    auto r = wire::decode_subscribe_response(*session_.version(), stream_->peek(),
                                             session_.config().decode);
    if (!r) {
      session_.fail(r.error());
      return;
    }
    if (!r->has_value()) {
      if (stream_->is_fin_received()) {
        end_track(make_error(ErrorCode::kNotFound, "subscribe stream ended before OK"));
      }
      return;
    }
    stream_->consume((*r)->consumed);
    if (std::holds_alternative<wire::SubscribeDrop>((*r)->value)) {
      session_.fail(make_error(ErrorCode::kUnexpectedMessage, "SUBSCRIBE_DROP before OK"));
      return;
    }
    got_ok_ = true;
  }
  // Later responses (lite-03 SUBSCRIBE_DROP) carry nothing the relay acts on.
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received()) {
    // The publisher ended the track.
    stream_->finish();
    end_track(make_error(ErrorCode::kClosed, "track ended by publisher"));
  }
}

void UpstreamTrack::on_reset(uint64_t code) {
  // @moq/lite resets the subscribe stream when the broadcast is unknown.
  (void)code;
  end_track(make_error(ErrorCode::kNotFound, "subscription reset by publisher"));
}

void UpstreamTrack::on_stop_sending(uint64_t code) { on_reset(code); }

GroupReceiver::GroupReceiver(Session& s, transport::Stream& stream) : StreamHandler(s) {
  attach(stream);
}

model::Track* GroupReceiver::track() const {
  if (!upstream_id_) {
    return nullptr;
  }
  UpstreamTrack* u = session_.upstream_by_id(*upstream_id_);
  return u != nullptr ? u->track() : nullptr;
}

void GroupReceiver::abandon(ErrorCode code) {
  if (group_) {
    if (model::Track* t = track(); t != nullptr && !group_->is_done()) {
      t->abort_group(*group_);
    }
    group_ = model::GroupRef();
  }
  if (stream_ != nullptr) {
    stream_->stop_sending(static_cast<uint64_t>(code));
  }
  finish();
}

void GroupReceiver::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  const wire::Version v = *session_.version();
  if (!upstream_id_) {
    auto header = read_message<wire::GroupHeader>([&](auto in) {
      return wire::decode_group_header(v, in, session_.config().decode);
    });
    if (!header) {
      return;
    }
    upstream_id_ = header->subscribe_id;
    model::Track* t = track();
    if (t == nullptr) {
      // Unknown or already cancelled subscription: not an error, the peer may race us.
      abandon(ErrorCode::kCancel);
      return;
    }
    MOQD_LOG(kDebug, "session %llu group id=%llu seq=%llu", static_cast<unsigned long long>(session_.id()),
             static_cast<unsigned long long>(header->subscribe_id),
             static_cast<unsigned long long>(header->sequence));
    model::Group* g = t->begin_group(header->sequence);
    if (g == nullptr) {
      abandon(ErrorCode::kDuplicate);
      return;
    }
    group_ = model::GroupRef(g);
  }
  model::Track* t = track();
  if (t == nullptr) {
    abandon(ErrorCode::kCancel);
    return;
  }
  while (stream_ != nullptr) {
    auto data = stream_->peek();
    if (!in_frame_) {
      if (data.empty()) {
        break;
      }
      auto size = wire::decode_frame_header(data);
      if (!size) {
        session_.fail(size.error());
        return;
      }
      if (!size->has_value()) {
        break;
      }
      uint64_t frame_size = (*size)->value;
      if (frame_size > session_.config().limits.max_frame_size) {
        MOQD_LOG(kInfo, "session %llu frame of %llu bytes over --max-frame-size; group dropped code=%u",
                 static_cast<unsigned long long>(session_.id()),
                 static_cast<unsigned long long>(frame_size),
                 static_cast<unsigned>(ErrorCode::kWrongSize));
        abandon(ErrorCode::kWrongSize);
        return;
      }
      stream_->consume((*size)->consumed);
      t->begin_object(*group_, frame_size);
      frame_left_ = frame_size;
      in_frame_ = frame_size > 0;
      continue;
    }
    if (data.empty()) {
      break;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(frame_left_, data.size()));
    Bytes chunk = Bytes::copy(data.first(n));
    stream_->consume(n);
    frame_left_ -= n;
    in_frame_ = frame_left_ > 0;
    t->append_chunk(*group_, std::move(chunk));
  }
  if (stream_ != nullptr && stream_->is_fin_received()) {
    if (in_frame_) {
      t->abort_group(*group_);  // the stream ended inside a frame
    } else {
      t->finish_group(*group_);
    }
    group_ = model::GroupRef();
    finish();
  }
}

void GroupReceiver::on_reset(uint64_t) {
  if (model::Track* t = track(); t != nullptr && group_ && !group_->is_done()) {
    t->abort_group(*group_);
  }
  group_ = model::GroupRef();
  finish();
}

}  // namespace moqd::session
