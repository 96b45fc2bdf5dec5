#pragma once
// Logging that never blocks a worker: a line is formatted on the calling thread into a bounded
// queue and written to stderr by a background thread. Each thread has its own rate limit
// (kLinesPerSecond, burst kBurst); lines over it are counted and reported as "N lines suppressed".
// A full queue drops the line and counts it the same way.
#include <cstdarg>
#include <cstdint>

namespace moqd::log {

enum class Level { kDebug, kInfo, kWarn, kError };

// Lines per second each thread may log once its burst is spent, and the burst.
inline constexpr double kLinesPerSecond = 200;
inline constexpr double kBurst = 1000;

void set_level(Level level);
bool enabled(Level level);
// Printf-style; appends the newline. Safe from any thread.
void write(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Blocks until every queued line is written (used at exit and in tests).
void flush();
// Lines dropped (rate limit or full queue) since start.
uint64_t dropped();

}  // namespace moqd::log

#define MOQD_LOG(level, ...)                                \
  do {                                                      \
    if (::moqd::log::enabled(::moqd::log::Level::level)) {  \
      ::moqd::log::write(::moqd::log::Level::level, __VA_ARGS__); \
    }                                                       \
  } while (0)

namespace moqd::log {
// Tag printed on this thread's lines ("w0", "main"); at most 15 characters.
void set_thread_tag(const char* tag);
}  // namespace moqd::log
