#pragma once
// The handlers of an IetfSession's streams that are tested on their own (ietf_handlers_test.cc):
// each holds the narrow context of its kind (ietf_context.h), never the IetfSession. The other
// handlers (PendingStream, UpstreamSubscription, NamespaceAnnouncer) live in
// ietf_session_internal.h, NamespaceDiscovery in ietf_discovery.h, on the same footing. DownstreamSubscription's and
// SubgroupReader's longer members are in ietf_subscriptions.cc. Internal to session/.
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/log.h"
#include "model/group.h"
#include "model/track.h"
#include "session/ietf_context.h"
#include "session/ietf_fetch.h"
#include "transport/transport.h"
#include "wire/ietf.h"

namespace moqd::session {

class IetfSession;
namespace wi = wire::ietf;

namespace ietf_detail {

// PUBLISH_DONE status codes (draft-14 §9.12).
inline constexpr uint64_t kDoneInternal = 0x0;
inline constexpr uint64_t kDoneTrackEnded = 0x2;
inline constexpr uint64_t kDoneSubscriptionEnded = 0x3;

// Stream reset codes on SUBGROUP streams we send or refuse (draft-14 §10.4.3 has none fixed for
// these; moqd's own ErrorCode values, as the moq-lite Session uses).
inline uint64_t reset_code(ErrorCode c) { return static_cast<uint64_t>(c); }

// Base of the per-stream state machines. Owned by the IetfSession; holds its stream and the
// context every handler has (HandlerContext), through which it retires itself.
class Handler : public transport::StreamVisitor {
 public:
  explicit Handler(HandlerContext& c) : context_(c) {}
  ~Handler() override { release_stream(); }
  void on_readable() override {}
  void on_writable() override {}
  void on_reset(uint64_t) override { done(); }
  void on_stop_sending(uint64_t) override { done(); }
  // The transport is gone: drop every stream pointer.
  virtual void on_session_closed() { stream_ = nullptr; }
  virtual void on_ready() {}

 protected:
  void attach(transport::Stream& s) {
    stream_ = &s;
    s.set_visitor(this);
  }
  void release_stream() {
    if (stream_ != nullptr) {
      stream_->set_visitor(nullptr);
      stream_->release();
      stream_ = nullptr;
    }
  }
  virtual void done() {
    release_stream();
    context_.retire(this);
  }

  HandlerContext& context_;
  transport::Stream* stream_ = nullptr;
  friend class moqd::session::IetfSession;
};

// A handler of one kind: `session_` is its context `Ctx` (ietf_context.h), all it may do to the
// session. (Named session_ as before the contexts, so that the handlers' bodies read the same.)
template <class Ctx>
class HandlerOf : public Handler {
 public:
  explicit HandlerOf(Ctx& c) : Handler(c), session_(c) {}

 protected:
  // Hands each complete message the peer wrote on the stream, read in its form, to `on_message`,
  // while the stream is held and the session open (the context fails the session on one that does
  // not decode). True when the peer's FIN was then read: the caller ends the stream its way.
  template <class OnMessage>
  bool read_messages(OnMessage&& on_message) {
    while (stream_ != nullptr && !session_.is_closed() && !stream_->peek().empty()) {
      std::optional<wi::ControlMessage> m = session_.read_message(*stream_, session_.peer_form());
      if (!m) {
        return false;
      }
      on_message(std::move(*m));
    }
    return stream_ != nullptr && !session_.is_closed() && stream_->is_fin_received();
  }

  Ctx& session_;
};

// Skips one control message of `type` (a u16-length body) that the codec does not model:
// d14/15 UNSUBSCRIBE_NAMESPACE (0x14), which the relay answers by dropping nothing (it sends no
// namespace updates on a request it no longer tracks). Returns the bytes taken, 0 for need-more.
inline constexpr uint64_t kUnsubscribeNamespace = 0x14;

inline size_t skip_message(std::span<const uint8_t> in, wi::VarintForm f) {
  auto t = wi::read_varint(f, in);
  if (!t || !t->has_value()) {
    return 0;
  }
  size_t at = (*t)->consumed;
  if (in.size() < at + 2) {
    return 0;
  }
  size_t len = (static_cast<size_t>(in[at]) << 8) | in[at + 1];
  if (in.size() < at + 2 + len) {
    return 0;
  }
  return at + 2 + len;
}

// The control stream (d14..16): CLIENT_SETUP, then every control message.
class ControlReader final : public HandlerOf<ControlContext> {
 public:
  ControlReader(ControlContext& s, transport::Stream& stream) : HandlerOf(s) { attach(stream); }
  transport::Stream* stream() const { return stream_; }

  void on_readable() override {
    while (stream_ != nullptr && !session_.is_closed()) {
      auto data = stream_->peek();
      if (data.empty()) {
        break;
      }
      if (session_.is_ready() && session_.row().number <= 15) {
        // d14/15 UNSUBSCRIBE_NAMESPACE (0x14) is not in the codec: read here, its request id is
        // all it says.
        auto t = wi::read_varint(session_.row().varint_form, data);
        if (t && t->has_value() && (*t)->value == kUnsubscribeNamespace) {
          size_t n = skip_message(data, session_.row().varint_form);
          if (n == 0) {
            if (stream_->has_peer_fin()) {
              session_.fail(make_error(ErrorCode::kDecode, "truncated message"));
            }
            break;
          }
          auto body = data.subspan((*t)->consumed + 2, n - (*t)->consumed - 2);
          auto id = wi::read_varint(session_.row().varint_form, body);
          stream_->consume(n);
          // @moq/net names the request id; the d14 text names the namespace prefix, which moqd
          // does not map back (its updates then continue until the session ends).
          if (id && id->has_value() && (*id)->consumed == body.size()) {
            session_.stop_namespace((*id)->value);
          }
          continue;
        }
      }
      auto r = wi::decode_control(session_.draft(), data, session_.limits());
      if (!r) {
        session_.fail(r.error());
        return;
      }
      if (!r->has_value()) {
        break;
      }
      stream_->consume((*r)->consumed);
      wi::ControlMessage m = std::move((*r)->value);
      if (!session_.is_ready()) {
        if (session_.is_client()) {
          session_.on_server_setup(m);
          continue;
        }
        auto* setup = std::get_if<wi::ClientSetup>(&m);
        if (setup == nullptr) {
          session_.fail(wi::TerminationCode::kProtocolViolation, "first message is not CLIENT_SETUP");
          return;
        }
        session_.on_control_setup(*setup);
        continue;
      }
      session_.on_control_message(std::move(m));
    }
    if (stream_ != nullptr && !session_.is_closed() && stream_->has_peer_fin()) {
      session_.fail(wi::TerminationCode::kProtocolViolation, "control stream closed");
    }
  }
  void on_reset(uint64_t) override {
    session_.fail(wi::TerminationCode::kProtocolViolation, "control stream reset");
  }
  void on_stop_sending(uint64_t) override {
    session_.fail(wi::TerminationCode::kProtocolViolation, "control stream stopped");
  }
  void write(std::vector<uint8_t> bytes) {
    if (stream_ != nullptr) {
      stream_->write(Bytes::from(bytes));
    }
  }
};

// One downstream SUBSCRIBE: the peer reads a track of the origin. Each group goes out on its own
// SUBGROUP uni stream (type 0x18: publisher priority, subgroup 0, the group's end with FIN), but
// objects the producer sent unreliably (model::Object::unreliable) go out as OBJECT_DATAGRAMs
// while the transport has datagrams and they fit (send_datagrams).
class DownstreamSubscription final : public HandlerOf<SubscriptionContext>,
                                     public model::TrackListener {
 public:
  DownstreamSubscription(SubscriptionContext& s, uint64_t request_id, model::Track& track,
                         uint8_t priority, bool next_group)
      : HandlerOf(s), request_id_(request_id), track_(&track), priority_(priority) {
    next_arrival_ = next_group ? track.next_arrival() : track.late_join_arrival();
    largest_at_start_ = largest_location(track);  // a joining FETCH ends here (d14 §9.16.2)
    largest_filter_ = !next_group;
  }
  ~DownstreamSubscription() override {
    stop_listening();
    for (auto& w : writers_) {
      reset_writer(*w, ErrorCode::kCancel);
    }
    session_.timers().cancel(drain_deadline_);
    session_.timers().cancel(settle_timer_);
    for (transport::Stream* st : draining_) {
      st->set_visitor(nullptr);
      st->release();  // finished: what it queued is still delivered
    }
  }
  uint64_t request_id() const { return request_id_; }
  uint64_t alias() const { return request_id_; }

  // `ok` goes out from pump() once the track's properties are known (a moq-lite-05 source asks
  // its publisher for them first), with a TIMESCALE track property on 17+ when moqd knows the
  // units of the track's timestamps.
  void begin(wi::SubscribeOk ok) {
    ok_ = std::move(ok);
    track_->add_listener(this);
    pump();
  }
  // The same subscription opened by our PUBLISH (`p`: its request id and alias are request_id(),
  // sent from pump() once the track's properties are known, as SUBSCRIBE_OK is): nothing is
  // forwarded until accepted() (PUBLISH_OK; REQUEST_OK from 18), and refused() (REQUEST_ERROR, or
  // its stream closed first) ends it without PUBLISH_DONE. A track that ends while the PUBLISH is
  // unanswered gets its PUBLISH_DONE once it is accepted.
  void begin_publish(wi::Publish p) {
    publish_ = std::move(p);
    awaiting_answer_ = true;
    forward_ = publish_->forward;
    track_->add_listener(this);
    pump();
  }
  bool is_awaiting_answer() const { return awaiting_answer_; }
  // PUBLISH_OK: objects flow, from the groups the track had when the PUBLISH was made, unless
  // FORWARD is 0 (d16: a SUBSCRIBE_UPDATE with forward 1 starts them through narrow(); 17+ has no
  // way to, as REQUEST_UPDATE on our PUBLISH's stream is not served).
  void accepted(bool forward) {
    awaiting_answer_ = false;
    forward_ = forward_ && forward;
    pump();
  }
  void refused() {
    awaiting_answer_ = false;
    stop_listening();
    for (auto& w : writers_) {
      reset_writer(*w, ErrorCode::kCancel);
    }
    writers_.clear();
    done();
  }

  // The peer unsubscribed.
  void unsubscribe() {
    stop_listening();
    for (auto& w : writers_) {
      reset_writer(*w, ErrorCode::kCancel);
    }
    writers_.clear();
    wi::PublishDone d{request_id_, kDoneSubscriptionEnded, streams_opened_, "unsubscribed"};
    session_.send_control(d);
    done();
  }

  // model::TrackListener
  void on_track_data(model::Track&) override { pump(); }
  void on_track_ended(model::Track&, Error reason) override {
    track_ = nullptr;
    end_reason_ = reason;
    ended_ = true;
    pump();
  }

  void on_session_closed() override {
    stop_listening();
    for (auto& w : writers_) {
      w->stream = nullptr;
    }
    writers_.clear();
    draining_.clear();
    session_.timers().cancel(drain_deadline_);
    session_.timers().cancel(settle_timer_);
    drain_deadline_ = 0;
    settle_timer_ = 0;
    Handler::on_session_closed();
  }

  void pump();
  // Sends the held SUBSCRIBE_OK once the track's properties are known (or the track is gone);
  // false while it waits.
  bool send_ok();
  // For FETCH and SUBSCRIBE_UPDATE (ietf_fetch.h).
  model::Track* track() const { return track_; }
  const std::optional<wi::Location>& largest_at_start() const { return largest_at_start_; }
  bool is_largest_filter() const { return largest_filter_; }
  std::optional<uint64_t> last_group() const { return last_group_; }
  bool forward() const { return forward_; }
  void narrow(const Narrowing& n);
  // Objects of this subscription wait to be written (for stall_timeout).
  bool has_waiting_data() const {
    for (const auto& w : writers_) {
      if (w->cursor.peek(1).kind != model::GroupCursor::Kind::kNothing) {
        return true;
      }
    }
    return false;
  }

 private:
  void done() override {
    done_sent_ = true;
    session_.forget_downstream(this);
    Handler::done();
  }
  struct Writer final : transport::StreamVisitor {
    Writer(DownstreamSubscription& o, model::GroupRef g) : owner(o), cursor(std::move(g)) {}
    void on_readable() override {}
    void on_writable() override { owner.pump(); }
    void on_reset(uint64_t) override {}
    void on_stop_sending(uint64_t) override {
      stopped = true;
      owner.pump();
    }
    DownstreamSubscription& owner;
    model::GroupCursor cursor;
    transport::Stream* stream = nullptr;
    bool stopped = false;
    bool finished = false;
    std::optional<uint64_t> previous_object;
    model::GroupCursor::Step step;
    // OBJECT_DATAGRAMs of this group sent so far, the last one's Object ID and whether it carried
    // END_OF_GROUP; on_stream: the rest of the group goes on a stream.
    uint64_t datagrams = 0;
    uint64_t last_datagram = 0;
    bool datagram_ended = false;
    bool on_stream = false;
  };
  // Sends the group's unreliable objects, as they complete, as OBJECT_DATAGRAMs (a group whose
  // end came after its last datagram gets an END_OF_GROUP status datagram). kStream: what is
  // left of it goes on a stream from now on (the transport has no datagrams, an object that is
  // not unreliable or does not fit, an empty group); kWait: nothing to send yet; kDone: all sent.
  enum class DatagramStep { kWait, kStream, kDone };
  DatagramStep send_datagrams(Writer& w);
  // The object's extension block in this draft's encoding into `out` (the producer's, or the
  // Timestamp property when TIMESCALE was declared; empty: none); false when this draft cannot
  // write the producer's block.
  bool object_properties(const model::Object& o, std::string& out);

  void stop_listening() {
    if (track_ != nullptr) {
      model::Track* t = track_;
      track_ = nullptr;
      t->remove_listener(this);
    }
  }
  void reset_writer(Writer& w, ErrorCode code) {
    if (w.stream != nullptr) {
      w.stream->set_visitor(nullptr);
      w.stream->reset(reset_code(code));
      w.stream->release();
      w.stream = nullptr;
    }
  }
  // Writes what `w` may now; true when the group is complete (FIN or reset sent).
  bool write_group(Writer& w);
  // The SUBGROUP_HEADER type (and nothing else) for `g`'s stream in this draft; `from_first`:
  // the stream begins with the group's first object (none went out as a datagram).
  wi::SubgroupHeader subgroup_header(const model::Group& g, bool from_first = true) const;
  // Releases the finished streams the end no longer waits for; true when none is left. @moq/net
  // 0.3.4 (d14-16) ends the track as soon as it reads PUBLISH_DONE, without waiting for its
  // Stream Count: its group readers stop at the track's close and drop what they have not read,
  // and a group stream not yet taken up is dropped whole (docs/ARCHITECTURE.md). A stream is
  // waited for until the peer's transport has received all of it (receipt_pending(): qmux-01/02,
  // a QX_PING after its FIN answered): PUBLISH_DONE then comes in a later read than every group
  // byte, and @moq/net consumes what one read brought before it handles the next. Transports
  // that cannot tell (qmux-00, QUIC, WebTransport) wait for on_sent() and then kSettle: 20 ms,
  // a timing guess (with 5 ms an ASan moqd under three parallel runs lost frames in 6 of 24).
  // On d17+ (nothing waits) only on_sent() holds a stream.
  bool drained();
  // True while PUBLISH_DONE must wait: a finished stream still has bytes queued or unconfirmed
  // (its on_sent(), on_received() or STOP_SENDING pumps again), or, where receipt is not
  // confirmed, kSettle has not passed since the last one drained. Bounded by kDrainBound from
  // the first wait (a peer that stops granting credit or never answers then gets PUBLISH_DONE
  // anyway).
  bool wait_drain();
  static constexpr Duration kSettle = std::chrono::milliseconds(20);
  static constexpr Duration kDrainBound = std::chrono::seconds(2);
  // The visitor of the finished streams waiting in draining_.
  struct DrainWatch final : transport::StreamVisitor {
    explicit DrainWatch(DownstreamSubscription& o) : owner(o) {}
    void on_readable() override {}
    void on_writable() override {}
    void on_reset(uint64_t) override {}
    void on_stop_sending(uint64_t) override { owner.on_stream_drained(); }
    void on_sent() override { owner.on_stream_drained(); }
    void on_received() override { owner.on_stream_drained(); }
    DownstreamSubscription& owner;
  };
  // A finished stream's queue emptied, its receipt was confirmed, or the peer stopped it: released
  // once nothing holds it; the end, if it waits for that, goes on.
  void on_stream_drained();
  DrainWatch drain_watch_{*this};
  std::optional<wi::SubscribeOk> ok_;  // held until the track's properties are known
  std::optional<wi::Publish> publish_;  // our PUBLISH, held likewise
  bool awaiting_answer_ = false;        // our PUBLISH is not answered yet
  // TIMESCALE was declared: objects without an extension block get a Timestamp property.
  bool stamp_ = false;
  std::vector<uint8_t> stamp_scratch_;
  std::vector<uint8_t> datagram_scratch_;

  uint64_t request_id_;
  model::Track* track_;
  uint8_t priority_;
  uint64_t next_arrival_ = 0;
  uint64_t streams_opened_ = 0;
  bool ended_ = false;
  bool done_sent_ = false;
  Error end_reason_{};
  std::deque<std::unique_ptr<Writer>> writers_;
  std::vector<transport::Stream*> draining_;  // finished, not yet drained (see drained())
  TimerId drain_deadline_ = 0;     // kDrainBound after the end first waited
  bool drain_bound_armed_ = false;
  bool drain_gave_up_ = false;     // kDrainBound passed: PUBLISH_DONE goes without waiting
  TimerId settle_timer_ = 0;
  bool settle_due_ = false;        // a stream was in flight: kSettle must pass before the end
  bool finished_in_pump_ = false;  // a group stream got its FIN in this pump()
  bool unconfirmed_ = false;       // a finished stream's transport does not confirm receipt
  std::optional<wi::Location> largest_at_start_;
  bool largest_filter_ = true;
  // SUBSCRIBE_UPDATE: the last group delivered (inclusive), and whether a group past it appeared
  // (the subscription then ends with SUBSCRIPTION_ENDED once its open groups are written).
  std::optional<uint64_t> last_group_;
  bool past_end_ = false;
  bool forward_ = true;
};

// One SUBGROUP uni stream from the peer, feeding one group of an upstream track.
class SubgroupReader final : public HandlerOf<SubgroupContext> {
 public:
  SubgroupReader(SubgroupContext& s, transport::Stream& stream) : HandlerOf(s) { attach(stream); }
  ~SubgroupReader() override { abandon_group(); }

  void on_readable() override;
  void on_reset(uint64_t) override {
    abandon_group();
    done();
  }
  void on_session_closed() override {
    group_ = model::GroupRef();
    Handler::on_session_closed();
  }
  // A SUBSCRIBE_OK arrived: the alias may be known now.
  void retry() { on_readable(); }

 private:
  model::Track* track() const {
    return alias_ ? session_.upstream_track(*alias_) : nullptr;
  }
  void abandon_group() {
    if (group_) {
      if (model::Track* t = track(); t != nullptr && !group_->is_done()) {
        t->abort_group(*group_);
      }
      group_ = model::GroupRef();
    }
    count_done();
  }
  void count_done() {
    if (counted_) {
      counted_ = false;
      if (alias_) {
        session_.upstream_reader(*alias_, false);
      }
    }
  }
  // The timestamp of an extension block that holds only a Timestamp property; nullopt otherwise.
  std::optional<uint64_t> object_timestamp(const std::string& ext) const;
  // Begins the stream's group in the track (its subgroup `subgroup`); false when refused.
  bool open_group(uint64_t subgroup);
  // Refuses the stream: what it carries cannot be expressed in moqd's model.
  void refuse(ErrorCode code, const char* why) {
    MOQD_LOG(kInfo, "session %llu subgroup stream refused code=%u: %s",
             static_cast<unsigned long long>(session_.id()), static_cast<unsigned>(code), why);
    abandon_group();
    if (stream_ != nullptr) {
      stream_->stop_sending(reset_code(code));
    }
    done();
  }
  void done() override {
    count_done();
    session_.on_subgroup_reader_done(this);
    Handler::done();
  }

  std::optional<wi::SubgroupHeader> header_;
  std::optional<uint64_t> alias_;
  model::GroupRef group_;
  bool counted_ = false;
  std::optional<uint64_t> previous_object_;
  uint64_t payload_left_ = 0;
  bool in_payload_ = false;
  bool waited_ = false;  // its subscription was looked up (open_group ran, or waits for the id)
};

// The peer's SETUP stream (its first uni stream): SETUP 0x2F00, then at most GOAWAY (which a client
// may not send). Its FIN or reset after SETUP is tolerated.
class SetupStreamReader final : public HandlerOf<ControlContext> {
 public:
  SetupStreamReader(ControlContext& s, transport::Stream& stream) : HandlerOf(s) { attach(stream); }
  void on_readable() override {
    while (stream_ != nullptr && !session_.is_closed() && !session_.is_admission_pending()) {
      auto data = stream_->peek();
      if (data.empty()) {
        if (stream_->is_fin_received()) {
          if (!got_setup_) {
            session_.fail(wi::TerminationCode::kProtocolViolation, "SETUP stream ended before SETUP");
            return;
          }
          done();
        }
        return;
      }
      // In the draft's form: the peer's form is known only from its SETUP.
      std::optional<wi::ControlMessage> read = session_.read_message(*stream_, wi::Peer::kDraftText);
      if (!read) {
        return;
      }
      wi::ControlMessage m = std::move(*read);
      if (!got_setup_) {
        auto* setup = std::get_if<wi::Setup>(&m);
        if (setup == nullptr) {
          session_.fail(wi::TerminationCode::kProtocolViolation, "first message is not SETUP");
          return;
        }
        got_setup_ = true;
        session_.on_peer_setup(*setup);
        continue;
      }
      if (std::holds_alternative<wi::Setup>(m)) {
        session_.fail(wi::TerminationCode::kProtocolViolation, "second SETUP");
        return;
      }
      session_.on_control_message(std::move(m));  // GOAWAY from a client: a violation
      return;
    }
  }
  void on_ready() override {}
  void on_reset(uint64_t) override {
    if (!got_setup_) {
      session_.fail(wi::TerminationCode::kProtocolViolation, "SETUP stream reset before SETUP");
      return;
    }
    done();
  }

 private:
  bool got_setup_ = false;
};

// ---------------------------------------------------------------------------------------------
// Drafts 17+ (Draft::request_streams): the stream kinds that replace the control stream.

// One request and its responses on a bidi stream: a SUBSCRIBE, PUBLISH_NAMESPACE, FETCH or
// TRACK_STATUS of the peer's, or a SUBSCRIBE of ours (upstream). FETCH and TRACK_STATUS are served
// by FetchService (ietf_fetch.h): TRACK_STATUS's answer ends the stream; a FETCH's stream ends
// when its data stream does (end()), and the peer resetting it cancels the FETCH (d17 §5.2). The request's handler in IetfSession does the work; this
// carries its messages, which in 17+ name no request id (filled in from the stream's), and turns
// the stream's end into the messages 17 removed: the peer closing a SUBSCRIBE stream is
// UNSUBSCRIBE, a PUBLISH_NAMESPACE stream PUBLISH_NAMESPACE_DONE; the publisher closing ours ends
// the track (PUBLISH_DONE, or REQUEST_ERROR before SUBSCRIBE_OK).
class RequestStream final : public HandlerOf<ControlContext> {
 public:
  enum class Kind : uint8_t {
    kPeerSubscribe,
    kPeerPublishNamespace,
    kOurSubscribe,
    kOurPublishNamespace,  // client role: a broadcast of ours, until we close the stream
    kPeerFetch,
    kPeerTrackStatus,
    kPeerPublish,  // d17+ PUBLISH: PUBLISH_DONE and FIN end it (PublishService)
    kOurPublish    // our PUBLISH (offer_track): the peer's close before an answer refuses it, after
                   // one unsubscribes; our PUBLISH_DONE ends it
  };
  RequestStream(ControlContext& s, transport::Stream& stream, Kind kind, uint64_t id)
      : HandlerOf(s), kind_(kind), id_(id) {
    attach(stream);
  }
  Kind kind() const { return kind_; }

  // A response or follow-up; `last`: the request is over on our side (FIN, then the stream is
  // handed back).
  void send(const wi::ControlMessage& m, bool last) {
    if (stream_ == nullptr) {
      return;
    }
    std::vector<uint8_t> out;
    if (!wi::encode(session_.draft(), m, out, session_.peer_form())) {
      MOQD_LOG(kWarn, "session %llu request message not encodable in %s (dropped)",
               static_cast<unsigned long long>(session_.id()), wire::version_name(session_.draft()));
      return;
    }
    stream_->write(Bytes::from(out));
    if (last || kind_ == Kind::kPeerTrackStatus) {
      stream_->finish();
      done();
    }
  }
  // A FETCH's data stream ended: FIN (complete) or reset (cancelled, or failed), and the stream is
  // handed back.
  void end(bool reset) {
    if (stream_ != nullptr) {
      if (reset) {
        stream_->reset(kResetCancelled);
      } else {
        stream_->finish();
      }
    }
    done();
  }
  // Our UNSUBSCRIBE (17 has none): FIN, and the stream is handed back.
  void cancel() {
    if (stream_ != nullptr) {
      stream_->finish();
    }
    done();
  }

  void on_readable() override {
    if (read_messages([this](wi::ControlMessage m) { on_message(std::move(m)); })) {
      if (kind_ == Kind::kPeerFetch || kind_ == Kind::kPeerTrackStatus) {
        return;  // d19 §3.3.2: the requester's FIN is not a cancellation
      }
      peer_ended();
    }
  }
  void on_reset(uint64_t) override { peer_ended(); }
  void on_stop_sending(uint64_t) override { peer_ended(); }

  static constexpr uint64_t kResetCancelled = 0x1;  // d18 §3.3.3 CANCELLED

 private:
  void on_message(wi::ControlMessage m) {
    if (kind_ == Kind::kPeerPublish) {
      ended_ = session_.on_publish_stream_message(id_, std::move(m)) || ended_;
      return;
    }
    if (kind_ == Kind::kOurPublishNamespace) {
      on_publish_namespace_answer(std::move(m));
      return;
    }
    if (kind_ == Kind::kOurPublish) {
      on_publish_answer(std::move(m));
      return;
    }
    if (kind_ != Kind::kOurSubscribe) {
      // Follow-ups on the peer's request (REQUEST_UPDATE): the session's handlers decide.
      if (auto* u = std::get_if<wi::SubscribeUpdate>(&m);
          u != nullptr && (kind_ == Kind::kPeerSubscribe || kind_ == Kind::kPeerFetch)) {
        u->existing_request_id = id_;
        session_.on_control_message(std::move(m));
        return;
      }
      session_.fail(wi::TerminationCode::kProtocolViolation, "unexpected message on a request stream");
      return;
    }
    if (auto* ok = std::get_if<wi::SubscribeOk>(&m)) {
      ok->request_id = id_;
      answered_ = true;
    } else if (auto* e = std::get_if<wi::RequestError>(&m)) {
      e->request_id = id_;
      answered_ = true;
      ended_ = true;
    } else if (auto* d = std::get_if<wi::PublishDone>(&m)) {
      d->request_id = id_;
      ended_ = true;
    } else {
      session_.fail(wi::TerminationCode::kProtocolViolation, "unexpected message on a SUBSCRIBE stream");
      return;
    }
    session_.on_control_message(std::move(m));
  }
  // The relay's answer to our PUBLISH_NAMESPACE: REQUEST_OK, or REQUEST_ERROR (logged by the
  // session). Nothing else belongs on this stream.
  void on_publish_namespace_answer(wi::ControlMessage m) {
    if (auto* ok = std::get_if<wi::RequestOk>(&m)) {
      ok->request_id = id_;
    } else if (auto* e = std::get_if<wi::RequestError>(&m)) {
      e->request_id = id_;
    } else {
      session_.fail(wi::TerminationCode::kProtocolViolation,
                    "unexpected message on a PUBLISH_NAMESPACE stream");
      return;
    }
    session_.on_control_message(std::move(m));
  }
  // The peer's answer to our PUBLISH: PUBLISH_OK (17), REQUEST_OK (18+: PUBLISH_OK's form there),
  // or REQUEST_ERROR, once. Nothing else belongs on this stream (REQUEST_UPDATE is not served).
  void on_publish_answer(wi::ControlMessage m) {
    if (answered_) {
      session_.fail(wi::TerminationCode::kProtocolViolation, "unexpected message on a PUBLISH stream");
      return;
    }
    answered_ = true;
    if (auto* ok = std::get_if<wi::PublishOk>(&m)) {
      ok->request_id = id_;
    } else if (std::holds_alternative<wi::RequestOk>(m)) {
      wi::PublishOk ok;
      ok.request_id = id_;
      m = ok;
    } else if (auto* e = std::get_if<wi::RequestError>(&m)) {
      e->request_id = id_;
      ended_ = true;
    } else {
      session_.fail(wi::TerminationCode::kProtocolViolation, "unexpected message on a PUBLISH stream");
      return;
    }
    session_.on_control_message(std::move(m));
  }
  void peer_ended() {
    if (stream_ == nullptr || session_.is_closed()) {
      return;
    }
    switch (kind_) {
      case Kind::kPeerSubscribe:
        // UNSUBSCRIBE: the session answers PUBLISH_DONE on this stream (send(last)), unless the
        // subscription is already over.
        session_.on_control_message(wi::Unsubscribe{id_});
        break;
      case Kind::kPeerPublishNamespace: {
        wi::PublishNamespaceDone d;
        d.request_id = id_;
        session_.on_control_message(d);
        break;
      }
      case Kind::kPeerFetch:
        // d17 §5.2: STOP_SENDING (or a reset) cancels the FETCH; FetchService resets its data
        // stream and ends this one (end()).
        session_.on_control_message(wi::FetchCancel{id_});
        break;
      case Kind::kPeerTrackStatus:
        break;
      case Kind::kPeerPublish:
        session_.on_publish_stream_closed(id_, ended_);
        break;
      case Kind::kOurSubscribe:
        if (!answered_) {
          wi::RequestError e;
          e.request_id = id_;
          e.reason = "SUBSCRIBE stream closed";
          session_.on_control_message(e);
        } else if (!ended_) {
          session_.on_control_message(wi::PublishDone{id_, 0, 0, "SUBSCRIBE stream closed"});
        }
        break;
      case Kind::kOurPublish:
        if (!answered_) {
          wi::RequestError e;
          e.request_id = id_;
          e.reason = "PUBLISH stream closed";
          session_.on_control_message(e);
        } else if (!ended_) {
          session_.on_control_message(wi::Unsubscribe{id_});  // PUBLISH_DONE goes out on it
        }
        break;
      case Kind::kOurPublishNamespace:
        // PUBLISH_NAMESPACE_CANCEL (17 has none): the relay no longer takes the namespace. Its
        // SUBSCRIBEs are separate requests; nothing else follows from it here.
        break;
    }
    if (stream_ != nullptr) {
      stream_->finish();
      done();
    }
  }
  void done() override {
    session_.forget_request(id_, this);
    Handler::done();
  }

  Kind kind_;
  uint64_t id_;
  bool answered_ = false;  // SUBSCRIBE_OK or REQUEST_ERROR seen (ours)
  bool ended_ = false;     // REQUEST_ERROR or PUBLISH_DONE seen (ours)
};

}  // namespace ietf_detail
}  // namespace moqd::session
