#pragma once
// What the handlers of an IetfSession may do to it, one narrow interface per handler kind. The
// protocol logic of each stream kind lives in its handler (ietf_handlers.h,
// ietf_session_internal.h, ietf_client.cc, ietf_fetch.cc, ietf_datagram.cc, ietf_publish.cc); the session owns the handlers, keeps the state shared between
// them (request ids, subscriptions by id and alias, announcements) and implements these
// interfaces. A handler holds only its context, so a test drives it on a fake stream with a fake
// context (ietf_handlers_test.cc), and what a handler may reach is listed here.
//
// The interfaces share a virtual base, HandlerContext, so that IetfSession implements it once.
// Every member is called on the session's worker thread, from a handler's callback; none of them
// destroys the calling handler synchronously (retire() defers it past the callback).
#include <cstddef>
#include <cstdint>
#include <cstddef>
#include <optional>
#include <span>
#include <string>

#include "base/error.h"
#include "session/moq_session.h"
#include "wire/ietf.h"

namespace moqd::model {
class Origin;
class Track;
}  // namespace moqd::model

namespace moqd::session::ietf_detail {

class Handler;
class DownstreamSubscription;
class UpstreamSubscription;
class SubgroupReader;
class RequestStream;

// What every handler may do: read the session's draft and limits, send on the control path, close
// the session because of the peer, and end itself.
class HandlerContext {
 public:
  // The session's id (for logs).
  virtual uint64_t id() const = 0;
  // The draft in effect, and its row of wire differences.
  virtual wire::Version draft() const = 0;
  virtual const wire::ietf::Draft& row() const = 0;
  // Decoder limits (wire/ietf.h) and the session's configuration (its limits, traffic counters).
  virtual const wire::ietf::Limits& limits() const = 0;
  virtual const SessionConfig& config() const = 0;
  // The query string of the session's URL, for the auth hook (not config().query: a session may
  // share its owner's config, which names no session's query).
  virtual const std::string& query() const = 0;
  virtual Timers& timers() = 0;
  // SETUP completed (and admission, where one is pending).
  virtual bool is_ready() const = 0;
  // The session is closed or closing: nothing more is to be written.
  virtual bool is_closed() const = 0;
  // Closes the session because of the peer: `e` maps to the draft's termination code; the second
  // form names the code itself. The caller returns without touching its stream again.
  virtual void fail(Error e) = 0;
  virtual void fail(wire::ietf::TerminationCode code, const char* detail) = 0;
  // Sends `m` where its request lives: the control stream (14..16), or the request's own bidi
  // stream by request id (17+; our SUBSCRIBE opens one).
  virtual void send_control(const wire::ietf::ControlMessage& m) = 0;
  // `h` is over: destroyed after the current callback.
  virtual void retire(Handler* h) = 0;

 protected:
  ~HandlerContext() = default;
};

// The control stream (14..16), the SETUP stream (17+), a request stream (17+), and a peer stream
// whose kind is not known yet: where the peer's control messages enter the session.
class ControlContext : public virtual HandlerContext {
 public:
  // The session waits for the application's admit(): peer streams are held unread.
  virtual bool is_admission_pending() const = 0;
  // The session plays the client role (it sent CLIENT_SETUP / its SETUP first).
  virtual bool is_client() const = 0;
  // How to read the peer's messages where @moq/net and the draft text disagree.
  virtual wire::ietf::Peer peer_form() const = 0;
  // The next control message at the front of `stream`, read in `form` and consumed; nullopt while
  // it is incomplete, or with the session failing when it does not decode or FIN cut it short.
  virtual std::optional<wire::ietf::ControlMessage> read_message(transport::Stream& stream,
                                                                 wire::ietf::Peer form) = 0;
  // A control message of the peer's (after SETUP), to the session's handler of its type.
  virtual void on_control_message(wire::ietf::ControlMessage m) = 0;
  // SETUP: the peer's CLIENT_SETUP (server role, 14..16), the relay's first message on our control
  // stream (client role: SERVER_SETUP, or the session fails), the peer's SETUP (17+).
  virtual void on_control_setup(const wire::ietf::ClientSetup& setup) = 0;
  virtual void on_server_setup(const wire::ietf::ControlMessage& m) = 0;
  virtual void on_peer_setup(const wire::ietf::Setup& setup) = 0;
  // d14/15 UNSUBSCRIBE_NAMESPACE: the peer no longer wants namespace updates of `request_id`.
  virtual void stop_namespace(uint64_t request_id) = 0;
  // The request stream of `request_id` is over (it retires itself too).
  virtual void forget_request(uint64_t request_id, RequestStream* r) = 0;
  // A peer stream whose first bytes arrived after SETUP: a uni stream is a SUBGROUP stream, a bidi
  // stream (d16) a SUBSCRIBE_NAMESPACE; the session adopts it with the handler of that kind.
  virtual void on_subgroup_stream(transport::Stream& stream) = 0;
  virtual void on_namespace_stream(transport::Stream& stream) = 0;
  // Drafts 17+, the request stream of the peer's PUBLISH `request_id` (PublishService): a message
  // after the PUBLISH (true: PUBLISH_DONE, the publisher ended the track; anything else fails the
  // session), and the stream's close (`done`: its PUBLISH_DONE came first).
  virtual bool on_publish_stream_message(uint64_t request_id, wire::ietf::ControlMessage m) = 0;
  virtual void on_publish_stream_closed(uint64_t request_id, bool done) = 0;
};

// OBJECT_DATAGRAMs the session's downstream subscriptions sent (ietf_datagram.h), and objects
// that arrived as datagrams but went out on a SUBGROUP stream (the transport has no datagrams,
// the object does not fit in one, or the transport refused it).
struct DatagramSendStats {
  uint64_t sent = 0;
  uint64_t stream_fallbacks = 0;
};

// A downstream SUBSCRIBE: the peer reads a track of the origin on SUBGROUP streams we open, and
// objects the producer sent unreliably in OBJECT_DATAGRAMs where the transport has them.
class SubscriptionContext : public virtual HandlerContext {
 public:
  // The largest datagram the transport takes now; 0 when it has none (qmux over WebSocket).
  virtual size_t max_datagram_size() const = 0;
  // Queues one datagram; false when the transport refused it (too big, or none).
  virtual bool send_datagram(std::span<const uint8_t> bytes) = 0;
  virtual DatagramSendStats& datagram_stats() = 0;
  // A new uni stream, or null while the peer's stream limit is reached.
  virtual transport::Stream* open_uni() = 0;
  // `s` found no uni stream: its pump() runs again once the peer raises the limit.
  virtual void wait_for_streams(DownstreamSubscription* s) = 0;
  // `s` is over (PUBLISH_DONE sent, or the peer unsubscribed): its request id is free.
  virtual void forget_downstream(DownstreamSubscription* s) = 0;
  // Client role: we sent PUBLISH_DONE for `request_id`; the subscription counts until the relay's
  // UNSUBSCRIBE. A no-op in the server role.
  virtual void await_unsubscribe(uint64_t request_id) = 0;
};

// An upstream subscription: the relay reads a track of a broadcast the peer published.
class UpstreamContext : public virtual HandlerContext {
 public:
  // Our next request id, or nullopt while the peer's MAX_REQUEST_ID does not allow one.
  virtual std::optional<uint64_t> take_request_id() = 0;
  // The peer's path of the full path `full` (under the session's root), or nullopt.
  virtual std::optional<std::string> to_peer(const std::string& full) const = 0;
  // `u` wants its SUBSCRIBE sent: now, or once the peer's MAX_REQUEST_ID allows one.
  virtual void request_upstream(UpstreamSubscription* u) = 0;
  // `u` stopped: its request id and alias are no longer routed to it.
  virtual void forget_upstream(UpstreamSubscription* u) = 0;
};

// Objects the peer publishes into upstream tracks (SUBGROUP streams, OBJECT_DATAGRAMs).
class IngressContext : public virtual HandlerContext {
 public:
  // Counts `n` payload bytes against --max-publisher-rate; false (the session closing) past it.
  virtual bool admit_ingress(uint64_t n) = 0;
  // The live track fed through `alias`, or null (no subscription has that alias, or its track is
  // gone).
  virtual model::Track* upstream_track(uint64_t alias) = 0;
};

// A SUBGROUP stream from the peer.
class SubgroupContext : public IngressContext {
 public:
  // True when `r` is held unread: no subscription has `alias` yet but a SUBSCRIBE_OK (or PUBLISH)
  // is outstanding; its retry() runs when one arrives. False when `alias` is known, or nothing is
  // outstanding (the stream is then refused).
  virtual bool hold_subgroup(SubgroupReader* r, uint64_t alias) = 0;
  // A stream of the subscription of `alias` began (started) or ended (!started) its group: the
  // subscription's end after PUBLISH_DONE waits for its streams. No-op for an unknown alias.
  virtual void upstream_reader(uint64_t alias, bool started) = 0;
  // `r` is over (it retires itself too): it is no longer held.
  virtual void on_subgroup_reader_done(SubgroupReader* r) = 0;
};

// SUBSCRIBE_NAMESPACE answered from the origin (NamespaceAnnouncer), and ours (client role,
// NamespaceDiscovery).
class NamespaceContext : public virtual HandlerContext {
 public:
  virtual model::Origin& origin() = 0;
  virtual SessionHandler& handler() = 0;
  // The session as the source of the peer's broadcasts (split horizon; withdrawals).
  virtual model::BroadcastSource& source() = 0;
  // A SUBSCRIBE_NAMESPACE began (true) or ended (false) listening: activity for idle_timeout.
  virtual void count_namespace_listener(bool open) = 0;
  // The cluster extension is in effect (session/ietf_cluster.h), and the peer's declared origin.
  virtual bool cluster_negotiated() const = 0;
  virtual uint64_t peer_relay_hops() const = 0;
  // Paths between the peer's view (under the session's root) and the origin's.
  virtual std::string to_full(const std::string& peer_path) const = 0;
  virtual std::optional<std::string> to_peer(const std::string& full) const = 0;
  // Our next request id (d14 PUBLISH_NAMESPACE), or nullopt while the peer allows none.
  virtual std::optional<uint64_t> take_request_id() = 0;
  virtual wire::ietf::Peer peer_form() const = 0;
  virtual std::optional<wire::ietf::ControlMessage> read_message(transport::Stream& stream,
                                                                 wire::ietf::Peer form) = 0;
  // A SUBSCRIBE_NAMESPACE asked for PUBLISH (d16/17 Subscribe Options 0 or 2): track `name` of
  // `full` is live in the origin, so the session offers it to the peer with a PUBLISH of its own
  // (FORWARD `forward`) and forwards its objects once the peer accepts. Nothing is sent for a track
  // of the peer's own broadcast, one the peer already subscribes, one it may not subscribe, or
  // while the peer's MAX_REQUEST_ID allows no request.
  virtual void offer_track(const std::string& full, const std::string& name, bool forward) = 0;
  // Client role: the relay announced / withdrew `full` (IetfSession::client_withdraw says when the
  // handler hears of it).
  virtual void client_announce(const std::string& full) = 0;
  virtual void client_withdraw(const std::string& full) = 0;
};

// FETCH, TRACK_STATUS and SUBSCRIBE_UPDATE (ietf_fetch.h).
class FetchContext : public virtual HandlerContext {
 public:
  virtual model::Origin& origin() = 0;
  virtual SessionHandler& handler() = 0;
  virtual std::string to_full(const std::string& peer_path) const = 0;
  // A new uni stream (a FETCH's data stream), or null while the peer's limit is reached.
  virtual transport::Stream* open_uni() = 0;
  // Checks a request id the peer chose for a new request; false (the session failing) when it
  // breaks the draft's rules.
  virtual bool accept_peer_request_id(uint64_t id) = 0;
  // The live downstream subscription of `request_id`, or null.
  virtual DownstreamSubscription* downstream(uint64_t request_id) const = 0;
  // The data stream of the peer's FETCH `request_id` ended (FIN, or `reset`): 17+, its request
  // stream ends the same way. No-op before 17 or once the stream is gone.
  virtual void end_request(uint64_t request_id, bool reset) = 0;
};

// PUBLISH (ietf_publish.h): the peer's own tracks, each fed into the origin as an upstream
// subscription that no SUBSCRIBE of ours opened, its namespace announced for as long as it lasts.
class PublishContext : public virtual HandlerContext {
 public:
  virtual model::Origin& origin() = 0;
  virtual SessionHandler& handler() = 0;
  // The session as the source of the peer's broadcasts.
  virtual model::BroadcastSource& source() = 0;
  virtual bool is_client() const = 0;
  virtual std::string to_full(const std::string& peer_path) const = 0;
  // Checks a request id the peer chose for a new request; false (the session failing) when it
  // breaks the draft's rules.
  virtual bool accept_peer_request_id(uint64_t id) = 0;
  // Our next request id (d20: a REQUEST_UPDATE on a PUBLISH's stream), or nullopt while the
  // peer's MAX_REQUEST_ID does not allow one.
  virtual std::optional<uint64_t> take_request_id() = 0;
  // The upstream subscription that `alias` routes to, or null.
  virtual UpstreamSubscription* upstream_by_alias(uint64_t alias) = 0;
  // The peer PUBLISH_NAMESPACEd `full`; how many paths it has PUBLISH_NAMESPACEd.
  virtual bool is_announced(const std::string& full) const = 0;
  virtual size_t announced_count() const = 0;
  // Counts one announcement change against --max-announce-rate; false (the session closing) past
  // it.
  virtual bool admit_announce_change() = 0;
  // The UpstreamSubscription of (`full`, `name`) fed by the peer's PUBLISH `request_id` under
  // `alias` (no SUBSCRIBE is sent for it), registered by request id and alias; null when the
  // session already subscribes that track. `properties`: the PUBLISH's Track Properties block
  // (raw), which give the track's properties as a SUBSCRIBE_OK's do. drop_published() undoes it.
  virtual UpstreamSubscription* adopt_published(const std::string& full, const std::string& name,
                                                uint64_t request_id, uint64_t alias,
                                                const std::string& properties) = 0;
  virtual void drop_published(UpstreamSubscription* u) = 0;
  // SUBGROUP streams held for an alias not known yet read again (a PUBLISH came).
  virtual void retry_held_subgroups() = 0;
  // A control message of the peer's, to the session's handler of its type (17+: the PUBLISH_DONE
  // read on a PUBLISH's request stream, or the one its close stands for).
  virtual void on_control_message(wire::ietf::ControlMessage m) = 0;
};

}  // namespace moqd::session::ietf_detail
