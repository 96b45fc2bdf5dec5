#pragma once
// A moq-lite session (drafts 01..05) over one transport session, for either role. It is symmetric:
// it serves the peer's ANNOUNCE_PLEASE and SUBSCRIBE streams from the origin, and it learns the
// peer's broadcasts (its own ANNOUNCE_PLEASE) and feeds the origin's tracks from the peer
// (its own SUBSCRIBEs). The relay and the `moq` client both use it. One worker thread; owned by
// the connection that owns the transport session; destroyed at the latest inside
// SessionHandler::on_session_closed.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "model/origin.h"
#include "session/config.h"
#include "session/guards.h"
#include "session/lite_context.h"
#include "session/moq_session.h"
#include "transport/transport.h"
#include "wire/lite.h"

namespace moqd::session {

class StreamHandler;
class Subscription;
class UpstreamTrack;

class Session final : public transport::SessionVisitor, public MoqSession {
 public:
  // `config` is the session's own copy (root and query included).
  Session(transport::Session& transport, SessionConfig config, model::Origin& origin,
          SessionHandler& handler, const Clock& clock, Timers& timers);
  // `shared` is the owner's, shared by its sessions, and must outlive this session; its root and
  // query are not read: the session's are `root` and `query`.
  Session(transport::Session& transport, const SessionConfig& shared, std::string root,
          std::string query, model::Origin& origin, SessionHandler& handler, const Clock& clock,
          Timers& timers);
  ~Session() override;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Starts the handshake (client: CLIENT_SETUP or nothing for lite-03+; server: waits). When the
  // handler's admission is pending, nothing starts until admit(): the peer's streams are accepted
  // and their bytes kept, unread.
  void start() override;
  // The handler decided (authorize(kConnect) now answers): starts, or closes with unauthorized.
  void admit() override;
  bool is_admission_pending() const override { return admission_pending_; }
  // Closes the transport session with `reason`; on_session_closed follows.
  void close(Error reason) override;
  // Sends GOAWAY naming `uri` where the version has it (lite-04: a bidi stream of type 5); false
  // otherwise (the caller closes with going_away at its deadline instead), or when no stream can
  // be opened now.
  bool send_goaway(const std::string& uri) override;

  uint64_t id() const override { return id_; }
  std::optional<wire::Version> version() const override { return version_; }
  bool is_ready() const override { return version_.has_value(); }
  const SessionConfig& config() const { return config_; }
  transport::Session& transport() override { return transport_; }

  // transport::SessionVisitor
  void on_incoming_stream(transport::Stream& stream) override;
  void on_streams_available() override;
  void on_closed(uint64_t code, std::string_view reason) override;

  // model::BroadcastSource: tracks of broadcasts this session's peer publishes.
  model::TrackSource& track_source(const std::string& path, const std::string& name) override;
  // Called by the origin only for tracks this session's peer publishes: makes the publisher state.
  model::CacheBudget* cache_budget() override { return &publisher().budget; }

  size_t subscription_count() const override { return subscriptions_.size(); }
  // Whether the peer ever acted as a publisher (announced, or had a track subscribed from it):
  // a pure viewer's session never makes that state. For tests.
  bool has_publisher_state() const { return publisher_ != nullptr; }
  // lite-05: the Origin the peer's SETUP named (0: none).
  uint64_t peer_hop_id() const { return peer_hop_id_; }

 private:
  // The handlers' view of this session (lite_context.h): forwards to the members below.
  class Context final : public LiteContext {
   public:
    explicit Context(Session& s) : s_(s) {}
    // HandlerContext
    std::optional<wire::Version> version() const override { return s_.version_; }
    uint64_t id() const override { return s_.id_; }
    const SessionConfig& config() const override { return s_.config_; }
    const Clock& clock() const override { return s_.clock_; }
    Timers& timers() override { return s_.timers_; }
    std::string to_full(std::string_view peer_path) const override;
    std::optional<std::string> to_peer(std::string_view full_path) const override;
    bool authorize(Action action, std::string_view full_path) override;
    bool is_relay_link() const override { return s_.handler_.is_relay_link(); }
    void fail(Error e) override { s_.fail(std::move(e)); }
    void retire(StreamHandler* h) override { s_.retire(h); }
    // ServeContext
    model::Origin& origin() override { return s_.origin_; }
    const model::BroadcastSource* peer_source() const override { return &s_; }
    transport::Stream* open_uni() override { return s_.transport_.open_uni(); }
    size_t subscription_count() const override { return s_.subscriptions_.size(); }
    void add_subscription(Subscription* sub) override;
    void forget_subscription(Subscription* sub) override;
    void wait_for_streams(Subscription* sub) override;
    bool add_announce_stream() override;
    void remove_announce_stream() override { --s_.announce_streams_; }
    // PeerContext
    transport::Stream* open_bidi() override { return s_.transport_.open_bidi(); }
    void wait_for_streams(UpstreamTrack* u) override;
    uint64_t next_upstream_id() override { return s_.publisher().next_upstream_id++; }
    void register_upstream(uint64_t id, UpstreamTrack* u) override {
      s_.publisher().upstreams[id] = u;
    }
    UpstreamTrack* upstream_by_id(uint64_t id) override;
    void forget_upstream(UpstreamTrack* u) override;
    bool admit_ingress(uint64_t n) override { return s_.admit_ingress(n); }
    void announce_from_peer(const std::string& full, bool active,
                            const model::Hops& hops) override {
      s_.announce_from_peer(full, active, hops);
    }
    // ControlContext
    bool is_admission_pending() const override { return s_.admission_pending_; }
    void on_setup_complete(wire::Version version) override { s_.on_setup_complete(version); }
    bool note_peer_setup_stream() override { return !std::exchange(s_.peer_setup_seen_, true); }
    void set_peer_hop_id(uint64_t id) override { s_.peer_hop_id_ = id; }
    void on_goaway(const std::string& uri) override { s_.handler_.on_goaway(uri); }
    // LiteContext
    void adopt(std::unique_ptr<StreamHandler> h) override;

   private:
    Session& s_;
  };

  void on_setup_complete(wire::Version version);
  // Closes the session because of the peer (logged with the code).
  void fail(Error e);
  // Destroys `h` from the loop, after the current callback returns.
  void retire(StreamHandler* h);
  // Counts `n` payload bytes received from the publishing peer against --max-publisher-rate
  // (a token bucket holding one second of the rate). False, and the session is closing with
  // bounds_exceeded, once the peer sends faster.
  bool admit_ingress(uint64_t n);
  void announce_from_peer(const std::string& full, bool active, const model::Hops& hops);
  void open_discovery();
  // The transport is gone: every handler drops its stream pointers.
  void detach_from_transport();
  // The peer's broadcasts leave the origin (through the handler).
  void withdraw_peer_announcements();
  void open_setup_stream();
  // lite-05: our SETUP on a uni stream (type 1), then FIN.
  void open_lite_setup_stream();
  void continue_start();
  void check_stalls();
  // Counts one announcement change of the peer against max_announce_rate; false (and the session
  // closing) past it.
  bool admit_announce_change();
  void sweep();

  // What only a publishing peer needs (~300 B): made on the peer's first announce or on the first
  // track the origin takes from it, so a pure viewer's session (the relay's many) never holds it.
  struct PublisherState {
    PublisherState(const SessionConfig& config, Instant now);
    std::vector<UpstreamTrack*> upstreams_waiting;
    std::map<uint64_t, UpstreamTrack*> upstreams;
    // One UpstreamTrack per (path, track), owned here, created on demand by track_source().
    std::map<std::pair<std::string, std::string>, std::unique_ptr<UpstreamTrack>> upstream_tracks;
    // Paths the peer announced and has not withdrawn. A server bounds it by max_announced_paths
    // (what one publisher may announce), a client by max_received_announced_paths (everyone's
    // broadcasts under its discovery prefix).
    std::unordered_set<std::string> peer_announced;
    uint64_t next_upstream_id = 0;
    model::CacheBudget budget;      // max_publisher_cache
    TokenBucket ingress;            // max_publisher_rate
    TokenBucket announce_changes;   // max_announce_rate
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

  // The by-value constructor's second step: the shared constructor over `owned`, which it keeps.
  Session(transport::Session& transport, std::unique_ptr<const SessionConfig> owned,
          model::Origin& origin, SessionHandler& handler, const Clock& clock, Timers& timers);

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
  Context ctx_{*this};
  std::optional<wire::Version> version_;
  bool closed_ = false;
  bool setup_waits_for_stream_ = false;
  bool admission_pending_ = false;
  bool closing_ = false;  // close() was called
  bool discovery_waits_for_stream_ = false;
  bool lite_setup_waits_for_stream_ = false;
  bool peer_setup_seen_ = false;
  uint64_t peer_hop_id_ = 0;
  TimerId setup_timer_ = 0;
  TimerId stall_timer_ = 0;
  TimerId sweep_timer_ = 0;
  std::vector<std::unique_ptr<StreamHandler>> handlers_;
  std::vector<StreamHandler*> retired_;
  std::vector<Subscription*> subscriptions_;
  std::vector<Subscription*> waiting_for_streams_;
  std::unique_ptr<PublisherState> publisher_;  // null until the peer publishes
  size_t announce_streams_ = 0;
  uint64_t peer_streams_ = 0;  // streams the peer opened (a sign of activity for idle_timeout)
  LivenessWatch liveness_;       // stall_timeout, idle_timeout
};

}  // namespace moqd::session
