#pragma once
// When to give freed heap back to the system (glibc malloc_trim). A trim walks every free chunk
// of every arena and madvises its pages, under each arena's lock: its cost grows with the heap,
// not with what it returns (19.6 ms on a worker's loop with 1,000 viewers, for a few KB each).
// So a trim runs only when the heap in use has dropped (a crowd left, an attack's state was freed)
// and the resident memory the allocator keeps beyond it has grown: never in a steady state,
// where the gap grows with fragmentation, not with memory that became free at once. And only when
// every loop was idle over the last check interval: a trim that returns a crowd's memory still
// madvises it page by page under the arena's lock (10-20 ms for 30-40 MB), which glibc offers no
// way to split, so it waits until no loop has traffic to delay. Memory freed while the relay stays
// busy stays with the allocator, which reuses it: it is below the peak the relay already held.
#include <algorithm>
#include <cstdint>

namespace moqd {

class TrimPolicy {
 public:
  struct Sample {
    uint64_t in_use = 0;    // bytes handed out by the allocator (mallinfo2 uordblks + hblkhd)
    uint64_t resident = 0;  // the process's resident bytes
    double busiest = 0;     // largest share (0..1) of the last interval a loop spent on work
  };

  // `threshold`: bytes freed (in use below its peak since the last trim) and kept (resident beyond
  // in use, above its floor) that each must reach before a trim. `max_busy`: the busiest loop's
  // share of the interval above which no trim runs.
  TrimPolicy(uint64_t threshold, double max_busy) : threshold_(threshold), max_busy_(max_busy) {}

  // Called once per check with the current sample; true: trim now, then call trimmed().
  bool should_trim(Sample s) {
    const uint64_t gap = s.resident > s.in_use ? s.resident - s.in_use : 0;
    floor_ = std::min(floor_, gap);
    peak_in_use_ = std::max(peak_in_use_, s.in_use);
    return gap >= floor_ + threshold_ && s.in_use + threshold_ <= peak_in_use_ &&
           s.busiest <= max_busy_;
  }

  // The sample right after a trim: what it left resident beyond in use is the new floor (code,
  // stacks, what a trim cannot return), and the heap's peak starts again from here.
  void trimmed(Sample after) {
    floor_ = after.resident > after.in_use ? after.resident - after.in_use : 0;
    peak_in_use_ = after.in_use;
  }

 private:
  uint64_t threshold_;
  double max_busy_;
  uint64_t floor_ = UINT64_MAX;
  uint64_t peak_in_use_ = 0;
};

}  // namespace moqd
