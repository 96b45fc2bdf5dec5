// Upstream subscriptions: SUBSCRIBE sent to the peer for a track of a broadcast it announced, and
// the group streams it sends back, written into the origin's track as they arrive.
#include "base/log.h"
#include "session/handlers.h"

namespace moqd::session {

// lite-05: the TRACK stream asking the publisher for TRACK_INFO, opened before SUBSCRIBE. Its
// answer sets the track's properties; a reset, or a FIN without TRACK_INFO, ends the track (the
// publisher does not know it).
class UpstreamTrack::TrackInfoRequest final : public transport::StreamVisitor {
 public:
  TrackInfoRequest(UpstreamTrack& owner, transport::Stream& stream)
      : owner_(owner), stream_(&stream) {
    stream.set_visitor(this);
  }
  ~TrackInfoRequest() override { release(); }
  void release() {
    if (stream_ != nullptr) {
      stream_->set_visitor(nullptr);
      stream_->release();
      stream_ = nullptr;
    }
  }
  void forget_stream() { stream_ = nullptr; }
  void on_readable() override {
    if (stream_ == nullptr || done_) {
      return;
    }
    PeerContext& s = owner_.session_;
    auto r = wire::decode_track_info(*s.version(), stream_->peek(), s.config().decode);
    if (!r) {
      s.fail(r.error());
      return;
    }
    if (!r->has_value()) {
      if (stream_->has_peer_fin()) {
        owner_.end_track(make_error(ErrorCode::kNotFound, "track stream ended before TRACK_INFO"));
      }
      return;
    }
    stream_->consume((*r)->consumed);
    done_ = true;
    stream_->finish();
    owner_.on_track_info((*r)->value);  // may release this request's stream: return at once
  }
  void on_writable() override {}
  void on_reset(uint64_t) override {
    if (!done_) {
      owner_.end_track(make_error(ErrorCode::kNotFound, "track stream reset by publisher"));
    }
  }
  void on_stop_sending(uint64_t) override {}

 private:
  UpstreamTrack& owner_;
  transport::Stream* stream_;
  bool done_ = false;
};

UpstreamTrack::UpstreamTrack(PeerContext& s, std::string path, std::string name)
    : session_(s), path_(std::move(path)), name_(std::move(name)) {}

UpstreamTrack::~UpstreamTrack() {
  session_.timers().cancel(grace_timer_);
  session_.timers().cancel(info_timer_);
  if (track_ != nullptr) {
    // The session is going away while the track still expects data.
    model::Track* t = track_;
    track_ = nullptr;
    session_.forget_upstream(this);
    t->set_source(nullptr);
    t->end(make_error(ErrorCode::kClosed, "publisher session ended"));
  }
  release_stream();
  release_track_stream();
}

void UpstreamTrack::start_track(model::Track& track) {
  track_ = &track;
  info_request_.reset();
  session_.timers().cancel(info_timer_);
  info_timer_ = 0;
  if (wire::is_lite05(*session_.version())) {
    track.expect_properties();  // until the publisher's TRACK_INFO
    info_timer_ = session_.timers().schedule(kTrackInfoWait, [this] {
      info_timer_ = 0;
      if (track_ != nullptr && !track_->properties()) {
        MOQD_LOG(kInfo, "session %llu no TRACK_INFO in %lld ms broadcast=%s track=%s: provisional "
                 "properties", static_cast<unsigned long long>(session_.id()),
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                     kTrackInfoWait).count()), path_.c_str(), name_.c_str());
        model::TrackProperties p;
        p.timescale_known = false;
        p.provisional = true;
        track_->set_properties(p);
      }
    });
  }
  got_ok_ = false;
  publisher_finished_ = false;
  grace_over_ = false;
  active_groups_ = 0;
  id_ = session_.next_upstream_id();
  session_.register_upstream(id_, this);
  open_subscribe_stream();
}

void UpstreamTrack::open_subscribe_stream() {
  if (track_ == nullptr || stream_ != nullptr) {
    return;
  }
  auto peer_path = session_.to_peer(path_);
  if (!peer_path) {
    end_track(make_error(ErrorCode::kNotFound, "broadcast outside the session root"));
    return;
  }
  const wire::Version v = *session_.version();
  if (wire::is_lite05(v) && info_request_ == nullptr) {
    // TRACK first: the track's properties (its timescale above all) come from TRACK_INFO.
    transport::Stream* ts = session_.open_bidi();
    if (ts == nullptr) {
      session_.wait_for_streams(this);
      return;
    }
    std::vector<uint8_t> out;
    out.push_back(static_cast<uint8_t>(wire::BidiType::kTrack));
    wire::encode(v, wire::TrackRequest{*peer_path, name_}, out);
    ts->write(Bytes::from(out));
    info_request_ = std::make_unique<TrackInfoRequest>(*this, *ts);
  }
  transport::Stream* stream = session_.open_bidi();
  if (stream == nullptr) {
    session_.wait_for_streams(this);
    return;
  }
  stream_ = stream;
  // lite-05 accepts implicitly (no SUBSCRIBE_OK): groups may come at once.
  got_ok_ = wire::is_lite05(v);
  stream->set_visitor(this);
  wire::Subscribe req;
  req.id = id_;
  req.broadcast = *peer_path;
  req.track = name_;
  req.priority = track_->priority().value_or(session_.config().upstream_priority);
  std::vector<uint8_t> out;
  out.push_back(static_cast<uint8_t>(wire::BidiType::kSubscribe));
  wire::encode(*session_.version(), req, out);
  stream->write(Bytes::from(out));
  MOQD_LOG(kDebug, "session %llu subscribe upstream id=%llu broadcast=%s track=%s",
           static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(id_),
           path_.c_str(), name_.c_str());
}

void UpstreamTrack::stop_track(model::Track&) {
  session_.timers().cancel(grace_timer_);
  grace_timer_ = 0;
  session_.timers().cancel(info_timer_);
  info_timer_ = 0;
  track_ = nullptr;
  session_.forget_upstream(this);
  if (stream_ != nullptr) {
    stream_->finish();  // unsubscribe: FIN our side (protocol/README.md §3.5.1)
  }
  release_stream();
  release_track_stream();
}

void UpstreamTrack::release_track_stream() {
  if (info_request_ != nullptr) {
    info_request_->release();
  }
}

void UpstreamTrack::on_track_info(const wire::TrackInfo& info) {
  release_track_stream();
  session_.timers().cancel(info_timer_);
  info_timer_ = 0;
  if (track_ == nullptr) {
    return;
  }
  model::TrackProperties p;
  p.priority = info.priority;
  p.ordered = info.ordered;
  p.max_latency_ms = info.max_latency_ms;
  p.timescale = info.timescale;
  track_->set_properties(p);
}

void UpstreamTrack::release_stream() {
  if (stream_ != nullptr) {
    stream_->set_visitor(nullptr);
    stream_->release();
    stream_ = nullptr;
  }
}

void UpstreamTrack::on_session_closed() {
  session_.timers().cancel(info_timer_);
  info_timer_ = 0;
  stream_ = nullptr;
  if (info_request_ != nullptr) {
    info_request_->forget_stream();
  }
  session_.forget_upstream(this);
}

void UpstreamTrack::end_track(Error e) {
  session_.timers().cancel(grace_timer_);
  grace_timer_ = 0;
  session_.timers().cancel(info_timer_);
  info_timer_ = 0;
  model::Track* t = track_;
  track_ = nullptr;
  session_.forget_upstream(this);
  release_stream();
  release_track_stream();
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
  if (wire::is_lite05(*session_.version())) {
    // SUBSCRIBE_START / END / DROP, any number until FIN: each must decode, none changes what
    // the relay does (groups are taken as they come; the FIN ends the track).
    while (stream_ != nullptr && !stream_->peek().empty()) {
      auto r = wire::decode_subscribe_response(*session_.version(), stream_->peek(),
                                               session_.config().decode);
      if (!r) {
        session_.fail(r.error());
        return;
      }
      if (!r->has_value()) {
        if (stream_->has_peer_fin()) {
          session_.fail(make_error(ErrorCode::kDecode, "truncated message"));
        }
        return;
      }
      stream_->consume((*r)->consumed);
    }
  }
  // Later responses (lite-03 SUBSCRIBE_DROP) carry nothing the relay acts on.
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received() && !publisher_finished_) {
    MOQD_LOG(kDebug, "session %llu upstream id=%llu ended by publisher",
             static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(id_));
    publisher_finished_ = true;
    stream_->finish();
    release_stream();
    grace_timer_ = session_.timers().schedule(kEndGrace, [this] {
      grace_timer_ = 0;
      grace_over_ = true;
      maybe_end_after_publisher_fin();
    });
  }
}

void UpstreamTrack::on_group_done() {
  if (active_groups_ > 0) {
    --active_groups_;
  }
  maybe_end_after_publisher_fin();
}

void UpstreamTrack::maybe_end_after_publisher_fin() {
  if (publisher_finished_ && grace_over_ && active_groups_ == 0 && track_ != nullptr) {
    end_track(make_error(ErrorCode::kClosed, "track ended by publisher"));
  }
}

void UpstreamTrack::on_reset(uint64_t code) {
  // @moq/lite resets the subscribe stream when the broadcast is unknown.
  (void)code;
  end_track(make_error(ErrorCode::kNotFound, "subscription reset by publisher"));
}

// The publisher no longer reads our side of the subscribe stream; @moq/lite sends this with its FIN
// when it ends a subscription. Only FIN or RESET end the track.
void UpstreamTrack::on_stop_sending(uint64_t) {}

GroupReceiver::GroupReceiver(PeerContext& s, transport::Stream& stream) : HandlerOf(s) {
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
      MOQD_LOG(kDebug, "session %llu group for unknown subscription id=%llu seq=%llu dropped",
               static_cast<unsigned long long>(session_.id()),
               static_cast<unsigned long long>(header->subscribe_id),
               static_cast<unsigned long long>(header->sequence));
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
    counted_ = true;
    session_.upstream_by_id(*upstream_id_)->on_group_started();
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
      uint64_t frame_size = 0;
      size_t header_size = 0;
      int64_t delta = 0;
      const bool timed = wire::is_lite05(v);
      if (timed) {
        auto h = wire::decode_timed_frame_header(data);
        if (!h) {
          session_.fail(h.error());
          return;
        }
        if (!h->has_value()) {
          if (stream_->has_peer_fin()) {
            fail_cut_header(*t);
            return;
          }
          break;
        }
        frame_size = (*h)->value.size;
        delta = (*h)->value.timestamp_delta;
        header_size = (*h)->consumed;
      } else {
        auto size = wire::decode_frame_header(data);
        if (!size) {
          session_.fail(size.error());
          return;
        }
        if (!size->has_value()) {
          if (stream_->has_peer_fin()) {
            fail_cut_header(*t);
            return;
          }
          break;
        }
        frame_size = (*size)->value;
        header_size = (*size)->consumed;
      }
      if (frame_size > session_.config().limits.max_frame_size) {
        MOQD_LOG(kInfo, "session %llu frame of %llu bytes over --max-frame-size; group dropped code=%u",
                 static_cast<unsigned long long>(session_.id()),
                 static_cast<unsigned long long>(frame_size),
                 static_cast<unsigned>(ErrorCode::kWrongSize));
        abandon(ErrorCode::kWrongSize);
        return;
      }
      stream_->consume(header_size);
      if (TrafficCounters* tc = session_.config().traffic) {
        tc->frames_in.add();
      }
      if (timed) {
        // Exact: the timestamps are kept as the publisher sent them (modulo 2^64).
        timestamp_ += static_cast<uint64_t>(delta);
        t->begin_timed_object(*group_, frame_size, timestamp_);
      } else {
        t->begin_object(*group_, frame_size);  // stamped with its arrival (model::TrackProperties)
      }
      frame_left_ = frame_size;
      in_frame_ = frame_size > 0;
      continue;
    }
    if (data.empty()) {
      break;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(frame_left_, data.size()));
    if (!session_.admit_ingress(n)) {
      return;
    }
    if (TrafficCounters* tc = session_.config().traffic) {
      tc->bytes_in.add(n);
    }
    Bytes chunk = stream_->read(n);  // shares the transport's receive buffer where it can
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
    done();
  }
}

// A FIN inside a frame header: the group ends at once, and the header is a truncated message.
// (is_fin_received() never turns true while the header's first bytes lie unread.)
void GroupReceiver::fail_cut_header(model::Track& t) {
  t.abort_group(*group_);
  group_ = model::GroupRef();
  session_.fail(make_error(ErrorCode::kDecode, "frame header cut short by FIN"));
}

void GroupReceiver::done() {
  if (!counted_) {
    return;
  }
  counted_ = false;
  if (UpstreamTrack* u = session_.upstream_by_id(*upstream_id_); u != nullptr) {
    u->on_group_done();
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
