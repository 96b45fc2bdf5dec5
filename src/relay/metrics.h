#pragma once
// One worker's production counters: written only by that worker's thread (base/counter.h: a
// relaxed load and store, no locked instruction), read from any thread when /metrics is scraped,
// where the workers' values are summed. Nothing here is shared between workers, so the data path
// never contends on a counter.
#include <array>
#include <cstddef>
#include <cstdint>

#include "auth/token.h"
#include "base/counter.h"
#include "base/histogram.h"
#include "wire/version.h"

namespace moqd::relay {

// Protocol versions as metric labels, in a fixed order.
inline constexpr wire::Version kMetricVersions[] = {
    wire::Version::kLite01,      wire::Version::kLite02,      wire::Version::kLite03,
    wire::Version::kLite04,      wire::Version::kLite05,      wire::Version::kTransport14,
    wire::Version::kTransport15, wire::Version::kTransport16, wire::Version::kTransport17,
};
inline constexpr size_t kMetricVersionCount = std::size(kMetricVersions);
size_t metric_version_index(wire::Version v);

// Session close codes 0..kMaxCodeLabel each get a label; larger codes count as "other".
inline constexpr size_t kMaxCodeLabel = 31;
inline constexpr size_t kAuthRefusals = static_cast<size_t>(auth::Refusal::kServiceFailed) + 1;
// What a refusal was about.
enum AuthAction : size_t { kAuthConnect, kAuthPublish, kAuthSubscribe, kAuthActions };

struct WorkerMetrics {
  // [transport class][version]: sessions that became ready, and of those, that ended.
  Counter sessions_started[3][kMetricVersionCount];
  Counter sessions_ended[3][kMetricVersionCount];
  // Sessions closed, by the code they closed with (index kMaxCodeLabel + 1: other codes).
  std::array<Counter, kMaxCodeLabel + 2> sessions_closed_by_code;
  Counter auth_refusals[kAuthActions][kAuthRefusals];
  Counter sessions_expired;  // closed because their token or grant expired
  Counter goaways_sent;
  // QUIC: Initials accepted as new connections, handshakes completed, Retry packets sent (over
  // --max-handshakes-per-second), Initials with an invalid Retry token.
  Counter quic_handshakes_started, quic_handshakes_completed, quic_retries, quic_invalid_tokens;
  // Connections refused by --max-connections or --max-connections-per-address.
  Counter connections_refused;
};

}  // namespace moqd::relay
