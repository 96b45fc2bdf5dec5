// lite-05 TRACK and FETCH streams opened by the peer (NET-0.3.md §3.5, §3.6): the track's
// properties as TRACK_INFO, and one cached group as timestamped FRAMEs.
#include "base/log.h"
#include "session/handlers.h"

namespace moqd::session {

TrackResponder::TrackResponder(ServeContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

TrackResponder::~TrackResponder() { unlisten(); }

void TrackResponder::unlisten() {
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
}

void TrackResponder::on_session_closed() {
  unlisten();
  StreamHandler::on_session_closed();
}

void TrackResponder::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (!started_) {
    const wire::Version v = *session_.version();
    auto req = read_message<wire::TrackRequest>([&](auto in) {
      return wire::decode_track_request(v, in, session_.config().decode);
    });
    if (!req) {
      return;
    }
    started_ = true;
    std::string full = session_.to_full(req->broadcast);
    auto refuse = [&](ErrorCode code, const char* why) {
      MOQD_LOG(kInfo, "session %llu track refused broadcast=%s track=%s code=%u (%s)",
               static_cast<unsigned long long>(session_.id()), full.c_str(), req->track.c_str(),
               static_cast<unsigned>(code), why);
      stream_->reset(static_cast<uint64_t>(code));
      finish();
    };
    if (!session_.authorize(Action::kSubscribe, full)) {
      refuse(ErrorCode::kUnauthorized, "unauthorized");
      return;
    }
    model::Track* track = session_.origin().track(full, req->track);
    if (track == nullptr) {
      refuse(ErrorCode::kNotFound, "not found");
      return;
    }
    // Listening first starts the track's source if it is idle, and a source that asks its
    // publisher for the properties (a lite-05 session, another worker) marks them pending as it
    // starts: only then do properties() tell defaults from not-yet-known.
    track_ = track;
    track->add_listener(this);
    if (auto p = track->properties(); p && !p->provisional) {
      answer(*p);
    }
  }
  if (stream_ == nullptr) {
    return;
  }
  // Nothing more is expected; the peer FINs its side after TRACK_INFO.
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received() && track_ == nullptr) {
    finish();
  }
}

void TrackResponder::answer(const model::TrackProperties& p) {
  unlisten();
  if (stream_ == nullptr) {
    return;
  }
  std::vector<uint8_t> out;
  wire::encode(*session_.version(),
               wire::TrackInfo{p.priority, p.ordered, p.max_latency_ms, p.timescale}, out);
  write_bytes(std::move(out));
  stream_->finish();
  if (stream_->is_fin_received()) {
    finish();
  }
}

void TrackResponder::on_track_data(model::Track& track) {
  // Provisional properties are not the publisher's: TRACK_INFO waits for those.
  if (auto p = track.properties(); p && !p->provisional) {
    answer(*p);
  }
}

void TrackResponder::on_track_ended(model::Track&, Error) {
  track_ = nullptr;  // already removed
  if (stream_ != nullptr) {
    stream_->reset(static_cast<uint64_t>(ErrorCode::kNotFound));
  }
  finish();
}

FetchResponder::FetchResponder(ServeContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

FetchResponder::~FetchResponder() { unlisten(); }

void FetchResponder::unlisten() {
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
}

void FetchResponder::on_session_closed() {
  unlisten();
  cursor_.reset();
  StreamHandler::on_session_closed();
}

void FetchResponder::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  if (!started_) {
    auto req = read_message<wire::Fetch>([&](auto in) {
      return wire::decode_fetch(*session_.version(), in, session_.config().decode);
    });
    if (!req) {
      return;
    }
    started_ = true;
    start(*req);
  }
  if (stream_ == nullptr) {
    return;
  }
  stream_->consume(stream_->peek().size());
  if (stream_->is_fin_received() && !cursor_) {
    finish();  // the group went out whole and the peer closed its side
  }
}

void FetchResponder::start(const wire::Fetch& req) {
  std::string full = session_.to_full(req.broadcast);
  auto refuse = [&](ErrorCode code, const char* why) {
    MOQD_LOG(kInfo, "session %llu fetch refused broadcast=%s track=%s group=%llu code=%u (%s)",
             static_cast<unsigned long long>(session_.id()), full.c_str(), req.track.c_str(),
             static_cast<unsigned long long>(req.group), static_cast<unsigned>(code), why);
    stream_->reset(static_cast<uint64_t>(code));
    finish();
  };
  if (!session_.authorize(Action::kSubscribe, full)) {
    refuse(ErrorCode::kUnauthorized, "unauthorized");
    return;
  }
  model::Track* track = session_.origin().track(full, req.track);
  if (track == nullptr) {
    refuse(ErrorCode::kNotFound, "broadcast not found");
    return;
  }
  model::GroupRef group;
  track->for_each_group_from(0, [&](const model::GroupRef& g) {
    if (g->sequence() == req.group) {
      group = g;
    }
  });
  if (!group) {
    refuse(ErrorCode::kNotFound, "group not cached");
    return;
  }
  stream_->set_send_order(uint64_t{req.priority} << 56);
  const bool live = !group->is_done();
  cursor_.emplace(std::move(group));
  if (live) {
    track_ = track;  // the rest of the group is still arriving
    track->add_listener(this);
  }
  pump();
}

void FetchResponder::pump() {
  while (stream_ != nullptr && cursor_) {
    size_t capacity = stream_->write_capacity();
    if (capacity == 0) {
      return;
    }
    switch (cursor_->next(capacity, step_)) {
      case model::GroupCursor::Kind::kNothing:
        return;
      case model::GroupCursor::Kind::kObjectStart:
        header_.clear();
        if (!encode_lite05_frame_header(*cursor_->group(), *step_.object, header_)) {
          unlisten();
          cursor_.reset();
          stream_->reset(static_cast<uint64_t>(ErrorCode::kWrongSize));
          finish();
          return;
        }
        stream_->write(Bytes::from(header_));
        break;
      case model::GroupCursor::Kind::kChunk:
        stream_->write(std::move(step_.chunk));
        break;
      case model::GroupCursor::Kind::kEnd:
        unlisten();
        cursor_.reset();
        stream_->finish();
        if (stream_->is_fin_received()) {
          finish();
        }
        return;
      case model::GroupCursor::Kind::kAborted:
        unlisten();
        cursor_.reset();
        stream_->reset(static_cast<uint64_t>(ErrorCode::kCancel));
        finish();
        return;
    }
  }
}

void FetchResponder::on_track_ended(model::Track&, Error) {
  track_ = nullptr;  // already removed; the track aborted the group if it was still open
  pump();
}

}  // namespace moqd::session
