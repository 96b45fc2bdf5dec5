#pragma once
// Looking up a name's addresses with their TTL, for peers discovered through DNS
// (relay/cluster_dns.h). getaddrinfo() hides the TTL, so this asks the resolver for the raw A and
// AAAA answers (libresolv's res_nsearch, which honours /etc/resolv.conf's search list, as a
// Kubernetes pod's short service names need) and reads them with parse_dns_answer.
//
// resolve_addresses() blocks (up to about kQueryTimeout per query): call it from a thread of its
// own, never from an event loop.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/error.h"

namespace moqd::runtime {

// What one DNS response says about a name.
struct DnsAnswer {
  // The A and AAAA records' addresses in text form ("10.0.0.7", "fd00::7"), in answer order.
  std::vector<std::string> addresses;
  // The smallest TTL of the answer section's records (CNAMEs included), in seconds; nullopt
  // when the section holds no record.
  std::optional<uint32_t> min_ttl;
  // The response's RCODE (0 NOERROR, 3 NXDOMAIN, ...).
  int rcode = 0;
};

// Parses a DNS response message (RFC 1035 wire format). Records of other types are skipped; an
// A record whose data is not 4 bytes (AAAA: 16) is malformed. A message that does not parse is an
// error (ErrorCode::kProtocolViolation); nothing in it is trusted or asserted on.
Result<DnsAnswer> parse_dns_answer(const uint8_t* data, size_t size);

// Where to send queries: a nameserver "IPv4:PORT" (tests, or a resolver other than the system's),
// or empty for /etc/resolv.conf's.
struct DnsResolverOptions {
  std::string server;
};

// The outcome of looking up `name`'s A and AAAA records.
struct DnsLookup {
  enum class Kind {
    kAddresses,  // at least one address
    kNoAddress,  // the name exists with no address, or does not exist (an answer, not a failure)
    kFailed,     // no usable answer (timeout, SERVFAIL, unreachable resolver): ask again later
  };
  Kind kind = Kind::kFailed;
  std::vector<std::string> addresses;  // A records first, then AAAA; duplicates removed
  uint32_t ttl_s = 0;                  // the smallest TTL among the answers (kAddresses)
  std::string error;                   // kFailed: why
};

// Per query: how long the resolver waits for an answer, and how often it asks.
inline constexpr Duration kQueryTimeout = std::chrono::seconds(1);

// Blocking: asks for `name`'s A and AAAA records.
DnsLookup resolve_addresses(const std::string& name, const DnsResolverOptions& options);

}  // namespace moqd::runtime
