#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <thread>

#include "base/mutex.h"

namespace moqd::log {
namespace {

constexpr size_t kMaxQueuedLines = 10000;

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<uint64_t> g_dropped{0};

struct Sink {
  Mutex mu;
  std::condition_variable_any cv;
  std::condition_variable_any drained;
  std::deque<std::string> lines;
  bool writing = false;
  std::thread thread;

  Sink() {
    thread = std::thread([this] { run(); });
    thread.detach();
  }

  void run() {
    std::unique_lock lock(mu);
    for (;;) {
      cv.wait(lock, [this] { return !lines.empty(); });
      std::deque<std::string> batch;
      batch.swap(lines);
      writing = true;
      lock.unlock();
      std::string out;
      for (auto& l : batch) {
        out += l;
      }
      for (size_t off = 0; off < out.size();) {
        ssize_t n = ::write(STDERR_FILENO, out.data() + off, out.size() - off);
        if (n <= 0) {
          break;
        }
        off += static_cast<size_t>(n);
      }
      lock.lock();
      writing = false;
      drained.notify_all();
    }
  }

  void push(std::string line) {
    {
      MutexLock lock(mu);
      if (lines.size() >= kMaxQueuedLines) {
        g_dropped.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      lines.push_back(std::move(line));
    }
    cv.notify_one();
  }

  void flush() {
    std::unique_lock lock(mu);
    drained.wait_for(lock, std::chrono::seconds(2), [this] { return lines.empty() && !writing; });
  }
};

Sink& sink() {
  static Sink* s = new Sink();  // leaked on purpose: lines may be logged during static destruction
  return *s;
}

struct Bucket {
  double tokens = kBurst;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
  uint64_t suppressed = 0;
};
thread_local Bucket t_bucket;
thread_local char t_tag[16] = "main";

const char* level_name(Level l) {
  switch (l) {
    case Level::kDebug: return "DEBUG";
    case Level::kInfo: return "INFO";
    case Level::kWarn: return "WARN";
    case Level::kError: return "ERROR";
  }
  return "?";
}

bool take_token() {
  auto now = std::chrono::steady_clock::now();
  double secs = std::chrono::duration<double>(now - t_bucket.last).count();
  t_bucket.last = now;
  t_bucket.tokens = std::min(kBurst, t_bucket.tokens + secs * kLinesPerSecond);
  if (t_bucket.tokens < 1) {
    return false;
  }
  t_bucket.tokens -= 1;
  return true;
}

std::string prefix(Level level) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm tm;
  gmtime_r(&ts.tv_sec, &tm);
  char buf[96];
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s ", tm.tm_year + 1900,
           tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
           t_tag, level_name(level));
  return buf;
}

}  // namespace

void set_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

bool enabled(Level level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void set_thread_tag(const char* tag) {
  snprintf(t_tag, sizeof t_tag, "%s", tag);
}

void write(Level level, const char* fmt, ...) {
  if (!take_token()) {
    ++t_bucket.suppressed;
    g_dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::string line = prefix(level);
  if (t_bucket.suppressed) {
    sink().push(line + std::to_string(t_bucket.suppressed) + " lines suppressed\n");
    t_bucket.suppressed = 0;
    line = prefix(level);
  }
  char body[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  line += body;
  line += '\n';
  sink().push(std::move(line));
}

void flush() { sink().flush(); }

uint64_t dropped() { return g_dropped.load(std::memory_order_relaxed); }

}  // namespace moqd::log
