#include "base/turn.h"

namespace moqd {

void TurnWork::unlink() {
  if (next_ == nullptr) {
    return;
  }
  prev_->next_ = next_;
  next_->prev_ = prev_;
  prev_ = nullptr;
  next_ = nullptr;
}

TurnQueue::TurnQueue() {
  head_.next_ = &head_;
  head_.prev_ = &head_;
}

TurnQueue::~TurnQueue() {
  while (!empty()) {
    head_.next_->unlink();
  }
  // The sentinel is not queued anywhere: its destructor must find it unlinked.
  head_.next_ = nullptr;
  head_.prev_ = nullptr;
}

void TurnQueue::push(TurnWork& w) {
  if (w.is_queued()) {
    return;
  }
  w.prev_ = head_.prev_;
  w.next_ = &head_;
  head_.prev_->next_ = &w;
  head_.prev_ = &w;
}

TurnWork* TurnQueue::pop_front() {
  if (empty()) {
    return nullptr;
  }
  TurnWork* w = head_.next_;
  w->unlink();
  return w;
}

bool TurnQueue::run_one() {
  TurnWork* w = pop_front();
  if (w == nullptr) {
    return false;
  }
  w->run_turn_work();  // may destroy w
  return true;
}

void TurnQueue::append(TurnQueue& other) {
  if (&other == this || other.empty()) {
    return;
  }
  TurnWork* first = other.head_.next_;
  TurnWork* last = other.head_.prev_;
  first->prev_ = head_.prev_;
  head_.prev_->next_ = first;
  last->next_ = &head_;
  head_.prev_ = last;
  other.head_.next_ = &other.head_;
  other.head_.prev_ = &other.head_;
}

size_t TurnQueue::run(size_t max) {
  size_t ran = 0;
  while (ran < max) {
    TurnWork* w = pop_front();
    if (w == nullptr) {
      break;
    }
    ++ran;
    w->run_turn_work();  // may destroy w
  }
  return ran;
}

}  // namespace moqd
