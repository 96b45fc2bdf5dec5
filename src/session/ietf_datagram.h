#pragma once
// OBJECT_DATAGRAM receive for an IetfSession (drafts 14..20): objects a publisher sends in QUIC /
// WebTransport datagrams enter the upstream track of their alias (a SUBSCRIBE moqd sent, or the
// publisher's PUBLISH), as the SubgroupReader's objects do.
//
// Model mapping (moqd's groups hold objects 0..n-1 in order, one subgroup): a datagram with Object
// ID 0 begins its group (finishing the alias's previous datagram group, whose end never came);
// one with the next Object ID of the open group appends to it; END_OF_GROUP, or a status datagram
// END_OF_GROUP / END_OF_TRACK, finishes it. So the usual one-object-per-group datagram track
// becomes single-object groups. What the model cannot carry is dropped and counted, never half
// applied: a datagram for an alias with no live subscription (the draft allows dropping those, it
// may buffer them instead), an object out of order or after a gap (datagrams may be lost or
// reordered), a group older than the track's cache allows, extensions other than a timestamp, an
// object over --max-frame-size, status DOES_NOT_EXIST. A datagram that does not decode closes the
// session with the draft's code (PROTOCOL_VIOLATION). Payload bytes count against
// --max-publisher-rate. Drafts 14..20 alike (wire/ietf_datagram.h holds their differences).
// Accepted objects are marked model::Object::unreliable (the forwarding preference the model
// keeps), their extension block held as it came.
//
// Sending (DownstreamSubscription::send_datagrams, ietf_subscriptions.cc): an IETF subscriber
// whose transport has datagrams (raw QUIC, WebTransport; not qmux over WebSocket) gets unreliable
// objects as OBJECT_DATAGRAMs of its own draft, encoded here; an object over
// max_datagram_size(), or any on a transport without datagrams, goes on the SUBGROUP stream of its
// group instead (counted, DatagramSendStats). moq-lite subscribers get every object on streams.
// One worker thread.
#include <cstdint>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "model/group.h"
#include "model/track.h"
#include "session/ietf_context.h"

namespace moqd::session {

namespace ietf_detail {

class DatagramReceiver {
 public:
  explicit DatagramReceiver(IngressContext& s) : session_(s) {}
  DatagramReceiver(const DatagramReceiver&) = delete;
  DatagramReceiver& operator=(const DatagramReceiver&) = delete;

  // One datagram from the transport (WebTransport's session prefix already stripped).
  void on_datagram(std::span<const uint8_t> bytes);
  // The transport is gone: open groups are let go without touching their tracks.
  void on_session_closed() { open_.clear(); }
  // The subscription of `alias` ended: its open group is let go (its track may be gone).
  void forget(uint64_t alias) { open_.erase(alias); }
  // Datagrams accepted into a track / dropped (see the file comment).
  uint64_t accepted() const { return accepted_; }
  uint64_t dropped() const { return dropped_; }

 private:
  // The alias's group being filled from datagrams.
  struct Open {
    model::Track* track = nullptr;
    model::GroupRef group;
    uint64_t sequence = 0;
    uint64_t next_object = 0;
  };
  void drop(const char* why);
  void finish(Open& o);

  IngressContext& session_;
  std::map<uint64_t, Open> open_;  // by track alias
  uint64_t accepted_ = 0;
  uint64_t dropped_ = 0;
};

// One object as an OBJECT_DATAGRAM of draft `d` appended to `out`: Object ID (the ZERO_OBJECT_ID
// form for 0), an explicit `priority`, `properties` (already in d's encoding; empty: none), its
// payload (the object must be complete), END_OF_GROUP when `end_of_group`. False (nothing
// appended) when the draft has no such datagram (the caller sends the object on a stream).
bool encode_object_datagram(wire::Version d, uint64_t alias, uint64_t group, const model::Object& o,
                            uint8_t priority, std::string_view properties, bool end_of_group,
                            std::vector<uint8_t>& out);
// The status datagram END_OF_GROUP (3) at `object` (the id after the group's last object).
void encode_end_of_group_datagram(wire::Version d, uint64_t alias, uint64_t group,
                                  uint64_t object, uint8_t priority, std::vector<uint8_t>& out);

}  // namespace ietf_detail
}  // namespace moqd::session
