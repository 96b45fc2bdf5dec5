#pragma once
// What the files of IetfSession share: ietf_session.cc and the files split from it by concern
// (ietf_control.cc, ietf_namespaces.cc, ietf_upstream.cc, ietf_request_streams.cc, ietf_client.cc).
// The request-id window and the error codes they answer with, and the handlers more than one of
// them creates or reaches (PendingStream, UpstreamSubscription, NamespaceAnnouncer); like those of
// ietf_handlers.h, each holds only its context (ietf_context.h). Internal to those files.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "model/path.h"
#include "session/ietf_cluster.h"
#include "session/ietf_datagram.h"
#include "session/ietf_fetch.h"
#include "session/ietf_handlers.h"
#include "session/ietf_publish.h"
#include "wire/ietf_namespace.h"
#include "wire/ietf_properties.h"

namespace moqd::session::ietf_detail {

// Request ids granted at once (MAX_REQUEST_ID), and the headroom below which more are granted.
inline constexpr uint64_t kRequestIdWindow = 1024;

// REQUEST_ERROR / SUBSCRIBE_ERROR codes (draft-14 §9.8, draft-16 §9.8 table).
inline constexpr uint64_t kErrInternal = 0x0;
inline constexpr uint64_t kErrUnauthorized = 0x1;
inline constexpr uint64_t kErrNotSupported = 0x3;
// "Does not exist": d14 SUBSCRIBE_ERROR TRACK_DOES_NOT_EXIST (§9.8) is 0x4; d15+ REQUEST_ERROR
// DOES_NOT_EXIST is 0x10 (d16 §13.1.3; 0x4 there is MALFORMED_AUTH_TOKEN).
inline uint64_t does_not_exist(const wi::Draft& d) { return d.request_ok ? 0x10 : 0x4; }
inline constexpr uint64_t kErrDuplicate = 0x5;  // PUBLISH_NAMESPACE of a namespace already announced

// The request id of a request we queue for its own stream (drafts 17+): SUBSCRIBE or, in the
// client role, PUBLISH_NAMESPACE.
inline uint64_t request_id_of(const wire::ietf::ControlMessage& m) {
  if (const auto* s = std::get_if<wire::ietf::Subscribe>(&m)) {
    return s->request_id;
  }
  if (const auto* p = std::get_if<wire::ietf::PublishNamespace>(&m)) {
    return p->request_id;
  }
  if (const auto* p = std::get_if<wire::ietf::Publish>(&m)) {
    return p->request_id;
  }
  return 0;
}

// A peer stream whose role is not known yet: a bidi stream before the control stream is the
// control stream; later bidi streams (d16) carry SUBSCRIBE_NAMESPACE; uni streams carry SUBGROUPs.
class PendingStream final : public HandlerOf<ControlContext> {
 public:
  PendingStream(ControlContext& s, transport::Stream& stream) : HandlerOf(s) { attach(stream); }
  void on_readable() override;
  void on_ready() override { on_readable(); }
};

// One upstream subscription: the relay reads a track of a broadcast the peer published.
class UpstreamSubscription final : public model::TrackSource {
 public:
  UpstreamSubscription(UpstreamContext& s, std::string path, std::string name)
      : session_(s), path_(std::move(path)), name_(std::move(name)) {}
  ~UpstreamSubscription() override {
    session_.timers().cancel(done_timer_);
    session_.timers().cancel(grace_timer_);
  }

  model::Track* track() const { return track_; }
  std::optional<uint64_t> request_id() const { return request_id_; }

  void start_track(model::Track& track) override {
    track_ = &track;
    if (published_) {
      // The PUBLISH's Track Properties, read as SUBSCRIBE_OK's are (on_ok).
      track.set_properties(properties_of(published_properties_));
      // The peer's PUBLISH already made the subscription: its request id and alias stay.
      done_count_.reset();
      open_readers_ = 0;
      streams_seen_ = 0;
      grace_over_ = false;
      return;
    }
    request_id_.reset();
    alias_.reset();
    done_count_.reset();
    open_readers_ = 0;
    streams_seen_ = 0;
    grace_over_ = false;
    track.expect_properties();  // until SUBSCRIBE_OK (on_ok): its TIMESCALE, if any
    session_.request_upstream(this);
  }
  void stop_track(model::Track&) override {
    track_ = nullptr;
    session_.timers().cancel(done_timer_);
    session_.timers().cancel(grace_timer_);
    done_timer_ = 0;
    grace_timer_ = 0;
    if (request_id_ && !session_.is_closed()) {
      session_.send_control(wi::Unsubscribe{*request_id_});
    }
    session_.forget_upstream(this);
    request_id_.reset();
    alias_.reset();
    published_ = false;
  }
  // PUBLISH: the peer subscribed us under `alias`; start_track binds without a SUBSCRIBE.
  // `properties`: the PUBLISH's Track Properties block (d16 Track Extensions), raw.
  void adopt_publish(uint64_t request_id, uint64_t alias, std::string properties) {
    published_ = true;
    request_id_ = request_id;
    alias_ = alias;
    published_properties_ = std::move(properties);
  }
  void drop_publish() {
    published_ = false;
    request_id_.reset();
    alias_.reset();
    published_properties_.clear();
  }

  // Sends SUBSCRIBE once a request id is available; false while blocked.
  bool send_subscribe() {
    if (track_ == nullptr || request_id_) {
      return true;
    }
    auto id = session_.take_request_id();
    if (!id) {
      return false;
    }
    request_id_ = id;
    auto peer = session_.to_peer(path_);
    auto ns = wi::to_namespace(peer ? *peer : path_);
    wi::Subscribe m;
    m.request_id = *id;
    m.ns = std::move(ns);
    m.track = name_;
    m.subscriber_priority = track_->priority().value_or(session_.config().upstream_priority);
    m.group_order = 0;
    m.forward = true;
    m.filter = wi::Filter{wi::FilterType::kLargestObject, {}, 0};
    if (session_.row().filter_fields) {
      // d20: "0 0" is Next Object, which @moq/net serves from the middle of the current group;
      // relative 1 is the current group from its first object (what @moq/net itself sends).
      m.filter->type = wi::FilterType::kRelative;
      m.filter->relative_groups = 1;
    }
    session_.send_control(m);
    return true;
  }

  // SUBSCRIBE_OK: the alias, and the Track Properties (17+): a TIMESCALE (0x08) gives the units
  // of the publisher's object Timestamps, which moqd then knows and passes on (to IETF
  // subscribers as TIMESCALE, to moq-lite-05 ones in TRACK_INFO); without one they are unknown.
  // The same for a PUBLISH's Track Properties (d18 §10.10, d20 §10.11).
  void on_ok(uint64_t alias, const std::string& properties) {
    alias_ = alias;
    if (track_ == nullptr) {
      return;
    }
    track_->set_properties(properties_of(properties));
  }
  void on_error(const wi::RequestError& e) {
    // The refused request is over: the track's end (stop_track) must not UNSUBSCRIBE it.
    request_id_.reset();
    if (track_ != nullptr) {
      MOQD_LOG(kInfo, "session %llu upstream subscribe path=%s track=%s refused code=%llu reason=%s",
               static_cast<unsigned long long>(session_.id()), path_.c_str(), name_.c_str(),
               static_cast<unsigned long long>(e.error_code), e.reason.c_str());
      track_->end(make_error(ErrorCode::kNotFound, "publisher refused the subscription"));
    }
  }
  void on_publish_done(const wi::PublishDone& d) {
    // PUBLISH_DONE's Stream Count says how many SUBGROUP streams the publisher opened; @moq/net
    // writes 0 ("not counted"), and may write PUBLISH_DONE right after its last group, before
    // the streams of its last groups have arrived (they travel apart from the control stream).
    // The track ends once that many arrived and none is still being read, or, for 0, once no
    // stream for the track has started or ended for kQuiet and none is read; at the latest when
    // no stream activity has been seen for kLatest (a stream reset before its header arrived
    // never shows up). Both timers restart on every stream of the track (arm_done_timers).
    done_count_ = d.stream_count;
    if (d.stream_count == kUncounted62 || d.stream_count == kUncounted64) {
      // d14..19 (d18 §10.11): "unable to set Stream Count to the exact number of streams" is
      // 2^62-1; d20 (#1831, §10.12) made it 2^64-1, and a d20 peer may still write the old value.
      // Either is no count: waited for as 0 is (the quiet grace), not for the kLatest bound.
      done_count_ = 0;
    }
    arm_done_timers();
    maybe_end();
  }
  void on_reader_started() {
    ++open_readers_;
    ++streams_seen_;
    arm_done_timers();
  }
  void on_reader_done() {
    if (open_readers_ > 0) {
      --open_readers_;
    }
    arm_done_timers();
    maybe_end();
  }
  std::optional<uint64_t> alias() const { return alias_; }
  void on_session_closed() {
    if (track_ != nullptr) {
      model::Track* t = track_;
      t->end(make_error(ErrorCode::kClosed, "publisher session closed"));
    }
  }

 private:
  // After PUBLISH_DONE: (re)starts the quiet grace (Stream Count 0) and the latest end. An
  // @moq/net d16 publisher that ended right after several large groups lost frames in 2 runs of
  // 8 when the grace was a fixed 200 ms from PUBLISH_DONE (docs/ARCHITECTURE.md).
  static constexpr std::chrono::milliseconds kQuiet{750};
  static constexpr uint64_t kUncounted62 = (uint64_t{1} << 62) - 1;
  static constexpr uint64_t kUncounted64 = UINT64_MAX;
  static constexpr std::chrono::seconds kLatest{5};
  void arm_done_timers() {
    if (track_ == nullptr || !done_count_) {
      return;
    }
    if (*done_count_ == 0) {
      grace_over_ = false;
      session_.timers().cancel(grace_timer_);
      grace_timer_ = session_.timers().schedule(kQuiet, [this] {
        grace_timer_ = 0;
        grace_over_ = true;
        maybe_end();
      });
    }
    session_.timers().cancel(done_timer_);
    done_timer_ = session_.timers().schedule(kLatest, [this] {
      done_timer_ = 0;
      if (track_ != nullptr) {
        track_->end(make_error(ErrorCode::kCancel, "publisher ended the track"));
      }
    });
  }
  // The track's properties as a Track Properties block (SUBSCRIBE_OK's or PUBLISH's) gives them:
  // its TIMESCALE on 17+, else timestamps in units moqd does not know.
  model::TrackProperties properties_of(const std::string& block) const {
    model::TrackProperties props;
    props.timescale_known = false;
    if (session_.row().number >= 17) {
      if (auto ts = track_timescale(block)) {
        props.timescale = *ts;
        props.timescale_known = true;
      }
    }
    return props;
  }
  // TIMESCALE (0x08) in a Track Properties block (delta-coded Key-Value-Pairs to the end);
  // nullopt when absent, 0, or the block does not parse.
  std::optional<uint64_t> track_timescale(const std::string& block) const {
    const wi::VarintForm f = session_.row().varint_form;
    std::span<const uint8_t> in(reinterpret_cast<const uint8_t*>(block.data()), block.size());
    uint64_t type = 0;
    std::optional<uint64_t> found;
    while (!in.empty()) {
      auto t = wi::read_varint(f, in);
      if (!t || !t->has_value() || (*t)->value > (uint64_t{1} << 62) - 1 - type) {
        return std::nullopt;
      }
      in = in.subspan((*t)->consumed);
      type += (*t)->value;
      auto v = wi::read_varint(f, in);
      if (!v || !v->has_value()) {
        return std::nullopt;
      }
      in = in.subspan((*v)->consumed);
      if ((type & 1) != 0) {
        if ((*v)->value > in.size()) {
          return std::nullopt;
        }
        in = in.subspan(static_cast<size_t>((*v)->value));
      } else if (type == 0x08 && (*v)->value != 0) {
        found = (*v)->value;
      }
    }
    return found;
  }
  void maybe_end() {
    if (track_ != nullptr && done_count_ && open_readers_ == 0 &&
        (*done_count_ == 0 ? grace_over_ : streams_seen_ >= *done_count_)) {
      track_->end(make_error(ErrorCode::kCancel, "publisher ended the track"));
    }
  }

  UpstreamContext& session_;
  std::string path_;
  std::string name_;
  model::Track* track_ = nullptr;
  std::optional<uint64_t> request_id_;
  std::optional<uint64_t> alias_;
  std::optional<uint64_t> done_count_;
  uint64_t open_readers_ = 0;
  uint64_t streams_seen_ = 0;
  bool grace_over_ = false;
  bool published_ = false;  // fed by the peer's PUBLISH (ietf_publish.h)
  std::string published_properties_;  // that PUBLISH's Track Properties
  TimerId done_timer_ = 0;
  TimerId grace_timer_ = 0;
};

// SUBSCRIBE_NAMESPACE answered from the origin: the peer hears of broadcasts under its prefix.
// d14: as PUBLISH_NAMESPACE / PUBLISH_NAMESPACE_DONE on the control stream; d15: NAMESPACE /
// NAMESPACE_DONE on the control stream; d16: the same on the request's own bidi stream.
class NamespaceAnnouncer final : public HandlerOf<NamespaceContext>, public model::AnnounceListener {
 public:
  // `publish`: announce with PUBLISH_NAMESPACE in every draft (a client-role session publishing
  // its origin's broadcasts to the relay), not as answers to a SUBSCRIBE_NAMESPACE.
  NamespaceAnnouncer(NamespaceContext& s, transport::Stream* own, std::string full_prefix,
                     size_t prefix_fields, bool publish = false)
      : HandlerOf(s),
        full_prefix_(std::move(full_prefix)),
        prefix_fields_(prefix_fields),
        publish_(publish) {
    if (own != nullptr) {
      attach(*own);
      own_stream_ = true;
    }
  }
  ~NamespaceAnnouncer() override { stop(); }
  // What the peer's Subscribe Options asked for (d16/17; before 16 NAMESPACE only, 18+'s
  // SUBSCRIBE_TRACKS is not served): NAMESPACE messages, PUBLISH of the live tracks (with FORWARD
  // `forward`), or both. Set before begin().
  void want(bool namespaces, bool tracks, bool forward) {
    namespaces_ = namespaces;
    tracks_ = tracks;
    forward_ = forward;
  }
  void begin() {
    listening_ = true;
    session_.count_namespace_listener(true);
    session_.origin().add_listener(full_prefix_, this);
    if (tracks_ && listening_) {
      // The tracks already live; later ones come through on_track().
      for (const auto& [path, name] : session_.origin().live_tracks(full_prefix_)) {
        if (!listening_ || session_.is_closed()) {
          break;
        }
        session_.offer_track(path, name, forward_);
      }
    }
  }
  void stop() {
    if (listening_) {
      listening_ = false;
      session_.count_namespace_listener(false);
      session_.origin().remove_listener(this);
    }
  }
  void on_session_closed() override {
    stop();
    Handler::on_session_closed();
  }
  void on_readable() override {
    if (stream_ == nullptr) {
      return;
    }
    // Nothing more is expected on a d16 SUBSCRIBE_NAMESPACE stream; its FIN or reset ends it.
    stream_->consume(stream_->peek().size());
    if (stream_->is_fin_received()) {
      stop();
      stream_->finish();
      done();
    }
  }
  void on_reset(uint64_t) override {
    stop();
    done();
  }
  void on_stop_sending(uint64_t) override {
    stop();
    done();
  }

  void on_announce(const std::string& path, bool active, const model::Hops& hops) override;
  void on_track(const std::string& path, const std::string& name) override {
    if (tracks_ && listening_ && !session_.is_closed()) {
      session_.offer_track(path, name, forward_);
    }
  }

 private:
  std::string full_prefix_;
  std::map<std::string, wire::ietf::Advert> adverts_;  // cluster extension: what each path last carried
  size_t prefix_fields_;
  bool own_stream_ = false;
  bool publish_ = false;
  bool namespaces_ = true;
  bool tracks_ = false;
  bool forward_ = true;
  bool listening_ = false;
  std::set<std::string> sent_;
  std::map<std::string, uint64_t> d14_ids_;  // path -> our PUBLISH_NAMESPACE request id
};

}  // namespace moqd::session::ietf_detail
