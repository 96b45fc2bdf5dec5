// Downstream subscriptions: serving the peer's SUBSCRIBE from the origin's track, one uni stream
// per group, pulled from the shared cache as the transport takes bytes.
#include <algorithm>
#include <chrono>
#include <utility>

#include "base/counting.h"
#include "base/log.h"
#include "session/handlers.h"

namespace moqd::session {
namespace {

// Burns CPU for `d` of wall time (see SessionLimits::debug_spin_per_delivery).
void spin(Duration d) {
  auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

}  // namespace

// One group being forwarded on its own uni stream. Reused for the subscription's next group once
// this one is done (start() again after detach()).
class Subscription::GroupWriter final : public transport::StreamVisitor {
 public:
  GroupWriter(Subscription& sub, model::GroupRef group, transport::Stream& stream)
      : sub_(sub), cursor_(std::move(group)), stream_(&stream) {
    stream.set_visitor(this);
  }
  ~GroupWriter() override { detach(); }
  void start(model::GroupRef group, transport::Stream& stream) {
    cursor_ = model::GroupCursor(std::move(group));
    stream_ = &stream;
    done_ = false;
    stream.set_visitor(this);
  }
  // Lets go of the stream (and, for a spare, of the group).
  void detach() {
    if (stream_ != nullptr) {
      stream_->set_visitor(nullptr);
      stream_->release();
      stream_ = nullptr;
    }
    cursor_ = model::GroupCursor(model::GroupRef());
  }
  void on_readable() override {}
  void on_writable() override { sub_.pump(); }
  void on_reset(uint64_t) override {}
  void on_stop_sending(uint64_t) override {
    done_ = true;
    sub_.writer_done_ = true;
    sub_.pump();
  }
  // The session is gone: the stream pointer is no longer valid.
  void forget_stream() { stream_ = nullptr; }

  Subscription& sub_;
  model::GroupCursor cursor_;
  transport::Stream* stream_;
  bool done_ = false;
};

Subscription::Subscription(ServeContext& s, transport::Stream& stream) : HandlerOf(s) {
  attach(stream);
}

Subscription::~Subscription() {
  session_.timers().cancel(fin_timer_);
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
  session_.forget_subscription(this);
}

void Subscription::on_session_closed() {
  for (auto& w : writers_) {
    w->forget_stream();
  }
  writers_.clear();
  pending_.clear();
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
  session_.forget_subscription(this);
  StreamHandler::on_session_closed();
}

void Subscription::on_readable() {
  if (stream_ == nullptr) {
    return;
  }
  const wire::Version v = *session_.version();
  if (!started_) {
    auto req = read_message<wire::Subscribe>([&](auto in) {
      return wire::decode_subscribe(v, in, session_.config().decode);
    });
    if (!req) {
      return;
    }
    started_ = true;
    start(*req);
  }
  while (stream_ != nullptr && !unsubscribed_ && !stream_->peek().empty()) {
    auto update = read_message<wire::SubscribeUpdate>([&](auto in) {
      return wire::decode_subscribe_update(v, in, session_.config().decode);
    });
    if (!update) {
      return;
    }
    req_.priority = update->priority;
    for (auto& w : writers_) {
      w->stream_->set_send_order(send_order(w->cursor_.group()->sequence()));
    }
  }
  if (stream_ != nullptr && stream_->is_fin_received() && !unsubscribed_) {
    // The subscriber unsubscribed: stop every group and end our side too.
    unsubscribed_ = true;
    for (auto& w : writers_) {
      w->stream_->reset(static_cast<uint64_t>(ErrorCode::kCancel));
    }
    writers_.clear();
    pending_.clear();
    end_subscription();
  }
}

void Subscription::start(const wire::Subscribe& req) {
  req_ = req;
  std::string full = session_.to_full(req.broadcast);
  auto refuse = [&](ErrorCode code, const char* why) {
    MOQD_LOG(kInfo, "session %llu subscribe refused broadcast=%s track=%s code=%u (%s)",
             static_cast<unsigned long long>(session_.id()), full.c_str(), req.track.c_str(),
             static_cast<unsigned>(code), why);
    stream_->reset(static_cast<uint64_t>(code));
    finish();
  };
  if (session_.subscription_count() >= session_.config().limits.max_subscriptions) {
    refuse(ErrorCode::kBoundsExceeded, "too many subscriptions");
    return;
  }
  if (!session_.authorize(Action::kSubscribe, full)) {
    refuse(ErrorCode::kUnauthorized, "unauthorized");
    return;
  }
  if (req.end_group && req.start_group && *req.end_group < *req.start_group) {
    refuse(ErrorCode::kProtocolViolation, "end before start");
    return;
  }
  model::Track* track = session_.origin().track(full, req.track);
  if (track == nullptr) {
    refuse(ErrorCode::kNotFound, "not found");
    return;
  }
  MOQD_LOG(kDebug, "session %llu subscribe id=%llu broadcast=%s track=%s",
           static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(req.id),
           full.c_str(), req.track.c_str());
  track_ = track;
  session_.add_subscription(this);
  stream_->set_send_order(0);

  const wire::Version v = *session_.version();
  // lite-05 accepts implicitly: SUBSCRIBE_START goes out with the first group (open_writers).
  if (!wire::is_lite05(v)) {
    wire::SubscribeOk ok;
    ok.priority = req.priority;
    if (wire::is_lite03_plus(v)) {
      ok.ordered = req.ordered;
      ok.max_latency_ms = req.max_latency_ms;
      ok.start_group = req.start_group;
      ok.end_group = req.end_group;
    }
    std::vector<uint8_t> out;
    wire::encode(v, ok, out);
    write_bytes(std::move(out));
  }

  // A late joiner starts at the newest group; an explicit start looks through the whole cache.
  if (req.start_group) {
    next_arrival_ = 0;
  } else {
    next_arrival_ = track->late_join_arrival();
  }
  track->raise_priority(req.priority);
  track->add_listener(this);
  pump();
}

bool Subscription::wants_group(const model::Group& g) const {
  if (req_.start_group && g.sequence() < *req_.start_group) {
    return false;
  }
  if (req_.end_group && g.sequence() > *req_.end_group) {
    return false;
  }
  return true;
}

uint64_t Subscription::send_order(uint64_t sequence) const {
  // Higher subscriber priority first, then newer groups first (older first when ordered).
  constexpr uint64_t kSeqMask = (uint64_t{1} << 56) - 1;
  uint64_t seq = std::min(sequence, kSeqMask - 1);
  uint64_t within = req_.ordered ? kSeqMask - seq : seq + 1;
  return (uint64_t{req_.priority} << 56) | within;
}

void Subscription::on_track_data(model::Track&) { pump(); }

void Subscription::on_track_ended(model::Track&, Error) {
  track_ = nullptr;
  track_ended_ = true;
  pump();
}

void Subscription::on_reset(uint64_t) {
  unsubscribed_ = true;
  writers_.clear();
  pending_.clear();
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
  finish();
}

void Subscription::on_stop_sending(uint64_t code) { on_reset(code); }

void Subscription::collect_new_groups() {
  if (track_ == nullptr || next_arrival_ == track_->next_arrival()) {
    return;  // no group began since the last look
  }
  track_->for_each_group_from(next_arrival_, [this](const model::GroupRef& g) {
    if (req_.end_group && g->sequence() >= *req_.end_group) {
      reached_end_ = true;
    }
    if (g->subgroup() != 0) [[unlikely]] {
      // moq-lite has one stream per group: it carries an IETF group's subgroup 0 alone.
      note_refused(*g, "a subgroup other than 0");
      return;
    }
    if (wants_group(*g)) {
      pending_.push_back(g);
    }
  });
  next_arrival_ = track_->next_arrival();
}

void Subscription::drop_old_groups() {
  if (writers_.size() + pending_.size() <= 1) {
    return;  // the newest group is never dropped
  }
  const auto& limits = session_.config().limits;
  Duration max_age = limits.max_backlog_age;
  if (req_.max_latency_ms > 0) {
    max_age = std::min<Duration>(max_age, std::chrono::milliseconds(req_.max_latency_ms));
  }
  uint64_t total = 0;
  for (auto& w : writers_) {
    total += w->cursor_.backlog();
  }
  for (auto& g : pending_) {
    total += g->bytes();
  }
  Instant now = session_.clock().now();
  uint64_t skipped = 0;
  while (writers_.size() + pending_.size() > 1) {
    const bool from_writers = !writers_.empty();
    const model::Group& oldest = from_writers ? *writers_.front()->cursor_.group() : *pending_.front();
    uint64_t backlog = from_writers ? writers_.front()->cursor_.backlog() : oldest.bytes();
    bool behind = backlog > 0 || !oldest.is_done();
    if (total <= limits.max_backlog_bytes && !(behind && now - oldest.created() > max_age)) {
      break;
    }
    total -= std::min(total, backlog);
    if (from_writers) {
      writers_.front()->stream_->reset(static_cast<uint64_t>(ErrorCode::kOld));
      writers_.front()->detach();
      spare_writers_.push_back(std::move(writers_.front()));
      writers_.erase(writers_.begin());
    } else {
      pending_.erase(pending_.begin());
    }
    ++skipped;
  }
  if (skipped > 0) {
    note_skip(skipped, now);
  }
}

void Subscription::note_skip(uint64_t groups, Instant now) {
  if (SkipCounters* c = session_.config().skips; c != nullptr) {
    c->events.add();
    c->groups.add(groups);
  }
  // One line per subscription per kSkipLogInterval at most; groups skipped in between are
  // reported by the next line.
  skipped_unlogged_ += groups;
  if (skip_logged_ && now - skip_logged_at_ < kSkipLogInterval) {
    return;
  }
  skip_logged_ = true;
  skip_logged_at_ = now;
  MOQD_LOG(kInfo, "session %llu subscription %llu skip-ahead broadcast=%s track=%s groups_skipped=%llu",
           static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(req_.id),
           session_.to_full(req_.broadcast).c_str(), req_.track.c_str(),
           static_cast<unsigned long long>(std::exchange(skipped_unlogged_, 0)));
}

void Subscription::note_refused(const model::Group& g, const char* what) {
  ++refused_groups_;
  if (refused_logged_) {
    return;  // one line per subscription; refused_groups() counts the rest
  }
  refused_logged_ = true;
  MOQD_LOG(kInfo, "session %llu subscription %llu broadcast=%s track=%s group %llu subgroup %llu "
           "refused: %s (moq-lite cannot express it)",
           static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(req_.id),
           session_.to_full(req_.broadcast).c_str(), req_.track.c_str(),
           static_cast<unsigned long long>(g.sequence()),
           static_cast<unsigned long long>(g.subgroup()), what);
}

bool Subscription::open_writers() {
  while (!pending_.empty()) {
    transport::Stream* stream = session_.open_uni();
    if (stream == nullptr) {
      MOQD_LOG(kDebug, "session %llu subscription %llu waits for a stream (%zu groups pending)",
               static_cast<unsigned long long>(session_.id()), static_cast<unsigned long long>(req_.id),
               pending_.size());
      session_.wait_for_streams(this);
      return false;
    }
    model::GroupRef group = std::move(pending_.front());
    pending_.erase(pending_.begin());
    if (wire::is_lite05(*session_.version())) {
      if (!start_sent_) {
        start_sent_ = true;
        header_.clear();
        wire::encode(*session_.version(), wire::SubscribeStart{group->sequence()}, header_);
        stream_->write(Bytes::from(header_));
      }
      end_group_ = std::max(end_group_, group->sequence() + 1);
    }
    header_.clear();
    header_.push_back(static_cast<uint8_t>(wire::UniType::kGroup));
    wire::encode(*session_.version(), wire::GroupHeader{req_.id, group->sequence()}, header_);
    stream->set_send_order(send_order(group->sequence()));
    stream->write(Bytes::from(header_));
    if (spare_writers_.empty()) {
      writers_.push_back(std::make_unique<GroupWriter>(*this, std::move(group), *stream));
    } else {
      writers_.push_back(std::move(spare_writers_.back()));
      spare_writers_.pop_back();
      writers_.back()->start(std::move(group), *stream);
    }
  }
  return true;
}

void Subscription::write_group(GroupWriter& w, const Delivery& d) {
  model::GroupCursor::Step& step = step_;
  // write_capacity() is asked once and then counted down by the bytes written, asked again only
  // when the count reaches 0: QUIC's and WebSocket's capacity falls by exactly the bytes written
  // (both budgets count them), and write() takes all it is given, so a transport whose capacity
  // fell faster is only written past the point where it asks for a pause, as write() allows.
  size_t capacity = w.stream_->write_capacity();
  auto wrote = [&capacity](size_t n) { capacity = n < capacity ? capacity - n : 0; };
  while (!w.done_) {
    if (capacity == 0 && (capacity = w.stream_->write_capacity()) == 0) {
      return;
    }
    switch (w.cursor_.next(capacity, step, /*whole=*/true)) {
      case model::GroupCursor::Kind::kNothing:
        return;
      case model::GroupCursor::Kind::kObjectStart: {
        if (step.object->lite_refused) [[unlikely]] {
          // An IETF object moq-lite cannot carry (an id gap, extensions beyond a timestamp): the
          // group stops here for this subscriber, reset with UNSUPPORTED, never cut silently.
          note_refused(*w.cursor_.group(), "an object moq-lite cannot carry (id gap or extensions)");
          w.stream_->reset(static_cast<uint64_t>(ErrorCode::kUnsupported));
          w.done_ = true;
          writer_done_ = true;
          break;
        }
        bool framed = false;
        const Bytes& header = frame_header(*w.cursor_.group(), *step.object, d.lite05, &framed);
        if (header.empty()) {
          // A timestamp this version cannot carry: the group is cut short, as if aborted.
          w.stream_->reset(static_cast<uint64_t>(ErrorCode::kWrongSize));
          w.done_ = true;
          writer_done_ = true;
          break;
        }
        if (!step.completes_object) [[unlikely]] {
          // The payload follows as chunks: the header alone (a framed one's first bytes).
          Bytes alone = framed ? header.slice(0, header.size() - step.object->size) : header;
          wrote(alone.size());
          w.stream_->write(std::move(alone));
          break;
        }
        wrote(header.size());
        count_delivery(step, step.object->size, d);
        if (framed) {
          // Taken whole, and the header lies just before the payload in the payload's own buffer:
          // one Bytes for both (one queued buffer, one vector, one ACK pop).
          w.stream_->write(header);
        } else if (step.object->size == 0) [[unlikely]] {
          w.stream_->write(header);  // a zero-size object: nothing more to write
        } else {
          // Taken whole: the header and the payload in one step and one write.
          const Bytes& payload = step.object->chunks[0];
          wrote(payload.size());
          w.stream_->write_pair(header, payload);
        }
        served_ = true;
        if (d.spin > Duration::zero()) [[unlikely]] {
          spin(d.spin);
        }
        break;
      }
      case model::GroupCursor::Kind::kChunk:
        count_delivery(step, step.chunk.size(), d);
        wrote(step.chunk.size());
        w.stream_->write(std::move(step.chunk));
        served_ = true;
        if (d.spin > Duration::zero()) [[unlikely]] {
          spin(d.spin);
        }
        break;
      case model::GroupCursor::Kind::kEnd:
        w.stream_->finish();
        w.done_ = true;
        writer_done_ = true;
        last_group_end_ = session_.clock().now();
        break;
      case model::GroupCursor::Kind::kAborted:
        w.stream_->reset(static_cast<uint64_t>(ErrorCode::kCancel));
        w.done_ = true;
        writer_done_ = true;
        break;
    }
  }
}

void Subscription::count_delivery(const model::GroupCursor::Step& step, uint64_t payload,
                                  const Delivery& d) {
  TrafficCounters* t = d.traffic;
  if (t == nullptr) {
    return;
  }
  t->bytes_out.add(payload);
  if (track_ != nullptr) {
    track_->note_bytes_out(payload);
  }
  if (step.completes_object) {
    t->frames_out.add();
    t->delivery_latency.record(d.now - step.object->arrived);
  }
}

void Subscription::pump() {
  if (pumping_ || stream_ == nullptr || unsubscribed_ || !started_) {
    return;
  }
  counting::PathScope path;  // per-subscriber delivery work (base/counting.h)
  pumping_ = true;
  collect_new_groups();
  drop_old_groups();
  open_writers();
  served_ = false;
  if (!writers_.empty()) {
    // What every delivery of this pump reads from the session, asked once (each is a virtual
    // call on the session's context; none changes within a turn: the clock is the loop's turn
    // time).
    const SessionConfig& config = session_.config();
    const Delivery d{config.traffic, config.limits.debug_spin_per_delivery, session_.clock().now(),
                     wire::is_lite05(*session_.version())};
    for (auto& w : writers_) {
      write_group(*w, d);
    }
  }
  if (served_ && track_ != nullptr) {
    track_->note_served();
  }
  recycle_done_writers();
  pumping_ = false;
  // lite-03 end_group: the subscription ends once the last wanted group has been sent.
  if ((track_ended_ || reached_end_) && writers_.empty() && pending_.empty() && fin_timer_ == 0) {
    Duration since = session_.clock().now() - last_group_end_;
    if (since >= kFinDelay) {
      end_subscription();
    } else {
      fin_timer_ = session_.timers().schedule(kFinDelay - since, [this] {
        fin_timer_ = 0;
        end_subscription();
      });
    }
  }
}

bool encode_lite05_frame_header(const model::Group& group, const model::Object& object,
                                std::vector<uint8_t>& out) {
  return wire::encode_timed_frame_header(
      wire::TimedFrameHeader{group.timestamp_delta(object), object.size}, out);
}

// A moq-lite-01..04 FRAME header is the payload size, the same for every subscriber of those
// versions; a lite-05 one adds the timestamp delta from the group's previous object, again the
// same for every lite-05 subscriber. Encoded once per object and shared (a reference per
// subscriber, no encoding, no copy); a track watched in both forms re-encodes when they alternate.
// Empty when the timestamp cannot be encoded.
//
// Framed: a moq-lite publisher's FRAME header arrives just before the payload, and the receive
// buffer the payload's Bytes shares still holds it. When the object is complete in one chunk and
// the bytes before it are exactly the header we would write, the header kept is the
// payload's view widened over them: header and payload in one buffer, held once, no allocation
// (not even the header's own), and each subscriber then queues one Bytes per message, not two.
// The check compares the bytes, so whatever lies there (an IETF publisher's payload length is the
// same varint) is used only when it is exactly the header; anything else (another version's
// header, a payload copied or in pieces) keeps the header alone.
void Subscription::encode_frame_header(const model::Group& group, const model::Object& object,
                                       bool lite05) {
  const uint8_t format = lite05 ? kLite05FrameHeader : kLiteFrameHeader;
  const uint8_t framed_format = lite05 ? kLite05Framed : kLiteFramed;
  header_.clear();
  if (lite05) {
    encode_lite05_frame_header(group, object, header_);
  } else {
    wire::encode_frame_header(object.size, header_);
  }
  Bytes widened;
  if (!header_.empty() && object.is_complete() && object.chunks.size() == 1 &&
      object.chunks[0].size() == object.size) {
    widened = object.chunks[0].widened_by(header_);
  }
  if (!widened.empty()) {
    object.header = std::move(widened);
    object.header_format = framed_format;
  } else {
    object.header = header_.empty() ? Bytes() : Bytes::from(header_);
    object.header_format = format;
  }
}

void Subscription::send_subscribe_end() {
  std::vector<uint8_t> out;
  wire::encode(*session_.version(), wire::SubscribeEnd{end_group_}, out);
  write_bytes(std::move(out));
}

void Subscription::recycle_done_writers() {
  if (!writer_done_) {
    return;
  }
  writer_done_ = false;
  // In place and in order (std::stable_partition would allocate a buffer).
  size_t kept = 0;
  for (size_t i = 0; i < writers_.size(); ++i) {
    if (writers_[i]->done_) {
      writers_[i]->detach();
      spare_writers_.push_back(std::move(writers_[i]));
    } else {
      if (kept != i) {
        writers_[kept] = std::move(writers_[i]);
      }
      ++kept;
    }
  }
  writers_.resize(kept);
}

bool Subscription::has_waiting_data() const {
  if (!pending_.empty()) {
    return true;
  }
  for (const auto& w : writers_) {
    if (w->cursor_.peek(1).kind != model::GroupCursor::Kind::kNothing) {
      return true;
    }
  }
  return false;
}

void Subscription::end_subscription() {
  session_.timers().cancel(fin_timer_);
  fin_timer_ = 0;
  if (track_ != nullptr) {
    track_->remove_listener(this);
    track_ = nullptr;
  }
  session_.forget_subscription(this);
  if (stream_ != nullptr && !fin_sent_) {
    fin_sent_ = true;
    if (wire::is_lite05(*session_.version()) && !unsubscribed_) {
      send_subscribe_end();  // the track or the requested range ended
    }
    stream_->finish();
  }
  finish();
}

}  // namespace moqd::session
