#pragma once
// Mutex: std::mutex that counts its acquisitions in the benchmark build (base/counting.h), so a
// test can show that the fan-out path takes none. Every mutex in src/ is one of these; lock it with
// MutexLock (std::lock_guard) or std::unique_lock<Mutex>, and wait on it with
// std::condition_variable_any. Any thread.
#include <mutex>

#include "base/counting.h"

namespace moqd {

class Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() {
    if constexpr (counting::kEnabled) {
      counting::note_lock();
    }
    mu_.lock();
  }
  bool try_lock() {
    if constexpr (counting::kEnabled) {
      counting::note_lock();
    }
    return mu_.try_lock();
  }
  void unlock() { mu_.unlock(); }

 private:
  std::mutex mu_;
};

using MutexLock = std::lock_guard<Mutex>;

}  // namespace moqd
