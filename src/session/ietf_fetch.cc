// FETCH, FETCH_CANCEL, TRACK_STATUS and SUBSCRIBE_UPDATE / REQUEST_UPDATE of the IETF session,
// drafts 14..20 (see ietf_fetch.h). Section numbers are draft-14's unless marked.
#include "session/ietf_fetch.h"

#include <algorithm>

#include "base/log.h"
#include "wire/ietf_namespace.h"
#include "wire/ietf_properties.h"

namespace moqd::session::ietf_detail {

namespace wi = wire::ietf;

namespace {

// Error codes per draft: d14 FETCH_ERROR / SUBSCRIBE_ERROR (§9.17, §9.8) and d15+ REQUEST_ERROR
// (d16 §13.1.3, d17 §14.5.2, d18 §15.10.2, d20 §15.11.2: the same numbers in d15..20).
struct Codes {
  uint64_t unauthorized = 0x1;
  uint64_t does_not_exist;
  uint64_t invalid_range;
  uint64_t invalid_joining;
  uint64_t not_supported = 0x3;
};
Codes codes(const wi::Draft& d) {
  return d.request_ok ? Codes{0x1, 0x10, 0x11, 0x32, 0x3} : Codes{0x1, 0x4, 0x5, 0x7, 0x3};
}
// d19 §5.1.3 range filters (SUBGROUP, OBJECTID, PRIORITY, OBJECT_PROPERTY): moqd does not apply
// them, so a FETCH carrying one is refused rather than answered with objects it excludes.
bool has_range_filter(const wi::Parameters& params) {
  for (const wi::Parameter& p : params) {
    if (p.type >= 0x25 && p.type <= 0x28) {
      return true;
    }
  }
  return false;
}
constexpr uint64_t kInternalError = 0x0;  // every draft's INTERNAL_ERROR
constexpr uint64_t kNoObjects = 0x6;  // d14 FETCH_ERROR only; d15+ answer an empty stream
constexpr uint64_t kResetCancelled = 0x1;  // d16 §13.1.4 CANCELLED (d14/15 alike)
constexpr uint64_t kResetInternal = 0x0;

bool before(const wi::Location& a, const wi::Location& b) {
  return a.group < b.group || (a.group == b.group && a.object < b.object);
}

}  // namespace

std::optional<wi::Location> largest_location(const model::Track& t) {
  std::optional<wi::Location> best;
  t.for_each_group_from(0, [&](const model::GroupRef& g) {
    const auto n = g->objects().size();
    if (n == 0) {
      return;
    }
    wi::Location l{g->sequence(), n - 1};
    if (!best || before(*best, l)) {
      best = l;
    }
  });
  return best;
}

// One FETCH's uni stream: FETCH_HEADER, then the objects of `parts_` in order, each written as its
// payload arrives (an object still arriving is waited for through the track's notifications).
class FetchResponder final : public transport::StreamVisitor, public model::TrackListener {
 public:
  struct Part {
    model::GroupRef group;
    size_t first = 0;  // object indexes [first, end)
    size_t end = 0;
  };
  FetchResponder(FetchService& svc, uint64_t request_id, model::Track& track,
                 std::vector<Part> parts, uint8_t priority, bool descending, bool stamp)
      : svc_(svc), request_id_(request_id), track_(&track), parts_(std::move(parts)),
        priority_(priority), descending_(descending), stamp_(stamp) {
    for (const Part& p : parts_) {
      for (size_t i = p.first; i < p.end; ++i) {
        if (!p.group->objects()[i].is_complete()) {
          listening_ = true;
        }
      }
    }
    if (listening_) {
      track_->add_listener(this);
    }
  }
  ~FetchResponder() override {
    stop_listening();
    close_stream(kResetCancelled);
  }
  uint64_t request_id() const { return request_id_; }
  // Every object was written and the stream FINished.
  bool completed() const { return completed_; }

  // Opens the stream (false: no uni stream credit; call again from on_streams_available).
  bool open() {
    transport::Stream* s = svc_.session().open_uni();
    if (s == nullptr) {
      return false;
    }
    stream_ = s;
    s->set_visitor(this);
    std::vector<uint8_t> out;
    wi::encode_fetch_header(svc_.session().draft(), request_id_, out);
    s->write(Bytes::from(out));
    pump();
    return true;
  }
  void cancel() {
    close_stream(kResetCancelled);
    finish();
  }
  void on_session_closed() {
    stop_listening();
    stream_ = nullptr;
  }

  void on_readable() override {}
  void on_writable() override { pump(); }
  void on_reset(uint64_t) override {}
  void on_stop_sending(uint64_t) override { cancel(); }
  void on_track_data(model::Track&) override { pump(); }
  void on_track_ended(model::Track&, Error) override {
    track_ = nullptr;
    listening_ = false;
    pump();
  }
  bool is_viewer() const override { return true; }

 private:
  void stop_listening() {
    if (listening_ && track_ != nullptr) {
      listening_ = false;
      track_->remove_listener(this);
    }
  }
  void close_stream(uint64_t code) {
    if (stream_ != nullptr) {
      stream_->set_visitor(nullptr);
      stream_->reset(code);
      stream_->release();
      stream_ = nullptr;
    }
  }
  void finish() {
    if (!finished_) {
      finished_ = true;
      stop_listening();
      svc_.retire(this);
    }
  }
  // Writes what the stream takes; FIN after the last object, reset when a group was aborted
  // before its objects arrived whole.
  void pump();

  FetchService& svc_;
  uint64_t request_id_;
  model::Track* track_;
  std::vector<Part> parts_;
  uint8_t priority_;
  bool descending_;
  bool stamp_;  // FETCH_OK declared a TIMESCALE: objects without properties get a Timestamp
  std::vector<uint8_t> stamp_scratch_;
  std::optional<wi::FetchObject> previous_;  // d18+: the fields are deltas from it
  bool completed_ = false;
  transport::Stream* stream_ = nullptr;
  bool listening_ = false;
  bool finished_ = false;
  size_t part_ = 0;
  size_t object_ = 0;     // index in the current part's group
  bool started_ = false;  // the current object's fields are written
  size_t chunk_ = 0;
  size_t offset_ = 0;
};

void FetchResponder::pump() {
  static constexpr size_t kChunk = 16 * 1024;
  while (stream_ != nullptr && !finished_) {
    if (part_ == parts_.size()) {
      completed_ = true;
      stream_->set_visitor(nullptr);
      stream_->finish();
      stream_->release();
      stream_ = nullptr;
      finish();
      return;
    }
    const Part& p = parts_[part_];
    if (!started_ && object_ < p.first) {
      object_ = p.first;
    }
    if (object_ >= p.end) {
      ++part_;
      object_ = 0;
      continue;
    }
    const model::Object& o = p.group->objects()[object_];
    size_t cap = stream_->write_capacity();
    if (cap == 0) {
      return;
    }
    if (!started_) {
      wi::FetchObject fo;
      fo.group = p.group->sequence();
      fo.subgroup = p.group->subgroup();
      fo.object = o.id;
      fo.publisher_priority = priority_;
      fo.payload_length = o.size;
      if (!o.extensions.empty()) {
        // The producer's block as the SUBGROUP writer sends it: its bytes when both drafts write
        // it alike, else the same pairs in this draft's form. One this draft cannot write ends
        // the FETCH stream (a reset), as the SUBGROUP writer resets the group.
        const wi::Draft& to = svc_.session().row();
        const wi::Draft* from = wi::draft(static_cast<wire::Version>(0xff000000u + o.extensions_draft));
        std::span<const uint8_t> raw(o.extensions.data(), o.extensions.size());
        if (from != nullptr && wi::same_property_encoding(*from, to)) {
          fo.extensions.assign(reinterpret_cast<const char*>(raw.data()), raw.size());
        } else {
          std::vector<uint8_t> block;
          if (from == nullptr || !wi::transcode_properties(*from, to, raw, block)) {
            MOQD_LOG(kInfo, "fetch %llu: object %llu/%llu's extensions cannot be written in draft %u; "
                     "the stream is reset", static_cast<unsigned long long>(request_id_),
                     static_cast<unsigned long long>(fo.group), static_cast<unsigned long long>(o.id),
                     to.number);
            close_stream(kResetInternal);
            finish();
            return;
          }
          fo.extensions.assign(block.begin(), block.end());
        }
      } else if (stamp_) {
        // As the SUBGROUP writer stamps them (DownstreamSubscription::object_properties).
        object_timestamp_block(svc_.session().row(), o.timestamp, stamp_scratch_);
        fo.extensions.assign(stamp_scratch_.begin(), stamp_scratch_.end());
      }
      std::vector<uint8_t> out;
      wi::encode_fetch_object(svc_.session().draft(), fo, previous_ ? &*previous_ : nullptr,
                              descending_, out);
      previous_ = fo;
      stream_->write(Bytes::from(out));
      started_ = true;
      chunk_ = 0;
      offset_ = 0;
      continue;
    }
    if (chunk_ < o.chunks.size()) {
      const Bytes& c = o.chunks[chunk_];
      size_t n = std::min({cap, kChunk, c.size() - offset_});
      stream_->write(c.slice(offset_, n));
      offset_ += n;
      if (offset_ == c.size()) {
        ++chunk_;
        offset_ = 0;
      }
      continue;
    }
    if (o.is_complete()) {
      ++object_;
      started_ = false;
      continue;
    }
    if (p.group->is_aborted() || track_ == nullptr) {
      close_stream(kResetInternal);  // the rest of the object will never arrive
      finish();
    }
    return;  // the rest of the object is still on its way
  }
}

// ---------------------------------------------------------------------------------------------

// A FETCH resolved against the track: the objects it returns and FETCH_OK's End Location.
struct FetchService::Range {
  model::Track* track = nullptr;
  std::vector<FetchResponder::Part> parts;
  wi::Location end;
  bool descending = false;
  std::optional<wi::Location> last_collected;  // the largest location in `parts`
};

FetchService::FetchService(FetchContext& s) : session_(s) {}

FetchService::~FetchService() {
  session_.timers().cancel(sweep_);
  live_.clear();
  retired_.clear();
}

void FetchService::retire(FetchResponder* r) {
  std::erase(waiting_, r);
  session_.end_request(r->request_id(), !r->completed());
  auto it = live_.find(r->request_id());
  if (it != live_.end() && it->second.get() == r) {
    retired_.push_back(std::move(it->second));
    live_.erase(it);
  }
  if (sweep_ == 0) {
    sweep_ = session_.timers().schedule(Duration::zero(), [this] {
      sweep_ = 0;
      auto done = std::move(retired_);
      retired_.clear();
    });
  }
}

void FetchService::on_session_closed() {
  for (auto& [id, r] : live_) {
    r->on_session_closed();
  }
  for (auto& r : retired_) {
    r->on_session_closed();
  }
  waiting_.clear();
}

void FetchService::on_streams_available() {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (FetchResponder* r : waiting) {
    if (!session_.is_closed() && !r->open()) {
      waiting_.push_back(r);
    }
  }
}

void FetchService::refuse(uint64_t request_id, uint64_t code, const char* reason) {
  MOQD_LOG(kInfo, "session %llu fetch %llu refused code=0x%llx: %s",
           static_cast<unsigned long long>(session_.id()),
           static_cast<unsigned long long>(request_id), static_cast<unsigned long long>(code),
           reason);
  wi::RequestError e;
  e.type = session_.row().request_ok ? wi::MessageType::kRequestError : wi::MessageType::kFetchError;
  e.request_id = request_id;
  e.error_code = code;
  e.reason = reason;
  session_.send_control(e);
}

// The track and range a FETCH names, before they meet the cache.
struct FetchService::Request {
  model::Track* track = nullptr;
  std::optional<wi::Location> largest;
  wi::Location start;
  wi::Location end;  // "the end plus 1" (§9.16): Object 0 is the whole End Group
  bool to_largest = false;  // d20: no End in the filter, the range ends at the largest object
};

std::optional<FetchService::Request> FetchService::standalone(const wi::Fetch& m) {
  const Codes c = codes(session_.row());
  auto peer = wi::to_path(m.ns);
  std::string full = peer ? session_.to_full(*peer) : std::string();
  if (!peer || !session_.handler().authorize(Action::kSubscribe, full, session_.query())) {
    refuse(m.request_id, peer ? c.unauthorized : c.does_not_exist,
           peer ? "unauthorized" : "namespace has no moqd path");
    return std::nullopt;
  }
  Request q;
  q.track = session_.origin().track(full, m.track);
  if (q.track == nullptr) {
    refuse(m.request_id, c.does_not_exist, "track not found");
    return std::nullopt;
  }
  q.largest = largest_location(*q.track);
  q.start = m.start;
  q.end = m.end;
  if (session_.row().filter_fields && !filter_range(m, q)) {
    return std::nullopt;
  }
  // §9.16: End Location MUST be the same or larger than Start Location.
  if (q.end.group < q.start.group ||
      (q.end.group == q.start.group && q.end.object != 0 && q.end.object < q.start.object)) {
    refuse(m.request_id, c.invalid_range, "end before start");
    return std::nullopt;
  }
  return q;
}

std::optional<FetchService::Request> FetchService::joining(const wi::Fetch& m) {
  const Codes c = codes(session_.row());
  DownstreamSubscription* s = session_.downstream(m.joining_request_id);
  if (s == nullptr) {
    refuse(m.request_id, c.invalid_joining, "no such subscription");
    return std::nullopt;
  }
  const wi::Draft& d = session_.row();
  if (!d.request_streams && !subscription_is_largest_object(*s)) {
    session_.fail(wi::TerminationCode::kProtocolViolation,
                  "joining FETCH of a subscription whose filter is not Largest Object");
    return std::nullopt;
  }
  if (d.request_streams && !subscription_forward(*s)) {
    // d17 §9.14.2: a violation; d18 §10.12.2 and later: INVALID_RANGE.
    if (d.number == 17) {
      session_.fail(wi::TerminationCode::kProtocolViolation,
                    "joining FETCH of a subscription with Forward State 0");
    } else {
      refuse(m.request_id, c.invalid_range, "the joined subscription does not forward");
    }
    return std::nullopt;
  }
  Request q;
  q.track = subscription_track(*s);
  q.largest = subscription_largest(*s);
  if (q.track == nullptr) {
    refuse(m.request_id, c.does_not_exist, "the subscription's track ended");
    return std::nullopt;
  }
  if (q.largest) {
    // §9.16.2 Joining Fetch Range Calculation.
    const wi::Location& l = *q.largest;
    q.end = wi::Location{l.group, l.object + 1};
    if (!d.filter_fields) {
      q.start.group = m.type == wi::FetchType::kRelativeJoining
                          ? l.group - std::min(l.group, m.joining_start)
                          : m.joining_start;
    } else {
      // d20 §10.13.2.1: StartGroup from LOCATION_FILTER (absent: 0); relative is
      // {Joining Location.Group + 1 - StartGroup, 0}, clamped at 0.
      uint64_t start_group = 0;
      if (m.filter) {
        const wi::Filter& f = *m.filter;
        start_group = f.type == wi::FilterType::kRelative          ? f.relative_groups
                      : f.type == wi::FilterType::kAbsoluteStart ||
                              f.type == wi::FilterType::kAbsoluteRange
                          ? f.start.group
                          : 0;
      }
      q.start.group = m.type == wi::FetchType::kRelativeJoining
                          ? (l.group + 1) - std::min(l.group + 1, start_group)
                          : start_group;
    }
  }
  return q;
}

bool FetchService::filter_range(const wi::Fetch& m, Request& q) {
  const std::optional<wi::Location>& l = q.largest;
  q.start = wi::Location{};
  q.to_largest = true;
  if (l) {
    q.end = wi::Location{l->group, l->object + 1};
  }
  if (!m.filter || m.filter->type == wi::FilterType::kUnfiltered) {
    return true;  // §5.1.2: without a filter, {0, 0} up to the largest object
  }
  const wi::Filter& f = *m.filter;
  switch (f.type) {
    case wi::FilterType::kNextGroupStart:
    case wi::FilterType::kRelative:
      if (l) {
        const uint64_t back = f.type == wi::FilterType::kRelative ? f.relative_groups : 0;
        q.start.group = (l->group + 1) - std::min(l->group + 1, back);
      }
      break;
    case wi::FilterType::kLargestObject:
      if (l) {
        q.start = wi::Location{l->group, l->object + 1};  // Next Object: past the largest
      }
      break;
    case wi::FilterType::kAbsoluteStart:
      q.start = f.start;
      break;
    case wi::FilterType::kAbsoluteRange:
      q.start = f.start;
      if (f.end_group > kMaxVarint - f.start.group) {
        // §5.1.2: StartGroup + EndGroupDelta past 2^64-1 (here: moqd's 2^62-1) closes the session.
        session_.fail(wi::TerminationCode::kProtocolViolation, "EndGroupDelta overflows");
        return false;
      }
      q.to_largest = false;
      q.end = f.end_object ? wi::Location{f.start.group + f.end_group, *f.end_object + 1}
                           : wi::Location{f.start.group + f.end_group, 0};
      break;
    default:
      break;
  }
  return true;
}

std::optional<FetchService::Range> FetchService::resolve(const wi::Fetch& m) {
  std::optional<Request> q = m.type == wi::FetchType::kStandalone ? standalone(m) : joining(m);
  if (!q) {
    return std::nullopt;
  }
  const Codes c = codes(session_.row());
  if (!q->largest) {
    refuse(m.request_id, c.invalid_range, "no objects published yet");
    return std::nullopt;
  }
  const wi::Location& largest = *q->largest;
  if (before(largest, q->start)) {
    refuse(m.request_id, c.invalid_range, "start beyond the largest object");
    return std::nullopt;
  }
  // The last object returned: the requested one, or the largest if that comes first (§9.16:
  // objects not yet published are not retrieved).
  const bool whole_end_group = q->end.object == 0;
  wi::Location last = whole_end_group ? wi::Location{q->end.group, UINT64_MAX}
                                      : wi::Location{q->end.group, q->end.object - 1};
  const bool beyond = before(largest, last);
  if (beyond) {
    last = largest;
  }
  Range r;
  r.track = q->track;
  r.descending = m.group_order == 2;
  // §9.17 FETCH_OK End Location.
  r.end = beyond            ? wi::Location{largest.group, largest.object + 1}
          : whole_end_group ? wi::Location{q->end.group, 0}
                            : q->end;
  collect(r, q->start, last);
  if (session_.row().filter_fields) {
    // d20 §10.14: End Location is the end of the range covered, inclusive (the filter's form).
    r.end = beyond || q->to_largest ? largest
            : whole_end_group       ? r.last_collected.value_or(wi::Location{q->end.group, 0})
                                    : last;
    if (r.last_collected && before(r.end, *r.last_collected)) {
      r.end = *r.last_collected;
    }
  }
  return r;
}

void FetchService::collect(Range& r, const wi::Location& start, const wi::Location& last) {
  r.track->for_each_group_from(0, [&](const model::GroupRef& g) {
    const uint64_t seq = g->sequence();
    const size_t n = g->objects().size();
    if (seq < start.group || seq > last.group || n == 0) {
      return;
    }
    size_t first = seq == start.group ? static_cast<size_t>(std::min<uint64_t>(start.object, n)) : 0;
    size_t stop = seq == last.group ? static_cast<size_t>(std::min<uint64_t>(last.object, n - 1) + 1) : n;
    if (first < stop) {
      r.parts.push_back(FetchResponder::Part{g, first, stop});
      const wi::Location l{seq, stop - 1};
      if (!r.last_collected || before(*r.last_collected, l)) {
        r.last_collected = l;
      }
    }
  });
  // Groups in the fetch's order; the subgroups of a group ascending, whichever arrived first, so
  // the objects of a group come in a fixed order (each subgroup's ids ascending).
  std::stable_sort(r.parts.begin(), r.parts.end(), [&](const auto& a, const auto& b) {
    if (a.group->sequence() != b.group->sequence()) {
      return r.descending ? a.group->sequence() > b.group->sequence()
                          : a.group->sequence() < b.group->sequence();
    }
    return a.group->subgroup() < b.group->subgroup();
  });
}

void FetchService::on_fetch(const wi::Fetch& m) {
  if (!session_.accept_peer_request_id(m.request_id)) {
    return;
  }
  if (has_range_filter(m.params)) {
    refuse(m.request_id, codes(session_.row()).not_supported, "range filters are not applied");
    return;
  }
  if (live_.size() >= session_.config().limits.max_subscriptions) {
    // Each FETCH in flight holds its groups past cache eviction: bounded like subscriptions.
    refuse(m.request_id, kInternalError, "too many fetches in flight");
    return;
  }
  std::optional<Range> r = resolve(m);
  if (!r || session_.is_closed()) {
    return;
  }
  if (r->parts.empty() && !session_.row().request_ok) {
    refuse(m.request_id, kNoObjects, "no objects in the range");  // d14 §9.16
    return;
  }
  serve(m, *r);
}

void FetchService::serve(const wi::Fetch& m, const Range& r) {
  wi::FetchOk ok;
  ok.request_id = m.request_id;
  ok.group_order = r.descending ? 2 : 1;
  ok.end_of_track = false;  // the origin hands out live tracks only
  ok.end = r.end;
  // d16 §9.17 / d18 §10.13 / d20 §10.14: FETCH_OK ends with the Track Properties SUBSCRIBE_OK
  // declares (none while a moq-lite-05 source still asks its publisher for them: the cache is
  // served as it is, not held back).
  if (auto p = r.track->properties()) {
    ok.track_extensions = track_properties_block(session_.row(), *p);
  }
  const bool stamp = !ok.track_extensions.empty();
  session_.send_control(ok);
  auto responder = std::make_unique<FetchResponder>(*this, m.request_id, *r.track, r.parts,
                                                    m.subscriber_priority, r.descending, stamp);
  FetchResponder* raw = responder.get();
  live_[m.request_id] = std::move(responder);
  if (!raw->open()) {
    waiting_.push_back(raw);
  }
}

void FetchService::on_fetch_cancel(const wi::FetchCancel& m) {
  auto it = live_.find(m.request_id);
  if (it != live_.end()) {
    it->second->cancel();  // d14 §9.18: close the stream promptly
  }
}

std::vector<wi::Parameter> FetchService::largest_param(const std::optional<wi::Location>& l) {
  std::vector<wi::Parameter> params;
  if (l) {
    // d16 §9.2.2.9 LARGEST_OBJECT: a length-prefixed Location.
    std::vector<uint8_t> loc;
    wi::write_varint(session_.row().varint_form, l->group, loc);
    wi::write_varint(session_.row().varint_form, l->object, loc);
    params.push_back(wi::Parameter{wi::kParamLargestObject, 0, std::string(loc.begin(), loc.end())});
  }
  return params;
}

void FetchService::on_track_status(const wi::TrackStatus& m) {
  const wi::Subscribe& q = m.request;
  if (!session_.accept_peer_request_id(q.request_id)) {
    return;
  }
  const bool d14 = !session_.row().request_ok;
  const Codes c = codes(session_.row());
  auto refuse_status = [&](uint64_t code, const char* why) {
    wi::RequestError e;
    e.type = d14 ? wi::MessageType::kTrackStatusError : wi::MessageType::kRequestError;
    e.request_id = q.request_id;
    e.error_code = code;
    e.reason = why;
    session_.send_control(e);
  };
  auto peer = wi::to_path(q.ns);
  if (!peer) {
    refuse_status(c.does_not_exist, "namespace has no moqd path");
    return;
  }
  std::string full = session_.to_full(*peer);
  if (!session_.handler().authorize(Action::kSubscribe, full, session_.query())) {
    refuse_status(c.unauthorized, "unauthorized");
    return;
  }
  model::Track* t = session_.origin().track(full, q.track);
  if (t == nullptr) {
    refuse_status(c.does_not_exist, "track not found");
    return;
  }
  const std::optional<wi::Location> largest = largest_location(*t);
  if (d14) {
    // d14 §9.18: SUBSCRIBE_OK's fields with Track Alias 0.
    wi::TrackStatusOk ok;
    ok.ok.request_id = q.request_id;
    ok.ok.track_alias = 0;
    ok.ok.group_order = 1;
    ok.ok.largest = largest;
    session_.send_control(ok);
    return;
  }
  // d15 §9.19, d16 §9.19: REQUEST_OK with what SUBSCRIBE_OK would carry.
  wi::RequestOk ok;
  ok.request_id = q.request_id;
  ok.params = largest_param(largest);
  session_.send_control(ok);
}

// d14 §9.10: End Group is the last group plus 1, 0 open-ended; it may not increase.
std::optional<Narrowing> FetchService::narrowing_of_fields(const wi::SubscribeUpdate& m,
                                                           const DownstreamSubscription& s) {
  Narrowing n;
  n.set_end = true;
  if (m.end_group != 0) {
    n.last_group = m.end_group - 1;
    if (*n.last_group < m.start.group) {
      session_.fail(wi::TerminationCode::kProtocolViolation, "End Group before Start");
      return std::nullopt;
    }
  }
  const auto current = subscription_last_group(s);
  if (current && (!n.last_group || *n.last_group > *current)) {
    session_.fail(wi::TerminationCode::kProtocolViolation, "SUBSCRIBE_UPDATE widens the end");
    return std::nullopt;
  }
  n.priority = m.subscriber_priority;
  n.forward = m.forward;
  return n;
}

// d15 §9.10, d16 §9.11: SUBSCRIBER_PRIORITY, FORWARD and SUBSCRIPTION_FILTER parameters.
std::optional<Narrowing> FetchService::narrowing_of_params(const wi::SubscribeUpdate& m) {
  Narrowing n;
  for (const wi::Parameter& p : m.params) {
    if ((p.type == wi::kParamSubscriberPriority && p.value > 255) ||
        (p.type == wi::kParamForward && p.value > 1)) {
      // d16 §9.2.2.3, §9.2.2.10: out of range closes the session.
      session_.fail(wi::TerminationCode::kProtocolViolation, "parameter value out of range");
      return std::nullopt;
    }
    if (p.type == wi::kParamSubscriberPriority) {
      n.priority = static_cast<uint8_t>(p.value);
    } else if (p.type == wi::kParamForward) {
      n.forward = p.value == 1;
    } else if (p.type == wi::kParamSubscriptionFilter) {
      // d16 §5.1.2 Subscription Filter: type, then Start for 3/4, End Group (inclusive) for 4;
      // d17 §5.1.2 and later: End Group Delta from the Start group; d20 §5.1.2: 0..4 fields, none
      // removing the filter (open-ended).
      const std::optional<wi::Filter> f = wi::decode_filter(session_.draft(), p.bytes);
      if (!f) {
        session_.fail(wi::TerminationCode::kProtocolViolation, "malformed subscription filter");
        return std::nullopt;
      }
      n.set_end = true;
      if (f->type == wi::FilterType::kAbsoluteRange) {
        const bool delta = session_.row().request_streams;
        if (delta && f->end_group > kMaxVarint - f->start.group) {
          session_.fail(wi::TerminationCode::kProtocolViolation, "End Group Delta overflows");
          return std::nullopt;
        }
        n.last_group = delta ? f->start.group + f->end_group : f->end_group;
        if (*n.last_group < f->start.group) {
          session_.fail(wi::TerminationCode::kProtocolViolation, "End Group before Start");
          return std::nullopt;
        }
      }
    }
  }
  return n;
}

void FetchService::on_subscribe_update(const wi::SubscribeUpdate& m) {
  if (!session_.accept_peer_request_id(m.request_id)) {
    return;
  }
  // From 17 the answer goes on the updated request's stream, found by its id.
  const uint64_t answer_id =
      session_.row().request_streams ? m.existing_request_id : m.request_id;
  DownstreamSubscription* s = session_.downstream(m.existing_request_id);
  if (s == nullptr && session_.row().request_ok && live_.count(m.existing_request_id) != 0) {
    // d16 §9.11, d17 §9.10: a REQUEST_UPDATE of a FETCH in flight (its priority): accepted; moqd's
    // FETCH streams keep the priority they began with.
    wi::RequestOk ok;
    ok.request_id = answer_id;
    session_.send_control(ok);
    return;
  }
  if (s == nullptr) {
    // d14 §9.10, d16 §9.11: an update of a request that does not exist.
    session_.fail(wi::TerminationCode::kProtocolViolation, "SUBSCRIBE_UPDATE of an unknown subscription");
    return;
  }
  std::optional<Narrowing> n = session_.row().subscribe_params ? narrowing_of_params(m)
                                                               : narrowing_of_fields(m, *s);
  if (!n) {
    return;  // the session failed
  }
  if (session_.row().request_ok) {
    // d15 §9.10, d16 §9.11, d17 §9.10, d18 §10.9: exactly one REQUEST_OK, with LARGEST_OBJECT
    // (before a PUBLISH_DONE the narrowing may send at once).
    wi::RequestOk ok;
    ok.request_id = answer_id;
    model::Track* t = subscription_track(*s);
    ok.params = largest_param(t != nullptr ? largest_location(*t) : std::nullopt);
    session_.send_control(ok);
  }
  narrow_subscription(*s, *n);
}

}  // namespace moqd::session::ietf_detail
