#pragma once
// The MoQ Cluster extension's advertisement parameters (draft-lcurley-moq-cluster, as @moq/net
// 0.3.4 speaks it in ietf/cluster.js; NET-0.3.md §4.4, §4.7), drafts 17+: HOP_PATH (0x40B57, odd:
// a length-prefixed value holding hop ids back to back, no count, in the draft's varint form) and
// ROUTE_COST (0x40B58, even: a varint, absent = 0) on PUBLISH_NAMESPACE and the extended NAMESPACE.
// Pure: no session state. The RELAY_HOPS setup option itself is in ietf.h (relay_hops_origin).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "wire/ietf.h"

namespace moqd::wire::ietf {

// Hops one HOP_PATH may hold (draft-lcurley-moq-cluster; @moq/net MAX_HOPS).
inline constexpr size_t kMaxHopPath = 32;

// One advertisement's cluster state: the hop ids it crossed, the original publisher first and the
// sender last, and the accumulated ROUTE_COST.
struct Advert {
  std::vector<uint64_t> hops;
  uint64_t cost = 0;
  friend bool operator==(const Advert&, const Advert&) = default;
};

// True when `hops` is a HOP_PATH a conforming sender may write: 1..32 entries, no non-zero id twice
// (repeated 0s are allowed: 0 identifies nothing).
bool valid_hop_path(std::span<const uint64_t> hops);

// HOP_PATH's value for `hops`: draft 17's leading-ones form whatever the draft (the bytes
// @moq/net's encodeLeadingOnes writes; drafts 18+ read it too). Callers check valid_hop_path().
std::string encode_hop_path(std::span<const uint64_t> hops);
// HOP_PATH's value back into hop ids. Errors, all kProtocolViolation (the draft closes the session
// with PROTOCOL_VIOLATION over each): entries that do not exactly fill the value, an invalid
// varint in the draft's form (d18+ also read the 7-byte form), an empty list, more than 32 entries (reported before the 33rd is stored), a non-zero id
// twice. Not a draft with request streams (17+): kVersion.
Result<std::vector<uint64_t>> decode_hop_path(Version v, std::string_view value);

// Appends HOP_PATH, and ROUTE_COST when the cost is not 0 (absent means 0, as @moq/net writes it),
// to `params`. False (nothing appended) when the hops are not a valid_hop_path().
bool append_advert(const Advert& advert, Parameters& params);
// The advertisement a negotiated session's PUBLISH_NAMESPACE or NAMESPACE carries in `params`.
// A missing HOP_PATH is kProtocolViolation, like every decode_hop_path() error.
Result<Advert> read_advert(Version v, const Parameters& params);

}  // namespace moqd::wire::ietf
