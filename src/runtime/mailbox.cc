#include "runtime/mailbox.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdlib>

#include "base/log.h"

namespace moqd::runtime {

Waker::Waker() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) {
    MOQD_LOG(kError, "eventfd failed: errno %d", errno);
    log::flush();
    std::abort();  // out of descriptors at startup: nothing sensible to do
  }
}

Waker::~Waker() { ::close(fd_); }

void Waker::wake() {
  uint64_t one = 1;
  // EAGAIN means the counter is saturated: the loop is due to wake anyway.
  [[maybe_unused]] ssize_t n = ::write(fd_, &one, sizeof one);
}

void Waker::prepare_sleep() {
  episode_.store(++last_episode_, std::memory_order_seq_cst);
}

void Waker::drain() {
  uint64_t value;
  [[maybe_unused]] ssize_t n = ::read(fd_, &value, sizeof value);
}

Mailbox::Mailbox(size_t capacity, Waker& consumer, Waker* producer)
    : slots_(std::bit_ceil(capacity < 2 ? size_t{2} : capacity)),
      mask_(slots_.size() - 1),
      consumer_(consumer),
      producer_(producer) {}

bool Mailbox::has_space() {
  size_t t = tail_.load(std::memory_order_relaxed);
  if (t - head_cache_ > mask_) {
    head_cache_ = head_.load(std::memory_order_seq_cst);
  }
  return t - head_cache_ <= mask_;
}

bool Mailbox::try_push(Task&& task, bool defer_wake) {
  if (!has_space()) {
    return false;
  }
  size_t t = tail_.load(std::memory_order_relaxed);
  slots_[t & mask_] = std::move(task);
  tail_.store(t + 1, std::memory_order_seq_cst);
  if (defer_wake) {
    wake_owed_ = true;
    return true;
  }
  wake_if_sleeping();
  return true;
}

void Mailbox::wake_if_sleeping() {
  // Once per episode: a write already made for this one is still pending for its epoll_wait.
  // (Dekker: the task's tail store came before this load in program order, so either the
  // consumer's check after prepare_sleep sees the task or this load sees its episode; that holds
  // however much later a deferred push makes the load.)
  wake_owed_ = false;
  uint64_t episode = consumer_.sleep_episode();
  if (episode != 0 && episode != woken_episode_) {
    woken_episode_ = episode;
    ++wakes_;
    consumer_.wake();
  }
}

void Mailbox::flush_wake() {
  if (wake_owed_) {
    wake_if_sleeping();
  }
}

void Mailbox::wait_for_space() {
  producer_waiting_.store(true, std::memory_order_seq_cst);
}

bool Mailbox::empty() const {
  return head_.load(std::memory_order_relaxed) == tail_.load(std::memory_order_seq_cst);
}

bool Mailbox::try_pop(Task& out) {
  size_t h = head_.load(std::memory_order_relaxed);
  if (h == tail_cache_) {
    tail_cache_ = tail_.load(std::memory_order_seq_cst);
    if (h == tail_cache_) {
      return false;
    }
  }
  out = std::move(slots_[h & mask_]);
  slots_[h & mask_] = nullptr;
  head_.store(h + 1, std::memory_order_seq_cst);
  return true;
}

void Mailbox::after_pop() {
  if (producer_ == nullptr) {
    return;
  }
  if (producer_waiting_.load(std::memory_order_seq_cst)) {
    producer_waiting_.store(false, std::memory_order_relaxed);
    producer_->wake();
  }
}

size_t Mailbox::drain(size_t max) {
  size_t ran = 0;
  Task task;
  while (ran < max && try_pop(task)) {
    task();
    task = nullptr;
    ++ran;
  }
  if (ran > 0) {
    after_pop();
  }
  return ran;
}

}  // namespace moqd::runtime
