#include "transport/quic/heap.h"

#include <array>
#include <algorithm>
#include <atomic>
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace moqd::transport::quic {
namespace {

// One slot per thread that ever allocated through counting_mem(). Written only by its thread
// (load + store, relaxed), so counting costs no atomic read-modify-write; slots are never reused,
// so a thread that ended keeps its (possibly negative: it freed what another allocated) share.
struct Slot {
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> blocks{0};
};

constexpr size_t kSlots = 256;
std::array<Slot, kSlots> g_slots;
std::atomic<size_t> g_next_slot{0};

// Threads beyond kSlots share the last slot through read-modify-write (never the case in moqd,
// whose threads are its workers and a few helpers).
Slot& my_slot(bool* shared) {
  thread_local size_t index = g_next_slot.fetch_add(1, std::memory_order_relaxed);
  *shared = index >= kSlots - 1;
  return g_slots[*shared ? kSlots - 1 : index];
}

void count(void* p, int64_t sign) {
  if (p == nullptr) {
    return;
  }
#if defined(__GLIBC__)
  auto n = static_cast<int64_t>(malloc_usable_size(p));
#else
  int64_t n = 0;
#endif
  bool shared = false;
  Slot& s = my_slot(&shared);
  if (shared) {
    s.bytes.fetch_add(sign * n, std::memory_order_relaxed);
    s.blocks.fetch_add(sign, std::memory_order_relaxed);
    return;
  }
  s.bytes.store(s.bytes.load(std::memory_order_relaxed) + sign * n, std::memory_order_relaxed);
  s.blocks.store(s.blocks.load(std::memory_order_relaxed) + sign, std::memory_order_relaxed);
}

void* mem_malloc(size_t size, void*) {
  void* p = std::malloc(size);
  count(p, 1);
  return p;
}

void mem_free(void* ptr, void*) {
  count(ptr, -1);
  std::free(ptr);
}

void* mem_calloc(size_t nmemb, size_t size, void*) {
  void* p = std::calloc(nmemb, size);
  count(p, 1);
  return p;
}

void* mem_realloc(void* ptr, size_t size, void*) {
  // Uncount first: after a successful realloc the old block may be gone. A failed realloc keeps
  // it, so it is counted again.
  count(ptr, -1);
  void* p = std::realloc(ptr, size);
  count(p != nullptr || size == 0 ? p : ptr, 1);
  return p;
}

const ngtcp2_mem kCountingMem = {nullptr, mem_malloc, mem_free, mem_calloc, mem_realloc};

}  // namespace

const ngtcp2_mem* counting_mem() { return &kCountingMem; }

HeapCount ngtcp2_heap() {
  int64_t bytes = 0;
  int64_t blocks = 0;
  size_t used = std::min(g_next_slot.load(std::memory_order_relaxed), kSlots);
  for (size_t i = 0; i < used; ++i) {
    bytes += g_slots[i].bytes.load(std::memory_order_relaxed);
    blocks += g_slots[i].blocks.load(std::memory_order_relaxed);
  }
  return {static_cast<uint64_t>(std::max<int64_t>(bytes, 0)),
          static_cast<uint64_t>(std::max<int64_t>(blocks, 0))};
}

}  // namespace moqd::transport::quic
