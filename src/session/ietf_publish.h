#pragma once
// PUBLISH (drafts 14..20, server role): the publisher-initiated subscription. A peer's PUBLISH
// names one track and the alias its SUBGROUP streams will carry; moqd answers PUBLISH_OK with
// Forward 1 and feeds the track into the origin exactly as if it had subscribed upstream: the
// track is an UpstreamSubscription of the session (ietf_upstream.cc) whose request id and alias
// come from the PUBLISH instead of from our SUBSCRIBE / the peer's SUBSCRIBE_OK, and PUBLISH_DONE
// ends it as it ends a subscription.
//
// What a relay does with it (d16 §7.6 / d20 §9.5 "Publisher Interactions": a relay MAY pause the
// subscription until there are known subscribers; d20 §9.2: Forward 1 upstream whenever a
// downstream subscriber wants it). Drafts 14..19 answer Forward 1 in PUBLISH_OK / REQUEST_OK,
// whatever the PUBLISH said, and so does a d20 PUBLISH with FORWARD 1 (the default): moqd keeps
// the track open in the origin (a relay-internal hold, neither a viewer nor demand) for as long
// as the PUBLISH lasts, so that a subscriber arriving later starts at the cached newest group; its
// cost, the publisher's bytes with nobody watching, is bounded by --max-publisher-rate like any
// other upstream track. A d20 PUBLISH with FORWARD 0 is accepted with the empty REQUEST_OK (#1834
// took FORWARD out of the answer) and stays paused until the track has demand (a listener that
// wants its data: a viewer of either protocol family on this worker, or a feed to another worker
// or cluster peer, model::TrackListener::wants_data); then moqd sends REQUEST_UPDATE with FORWARD
// 1 on the PUBLISH's stream (d20 §10.9; a new request id of ours, §10.1), and FORWARD 0 once
// demand has been gone for the track's linger (--upstream-linger, as for an upstream SUBSCRIBE;
// a viewer back meanwhile costs no restart). At most one REQUEST_UPDATE is in flight (within any
// MAX_REQUEST_UPDATES); the publisher's REQUEST_OK lets the next go; its REQUEST_ERROR (§10.9: the
// update failing terminates the subscription) ends the track as a PUBLISH_DONE with no Stream
// Count would, and moqd closes the stream. On 14..19 moqd does not pause a publisher (their answer
// sets Forward 1 at once; a SUBSCRIBE_UPDATE / REQUEST_UPDATE pause there is left undone: the warm
// cache is the choice). A downstream subscriber that asked Forward 0 still counts as demand (§9.2
// leaves Forward 1 upstream to the relay's discretion then).
//
// The track's namespace becomes a broadcast of this session: if the peer did not PUBLISH_NAMESPACE
// it, it is announced for as long as one PUBLISHed track of it lasts (d16 §7.6: a PUBLISH
// authorizes that one track; other tracks of the broadcast are not routed to the peer, their
// SUBSCRIBE upstream is refused by it). Refused with REQUEST_ERROR (d14: PUBLISH_ERROR): a
// namespace with no moqd path, an unauthorized path, a broadcast active through another session,
// a track this session already carries, more PUBLISHes than --max-subscriptions; a Track Alias in
// use closes the session with DUPLICATE_TRACK_ALIAS (d14 §9.13).
//
// Drafts 17..20: the PUBLISH is the first message of the peer's bidi request stream (d17 §9.11,
// d18/19 §10.10, d20 §10.11); the answer goes on that stream: PUBLISH_OK 0x1E (17), REQUEST_OK (18+,
// #1611; on 20 with no parameters, since #1834 moved FORWARD, SUBSCRIBER_PRIORITY and the filter
// into PUBLISH), or REQUEST_ERROR and FIN; on 20 moqd's REQUEST_UPDATEs follow on it. The peer's
// PUBLISH_DONE on that stream ends the track as on 14..16 (its Stream Count read as the upstream
// subscription reads it); the peer closing or resetting the
// stream without one ends it as a PUBLISH_DONE with Stream Count 0 would; moqd ending the track
// (the session closing) closes the stream, which is d17's UNSUBSCRIBE. Owned by the IetfSession,
// of which it holds only its PublishContext (ietf_context.h); one worker thread.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/track.h"
#include "session/ietf_context.h"
#include "wire/ietf.h"

namespace moqd::session::ietf_detail {

class PublishService {
 public:
  explicit PublishService(PublishContext& s);
  ~PublishService();
  PublishService(const PublishService&) = delete;
  PublishService& operator=(const PublishService&) = delete;

  // A PUBLISH as decoded; the request id is checked here.
  void on_publish(const wire::ietf::Publish& m);
  // Drafts 17+: a message after the PUBLISH on its request stream `request_id`: PUBLISH_DONE
  // (handed to the session, true: the publisher ended the track), or the REQUEST_OK /
  // REQUEST_ERROR answering our REQUEST_UPDATE in flight (an error ends the track: true; once the
  // track has ended either is ignored); anything else closes the session with a protocol
  // violation (false).
  bool on_stream_message(uint64_t request_id, wire::ietf::ControlMessage m);
  // Drafts 17+: the peer closed (FIN, reset or STOP_SENDING) the request stream of PUBLISH
  // `request_id`; `done`: its PUBLISH_DONE came first.
  static void on_stream_closed(PublishContext& s, uint64_t request_id, bool done);
  // The session is closing: tracks ending from now on release nothing (the session withdraws its
  // paths itself, with take_paths()).
  void on_session_closed() { closed_ = true; }
  // The paths announced only because of a PUBLISH, taken (the session withdraws them at close).
  std::vector<std::string> take_paths();
  // Live PUBLISHed tracks.
  size_t active() const { return holds_.size(); }

 private:
  class Hold;
  void refuse(uint64_t request_id, uint64_t code, const char* reason);
  // d20 FORWARD 0 publisher: the track's demand began (at once FORWARD 1) or ended (FORWARD 0
  // after the track's linger); steer() sends the REQUEST_UPDATE that brings the publisher's
  // Forward State to what demand wants, one at a time.
  void on_demand(Hold* h, bool demanded);
  void steer(Hold* h);
  // The track of `h` ended: PUBLISH over. Withdraws its path once no PUBLISHed track holds it
  // (unless the peer PUBLISH_NAMESPACEd it).
  void release(Hold* h);
  void withdraw_if_unused(const std::string& full);

  PublishContext& session_;
  bool closed_ = false;
  std::map<uint64_t, std::unique_ptr<Hold>> holds_;  // by PUBLISH request id
  std::vector<std::unique_ptr<Hold>> ended_;          // destroyed on the next PUBLISH or with us
  std::map<std::string, size_t> paths_;               // implicitly announced path -> holds
};

}  // namespace moqd::session::ietf_detail
