// Track cache microbenchmarks (src/model/track.h): a producer writing groups of 30 frames of 1000
// bytes into a Track whose cache is bounded, by group count, by bytes, or by a shared
// CacheBudget, so that every new group (or chunk) evicts an old one in steady state. The chunk is
// one Bytes shared by every frame (a refcount, no copy), so this measures the cache and not the
// payload copy; the session's receive path makes that copy (one Bytes::copy per chunk). No
// listeners: fan-out is fanout_bench.cc.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "alloc_counter.h"
#include "cpu_clock.h"
#include "base/clock.h"
#include "model/cache_budget.h"
#include "model/track.h"

namespace moqd::bench {
namespace {

constexpr size_t kFrameSize = 1000;
constexpr size_t kFramesPerGroup = 30;
constexpr size_t kCachedGroups = 4;

enum class Bound { kGroups, kBytes, kBudget };

void BM_CacheInsertEvict(benchmark::State& state) {
  const auto bound = static_cast<Bound>(state.range(0));
  model::CacheLimits limits;
  const uint64_t group_bytes = kFrameSize * kFramesPerGroup;
  if (bound == Bound::kGroups) {
    limits.max_groups = kCachedGroups;
  } else {
    limits.max_groups = 1 << 20;
  }
  if (bound == Bound::kBytes) {
    limits.max_bytes = kCachedGroups * group_bytes;
  }
  ManualClock clock;
  model::CacheBudget budget(kCachedGroups * group_bytes);
  model::Track track("bench", "video", limits, std::chrono::seconds(5), clock, clock);
  if (bound == Bound::kBudget) {
    track.attach_budget(&budget);
  }
  std::vector<uint8_t> payload(kFrameSize, 0x5a);
  const Bytes chunk = Bytes::copy(payload);
  uint64_t sequence = 0;
  auto write_group = [&] {
    model::Group* g = track.begin_group(sequence++);
    for (size_t f = 0; f < kFramesPerGroup; ++f) {
      track.begin_object(*g, kFrameSize);
      track.append_chunk(*g, chunk);
    }
    track.finish_group(*g);
  };
  for (size_t i = 0; i < 2 * kCachedGroups; ++i) {
    write_group();  // fill the cache: from here on, every group evicts one
  }
  AllocationDelta allocs;
  const uint64_t cpu_start = thread_cpu_ns();
  for (auto _ : state) {
    write_group();
  }
  const uint64_t cpu_ns = thread_cpu_ns() - cpu_start;
  if (track.cached_groups() > kCachedGroups + 1) {
    state.SkipWithError("the cache did not evict");
  }
  const double frames = static_cast<double>(state.iterations() * kFramesPerGroup);
  state.counters["allocs_per_frame"] = static_cast<double>(allocs.count()) / frames;
  state.counters["cpu_ns_per_frame"] = static_cast<double>(cpu_ns) / frames;
  state.counters["cached_groups"] = static_cast<double>(track.cached_groups());
  state.SetItemsProcessed(static_cast<int64_t>(frames));
  state.SetLabel(bound == Bound::kGroups ? "bound=groups" : bound == Bound::kBytes ? "bound=bytes"
                                                                                    : "bound=budget");
}
BENCHMARK(BM_CacheInsertEvict)
    ->ArgName("bound")
    ->Arg(static_cast<int>(Bound::kGroups))
    ->Arg(static_cast<int>(Bound::kBytes))
    ->Arg(static_cast<int>(Bound::kBudget));

}  // namespace
}  // namespace moqd::bench
