// Fixed work for `make bench-instructions`: the 1-worker fan-out of bench/fanout_rig.h to 64
// subscribers, set up and warmed up with callgrind's instrumentation off, then exactly --groups
// groups of 30 frames of 1000 bytes (--frames-per-group, --frame-size) with it on (CALLGRIND_START/STOP_INSTRUMENTATION; run under
// `valgrind --tool=callgrind --instr-atstart=no`). Prints the deliveries made in the measured
// phase; bench/instructions.sh divides callgrind's instruction total by them. No timing: an
// instruction count compares two builds on a noisy machine. Outside valgrind the macros do nothing.
//
// It also prints the measured phase's heap allocations and Mutex acquisitions, in all and on the
// per-subscriber delivery path (inside Subscription::pump, base/counting.h). With --assert-zero it
// is the test that a delivery neither allocates nor locks: it exits 3 when the path made any
// allocation or lock acquisition in steady state (scripts/test.sh runs it on 1 and 2 workers).
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "alloc_counter.h"
#include "base/counting.h"
#include "fanout_rig.h"

namespace {

unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }

}  // namespace

int main(int argc, char** argv) {
  moqd::bench::FanoutOptions o;
  o.workers = 1;
  o.subscribers = 64;
  size_t groups = 10;
  bool assert_zero = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--assert-zero") == 0) {
      assert_zero = true;
    } else if (i + 1 < argc && std::strcmp(argv[i], "--subscribers") == 0) {
      o.subscribers = std::strtoull(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--groups") == 0) {
      groups = std::strtoull(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--workers") == 0) {
      o.workers = std::strtoull(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--frames-per-group") == 0) {
      o.frames_per_group = std::strtoull(argv[++i], nullptr, 10);
    } else if (i + 1 < argc && std::strcmp(argv[i], "--frame-size") == 0) {
      o.frame_size = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--subscribers N] [--groups N] [--workers N] [--frames-per-group N] "
                   "[--frame-size BYTES] [--assert-zero]\n",
                   argv[0]);
      return 2;
    }
  }
  if (assert_zero && !moqd::counting::kEnabled) {
    std::fprintf(stderr, "--assert-zero needs the MOQD_COUNTING build (-DMOQD_BENCH=ON)\n");
    return 2;
  }
  moqd::bench::FanoutRig rig(o);
  // Warm-up: every stream pool and buffer at its steady-state size, including a subscription
  // serving two groups at once at a group boundary (fanout_rig.h), which a late subscriber
  // brings about in steady state now and then.
  rig.publish_groups(3, /*overlapping=*/true);
  if (std::string err = rig.check(); !err.empty()) {
    std::fprintf(stderr, "warm-up: %s\n", err.c_str());
    return 1;
  }
  const uint64_t before = rig.expected_deliveries();
  // Read outside the counted phase: reading them runs a task on each worker.
  const moqd::bench::LoopTotals loops_start = rig.loop_totals();
  if (assert_zero) {
    moqd::bench::arm_path_traces();  // steady-state path allocations only; printed on failure
  }
  moqd::bench::AllocationDelta allocs;
  const uint64_t path_allocs_start = moqd::bench::path_allocation_count();
  const uint64_t locks_start = moqd::counting::lock_count();
  const uint64_t path_locks_start = moqd::counting::path_lock_count();
  CALLGRIND_START_INSTRUMENTATION;
  rig.publish_groups(groups);
  CALLGRIND_STOP_INSTRUMENTATION;
  const uint64_t allocations = allocs.count();
  const uint64_t path_allocations = moqd::bench::path_allocation_count() - path_allocs_start;
  const uint64_t locks = moqd::counting::lock_count() - locks_start;
  const uint64_t path_locks = moqd::counting::path_lock_count() - path_locks_start;
  const moqd::bench::LoopTotals loops_end = rig.loop_totals();
  if (std::string err = rig.check(); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  std::printf("subscribers=%zu workers=%zu groups=%zu frames_per_group=%zu frame_size=%zu\n",
              o.subscribers, o.workers, groups, o.frames_per_group, o.frame_size);
  const uint64_t deliveries = rig.expected_deliveries() - before;
  std::printf("deliveries=%llu allocations=%llu path_allocations=%llu locks=%llu path_locks=%llu\n",
              ull(deliveries), ull(allocations), ull(path_allocations), ull(locks),
              ull(path_locks));
  // The loops' turns: how often they polled, and what the slices of turn work cost in clock reads.
  std::printf("polls=%llu turn_items=%llu turn_slices_cut=%llu turn_clock_reads=%llu\n",
              ull(loops_end.polls - loops_start.polls),
              ull(loops_end.turn_items - loops_start.turn_items),
              ull(loops_end.turn_slices_cut - loops_start.turn_slices_cut),
              ull(loops_end.turn_clock_reads - loops_start.turn_clock_reads));
  if (assert_zero && (path_allocations != 0 || path_locks != 0)) {
    std::fprintf(stderr,
                 "FAIL: the delivery path allocated %llu times and locked %llu times in %llu "
                 "deliveries (%.3f and %.3f per delivery; 0 expected)\n",
                 ull(path_allocations), ull(path_locks), ull(deliveries),
                 static_cast<double>(path_allocations) / static_cast<double>(deliveries),
                 static_cast<double>(path_locks) / static_cast<double>(deliveries));
    moqd::bench::print_path_traces(2);
    return 3;
  }
  return 0;
}
