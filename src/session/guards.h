#pragma once
// The abuse limits of SessionLimits that every session family enforces the same way (moq-lite's
// Session and the IETF session): a token bucket (--max-publisher-rate over payload bytes,
// --max-announce-rate over announcement changes) and a liveness watch (--stall-timeout,
// --idle-timeout). Sans-I/O: the session passes the time and its own answers (bytes sent, data
// waiting, something open) and closes itself with its own codes on a verdict.
#include <cstdint>

#include "base/clock.h"
#include "session/config.h"

namespace moqd::session {

// Refills at `rate` tokens per second up to `capacity`; starts full.
class TokenBucket {
 public:
  void reset(double rate, double capacity, Instant now);
  // Takes `n` tokens; false once the bucket is overdrawn (the caller closes the session).
  // A bucket of rate 0 admits everything.
  bool take(double n, Instant now);

 private:
  double rate_ = 0;
  double capacity_ = 0;
  double tokens_ = 0;
  Instant refilled_{};
};

// max_announce_rate's bucket holds one second of the rate plus max_announced_paths (a publisher
// announcing everything at once).
inline double announce_capacity(const SessionLimits& limits) {
  return static_cast<double>(limits.max_announce_rate) +
         static_cast<double>(limits.max_announced_paths);
}

// A session's two rate buckets, full at `now`: max_publisher_rate's (one second of the rate) and
// max_announce_rate's (announce_capacity).
inline void reset_rate_buckets(const SessionLimits& limits, Instant now, TokenBucket& ingress,
                               TokenBucket& announce_changes) {
  const auto publisher_rate = static_cast<double>(limits.max_publisher_rate);
  ingress.reset(publisher_rate, publisher_rate, now);
  announce_changes.reset(static_cast<double>(limits.max_announce_rate), announce_capacity(limits),
                         now);
}

// What a session reports to its LivenessWatch at each check.
struct LivenessSample {
  uint64_t bytes_sent = 0;     // transport bytes_sent(): bytes handed to the network
  uint64_t peer_streams = 0;   // streams the peer opened so far
  bool waiting = false;        // data queued for the peer (transport or a subscription)
  bool busy = false;           // an announcement, subscription or discovery request is open
};

// stall_timeout: data waits for the peer and, for stall_timeout, no byte of it left the
// connection (bytes queued into the transport are not progress; bytes handed to the network are).
// idle_timeout (zero: never): nothing open, no new stream and no byte sent for that long.
class LivenessWatch {
 public:
  enum class Verdict { kAlive, kStalled, kIdle };
  void start(Instant now);
  Verdict check(const SessionLimits& limits, Instant now, const LivenessSample& s);
  // How long until the next check.
  static Duration period(const SessionLimits& limits);

 private:
  uint64_t progress_sent_ = 0;  // bytes_sent at the last sign of progress
  Instant progress_at_{};
  uint64_t idle_sent_ = 0;      // bytes_sent and peer_streams at the previous check
  uint64_t idle_streams_ = 0;
  Instant active_at_{};
};

}  // namespace moqd::session
