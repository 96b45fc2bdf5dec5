#pragma once
// Counts every heap allocation the process makes: operator new/delete in all their forms and the
// malloc family (moqd's Bytes buffers come from malloc) are replaced in alloc_counter.cc, which
// every benchmark executable links. Each thread counts into its own cache line (no atomic
// read-modify-write on the hot path, so the count barely perturbs the timing); allocation_count()
// sums them. Benchmarks read it before and after a timed loop.
#include <cstdint>

namespace moqd::bench {

// Allocations (new, new[], malloc, calloc, memalign, aligned_alloc, posix_memalign; every realloc
// counts as one, since it may move the block) made by every thread since the process started.
uint64_t allocation_count();
// Those of them made inside a counting::PathScope (base/counting.h): on the per-subscriber
// delivery path. Needs the benchmark build's MOQD_COUNTING; 0 without it.
uint64_t path_allocation_count();

// Debug aid for a rare path allocation: once armed, the first kMaxPathTraces allocations made
// inside a PathScope each record their thread slot and call stack (backtrace(), into a static
// buffer: recording allocates nothing). Arm it after the warm-up, so that only steady-state path
// allocations are recorded; print_path_traces writes them to a file descriptor (stderr) as
// backtrace_symbols_fd does (binary(+offset): `addr2line -Cfipe BINARY OFFSET` names the line).
constexpr int kMaxPathTraces = 8;
void arm_path_traces();
void print_path_traces(int fd);

// Snapshot helper: allocations since construction (or the last reset()).
class AllocationDelta {
 public:
  AllocationDelta() : start_(allocation_count()) {}
  void reset() { start_ = allocation_count(); }
  uint64_t count() const { return allocation_count() - start_; }

 private:
  uint64_t start_;
};

}  // namespace moqd::bench
