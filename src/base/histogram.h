#pragma once
// A latency histogram with one writer thread (base/counter.h rules): fixed buckets, readable from
// any thread while the writer records.
#include <array>
#include <cstddef>
#include <cstdint>

#include "base/clock.h"
#include "base/counter.h"

namespace moqd {

// Histogram of the delivery latency inside the relay: from a frame's last byte entering the track
// cache to a subscription handing that byte to the transport. Bucket upper bounds in
// microseconds; the last bucket is +Inf.
inline constexpr int64_t kLatencyBoundsUs[] = {50,    100,    250,    500,    1000,   2500,
                                               5000,  10000,  25000,  50000,  100000, 250000,
                                               500000, 1000000};
inline constexpr size_t kLatencyBuckets = std::size(kLatencyBoundsUs) + 1;

class LatencyHistogram {
 public:
  // Worker thread only.
  void record(Duration d) {
    int64_t us = d.count() < 0 ? 0 : d.count();
    size_t i = 0;
    while (i < std::size(kLatencyBoundsUs) && us > kLatencyBoundsUs[i]) {
      ++i;
    }
    buckets_[i].add();
    sum_us_.add(static_cast<uint64_t>(us));
  }
  // Any thread.
  uint64_t bucket(size_t i) const { return buckets_[i].get(); }
  uint64_t sum_us() const { return sum_us_.get(); }

 private:
  std::array<Counter, kLatencyBuckets> buckets_;
  Counter sum_us_;
};

}  // namespace moqd
