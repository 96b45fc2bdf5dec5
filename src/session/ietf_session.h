#pragma once
// An IETF MoQ Transport session (drafts 14 to 20) as a relay serves it, on the same model as
// the moq-lite Session: the peer's PUBLISH_NAMESPACE feeds the origin's announcements (this
// session is the BroadcastSource of those broadcasts and SUBSCRIBEs upstream to the peer for
// their tracks), SUBSCRIBE_NAMESPACE is answered from the origin's announcements, and SUBSCRIBE
// is served from the origin's tracks as SUBGROUP uni streams. Wire codec: wire/ietf.h; namespace
// tuples map to paths by wire/ietf_namespace.h.
//
// Client role (SessionConfig::role, for `moq --versions moq-transport-14..20`): the session
// opens the control stream with CLIENT_SETUP (17+: its SETUP on a uni stream, requests once the
// relay's SETUP arrived), publishes every broadcast of its origin with PUBLISH_NAMESPACE (17+: one
// bidi stream each, closed to end it), and asks for SessionConfig::discover_prefix with
// SUBSCRIBE_NAMESPACE (on its own bidi stream in d16+); the rest (SUBSCRIBE upstream for announced
// tracks, serving the relay's SUBSCRIBEs, SUBGROUP streams both ways) is the same code as the
// server role's, with request id parity reversed (ours even). PUBLISH (drafts 14..20; 17+ on its
// own request stream) is served by ietf_detail::PublishService (ietf_publish.h); OBJECT_DATAGRAMs
// (drafts 14..20) from a publisher by ietf_detail::DatagramReceiver (ietf_datagram.h), and sent on
// to subscribers as OBJECT_DATAGRAMs where the transport has datagrams (DownstreamSubscription).
// One worker thread.
//
// FETCH (standalone and joining), FETCH_CANCEL, TRACK_STATUS and SUBSCRIBE_UPDATE / REQUEST_UPDATE
// (drafts 14 to 20) are served from the origin's track caches by ietf_detail::FetchService
// (ietf_fetch.h); from 17 each FETCH and TRACK_STATUS has its own request stream here.
//
// Drafts 17 to 20 (Draft::request_streams) differ only in where messages travel: SETUP 0x2F00 on
// a uni stream each way (ours kept open for GOAWAY), and each request on its own bidi stream with
// its responses; closing that stream is UNSUBSCRIBE / PUBLISH_NAMESPACE_DONE. The handlers are
// the same: send_control() routes a message to its request's stream by request id. In the client
// role PUBLISH_DONE leaves the request stream open: the relay closing it is the UNSUBSCRIBE that
// await_unsubscribe() waits for.
//
// The implementation is split by concern: ietf_session.cc (life, control path, request ids, the
// peer's SUBSCRIBE, limits), ietf_control.cc (peer streams, SETUP on the control stream),
// ietf_namespaces.cc, ietf_upstream.cc, ietf_request_streams.cc (17+), ietf_client.cc; the
// handlers in ietf_handlers.h and ietf_session_internal.h.
#include <cstdint>
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
#include "session/guards.h"
#include "session/ietf_context.h"
#include "session/moq_session.h"
#include "wire/ietf.h"

namespace moqd::session {

namespace ietf_detail {
class Handler;
class ControlReader;
class DownstreamSubscription;
class UpstreamSubscription;
class SubgroupReader;
class NamespaceAnnouncer;
class RequestStream;
class SetupStreamReader;
class NamespaceDiscovery;
class FetchService;
class PublishService;
class DatagramReceiver;
}  // namespace ietf_detail

// The relay, the client and the apps see a MoqSession; the handlers see the contexts of their kind
// (ietf_context.h), which this implements (privately: nothing else calls them).
class IetfSession final : public transport::SessionVisitor,
                          public MoqSession,
                          private ietf_detail::ControlContext,
                          private ietf_detail::SubscriptionContext,
                          private ietf_detail::UpstreamContext,
                          private ietf_detail::SubgroupContext,
                          private ietf_detail::NamespaceContext,
                          private ietf_detail::FetchContext,
                          private ietf_detail::PublishContext {
 public:
  // `version`: the draft the transport's protocol selected (moqt-15, moqt-16), or
  // moq-transport-14 for the SETUP path, where CLIENT_SETUP must offer it.
  // `config`: the session's own copy (root and query included).
  IetfSession(transport::Session& transport, SessionConfig config, model::Origin& origin,
              SessionHandler& handler, const Clock& clock, Timers& timers, wire::Version version);
  // `shared`: the owner's, shared by its sessions, outliving this one; its root and query are not
  // read (the session's are `root` and `query`).
  IetfSession(transport::Session& transport, const SessionConfig& shared, std::string root,
              std::string query, model::Origin& origin, SessionHandler& handler,
              const Clock& clock, Timers& timers, wire::Version version);
  ~IetfSession() override;
  IetfSession(const IetfSession&) = delete;
  IetfSession& operator=(const IetfSession&) = delete;

  // MoqSession
  void start() override;
  void admit() override;
  bool is_admission_pending() const override { return admission_pending_; }
  void close(Error reason) override;
  bool send_goaway(const std::string& uri) override;
  uint64_t id() const override { return id_; }
  std::optional<wire::Version> version() const override {
    return ready_ ? std::optional<wire::Version>(version_) : std::nullopt;
  }
  bool is_ready() const override { return ready_; }
  transport::Session& transport() override { return transport_; }
  // Client role: also subscriptions whose PUBLISH_DONE the relay has not answered with
  // UNSUBSCRIBE (see await_unsubscribe()).
  size_t subscription_count() const override {
    return downstream_.size() + ended_unacknowledged_.size();
  }

  // model::BroadcastSource: tracks of broadcasts the peer published (PUBLISH_NAMESPACE).
  model::TrackSource& track_source(const std::string& path, const std::string& name) override;
  // Called by the origin only for tracks this session's peer publishes: makes the publisher state.
  model::CacheBudget* cache_budget() override { return &publisher().budget; }
  // Whether the peer ever acted as a publisher (PUBLISH_NAMESPACE, PUBLISH, a track the origin
  // took from it, data on a SUBGROUP stream or datagram): a pure viewer's session never makes
  // that state. For tests.
  bool has_publisher_state() const { return publisher_ != nullptr; }

  // transport::SessionVisitor
  void on_incoming_stream(transport::Stream& stream) override;
  void on_streams_available() override;
  void on_closed(uint64_t code, std::string_view reason) override;
  // OBJECT_DATAGRAM receive (ietf_datagram.h).
  void on_datagram(std::span<const uint8_t> payload) override;
  // OBJECT_DATAGRAMs sent to the peer, and datagram objects it got on streams instead.
  const ietf_detail::DatagramSendStats& datagrams_sent() const { return datagram_stats_; }


 private:
  // --- ietf_detail::HandlerContext and the contexts of each handler kind (ietf_context.h) ---
  wire::Version draft() const override { return version_; }
  const wire::ietf::Draft& row() const override { return *row_; }
  const wire::ietf::Limits& limits() const override { return limits_; }
  const SessionConfig& config() const override { return config_; }
  const std::string& query() const override { return query_; }
  Timers& timers() override { return timers_; }
  bool is_closed() const override { return closed_; }
  void fail(Error e) override;
  void fail(wire::ietf::TerminationCode code, const char* detail) override;
  void send_control(const wire::ietf::ControlMessage& m) override;
  void retire(ietf_detail::Handler* h) override;
  // ControlContext
  bool is_client() const override { return config_.role == Role::kClient; }
  wire::ietf::Peer peer_form() const override { return peer_form_; }
  std::optional<wire::ietf::ControlMessage> read_message(transport::Stream& stream,
                                                         wire::ietf::Peer form) override;
  void on_control_message(wire::ietf::ControlMessage m) override;
  void on_control_setup(const wire::ietf::ClientSetup& setup) override;
  // Client role: the first message on the control stream we opened.
  void on_server_setup(const wire::ietf::ControlMessage& m) override;
  void on_peer_setup(const wire::ietf::Setup& setup) override;
  void stop_namespace(uint64_t request_id) override;
  void forget_request(uint64_t request_id, ietf_detail::RequestStream* r) override;
  void on_subgroup_stream(transport::Stream& stream) override;
  void on_namespace_stream(transport::Stream& stream) override;
  bool on_publish_stream_message(uint64_t request_id, wire::ietf::ControlMessage m) override;
  void on_publish_stream_closed(uint64_t request_id, bool done) override;
  // SubscriptionContext
  transport::Stream* open_uni() override { return transport_.open_uni(); }
  void wait_for_streams(ietf_detail::DownstreamSubscription* s) override;
  size_t max_datagram_size() const override { return transport_.max_datagram_size(); }
  bool send_datagram(std::span<const uint8_t> b) override { return transport_.send_datagram(b); }
  ietf_detail::DatagramSendStats& datagram_stats() override { return datagram_stats_; }
  void forget_downstream(ietf_detail::DownstreamSubscription* s) override;
  // Client role: we sent PUBLISH_DONE for `request_id`. IETF has no acknowledgement of it, but a
  // relay stops its upstream subscription with UNSUBSCRIBE once it has read every stream (moqd
  // does): until then the subscription counts in subscription_count(), so that `moq pub` does not
  // close the session under groups the relay is still reading (its --linger bounds the wait).
  void await_unsubscribe(uint64_t request_id) override;
  // UpstreamContext
  std::optional<uint64_t> take_request_id() override;
  std::optional<std::string> to_peer(const std::string& full) const override;
  void request_upstream(ietf_detail::UpstreamSubscription* u) override;
  void forget_upstream(ietf_detail::UpstreamSubscription* u) override;
  // IngressContext, SubgroupContext
  bool admit_ingress(uint64_t n) override;
  model::Track* upstream_track(uint64_t alias) override;
  bool hold_subgroup(ietf_detail::SubgroupReader* r, uint64_t alias) override;
  void upstream_reader(uint64_t alias, bool started) override;
  void on_subgroup_reader_done(ietf_detail::SubgroupReader* r) override;
  // NamespaceContext
  model::Origin& origin() override { return origin_; }
  SessionHandler& handler() override { return handler_; }
  model::BroadcastSource& source() override { return *this; }
  void count_namespace_listener(bool open) override {
    if (open) {
      ++namespace_listeners_;
    } else {
      --namespace_listeners_;
    }
  }
  bool cluster_negotiated() const override;
  uint64_t peer_relay_hops() const override { return peer_relay_hops_.value_or(0); }
  std::string to_full(const std::string& peer_path) const override;
  void offer_track(const std::string& full, const std::string& name, bool forward) override;
  // The relay announced `full` (a namespace it told of, or told of again).
  void client_announce(const std::string& full) override;
  // The relay withdrew `full` (NAMESPACE_DONE, d14 PUBLISH_NAMESPACE_DONE). An IETF subscription
  // outlives the namespace (it ends with PUBLISH_DONE), but the origin ends a broadcast's tracks
  // when it is withdrawn: so the handler hears of it once no upstream subscription under it is
  // live (groups still arriving are not cut off), or when the session ends.
  void client_withdraw(const std::string& full) override;
  // FetchContext
  bool accept_peer_request_id(uint64_t id) override;
  ietf_detail::DownstreamSubscription* downstream(uint64_t request_id) const override;
  void end_request(uint64_t request_id, bool reset) override;

  // PublishContext (and the session itself)
  bool is_announced(const std::string& full) const override {
    return publisher_ != nullptr && publisher_->announced_by_path.count(full) != 0;
  }
  size_t announced_count() const override {
    return publisher_ != nullptr ? publisher_->announced_by_path.size() : 0;
  }
  ietf_detail::UpstreamSubscription* adopt_published(const std::string& full,
                                                     const std::string& name, uint64_t request_id,
                                                     uint64_t alias,
                                                     const std::string& properties) override;
  void drop_published(ietf_detail::UpstreamSubscription* u) override;
  // SUBGROUP streams held for an alias not known yet read again (a SUBSCRIBE_OK or PUBLISH came).
  void retry_held_subgroups() override;
  ietf_detail::UpstreamSubscription* upstream_by_alias(uint64_t alias) override;
  // A d16 SUBSCRIBE_NAMESPACE (`own_stream`: its bidi stream; null: on the control stream).
  void handle_subscribe_namespace(const wire::ietf::SubscribeNamespace& m,
                                  transport::Stream* own_stream);
  // --- drafts 17+ (Draft::request_streams): SETUP on uni streams, a bidi stream per request ---
  // A peer bidi stream: its first message says which request it carries.
  void on_request_stream(transport::Stream& stream);
  // The first message of a peer bidi stream no handler holds yet (d16 SUBSCRIBE_NAMESPACE, 17+ a
  // request), read in the peer's form and consumed. nullopt: incomplete (a PendingStream holds
  // the stream and reads again), or the session fails (no decode, or FIN cut it short) with the
  // stream released.
  std::optional<wire::ietf::ControlMessage> read_first_message(transport::Stream& stream);
  // --- client role (ietf_client.cc) ---
  // A d15 NAMESPACE / NAMESPACE_DONE on the control stream: an answer to our SUBSCRIBE_NAMESPACE.
  void on_client_namespace(const wire::ietf::Namespace& m);
  // A REQUEST_ERROR for none of our upstream subscriptions: a PUBLISH_NAMESPACE or
  // SUBSCRIBE_NAMESPACE of ours refused (logged), or a late answer.
  void on_client_request_error(const wire::ietf::RequestError& m);

  template <class H, class... Args>
  H* adopt(Args&&... args) {
    // new here, not std::make_unique: the context bases are private, so only a member converts.
    std::unique_ptr<H> h(new H(*this, std::forward<Args>(args)...));
    H* raw = h.get();
    handlers_.push_back(std::move(h));
    return raw;
  }

  void continue_start();
  // Client role: request ids (ours even from 0, the relay's odd from 1), then the control stream
  // (14..16) or our SETUP stream (17+).
  void start_client();
  // Opens the control stream and writes CLIENT_SETUP; over qmux-00 it may have to wait for
  // on_streams_available().
  void open_client_control();
  // After SERVER_SETUP: PUBLISH_NAMESPACE for the origin's broadcasts, SUBSCRIBE_NAMESPACE for the
  // discovery prefix.
  void start_client_requests();
  bool has_live_upstream(const std::string& full) const;
  // Withdraws the pending paths whose subscriptions are over; flush: all of them (session end).
  void withdraw_served();
  void flush_client_withdrawals();
  void on_setup_done();
  void handle_subscribe(const wire::ietf::Subscribe& m);
  void handle_unsubscribe(const wire::ietf::Unsubscribe& m);
  void handle_publish_namespace(const wire::ietf::PublishNamespace& m);
  void handle_publish_namespace_done(const wire::ietf::PublishNamespaceDone& m);
  void handle_subscribe_ok(const wire::ietf::SubscribeOk& m);
  void handle_request_error(const wire::ietf::RequestError& m);
  // The peer's answer to our PUBLISH `request_id` (offer_track): PUBLISH_OK (REQUEST_OK from 18).
  void handle_publish_ok(uint64_t request_id, bool forward);
  void handle_publish_done(const wire::ietf::PublishDone& m);
  void handle_max_request_id(const wire::ietf::MaxRequestId& m);
  void send_request_error(uint64_t request_id, wire::ietf::MessageType type, uint64_t code,
                          const char* reason);
  void withdraw_peer_announcements();
  void detach();
  void flush_retired();
  void raise_max_request_id();
  // Counts one PUBLISH_NAMESPACE or PUBLISH_NAMESPACE_DONE against --max-announce-rate; false
  // (the session closing) past it (PublishContext).
  bool admit_announce_change() override;
  // stall_timeout and idle_timeout, every LivenessWatch::period once SETUP completed.
  void check_liveness();
  // --- drafts 17+ ---
  void start_request_streams();
  void on_incoming_stream_d17(transport::Stream& stream);
  // send_control() for drafts 17+: each message goes on the stream of its request (by request id),
  // a new bidi stream for our SUBSCRIBE, GOAWAY on our SETUP stream.
  void send_on_request_stream(const wire::ietf::ControlMessage& m);
  void open_our_requests();
  bool accept_stream_request_id(uint64_t id);


  // The by-value constructor's second step: the shared constructor over `owned`, which it keeps.
  IetfSession(transport::Session& transport, std::unique_ptr<const SessionConfig> owned,
              model::Origin& origin, SessionHandler& handler, const Clock& clock, Timers& timers,
              wire::Version version);

  transport::Session& transport_;
  // The by-value constructor's copy; null when the owner lent its shared config.
  std::unique_ptr<const SessionConfig> owned_config_;
  const SessionConfig& config_;  // *owned_config_ or the owner's
  std::string root_;             // normalised
  std::string query_;
  model::Origin& origin_;
  SessionHandler& handler_;
  const Clock& clock_;
  Timers& timers_;
  uint64_t id_;
  wire::Version version_;
  const wire::ietf::Draft* row_;
  wire::ietf::Limits limits_;
  bool ready_ = false;
  bool closed_ = false;
  bool closing_ = false;
  bool admission_pending_ = false;
  bool started_ = false;
  TimerId setup_timer_ = 0;
  TimerId retire_timer_ = 0;
  TimerId stall_timer_ = 0;
  uint64_t peer_streams_ = 0;       // streams the peer opened (activity for idle_timeout)
  size_t namespace_listeners_ = 0;  // SUBSCRIBE_NAMESPACEs listening
  LivenessWatch liveness_;          // stall_timeout, idle_timeout
  transport::Stream* control_ = nullptr;
  ietf_detail::ControlReader* control_reader_ = nullptr;
  std::vector<std::unique_ptr<ietf_detail::Handler>> handlers_;
  std::vector<std::unique_ptr<ietf_detail::Handler>> retired_;
  // Request ids: the peer's next expected id and the limit we granted; ours and the peer's limit.
  uint64_t peer_next_request_id_ = 0;
  uint64_t peer_max_request_id_ = 0;  // what we granted
  uint64_t our_next_request_id_ = 1;
  uint64_t our_max_request_id_ = 0;   // what the peer granted
  // What only a publishing peer needs (~330 B): made on its first PUBLISH_NAMESPACE or PUBLISH,
  // on the first track the origin takes from it, or on the first object bytes it sends, so a
  // pure viewer's session (the relay's many) never holds it. Lookups answer "none" without it.
  struct PublisherState {
    PublisherState(const SessionConfig& config, Instant now);
    ~PublisherState();
    // The peer's announcements: request id -> path (full), and path -> request id.
    std::map<uint64_t, std::string> announced_by_id;
    std::map<std::string, uint64_t> announced_by_path;
    // Upstream subscriptions, one per (path, track), owned here.
    std::map<std::pair<std::string, std::string>,
             std::unique_ptr<ietf_detail::UpstreamSubscription>>
        upstream_tracks;
    std::map<uint64_t, ietf_detail::UpstreamSubscription*> upstream_by_request;
    std::map<uint64_t, ietf_detail::UpstreamSubscription*> upstream_by_alias;
    std::vector<ietf_detail::UpstreamSubscription*> upstream_blocked;  // no request id yet
    std::vector<ietf_detail::SubgroupReader*> held_subgroups;
    model::CacheBudget budget;     // max_publisher_cache
    TokenBucket ingress;           // max_publisher_rate
    TokenBucket announce_changes;  // max_announce_rate
  };
  // The publisher state, made on first use. The rate buckets start full when it is made, which
  // is what buckets made at session start would hold by then (they refill to their capacity).
  PublisherState& publisher() {
    if (publisher_ == nullptr) [[unlikely]] {
      make_publisher_state();
    }
    return *publisher_;
  }
  void make_publisher_state();
  std::unique_ptr<PublisherState> publisher_;  // null until the peer publishes
  std::map<uint64_t, ietf_detail::DownstreamSubscription*> downstream_;  // by request id
  // Tracks offer_track() could not PUBLISH under the peer's MAX_REQUEST_ID, offered when it rises.
  struct BlockedOffer {
    std::string full;
    std::string name;
    bool forward = true;
    friend bool operator==(const BlockedOffer&, const BlockedOffer&) = default;
  };
  std::vector<BlockedOffer> offers_blocked_;
  std::vector<ietf_detail::DownstreamSubscription*> waiting_for_streams_;
  std::map<uint64_t, ietf_detail::NamespaceAnnouncer*> namespace_announcers_;  // d14/15
  // Drafts 17+: our SETUP stream (kept open: GOAWAY goes there), whether the peer's SETUP stream
  // arrived, the request streams by request id (a client's even, a server's odd), our SUBSCRIBEs
  // (and a client's PUBLISH_NAMESPACEs) waiting for a bidi stream, and the peer's ids skipped so
  // far (a request's stream may overtake an earlier one's).
  transport::Stream* setup_out_ = nullptr;
  bool peer_setup_stream_ = false;
  wire::ietf::Peer peer_form_ = wire::ietf::Peer::kDraftText;
  std::optional<uint64_t> peer_relay_hops_;  // RELAY_HOPS origin from the peer's SETUP, kept
  uint64_t peer_relay_cost_ = 0;  // RELAY_COST from the peer's SETUP (0: none declared)
  std::map<uint64_t, ietf_detail::RequestStream*> requests_;
  std::deque<wire::ietf::ControlMessage> our_requests_waiting_;  // SUBSCRIBE, PUBLISH_NAMESPACE, PUBLISH
  std::set<uint64_t> peer_skipped_ids_;
  // Client role: CLIENT_SETUP waits for a stream; the d14/15 discovery request on the control
  // stream (a d16 one lives on its own stream, owned by handlers_).
  bool control_waits_for_stream_ = false;
  ietf_detail::NamespaceDiscovery* discovery_ = nullptr;
  std::set<std::string> withdraw_pending_;  // client_withdraw() of paths still subscribed
  TimerId withdraw_timer_ = 0;
  std::set<uint64_t> ended_unacknowledged_;  // await_unsubscribe()
  // FETCH, TRACK_STATUS, SUBSCRIBE_UPDATE (ietf_fetch.cc); made on the first such message.
  std::unique_ptr<ietf_detail::FetchService> fetches_;
  ietf_detail::FetchService& fetches();
  // PUBLISH (ietf_publish.cc); made on the first one.
  std::unique_ptr<ietf_detail::PublishService> publishes_;
  ietf_detail::PublishService& publishes();
  // OBJECT_DATAGRAM receive (ietf_datagram.cc); made on the first datagram.
  std::unique_ptr<ietf_detail::DatagramReceiver> datagrams_;
  ietf_detail::DatagramSendStats datagram_stats_;
  bool blocked_sent_ = false;  // REQUESTS_BLOCKED sent for the peer's current MAX_REQUEST_ID
};

}  // namespace moqd::session
