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
// Sending: moqd writes every object to IETF subscribers on SUBGROUP streams,
// whatever it arrived on (the model keeps no forwarding preference). One worker thread.
#include <cstdint>
#include <map>
#include <span>

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

}  // namespace ietf_detail
}  // namespace moqd::session
