#pragma once
// FETCH (standalone and joining), FETCH_CANCEL, TRACK_STATUS and SUBSCRIBE_UPDATE / REQUEST_UPDATE
// of an IetfSession (drafts 14..20, server role), served from the origin's track caches: what a relay
// has cached is what a FETCH returns (no upstream FETCH for what was evicted). Owned by the
// IetfSession; one worker thread. The live subscriptions it reads and narrows stay in
// the IetfSession and are reached through the functions below. From 17 each FETCH and TRACK_STATUS
// arrives on its own bidi stream (RequestStream, ietf_handlers.h), where its answers are routed by
// request id; a FETCH's request stream ends with its data stream (IetfSession::end_request), and
// resetting it arrives here as FETCH_CANCEL. What differs by draft is read off
// its wire::ietf::Draft row, not a copy of the handlers.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "model/track.h"
#include "session/ietf_context.h"
#include "wire/ietf.h"

namespace moqd::session {

namespace ietf_detail {

class DownstreamSubscription;
class FetchResponder;

// The largest location cached on `t` (the newest group by sequence holding an object, and its last
// object); nullopt when nothing is cached.
std::optional<wire::ietf::Location> largest_location(const model::Track& t);

// A SUBSCRIBE_UPDATE's effect on a live subscription (unset: unchanged). `last_group` is the last
// group delivered, inclusive; groups after it are no longer opened, those open are reset, and the
// subscription ends with PUBLISH_DONE (SUBSCRIPTION_ENDED) once a group past it appeared.
struct Narrowing {
  bool set_end = false;
  std::optional<uint64_t> last_group;  // with set_end: nullopt is open-ended
  std::optional<uint8_t> priority;
  std::optional<bool> forward;
};

// Defined in ietf_subscriptions.cc. The Track Properties block that SUBSCRIBE_OK and FETCH_OK
// declare for a track of properties `p` on draft `row`: TIMESCALE (0x08) on 17+ when moqd knows
// the units of the track's timestamps, else empty. Non-empty means every object sent under it
// carries a Timestamp property (object_timestamp_block).
std::string track_properties_block(const wire::ietf::Draft& row, const model::TrackProperties& p);
// An object's LOC Timestamp property (0x10) alone, as a property block of `row`, into `out`.
void object_timestamp_block(const wire::ietf::Draft& row, uint64_t timestamp,
                            std::vector<uint8_t>& out);

// Defined in ietf_subscriptions.cc: what FETCH and SUBSCRIBE_UPDATE may see of a subscription.
model::Track* subscription_track(const DownstreamSubscription& s);
std::optional<wire::ietf::Location> subscription_largest(const DownstreamSubscription& s);
bool subscription_is_largest_object(const DownstreamSubscription& s);
std::optional<uint64_t> subscription_last_group(const DownstreamSubscription& s);
void narrow_subscription(DownstreamSubscription& s, const Narrowing& n);
bool subscription_forward(const DownstreamSubscription& s);

class FetchService {
 public:
  explicit FetchService(FetchContext& s);
  ~FetchService();
  FetchService(const FetchService&) = delete;
  FetchService& operator=(const FetchService&) = delete;

  // Each takes the message as decoded; the request id is checked here.
  void on_fetch(const wire::ietf::Fetch& m);
  void on_fetch_cancel(const wire::ietf::FetchCancel& m);
  void on_track_status(const wire::ietf::TrackStatus& m);
  void on_subscribe_update(const wire::ietf::SubscribeUpdate& m);
  // The transport granted uni streams: responders waiting for one open it now.
  void on_streams_available();
  // The transport is gone: every stream pointer is dropped, nothing more is written.
  void on_session_closed();
  // A responder finished (FIN, reset or cancel); it is destroyed after the current callback.
  void retire(FetchResponder* r);
  FetchContext& session() { return session_; }
  size_t active() const { return live_.size(); }

 private:
  struct Request;
  struct Range;
  void refuse(uint64_t request_id, uint64_t code, const char* reason);
  // The FETCH's track and range (d14 §9.16), or nullopt once refused (or the session failed).
  std::optional<Request> standalone(const wire::ietf::Fetch& m);
  std::optional<Request> joining(const wire::ietf::Fetch& m);
  // Clamped to what was published, and the cached objects in it, in the requested order.
  std::optional<Range> resolve(const wire::ietf::Fetch& m);
  void collect(Range& r, const wire::ietf::Location& start, const wire::ietf::Location& last);
  // What a SUBSCRIBE_UPDATE asks: d14's fields, d15/16's parameters; nullopt once the session
  // failed on it.
  std::optional<Narrowing> narrowing_of_fields(const wire::ietf::SubscribeUpdate& m,
                                               const DownstreamSubscription& s);
  std::optional<Narrowing> narrowing_of_params(const wire::ietf::SubscribeUpdate& m);
  // d20 (§10.13.1, §5.1.2): Start / End from LOCATION_FILTER once the largest object is known;
  // false once the session failed.
  bool filter_range(const wire::ietf::Fetch& m, Request& q);
  void serve(const wire::ietf::Fetch& m, const Range& r);
  std::vector<wire::ietf::Parameter> largest_param(const std::optional<wire::ietf::Location>& l);

  FetchContext& session_;
  std::map<uint64_t, std::unique_ptr<FetchResponder>> live_;
  std::vector<std::unique_ptr<FetchResponder>> retired_;
  std::vector<FetchResponder*> waiting_;  // for a uni stream
  TimerId sweep_ = 0;
};

}  // namespace ietf_detail
}  // namespace moqd::session
