#pragma once
// N worker threads, each running its own EventLoop and owning what is homed on it. Workers talk
// only through post(): an SPSC Mailbox per ordered pair of workers, with a sender-side overflow
// queue when a ring is full, so tasks are never dropped and stay in order per (sender, receiver).
// Non-worker threads post through the receiving loop's mutex-protected injection queue (control
// traffic only). Created and stopped by the main thread.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "runtime/event_loop.h"
#include "runtime/mailbox.h"

namespace moqd::runtime {

class Workers {
 public:
  // Tasks per ring between two workers before the sender starts queueing on its own side.
  static constexpr size_t kDefaultRingCapacity = 4096;

  explicit Workers(size_t count, size_t ring_capacity = kDefaultRingCapacity);
  ~Workers();  // stop_and_join()
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;

  size_t size() const { return workers_.size(); }
  EventLoop& loop(size_t i) { return workers_[i]->loop; }
  // Index of the calling thread's worker in this pool, or SIZE_MAX off-worker.
  size_t current() const;

  // Starts the threads; each runs init(i) on its own thread, then its loop until stop_and_join().
  void start(std::function<void(size_t)> init = nullptr);
  // Runs `task` on worker `to`. From a worker: through the (current, to) ring, or defer() when
  // `to` is the current worker. From any other thread: through `to`'s injection queue.
  // Wake::kDeferred (from a worker, for tasks that may wait until the sender's loop iteration
  // ends, like credit acknowledgements): a sleeping `to` is woken not at the push but when the
  // sender's loop next starts an iteration (Mailbox::flush_wake), once for all such posts;
  // order with the other posts to `to` is kept.
  enum class Wake : uint8_t { kNow, kDeferred };
  void post(size_t to, Task task, Wake wake = Wake::kNow);
  // From a worker: true while its ring to `to` is full or tasks wait in its overflow queue for
  // `to` (the receiver is not keeping up). Senders of data that may be dropped (the Bridge's
  // feeds) hold back then; control tasks are posted regardless. False off-worker or for itself.
  bool is_congested(size_t to);
  // Tasks the calling worker holds in its overflow queue for `to` (0 off-worker).
  size_t overflow_size(size_t to) const;
  // eventfd writes the calling worker made to wake `to` through their ring (0 off-worker or for
  // itself): at most one per time `to` prepared to block (Waker).
  uint64_t wakes(size_t to);
  // Stops every loop and joins the threads. Tasks still queued are destroyed unrun. Idempotent.
  void stop_and_join();

 private:
  struct Worker;
  // Drains a worker's inbound rings and flushes its overflow queues; polled by its loop.
  class Pump final : public PollSource {
   public:
    Pump(Workers& pool, size_t self) : pool_(pool), self_(self) {}
    bool is_ready() override;
    void poll() override;
    void before_wait() override;

   private:
    Workers& pool_;
    size_t self_;
  };
  struct Worker {
    Worker(Workers& pool, size_t self) : pump(pool, self) {}
    EventLoop loop;
    Pump pump;
    std::thread thread;
    std::vector<std::deque<Task>> overflow;  // [to]: tasks waiting for ring (self, to)
    size_t overflowing = 0;                  // non-empty entries of `overflow`
  };

  Mailbox& ring(size_t from, size_t to) { return *rings_[from * size() + to]; }
  void flush_overflow(size_t from, size_t to);

  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::unique_ptr<Mailbox>> rings_;  // [from * n + to]; null where from == to
  bool started_ = false;
};

}  // namespace moqd::runtime
