#pragma once
// The MoQ Cluster extension on IETF sessions of drafts 17+ (draft-lcurley-moq-cluster, as @moq/net
// 0.3.4 speaks it: ietf/cluster.js; NET-0.3.md §4.7): the session-side rules, kept out of
// IetfSession (ietf_request_streams.cc, ietf_namespaces.cc), which calls them at four points (its SETUP, its SETUP's answer, a received
// PUBLISH_NAMESPACE, an advertisement it sends).
//
// moqd declares RELAY_HOPS (its hop id, the same id its moq-lite-04/05 announcements carry) only
// when it runs as a cluster node (--cluster-node, --cluster-connect, --cluster-peers-file or
// --cluster-dns: SessionConfig::ietf_relay_hops != 0). Every moqd has a hop id (the host name's by
// default), but declaring makes every @moq/net client on 17+ read the extended NAMESPACE, and a
// standalone relay would gain only @moq/net's reflection filter, which moqd's split horizon already
// gives (a session's own broadcasts are never announced back to it). The extension is in
// effect on a session when moqd declared and the peer's SETUP carried RELAY_HOPS too (@moq/net
// always declares on 17+, so with a cluster node it always is). Then every PUBLISH_NAMESPACE and
// NAMESPACE moqd sends carries HOP_PATH = the route's hops (oldest first, as moq-lite keeps them)
// plus moqd's own id last, and ROUTE_COST = the count of those upstream hops (the draft's
// accumulated cost when every hop declares the default RELAY_COST 1; moqd's model keeps hop lists,
// not costs); a received PUBLISH_NAMESPACE's HOP_PATH becomes the route's hop list, as a moq-lite
// link's ANNOUNCE hops do, and its ROUTE_COST plus the peer's RELAY_COST (its SETUP option, the
// cost of the link to that peer; absent = 0) becomes the route's cost (route_cost), added to the
// hop distance in its score exactly as a --cluster-connect ?cost=N link's cost is. moqd sends no
// RELAY_COST: the only per-link cost it is configured with (?cost=N) is its own price for its
// outbound moq-lite links, not a cost it declares to IETF peers.
#include <cstdint>
#include <optional>

#include "base/error.h"
#include "model/origin.h"
#include "wire/ietf.h"
#include "wire/ietf_cluster.h"

namespace moqd::session::ietf_cluster {

// Adds RELAY_HOPS (moqd's hop id, one leading-ones varint) to the SETUP options moqd sends on draft
// `v`, when `self` != 0 (a cluster node) and `v` has request streams (17+: the only drafts the
// extension covers). Otherwise adds nothing.
void add_setup_options(wire::Version v, uint64_t self, wire::ietf::Parameters& options);

// Whether the session negotiated the extension: moqd declared (see add_setup_options) and the
// peer's SETUP carried RELAY_HOPS (`peer`: its declared origin, 0 allowed).
bool negotiated(wire::Version v, uint64_t self, const std::optional<uint64_t>& peer);

// The advertisement moqd sends a peer that declared `peer` for a route with `hops` (the model's
// hop list, oldest first): the hops, then `self`. nullopt: not to be advertised to that peer (the
// draft's "a publisher MUST NOT advertise a path whose HOP_PATH contains the Hop ID that peer
// declared", or a path that would pass 32 hops or repeat moqd).
std::optional<wire::ietf::Advert> advert_for(const model::Hops& hops, uint64_t self, uint64_t peer);

// What a received advertisement (a PUBLISH_NAMESPACE's parameters on a negotiated session) means.
struct Inbound {
  model::Hops hops;   // the route's hop list for the origin (HOP_PATH as sent: sender last)
  uint64_t cost = 0;  // ROUTE_COST (0 when absent)
  bool loop = false;  // HOP_PATH already holds moqd's own id: dropped, like a moq-lite loop
};
// The cost a route learned from a peer adds to its score: the advertisement's ROUTE_COST plus the
// peer's RELAY_COST. Both are below 2^62, so the sum (and the score's hop distance on top) does
// not overflow.
uint64_t route_cost(const Inbound& in, uint64_t peer_relay_cost);
// Errors (kProtocolViolation, the draft's PROTOCOL_VIOLATION): no HOP_PATH, or a malformed one
// (wire::ietf::read_advert).
Result<Inbound> read_inbound(wire::Version v, const wire::ietf::Parameters& params, uint64_t self);

}  // namespace moqd::session::ietf_cluster
