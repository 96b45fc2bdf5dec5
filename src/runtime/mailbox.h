#pragma once
// Cross-worker messaging: a Waker (an eventfd plus a "may be asleep" flag) per consuming loop, and
// a bounded single-producer single-consumer ring of tasks per ordered pair of workers. A push costs
// a release store, a fence and a load; no mutex and no atomic read-modify-write. The eventfd is
// written only when the consumer has said it may block, so a busy consumer is never signalled.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace moqd::runtime {

using Task = std::function<void()>;

// The wake-up of one event loop. wake() and sleep_episode() are thread-safe;
// the rest belong to the owning loop's thread. Protocol: the loop calls prepare_sleep() only when
// it is about to block, then checks every source of work, and blocks only if all are empty; a
// producer publishes its work, then reads sleep_episode() and wakes the loop if it is non-zero.
// Both sides store, then load the other's flag, all seq_cst (Dekker), so at least one side sees
// the other. (Plain seq_cst operations rather than fences: TSan checks them.) Each prepare_sleep()
// starts a new episode (a non-zero number, never reused by this loop): a producer that already
// wrote the eventfd for an episode need not write it again, since that write is still pending
// for the loop's epoll_wait (one wake-up per batch of pushes, not one per push).
class Waker {
 public:
  Waker();
  ~Waker();
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  int fd() const { return fd_; }
  void wake();
  // The episode the loop is (maybe) blocking in, 0 while it is awake.
  uint64_t sleep_episode() const { return episode_.load(std::memory_order_seq_cst); }
  void prepare_sleep();
  void awake() { episode_.store(0, std::memory_order_relaxed); }
  // Resets the eventfd's counter (tests; EventLoop watches it edge-triggered and never reads it).
  void drain();

 private:
  int fd_ = -1;
  std::atomic<uint64_t> episode_{0};
  uint64_t last_episode_ = 0;  // the loop's thread only
};

// A bounded SPSC ring of tasks. One producer thread calls try_push/has_space/wait_for_space; one
// consumer thread calls try_pop/drain/empty. Tasks are moved in and out (they own their data) and
// run in push order.
class Mailbox {
 public:
  // `capacity` is rounded up to a power of two (at least 2). `consumer` is woken after a push
  // while it may be asleep; `producer` (may be null) after the consumer frees space while the
  // producer waits for it (wait_for_space).
  Mailbox(size_t capacity, Waker& consumer, Waker* producer = nullptr);
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  size_t capacity() const { return mask_ + 1; }

  // Producer. Returns false when full, leaving `task` untouched. With `defer_wake`, a consumer
  // that may be asleep is not woken now: the wake is owed until flush_wake(), which the producer
  // calls before its own loop may block (Workers: at the start of every loop iteration). For
  // tasks that can wait until the producer's iteration ends (credit acknowledgements): however
  // many it pushes in one iteration, one eventfd write wakes the consumer.
  bool try_push(Task&& task, bool defer_wake = false);
  // Writes the wake-up owed by deferred pushes, if the consumer may still be asleep and this
  // producer has not woken it since.
  void flush_wake();
  bool wake_owed() const { return wake_owed_; }
  bool has_space();
  // Asks the consumer to wake the producer's Waker once it pops something. Call it, then re-check
  // has_space(): space freed in between is not signalled.
  void wait_for_space();
  // eventfd writes this producer made to wake the consumer (producer thread; tests, benchmarks).
  uint64_t wakes() const { return wakes_; }

  // Consumer.
  bool try_pop(Task& out);
  // Pops and runs up to `max` tasks; returns how many ran. Only drain() wakes a producer waiting
  // for space.
  size_t drain(size_t max = SIZE_MAX);
  bool empty() const;

 private:
  void after_pop();
  void wake_if_sleeping();

  std::vector<Task> slots_;
  size_t mask_;
  Waker& consumer_;
  Waker* producer_;
  alignas(64) std::atomic<size_t> head_{0};  // written by the consumer
  size_t tail_cache_ = 0;                    // consumer's last view of tail_
  alignas(64) std::atomic<size_t> tail_{0};  // written by the producer
  size_t head_cache_ = 0;                    // producer's last view of head_
  uint64_t woken_episode_ = 0;               // producer: the consumer's episode it last woke
  uint64_t wakes_ = 0;                       // producer
  bool wake_owed_ = false;                   // producer: a deferred push not yet signalled
  alignas(64) std::atomic<bool> producer_waiting_{false};
};

}  // namespace moqd::runtime
