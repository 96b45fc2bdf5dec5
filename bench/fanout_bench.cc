// In-process fan-out of one track (bench/fanout_rig.h): one publisher, 64 / 1,000 / 10,000
// subscribers, on 1 worker and on 2 workers (the subscribers split over two event loops on two
// threads; the track crosses from worker 0 to worker 1 through the relay's Bridge once). Frames of
// 1000 bytes, a new group every 30 frames.
//
// One delivery is one frame received by one subscriber (proved by the subscribers' sinks, which
// parse every group stream: the run fails if a single frame or byte is missing). Reported per
// delivery, over the timed loop only (after setup and three warm-up groups):
//   cpu_ns_per_delivery    CPU time of the whole process (CLOCK_PROCESS_CPUTIME_ID: both workers,
//                          and the benchmark thread, which sleeps on a condition variable)
//   wall_ns_per_delivery   elapsed time
//   allocs_per_delivery    heap allocations of every thread (bench/alloc_counter.h)
//   path_allocs_per_delivery  those made on the per-subscriber delivery path (inside
//                          Subscription::pump: base/counting.h); 0 is the target
//   locks_per_delivery, path_locks_per_delivery  Mutex acquisitions, all and on that path
//   polls_per_frame        epoll_wait calls of every worker per published frame
//   wakes_per_frame        eventfd writes one worker made to wake another, per published frame
// Each iteration publishes enough whole groups for about 20,000 deliveries, and a fixed number of
// iterations gives about 1.5 million deliveries per case.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "alloc_counter.h"
#include "base/counting.h"
#include "cpu_clock.h"
#include "fanout_rig.h"

namespace moqd::bench {
namespace {

constexpr uint64_t kDeliveriesPerIteration = 20'000;
constexpr uint64_t kDeliveriesPerCase = 1'500'000;
constexpr size_t kWarmupGroups = 3;
constexpr size_t kFramesPerGroup = 30;

size_t groups_per_iteration(size_t subscribers) {
  uint64_t per_group = kFramesPerGroup * subscribers;
  return static_cast<size_t>(std::max<uint64_t>(1, (kDeliveriesPerIteration + per_group - 1) / per_group));
}

int64_t iterations(size_t subscribers) {
  uint64_t per_iteration = groups_per_iteration(subscribers) * kFramesPerGroup * subscribers;
  return static_cast<int64_t>(std::max<uint64_t>(3, kDeliveriesPerCase / per_iteration));
}

void BM_Fanout(benchmark::State& state, size_t workers, size_t subscribers) {
  FanoutOptions o;
  o.workers = workers;
  o.subscribers = subscribers;
  o.frames_per_group = kFramesPerGroup;
  FanoutRig rig(o);
  rig.publish_groups(kWarmupGroups, /*overlapping=*/true);  // pool growth at group boundaries
  if (std::string err = rig.check(); !err.empty()) {
    state.SkipWithError(("warm-up: " + err).c_str());
    return;
  }
  const size_t groups = groups_per_iteration(subscribers);
  const uint64_t before = rig.expected_deliveries();
  AllocationDelta allocs;
  const uint64_t path_allocs_start = path_allocation_count();
  const uint64_t locks_start = counting::lock_count();
  const uint64_t path_locks_start = counting::path_lock_count();
  const LoopTotals loops_start = rig.loop_totals();
  const uint64_t cpu_start = process_cpu_ns();
  const auto wall_start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    rig.publish_groups(groups);
  }
  const auto wall = std::chrono::steady_clock::now() - wall_start;
  const uint64_t cpu_ns = process_cpu_ns() - cpu_start;
  const uint64_t alloc_count = allocs.count();
  const uint64_t path_allocs = path_allocation_count() - path_allocs_start;
  const uint64_t locks = counting::lock_count() - locks_start;
  const uint64_t path_locks = counting::path_lock_count() - path_locks_start;
  const LoopTotals loops_end = rig.loop_totals();
  if (std::string err = rig.check(); !err.empty()) {
    state.SkipWithError(err.c_str());
    return;
  }
  const double frames = static_cast<double>(rig.expected_deliveries() - before) /
                        static_cast<double>(subscribers);
  state.counters["polls_per_frame"] =
      static_cast<double>(loops_end.polls - loops_start.polls) / frames;
  state.counters["wakes_per_frame"] =
      static_cast<double>(loops_end.wakes - loops_start.wakes) / frames;
  const double deliveries = static_cast<double>(rig.expected_deliveries() - before);
  state.counters["cpu_ns_per_delivery"] = static_cast<double>(cpu_ns) / deliveries;
  state.counters["wall_ns_per_delivery"] =
      static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count()) /
      deliveries;
  state.counters["allocs_per_delivery"] = static_cast<double>(alloc_count) / deliveries;
  state.counters["path_allocs_per_delivery"] = static_cast<double>(path_allocs) / deliveries;
  state.counters["locks_per_delivery"] = static_cast<double>(locks) / deliveries;
  state.counters["path_locks_per_delivery"] = static_cast<double>(path_locks) / deliveries;
  state.counters["deliveries"] = deliveries;
  state.SetItemsProcessed(static_cast<int64_t>(deliveries));
}

const bool kRegistered = [] {
  for (size_t workers : {1, 2}) {
    for (size_t subscribers : {64, 1000, 10000}) {
      std::string name = "BM_Fanout/workers:" + std::to_string(workers) +
                         "/subscribers:" + std::to_string(subscribers);
      benchmark::RegisterBenchmark(name.c_str(), BM_Fanout, workers, subscribers)
          ->Iterations(iterations(subscribers))
          ->MeasureProcessCPUTime()
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace moqd::bench
