#pragma once
// What a moq-lite stream handler may do to its session: handlers (handlers.h) hold one of these
// instead of the Session, each kind only what it needs; Session implements them (Session::Context,
// session.h) and tests a fake (lite_handlers_test.cc) to drive one handler on one fake stream.
// One worker thread. fail(), admit_ingress(), announce_from_peer(), on_setup_complete() and
// on_goaway() may close the session, or run other handlers, before they return: a caller
// rechecks its stream (null once on_session_closed() ran).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/clock.h"
#include "base/error.h"
#include "model/origin.h"
#include "session/config.h"
#include "transport/transport.h"
#include "wire/version.h"

namespace moqd::session {

class StreamHandler;
class Subscription;
class UpstreamTrack;

// What every handler may do.
class HandlerContext {
 public:
  // The negotiated version; nullopt until SETUP completes (only the setup handlers and
  // PendingStream run before that).
  virtual std::optional<wire::Version> version() const = 0;
  // The session's id, for log lines.
  virtual uint64_t id() const = 0;
  // The session's configuration (limits, decode limits, counters); constant for its lifetime.
  virtual const SessionConfig& config() const = 0;
  virtual const Clock& clock() const = 0;
  // The session's timers; a handler cancels its own before it is destroyed.
  virtual Timers& timers() = 0;
  // The full path (root included) of a path as the peer names it.
  virtual std::string to_full(std::string_view peer_path) const = 0;
  // The peer's name for `full_path`; nullopt when it lies outside the session's root.
  virtual std::optional<std::string> to_peer(std::string_view full_path) const = 0;
  // The auth hook: may the peer do `action` on `full_path` (with the session's query)?
  virtual bool authorize(Action action, std::string_view full_path) = 0;
  // True when the peer is another relay (a cluster link).
  virtual bool is_relay_link() const = 0;
  // Closes the session because of the peer (a protocol error): logged with the code; every
  // handler is told on_session_closed() later (possibly before this returns).
  virtual void fail(Error e) = 0;
  // Destroys `h` after the current callback returns (never from inside this call). Idempotent.
  virtual void retire(StreamHandler* h) = 0;

 protected:
  ~HandlerContext() = default;
};

// Serving the peer's requests from the origin: SUBSCRIBE (Subscription), TRACK (TrackResponder),
// FETCH (FetchResponder) and ANNOUNCE_PLEASE (AnnounceResponder).
class ServeContext : public virtual HandlerContext {
 public:
  // The origin whose tracks and announcements are served.
  virtual model::Origin& origin() = 0;
  // The session as the source of the peer's own broadcasts in the origin (split horizon: never
  // announced back to the peer).
  virtual const model::BroadcastSource* peer_source() const = 0;
  // A new uni stream for a group, or null when the peer's stream limit does not allow one now
  // (then wait_for_streams() and retry from pump()).
  virtual transport::Stream* open_uni() = 0;
  // Downstream subscriptions counted by the session (stall detection, max_subscriptions,
  // traffic counters): add once started, forget (idempotent) when done or destroyed.
  virtual size_t subscription_count() const = 0;
  virtual void add_subscription(Subscription* s) = 0;
  virtual void forget_subscription(Subscription* s) = 0;
  // `s->pump()` is called once the peer allows more streams. Idempotent until then.
  virtual void wait_for_streams(Subscription* s) = 0;
  // One more ANNOUNCE_PLEASE served; false (nothing counted) at limits.max_announce_streams.
  virtual bool add_announce_stream() = 0;
  // An ANNOUNCE_PLEASE counted by add_announce_stream() ended.
  virtual void remove_announce_stream() = 0;

 protected:
  ~ServeContext() = default;
};

// Consuming what the peer publishes: its announcements (AnnounceRequester) and the tracks the
// session subscribes to (UpstreamTrack, GroupReceiver).
class PeerContext : public virtual HandlerContext {
 public:
  // A new bidi stream, or null when the peer's limit does not allow one now (then
  // wait_for_streams() and retry from open_subscribe_stream()).
  virtual transport::Stream* open_bidi() = 0;
  // `u->open_subscribe_stream()` is called once the peer allows more streams. Idempotent.
  virtual void wait_for_streams(UpstreamTrack* u) = 0;
  // Upstream subscriptions by the id sent in SUBSCRIBE: a fresh id, registration while the
  // track is fed, lookup from a group header (null: unknown or ended), and forgetting.
  virtual uint64_t next_upstream_id() = 0;
  virtual void register_upstream(uint64_t id, UpstreamTrack* u) = 0;
  virtual UpstreamTrack* upstream_by_id(uint64_t id) = 0;
  virtual void forget_upstream(UpstreamTrack* u) = 0;
  // Counts `n` received payload bytes against --max-publisher-rate; false once over it (the
  // session is then failing: stop reading).
  virtual bool admit_ingress(uint64_t n) = 0;
  // The peer announced (active) or withdrew `full`, with the relays it crossed. The session
  // bounds and rate-limits these (it may fail) and tells its SessionHandler.
  virtual void announce_from_peer(const std::string& full, bool active,
                                  const model::Hops& hops) = 0;

 protected:
  ~PeerContext() = default;
};

// The session's own streams: SETUP (compat SETUP both sides, lite-05's uni SETUP), PROBE and
// GOAWAY.
class ControlContext : public virtual HandlerContext {
 public:
  // True while the SessionHandler has not admitted the session: streams wait unread.
  virtual bool is_admission_pending() const = 0;
  // SETUP chose `version`: the session is ready (held streams are read, discovery starts).
  virtual void on_setup_complete(wire::Version version) = 0;
  // lite-05: the peer opened its SETUP stream; false when it already had one.
  virtual bool note_peer_setup_stream() = 0;
  // lite-05: the Origin the peer's SETUP named (0: none).
  virtual void set_peer_hop_id(uint64_t id) = 0;
  // The peer (a relay) sent GOAWAY naming `uri` ("" = the same URL).
  virtual void on_goaway(const std::string& uri) = 0;

 protected:
  ~ControlContext() = default;
};

// Everything: what PendingStream needs to hand a stream to the handler of its type.
class LiteContext : public ServeContext, public PeerContext, public ControlContext {
 public:
  // Takes ownership of `h`; it lives until retired or until the session ends.
  virtual void adopt(std::unique_ptr<StreamHandler> h) = 0;

  // Makes handler H on this context (H(LiteContext&, args...)) and adopts it.
  template <class H, class... Args>
  H* make(Args&&... args) {
    auto h = std::make_unique<H>(*this, std::forward<Args>(args)...);
    H* raw = h.get();
    adopt(std::move(h));
    return raw;
  }

 protected:
  ~LiteContext() = default;
};

}  // namespace moqd::session
