// Fixed work for `make bench-instructions`: the 1-worker fan-out of bench/fanout_rig.h to 64
// subscribers, set up and warmed up with callgrind's instrumentation off, then exactly --groups
// groups of 30 frames of 1000 bytes with it on (CALLGRIND_START/STOP_INSTRUMENTATION; run under
// `valgrind --tool=callgrind --instr-atstart=no`). Prints the deliveries made in the measured
// phase; bench/instructions.sh divides callgrind's instruction total by them. No timing: an
// instruction count compares two builds on a noisy machine. Outside valgrind the macros do nothing.
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "alloc_counter.h"
#include "fanout_rig.h"

int main(int argc, char** argv) {
  moqd::bench::FanoutOptions o;
  o.workers = 1;
  o.subscribers = 64;
  size_t groups = 10;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--subscribers") == 0) {
      o.subscribers = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--groups") == 0) {
      groups = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--workers") == 0) {
      o.workers = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--subscribers N] [--groups N] [--workers N]\n", argv[0]);
      return 2;
    }
  }
  moqd::bench::FanoutRig rig(o);
  rig.publish_groups(3);  // warm-up: every stream pool and buffer at its steady-state size
  if (std::string err = rig.check(); !err.empty()) {
    std::fprintf(stderr, "warm-up: %s\n", err.c_str());
    return 1;
  }
  const uint64_t before = rig.expected_deliveries();
  moqd::bench::AllocationDelta allocs;
  CALLGRIND_START_INSTRUMENTATION;
  rig.publish_groups(groups);
  CALLGRIND_STOP_INSTRUMENTATION;
  const uint64_t allocations = allocs.count();
  if (std::string err = rig.check(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  std::printf("subscribers=%zu workers=%zu groups=%zu frames_per_group=%zu frame_size=%zu\n",
              o.subscribers, o.workers, groups, o.frames_per_group, o.frame_size);
  const uint64_t deliveries = rig.expected_deliveries() - before;
  std::printf("deliveries=%llu allocations=%llu\n", static_cast<unsigned long long>(deliveries),
              static_cast<unsigned long long>(allocations));
  return 0;
}
