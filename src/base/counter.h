#pragma once
// A statistics counter with one writer thread and readers on any thread: the writer adds with a
// relaxed load and store (no read-modify-write, so no locked instruction on the hot path), readers
// see a recent value. Two writers would lose counts: each counter belongs to one thread.
#include <atomic>
#include <cstdint>

namespace moqd {

class Counter {
 public:
  void add(uint64_t n = 1) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

}  // namespace moqd
