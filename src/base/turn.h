#pragma once
// Work that runs once at the end of the current event-loop turn: after every I/O event and timer
// of the turn, so that what many packets or many writers asked for is done once, with everything
// they brought. A connection asks for it when a packet arrives or a stream is written, and the
// loop runs its write pass once, however many packets and writes came in that turn.
//
// Requests coalesce: asking again while queued does nothing. Destroying queued work unqueues it, so
// an owner never has to remember to cancel. Everything here belongs to one thread.
#include <cstddef>
#include <cstdint>

namespace moqd {

class TurnQueue;

class TurnWork {
 public:
  TurnWork() = default;
  TurnWork(const TurnWork&) = delete;
  TurnWork& operator=(const TurnWork&) = delete;
  virtual ~TurnWork() { unlink(); }

  bool is_queued() const { return next_ != nullptr; }

 protected:
  // Takes back a request that has not run yet; a no-op when none is queued.
  void unqueue() { unlink(); }

  // Runs once per request, from TurnQueue::run(). It may queue work, itself included (it then runs
  // again in the same run() if the run's budget allows, otherwise in the next turn), and may
  // destroy other queued work.
  virtual void run_turn_work() = 0;

 private:
  friend class TurnQueue;
  void unlink();

  TurnWork* prev_ = nullptr;
  TurnWork* next_ = nullptr;
};

// A first-in first-out queue of TurnWork (an intrusive list through a sentinel: push and unqueue
// are O(1) and allocate nothing).
class TurnQueue {
 public:
  TurnQueue();
  ~TurnQueue();
  TurnQueue(const TurnQueue&) = delete;
  TurnQueue& operator=(const TurnQueue&) = delete;

  // Queues `w` at the back; a no-op while `w` is queued here or in another queue.
  void push(TurnWork& w);
  bool empty() const { return head_.next_ == &head_; }
  // Unqueues and returns the front, or null when empty.
  TurnWork* pop_front();
  // Unqueues and runs the front; false when empty.
  bool run_one();
  // Moves everything queued in `other` to the back of this queue, in order (O(1)).
  void append(TurnQueue& other);
  // Runs queued work front to back, including work queued meanwhile, until the queue is empty or
  // `max` items ran. Returns how many ran.
  size_t run(size_t max = SIZE_MAX);

 private:
  // The sentinel: head_.next_ is the front, head_.prev_ the back.
  struct Sentinel final : TurnWork {
    void run_turn_work() override {}
  };
  Sentinel head_;
};

}  // namespace moqd
