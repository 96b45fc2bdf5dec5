#include "session/guards.h"

#include <algorithm>
#include <chrono>

namespace moqd::session {

void TokenBucket::reset(double rate, double capacity, Instant now) {
  rate_ = rate;
  capacity_ = capacity;
  tokens_ = capacity;
  refilled_ = now;
}

bool TokenBucket::take(double n, Instant now) {
  if (rate_ == 0) {
    return true;
  }
  double elapsed = std::chrono::duration<double>(now - refilled_).count();
  refilled_ = now;
  tokens_ = std::min(capacity_, tokens_ + elapsed * rate_);
  tokens_ -= n;
  return tokens_ >= 0;
}

void LivenessWatch::start(Instant now) {
  progress_at_ = now;
  active_at_ = now;
}

LivenessWatch::Verdict LivenessWatch::check(const SessionLimits& limits, Instant now,
                                            const LivenessSample& s) {
  if (!s.waiting || s.bytes_sent != progress_sent_) {
    progress_sent_ = s.bytes_sent;
    progress_at_ = now;
  } else if (now - progress_at_ > limits.stall_timeout) {
    return Verdict::kStalled;
  }
  if (limits.idle_timeout > Duration::zero()) {
    bool active = s.busy || s.bytes_sent != idle_sent_ || s.peer_streams != idle_streams_;
    idle_sent_ = s.bytes_sent;
    idle_streams_ = s.peer_streams;
    if (active) {
      active_at_ = now;
    } else if (now - active_at_ >= limits.idle_timeout) {
      return Verdict::kIdle;
    }
  }
  return Verdict::kAlive;
}

Duration LivenessWatch::period(const SessionLimits& limits) {
  Duration period = limits.stall_timeout / 8;
  if (limits.idle_timeout > Duration::zero()) {
    period = std::min<Duration>(period, limits.idle_timeout / 4);
  }
  return std::max<Duration>(period, std::chrono::milliseconds(25));
}

}  // namespace moqd::session
