// Global replacements of operator new/delete and of the malloc family that count allocations.
// malloc and friends forward to glibc's __libc_* entry points; operator new calls __libc_malloc
// directly so that one `new` counts once.
#include "alloc_counter.h"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstdio>
#include <new>

#include "base/counting.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);
}

namespace moqd::bench {
namespace {

// One slot per thread, each on its own cache line. Threads beyond kSlots share the last slot,
// which then counts with an atomic add (never the case in these benchmarks: a handful of threads).
constexpr size_t kSlots = 64;
struct alignas(64) Slot {
  std::atomic<uint64_t> count{0};
  std::atomic<uint64_t> path{0};  // made inside a counting::PathScope
};
Slot g_slots[kSlots];
std::atomic<size_t> g_next_slot{0};
thread_local size_t t_slot = SIZE_MAX;

// Path-allocation traces (alloc_counter.h). A trace's slot is claimed with a fetch_add, its frames
// written, then `ready` set; the printer reads only ready ones.
constexpr int kTraceDepth = 32;
struct PathTrace {
  std::atomic<bool> ready{false};
  size_t thread_slot = 0;
  int depth = 0;
  void* frames[kTraceDepth];
};
PathTrace g_traces[kMaxPathTraces];
std::atomic<bool> g_traces_armed{false};
std::atomic<int> g_next_trace{0};
thread_local bool t_tracing = false;  // backtrace() itself must not be traced

void record_path_trace(size_t slot) {
  if (!g_traces_armed.load(std::memory_order_relaxed) || t_tracing) {
    return;
  }
  const int i = g_next_trace.fetch_add(1, std::memory_order_relaxed);
  if (i >= kMaxPathTraces) {
    return;
  }
  t_tracing = true;
  PathTrace& t = g_traces[i];
  t.thread_slot = slot;
  t.depth = backtrace(t.frames, kTraceDepth);
  t.ready.store(true, std::memory_order_release);
  t_tracing = false;
}

inline void count_one() {
  size_t s = t_slot;
  if (s == SIZE_MAX) {
    s = g_next_slot.fetch_add(1, std::memory_order_relaxed);
    t_slot = s = s < kSlots ? s : kSlots - 1;
  }
  const bool in_path = moqd::counting::in_path();
  if (in_path) {
    record_path_trace(s);
  }
  if (s == kSlots - 1) {
    g_slots[s].count.fetch_add(1, std::memory_order_relaxed);
    if (in_path) {
      g_slots[s].path.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  // Only this thread writes its slot: a plain load and store, no lock prefix.
  auto& c = g_slots[s].count;
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (in_path) {
    auto& p = g_slots[s].path;
    p.store(p.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
}

void* counted_malloc(size_t size) {
  count_one();
  return __libc_malloc(size);
}

void* counted_aligned(size_t alignment, size_t size) {
  count_one();
  return __libc_memalign(alignment, size);
}

void* new_or_throw(size_t size) {
  void* p = counted_malloc(size == 0 ? 1 : size);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return p;
}

void* aligned_new_or_throw(size_t size, std::align_val_t al) {
  void* p = counted_aligned(static_cast<size_t>(al), size == 0 ? 1 : size);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  return p;
}

}  // namespace

uint64_t allocation_count() {
  uint64_t total = 0;
  for (const Slot& s : g_slots) {
    total += s.count.load(std::memory_order_relaxed);
  }
  return total;
}

uint64_t path_allocation_count() {
  uint64_t total = 0;
  for (const Slot& s : g_slots) {
    total += s.path.load(std::memory_order_relaxed);
  }
  return total;
}

void arm_path_traces() {
  // The first backtrace() loads the unwinder, which allocates: do it here, outside any path.
  void* warm[4];
  t_tracing = true;
  backtrace(warm, 4);
  t_tracing = false;
  g_next_trace.store(0, std::memory_order_relaxed);
  for (PathTrace& t : g_traces) {
    t.ready.store(false, std::memory_order_relaxed);
  }
  g_traces_armed.store(true, std::memory_order_release);
}

void print_path_traces(int fd) {
  const int n = g_next_trace.load(std::memory_order_acquire);
  for (int i = 0; i < n && i < kMaxPathTraces; ++i) {
    const PathTrace& t = g_traces[i];
    if (!t.ready.load(std::memory_order_acquire)) {
      continue;
    }
    char line[96];
    const int len = std::snprintf(line, sizeof line, "path allocation %d (thread slot %zu):\n", i,
                                  t.thread_slot);
    if (len > 0 && write(fd, line, static_cast<size_t>(len)) < 0) {
      return;
    }
    backtrace_symbols_fd(t.frames, t.depth, fd);
  }
}

}  // namespace moqd::bench

using moqd::bench::aligned_new_or_throw;
using moqd::bench::counted_aligned;
using moqd::bench::counted_malloc;
using moqd::bench::new_or_throw;

// --- the malloc family ---
extern "C" {
void* malloc(size_t size) noexcept { return counted_malloc(size); }
void free(void* p) noexcept { __libc_free(p); }
void* calloc(size_t n, size_t size) noexcept {
  moqd::bench::count_one();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) noexcept {
  moqd::bench::count_one();  // a realloc may move the block: count it as an allocation
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) noexcept { return counted_aligned(alignment, size); }
void* aligned_alloc(size_t alignment, size_t size) noexcept { return counted_aligned(alignment, size); }
int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  void* p = counted_aligned(alignment, size);
  if (p == nullptr) {
    return 12;  // ENOMEM
  }
  *out = p;
  return 0;
}
}

// --- operator new / delete, every replaceable form ---
void* operator new(size_t size) { return new_or_throw(size); }
void* operator new[](size_t size) { return new_or_throw(size); }
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return counted_malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return counted_malloc(size == 0 ? 1 : size);
}
void* operator new(size_t size, std::align_val_t al) { return aligned_new_or_throw(size, al); }
void* operator new[](size_t size, std::align_val_t al) { return aligned_new_or_throw(size, al); }
void* operator new(size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return counted_aligned(static_cast<size_t>(al), size == 0 ? 1 : size);
}
void* operator new[](size_t size, std::align_val_t al, const std::nothrow_t&) noexcept {
  return counted_aligned(static_cast<size_t>(al), size == 0 ? 1 : size);
}

void operator delete(void* p) noexcept { __libc_free(p); }
void operator delete[](void* p) noexcept { __libc_free(p); }
void operator delete(void* p, size_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t) noexcept { __libc_free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { __libc_free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { __libc_free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  __libc_free(p);
}
