#pragma once
// Counters that prove the fan-out path neither allocates nor locks, compiled in only with
// MOQD_COUNTING (the benchmark build, -DMOQD_BENCH=ON); without it every function here is an empty
// inline and lock_count() stays 0.
//
// - Lock acquisitions: every base::Mutex::lock() (base/mutex.h) counts one, in a slot of its own
//   thread (a plain load and store, no read-modify-write); lock_count() sums every thread's.
// - The delivery path: a PathScope marks a thread as running per-subscriber delivery work
//   (session::Subscription::pump: the cache cursor, the FRAME and GROUP headers, the transport's
//   write). Locks taken inside one also count in path_lock_count(), and the benchmark build's
//   allocation counter (bench/alloc_counter.cc) asks in_path() to count allocations made inside one
//   apart. A delivery is one frame handed to one subscriber, so per-delivery costs are exactly
//   what runs inside a PathScope; per-frame work (receiving it, caching it, the Bridge's copy for
//   another worker) runs outside.
// Readers may call the *_count() functions from any thread; the rest belongs to the calling thread.
#include <cstdint>

namespace moqd::counting {

#ifdef MOQD_COUNTING
inline constexpr bool kEnabled = true;
#else
inline constexpr bool kEnabled = false;
#endif

// Called by Mutex::lock() before it locks.
void note_lock();
// Lock acquisitions by every thread since the process started, and those inside a PathScope.
uint64_t lock_count();
uint64_t path_lock_count();

// True while the calling thread is inside a PathScope.
bool in_path();
void enter_path();
void leave_path();

class PathScope {
 public:
  PathScope() {
    if constexpr (kEnabled) {
      enter_path();
    }
  }
  ~PathScope() {
    if constexpr (kEnabled) {
      leave_path();
    }
  }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;
};

}  // namespace moqd::counting
