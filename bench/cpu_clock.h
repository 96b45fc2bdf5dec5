#pragma once
// CPU clocks for the benchmarks' per-operation counters, in nanoseconds: the whole process (every
// thread: what the fan-out costs on 1 or 2 workers) and the calling thread.
#include <time.h>

#include <cstdint>

namespace moqd::bench {

inline uint64_t cpu_clock_ns(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}
// CLOCK_PROCESS_CPUTIME_ID: CPU time of every thread of the process.
inline uint64_t process_cpu_ns() { return cpu_clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
// CLOCK_THREAD_CPUTIME_ID: CPU time of the calling thread.
inline uint64_t thread_cpu_ns() { return cpu_clock_ns(CLOCK_THREAD_CPUTIME_ID); }

}  // namespace moqd::bench
