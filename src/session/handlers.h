#pragma once
// The per-stream state machines of a moq-lite session. Internal to the session layer. Each holds,
// as `session_`, the narrowest context (lite_context.h) its kind needs, never the Session: a
// handler can be driven on a fake stream with a fake context (lite_handlers_test.cc).
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/group.h"
#include "model/origin.h"
#include "model/track.h"
#include "session/lite_context.h"
#include "transport/transport.h"
#include "wire/lite.h"

namespace moqd::session {

struct TrafficCounters;

// Base of the per-stream state machines. Owned by the session (LiteContext::adopt); destroyed
// after HandlerContext::retire, or when the session ends.
class StreamHandler : public transport::StreamVisitor {
 public:
  explicit StreamHandler(HandlerContext& ctx) : base_ctx_(ctx) {}
  ~StreamHandler() override = default;
  // Called when the session ends: drop every reference into the transport (overrides call this).
  virtual void on_session_closed() { stream_ = nullptr; }
  // Called once SETUP completes, for handlers that held their stream until then.
  virtual void on_session_ready() {}
  void on_writable() override {}
  void on_reset(uint64_t) override { finish(); }
  void on_stop_sending(uint64_t) override { finish(); }

  bool is_retired() const { return retired_; }
  // For HandlerContext::retire: marks this handler retired; false when it already was.
  bool mark_retired() { return !std::exchange(retired_, true); }

 protected:
  // Releases the stream (if any) and retires this handler.
  void finish() {
    if (stream_ != nullptr) {
      stream_->set_visitor(nullptr);
      stream_->release();
      stream_ = nullptr;
    }
    base_ctx_.retire(this);
  }
  void attach(transport::Stream& stream) {
    stream_ = &stream;
    stream.set_visitor(this);
  }
  // Decodes one message from the stream's buffer with `decode`; on success consumes its bytes.
  // Returns nullopt on need-more or after failing the session.
  template <class T, class F>
  std::optional<T> read_message(F&& decode);
  void write_bytes(std::vector<uint8_t> bytes) { stream_->write(Bytes::from(bytes)); }

  transport::Stream* stream_ = nullptr;

 private:
  HandlerContext& base_ctx_;
  bool retired_ = false;
};

// A handler of one kind, holding the context that kind may use.
template <class Ctx>
class HandlerOf : public StreamHandler {
 protected:
  explicit HandlerOf(Ctx& ctx) : StreamHandler(ctx), session_(ctx) {}
  Ctx& session_;  // the session, as this kind of handler sees it
};

template <class T, class F>
std::optional<T> StreamHandler::read_message(F&& decode) {
  if (stream_ == nullptr) {
    return std::nullopt;
  }
  auto r = decode(stream_->peek());
  if (!r) {
    base_ctx_.fail(r.error());
    return std::nullopt;
  }
  if (!r->has_value()) {
    if (stream_->has_peer_fin()) {
      // The peer ended the stream in the middle of a message.
      base_ctx_.fail(make_error(ErrorCode::kDecode, "truncated message"));
    }
    return std::nullopt;
  }
  stream_->consume((*r)->consumed);
  return std::move((*r)->value);
}

// A stream whose type is not known yet: waits for the type (a varint on bidi streams, a byte on
// uni streams) and hands the stream to the handler for that type.
class PendingStream final : public HandlerOf<LiteContext> {
 public:
  PendingStream(LiteContext& ctx, transport::Stream& stream);
  void on_readable() override;
  void on_session_ready() override { on_readable(); }
};

// Server side of the compat SETUP (0x20/0x21) on the first bidi stream; the stream then stays open
// as the lite-01/02 session stream (SESSION_INFO is read and ignored; it is never reset).
class SetupServer final : public HandlerOf<ControlContext> {
 public:
  SetupServer(ControlContext& ctx, transport::Stream& stream);
  void on_readable() override;
  void on_reset(uint64_t code) override;

 private:
  bool done_ = false;
};

// Client side of the compat SETUP.
class SetupClient final : public HandlerOf<ControlContext> {
 public:
  SetupClient(ControlContext& ctx, transport::Stream& stream);
  void on_readable() override;
  void on_reset(uint64_t code) override;

 private:
  bool done_ = false;
};

// lite-05: the peer's uni SETUP stream. Its SETUP is decoded (a malformed one closes the session)
// and its Origin kept; the stream ends with the peer's FIN.
class LiteSetupReceiver final : public HandlerOf<ControlContext> {
 public:
  LiteSetupReceiver(ControlContext& ctx, transport::Stream& stream);
  void on_readable() override;
  void on_reset(uint64_t) override { finish(); }

 private:
  bool done_ = false;
};

// lite-05 TRACK stream (bidi type 6) opened by the peer: answers TRACK_INFO from the origin's
// track and FINs. When the track's properties are still being asked of its publisher (a lite-05
// publisher's TRACK_INFO, or another worker's), it listens to the track until they arrive
// (provisional ones, TrackProperties::provisional, are not the publisher's and are not answered);
// it resets the stream for an unknown track, or when the track ends first.
class TrackResponder final : public HandlerOf<ServeContext>, public model::TrackListener {
 public:
  TrackResponder(ServeContext& ctx, transport::Stream& stream);
  ~TrackResponder() override;
  void on_readable() override;
  void on_session_closed() override;
  void on_track_data(model::Track& track) override;
  void on_track_ended(model::Track& track, Error reason) override;
  bool is_viewer() const override { return false; }

 private:
  void answer(const model::TrackProperties& p);
  void unlisten();

  bool started_ = false;
  model::Track* track_ = nullptr;
};

// lite-05 FETCH stream (bidi type 3) opened by the peer: one cached group, as lite-05 FRAMEs
// directly on the stream, then FIN. A group still arriving is followed until it ends. The stream is
// reset when the group is not cached (not found) or is aborted.
class FetchResponder final : public HandlerOf<ServeContext>, public model::TrackListener {
 public:
  FetchResponder(ServeContext& ctx, transport::Stream& stream);
  ~FetchResponder() override;
  void on_readable() override;
  void on_writable() override { pump(); }
  void on_session_closed() override;
  void on_track_data(model::Track&) override { pump(); }
  void on_track_ended(model::Track& track, Error reason) override;

 private:
  void start(const wire::Fetch& req);
  void pump();
  void unlisten();

  bool started_ = false;
  model::Track* track_ = nullptr;
  std::optional<model::GroupCursor> cursor_;
  model::GroupCursor::Step step_;
  std::vector<uint8_t> header_;
};

// A lite-03+ PROBE stream opened by the peer: kept open and drained; never reset, because
// @moq/lite 0.2.2 treats a reset probe stream as fatal.
class ProbeHolder final : public HandlerOf<ControlContext> {
 public:
  ProbeHolder(ControlContext& ctx, transport::Stream& stream);
  void on_readable() override;
  void on_reset(uint64_t) override {}
  void on_stop_sending(uint64_t) override {}
};

// GOAWAY (lite-04, bidi type 5). The server's side writes the message and FIN and drains what the
// peer sends; the client's side reads the message and tells the SessionHandler (on_goaway).
class GoawayStream final : public HandlerOf<ControlContext> {
 public:
  GoawayStream(ControlContext& ctx, transport::Stream& stream, bool receiving);
  void on_readable() override;
  void on_reset(uint64_t) override {}
  void on_stop_sending(uint64_t) override {}

 private:
  bool receiving_;
  bool told_ = false;
};

// The peer asked for announcements (ANNOUNCE_PLEASE): we publish the origin's paths under its
// prefix, then live changes, alternating active/ended per path.
class AnnounceResponder final : public HandlerOf<ServeContext>, public model::AnnounceListener {
 public:
  AnnounceResponder(ServeContext& ctx, transport::Stream& stream);
  ~AnnounceResponder() override;
  void on_readable() override;
  void on_announce(const std::string& path, bool active, const model::Hops& hops) override;
  void on_carrying(const std::string& path, const model::Hops& hops, bool carrying) override;
  void on_session_closed() override;

 private:
  void stop();
  // The hop list `path`'s route (`hops`) goes out with: ours appended on lite-04, marked
  // model::kWarmHop when the peer is a relay and this relay carries the broadcast.
  model::Hops wire_hops(const std::string& path, const model::Hops& hops) const;
  // Queues `out`, or resets the stream when the peer no longer reads (--max-announce-buffer).
  void send(std::vector<uint8_t> out);
  // A relay peer: a relay link (the handler says) that named its hop id in ANNOUNCE_PLEASE
  // (exclude_hop). On an open relay every session is trusted as a link; clients send no hop id.
  bool is_relay_peer() const;

  std::optional<std::string> full_prefix_;
  uint64_t exclude_hop_ = 0;  // the peer's hop id (lite-04 ANNOUNCE_PLEASE): routes through it are not sent
  bool collecting_init_ = false;
  std::vector<std::string> init_suffixes_;
  std::vector<model::Hops> init_hops_;  // lite-05: the hops of each init_suffixes_ entry
  std::map<std::string, model::Hops> active_;  // paths sent active, with the hops sent
  bool listening_ = false;
};

// We asked the peer for announcements: its broadcasts go into the origin with the session as
// their source.
class AnnounceRequester final : public HandlerOf<PeerContext> {
 public:
  // How long a relay peer's withdrawal waits for the active that makes it an update: the pair
  // is written at once, but may arrive in two reads.
  static constexpr Duration kUpdateGrace = std::chrono::milliseconds(50);

  AnnounceRequester(PeerContext& ctx, transport::Stream& stream, std::string prefix);
  ~AnnounceRequester() override;
  void on_readable() override;
  void on_reset(uint64_t code) override;
  void on_session_closed() override;

 private:
  void apply(const std::string& suffix, bool active, model::Hops hops);
  // Applies the withdrawals held back by apply().
  void flush_withdrawals();
  void withdraw_all();

  std::string prefix_;
  bool got_init_ = false;  // lite-01/02 ANNOUNCE_INIT, lite-05 ANNOUNCE_OK
  uint64_t responder_hop_ = 0;  // lite-05: ANNOUNCE_OK's hop id, the last hop of every route
  // What the peer announced, made on its first active announcement: every session asks its peer
  // (the relay's many viewers, which announce nothing, included), so an empty requester holds
  // one pointer, not three sets.
  struct Paths {
    std::set<std::string> active;  // full paths
    std::set<std::string> hopped;  // those whose active announcement carried hops (from a relay)
    // A relay peer's withdrawals waiting kUpdateGrace for an active of the same path: lite-04 has
    // no update, so a relay changing a route's hops sends ended then active, applied as one change.
    std::set<std::string> withdrawing;
  };
  std::unique_ptr<Paths> paths_;  // null until the peer announces
  TimerId flush_timer_ = 0;
};

// One downstream subscription: the peer's SUBSCRIBE stream, a listener on the origin's track, and
// a uni stream per group being forwarded.
class Subscription final : public HandlerOf<ServeContext>, public model::TrackListener {
 public:
  Subscription(ServeContext& ctx, transport::Stream& stream);
  ~Subscription() override;
  void on_readable() override;
  void on_reset(uint64_t code) override;
  void on_stop_sending(uint64_t code) override;
  void on_session_closed() override;
  void on_track_data(model::Track& track) override;
  void on_track_ended(model::Track& track, Error reason) override;

  // Writes what the transport will take; opens streams for new groups.
  void pump();
  // True when some of the track's data is not yet written to the transport.
  bool has_waiting_data() const;
  // Groups (or their rest) not sent because moq-lite cannot express them (note_refused).
  uint64_t refused_groups() const { return refused_groups_; }

  class GroupWriter;

  // After the track ends, the FIN of the subscribe stream waits this long past the last group
  // stream's end: @moq/lite reads new group streams asynchronously and drops those that arrive
  // after the subscription ended.
  static constexpr Duration kFinDelay = std::chrono::milliseconds(200);
  // A subscription logs its skip-ahead at most once per this interval.
  static constexpr Duration kSkipLogInterval = std::chrono::seconds(10);

 private:
  void start(const wire::Subscribe& req);
  void collect_new_groups();
  bool open_writers();
  void drop_old_groups();
  // Counts (SessionConfig::skips) and logs, rate-limited, `groups` dropped by skip-ahead.
  void note_skip(uint64_t groups, Instant now);
  // Counts, and logs once per subscription, a group (or its rest) refused to this subscriber
  // because moq-lite cannot express `what` of it (an IETF producer's subgroup, id gap, property).
  void note_refused(const model::Group& g, const char* what);
  // What write_group() reads from the session once per pump rather than once per delivery.
  struct Delivery {
    TrafficCounters* traffic;  // SessionConfig::traffic
    Duration spin;             // SessionConfig::limits.debug_spin_per_delivery
    Instant now;               // the loop's turn time
    bool lite05;               // the session's version frames with lite-05 FRAME headers
  };
  void write_group(GroupWriter& w, const Delivery& d);
  // Counts `payload` bytes of the step's object handed to the transport (SessionConfig::traffic),
  // and the object once the step completes it.
  void count_delivery(const model::GroupCursor::Step& step, uint64_t payload, const Delivery& d);
  // Moves finished writers to spare_writers_.
  void recycle_done_writers();
  // The object's FRAME header, encoded once per object (Object::header) and shared. When
  // `*framed` comes back true, the Bytes is the header and the whole payload side by side (one
  // buffer: see frame_header()), and the header alone is its first size() - object.size bytes.
  // The encoded header is looked up inline (every delivery but the object's first); encoding it
  // is out of line (encode_frame_header()).
  const Bytes& frame_header(const model::Group& group, const model::Object& object, bool lite05,
                            bool* framed) {
    const uint8_t format = lite05 ? kLite05FrameHeader : kLiteFrameHeader;
    const uint8_t framed_format = lite05 ? kLite05Framed : kLiteFramed;
    if (object.header_format == framed_format) [[likely]] {
      *framed = true;
      return object.header;
    }
    if (object.header_format != format) {
      encode_frame_header(group, object, lite05);
    }
    *framed = object.header_format == framed_format;
    return object.header;
  }
  // Encodes `object`'s FRAME header into Object::header (see frame_header()).
  void encode_frame_header(const model::Group& group, const model::Object& object, bool lite05);
  static constexpr uint8_t kLiteFrameHeader = 1;  // Object::header_format of a moq-lite FRAME
  // lite-05 FRAME (zigzag timestamp delta, size): the same for every lite-05 reader of the group.
  static constexpr uint8_t kLite05FrameHeader = 2;
  // The same two, with the whole payload after the header in Object::header.
  static constexpr uint8_t kLiteFramed = 3;
  static constexpr uint8_t kLite05Framed = 4;
  // lite-05: SUBSCRIBE_END{end} before our FIN when the track (or the requested range) ended.
  void send_subscribe_end();
  void remove_writer(GroupWriter* w);
  void end_subscription();
  bool wants_group(const model::Group& g) const;
  uint64_t send_order(uint64_t sequence) const;

  wire::Subscribe req_;
  bool started_ = false;
  bool unsubscribed_ = false;
  bool track_ended_ = false;
  bool reached_end_ = false;  // a group at or past end_group arrived: no more are wanted
  bool fin_sent_ = false;
  model::Track* track_ = nullptr;
  uint64_t next_arrival_ = 0;  // groups of the track with arrival >= this are still to come
  // Groups waiting for a stream, oldest first (a vector: a few at most, and a deque used as a FIFO
  // allocates a node every 64 pushes).
  std::vector<model::GroupRef> pending_;
  std::vector<std::unique_ptr<GroupWriter>> writers_;
  // Writers of finished groups, kept for the next groups: no allocation per group.
  std::vector<std::unique_ptr<GroupWriter>> spare_writers_;
  std::vector<uint8_t> header_;  // scratch for encoding FRAME and GROUP headers
  Instant last_group_end_{};
  TimerId fin_timer_ = 0;
  bool pumping_ = false;
  bool served_ = false;
  bool writer_done_ = false;  // some writer finished since the last recycle_done_writers()
  model::GroupCursor::Step step_;  // reused by write_group()
  bool skip_logged_ = false;
  Instant skip_logged_at_{};
  uint64_t skipped_unlogged_ = 0;  // groups skipped since the last skip-ahead line
  bool start_sent_ = false;  // lite-05 SUBSCRIBE_START
  uint64_t end_group_ = 0;   // lite-05: one past the largest sequence sent (SUBSCRIBE_END)
  uint64_t refused_groups_ = 0;
  bool refused_logged_ = false;
};

// lite-05 encoding of an object's FRAME header; false when the timestamp delta cannot be encoded
// (|delta| >= 2^61: never for timestamps a lite-05 peer sent).
bool encode_lite05_frame_header(const model::Group& group, const model::Object& object,
                                std::vector<uint8_t>& out);

// An upstream subscription: the track source for one (broadcast, track) of the peer's broadcasts.
// Owned by the Session (one per track name, reused across start/stop).
class UpstreamTrack final : public model::TrackSource, public transport::StreamVisitor {
 public:
  UpstreamTrack(PeerContext& ctx, std::string path, std::string name);
  ~UpstreamTrack() override;
  void start_track(model::Track& track) override;
  void stop_track(model::Track& track) override;
  void on_readable() override;
  void on_writable() override {}
  void on_reset(uint64_t code) override;
  void on_stop_sending(uint64_t code) override;
  void on_session_closed();

  model::Track* track() const { return track_; }
  uint64_t id() const { return id_; }
  // Opens the subscribe stream and sends SUBSCRIBE; waits for on_streams_available when the
  // peer's stream limit (or, over qmux, its missing transport parameters) does not allow it yet.
  void open_subscribe_stream();
  // Group streams of this subscription being received; the track ends only once they are done.
  void on_group_started() { ++active_groups_; }
  void on_group_done();

  // After the publisher ends the subscription, group streams it opened just before may still be
  // arriving (@moq/lite FINs the subscribe stream without waiting for its group streams).
  static constexpr Duration kEndGrace = std::chrono::milliseconds(250);
  // lite-05: how long the publisher's TRACK_INFO is waited for before the track's properties are
  // set provisional (model::TrackProperties::provisional), so that an IETF subscriber's
  // SUBSCRIBE_OK goes out without TIMESCALE instead of waiting without bound. The subscription
  // itself is established (lite-05 accepts SUBSCRIBE implicitly) and goes on; @moq/net's own
  // subscriber gives up on TRACK_INFO after 10 s, so 2 s answers well within any client's bound.
  static constexpr Duration kTrackInfoWait = std::chrono::seconds(2);

 private:
  void release_stream();
  void end_track(Error e);
  void maybe_end_after_publisher_fin();
  // lite-05: the TRACK stream asking the publisher for TRACK_INFO.
  class TrackInfoRequest;
  void on_track_info(const wire::TrackInfo& info);
  void release_track_stream();

  PeerContext& session_;  // the session, as an upstream subscription sees it
  std::string path_;  // full
  std::string name_;
  model::Track* track_ = nullptr;
  transport::Stream* stream_ = nullptr;
  uint64_t id_ = 0;
  bool got_ok_ = false;
  bool publisher_finished_ = false;
  bool grace_over_ = false;
  size_t active_groups_ = 0;
  TimerId grace_timer_ = 0;
  TimerId info_timer_ = 0;  // lite-05: kTrackInfoWait
  std::unique_ptr<TrackInfoRequest> info_request_;
};

// A group uni stream from the peer: GROUP header, then FRAMEs until FIN, written into the track
// as chunks arrive (a large frame is forwarded before it is complete).
class GroupReceiver final : public HandlerOf<PeerContext> {
 public:
  GroupReceiver(PeerContext& ctx, transport::Stream& stream);
  ~GroupReceiver() override { done(); }
  void on_readable() override;
  void on_reset(uint64_t code) override;
  void on_stop_sending(uint64_t) override {}

 private:
  void abandon(ErrorCode code);
  model::Track* track() const;
  void fail_cut_header(model::Track& t);
  void done();

  std::optional<uint64_t> upstream_id_;
  bool counted_ = false;
  model::GroupRef group_;
  uint64_t frame_left_ = 0;
  bool in_frame_ = false;
  uint64_t timestamp_ = 0;  // lite-05: the previous frame's timestamp on this stream
};

}  // namespace moqd::session
