#pragma once
// A latency histogram that merges across processes: log-linear buckets (16 per power of two of
// microseconds, so a percentile is within 1/16 of the true value), serialised as "i:n,i:n".
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace moqd::bench {

class Histogram {
 public:
  static constexpr int kSub = 16;
  static constexpr int kBuckets = 40 * kSub;

  void record_ns(int64_t ns) {
    uint64_t us = ns <= 0 ? 0 : static_cast<uint64_t>(ns) / 1000;
    ++counts_[index(us)];
    ++total_;
    max_ns_ = std::max(max_ns_, ns);
  }
  uint64_t total() const { return total_; }
  // The p-th quantile (0..1) in milliseconds: the upper edge of its bucket; max for p == 1.
  double quantile_ms(double p) const {
    if (total_ == 0) {
      return 0;
    }
    if (p >= 1) {
      return static_cast<double>(max_ns_) / 1e6;
    }
    uint64_t rank = static_cast<uint64_t>(p * static_cast<double>(total_ - 1)) + 1;
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        return std::min(static_cast<double>(upper_us(i)) / 1e3, static_cast<double>(max_ns_) / 1e6);
      }
    }
    return static_cast<double>(max_ns_) / 1e6;
  }
  void merge(const Histogram& o) {
    for (int i = 0; i < kBuckets; ++i) {
      counts_[i] += o.counts_[i];
    }
    total_ += o.total_;
    max_ns_ = std::max(max_ns_, o.max_ns_);
  }
  // What was recorded after `earlier` (an older copy of this cumulative histogram); its max is
  // the upper edge of the highest bucket that grew (the exact maximum is not kept per bucket).
  Histogram since(const Histogram& earlier) const {
    Histogram d;
    for (int i = 0; i < kBuckets; ++i) {
      d.counts_[i] = counts_[i] >= earlier.counts_[i] ? counts_[i] - earlier.counts_[i] : 0;
      d.total_ += d.counts_[i];
      if (d.counts_[i] != 0) {
        d.max_ns_ = std::min<int64_t>(max_ns_, static_cast<int64_t>(upper_us(i)) * 1000);
      }
    }
    return d;
  }
  std::string serialize() const {
    std::string s = std::to_string(max_ns_);
    for (int i = 0; i < kBuckets; ++i) {
      if (counts_[i] != 0) {
        s += "," + std::to_string(i) + ":" + std::to_string(counts_[i]);
      }
    }
    return s;
  }
  static Histogram parse(const std::string& s) {
    Histogram h;
    const char* p = s.c_str();
    char* end = nullptr;
    h.max_ns_ = std::strtoll(p, &end, 10);
    while (*end == ',') {
      long i = std::strtol(end + 1, &end, 10);
      if (*end != ':') {
        break;
      }
      uint64_t n = std::strtoull(end + 1, &end, 10);
      if (i >= 0 && i < kBuckets) {
        h.counts_[static_cast<size_t>(i)] += n;
        h.total_ += n;
      }
    }
    return h;
  }

 private:
  static int index(uint64_t us) {
    if (us < kSub) {
      return static_cast<int>(us);
    }
    int exp = std::bit_width(us) - 5;  // us >> exp is in [16, 32)
    int i = (exp + 1) * kSub + static_cast<int>((us >> exp) - kSub);
    return std::min(i, kBuckets - 1);
  }
  static uint64_t upper_us(int i) {
    if (i < kSub) {
      return static_cast<uint64_t>(i) + 1;
    }
    int exp = i / kSub - 1;
    return ((static_cast<uint64_t>(i % kSub) + kSub + 1) << exp);
  }

  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
  int64_t max_ns_ = 0;
};

}  // namespace moqd::bench
