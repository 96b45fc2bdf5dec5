#include "base/counting.h"

#include <atomic>
#include <cstddef>

namespace moqd::counting {
namespace {

// One slot per thread, each on its own cache line; threads past kSlots share the last one, which
// then counts with an atomic add (tests and benchmarks run a handful of threads).
constexpr size_t kSlots = 64;
struct alignas(64) Slot {
  std::atomic<uint64_t> locks{0};
  std::atomic<uint64_t> path_locks{0};
};
Slot g_slots[kSlots];
thread_local int t_path_depth = 0;

#ifdef MOQD_COUNTING  // without it nothing counts, and clang warns of what would go unused
std::atomic<size_t> g_next_slot{0};
thread_local size_t t_slot = SIZE_MAX;

void bump(std::atomic<uint64_t>& c, bool shared) {
  if (shared) {
    c.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // Only this thread writes its slot: a plain load and store.
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
#endif

}  // namespace

void note_lock() {
#ifdef MOQD_COUNTING
  {
    size_t s = t_slot;
    if (s == SIZE_MAX) {
      s = g_next_slot.fetch_add(1, std::memory_order_relaxed);
      t_slot = s = s < kSlots ? s : kSlots - 1;
    }
    const bool shared = s == kSlots - 1;
    bump(g_slots[s].locks, shared);
    if (t_path_depth > 0) {
      bump(g_slots[s].path_locks, shared);
    }
  }
#endif
}

uint64_t lock_count() {
  uint64_t total = 0;
  for (const Slot& s : g_slots) {
    total += s.locks.load(std::memory_order_relaxed);
  }
  return total;
}

uint64_t path_lock_count() {
  uint64_t total = 0;
  for (const Slot& s : g_slots) {
    total += s.path_locks.load(std::memory_order_relaxed);
  }
  return total;
}

bool in_path() { return t_path_depth > 0; }
void enter_path() { ++t_path_depth; }
void leave_path() { --t_path_depth; }

}  // namespace moqd::counting
