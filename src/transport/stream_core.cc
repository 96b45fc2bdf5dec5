#include "transport/stream_core.h"

#include <algorithm>

namespace moqd::transport {
namespace {

// Read bytes are compacted away once this much of the buffer has been read (and at least half
// of it), so a reader that lags by a few bytes does not move the buffer on every consume.
constexpr size_t kCompactThreshold = 64 * 1024;

}  // namespace

// ---------------------------------------------------------------------------------------------
// SendScheduler

std::deque<StreamId>& SendScheduler::bucket(uint64_t order) {
  auto it = ready_.find(order);
  if (it != ready_.end()) {
    return it->second;
  }
  if (!spare_.empty()) {
    spare_.key() = order;
    return ready_.insert(std::move(spare_)).position->second;
  }
  return ready_[order];
}

void SendScheduler::push_back(StreamId id, Entry& e) {
  if (e.queued) {
    return;
  }
  e.queued = true;
  bucket(e.order).push_back(id);
}

void SendScheduler::push_front(StreamId id, Entry& e) {
  if (e.queued) {
    return;
  }
  e.queued = true;
  bucket(e.order).push_front(id);
}

void SendScheduler::remove(StreamId id, Entry& e) {
  if (!e.queued) {
    return;
  }
  e.queued = false;
  auto it = ready_.find(e.order);
  if (it == ready_.end()) {
    return;
  }
  auto& queue = it->second;
  queue.erase(std::remove(queue.begin(), queue.end(), id), queue.end());
  if (queue.empty()) {
    spare_ = ready_.extract(it);
  }
}

void SendScheduler::set_order(StreamId id, Entry& e, uint64_t order) {
  if (e.order == order) {
    return;
  }
  bool was_queued = e.queued;
  remove(id, e);
  e.order = order;
  if (was_queued) {
    push_back(id, e);
  }
}

StreamId SendScheduler::pop_id() {
  auto it = ready_.begin();
  StreamId id = it->second.front();
  it->second.pop_front();
  if (it->second.empty()) {
    spare_ = ready_.extract(it);
  }
  return id;
}

// ---------------------------------------------------------------------------------------------
// RecvBuffer

void RecvBuffer::append(std::span<const uint8_t> data) {
  buf_.insert(buf_.end(), data.begin(), data.end());
  received_ += data.size();
}

size_t RecvBuffer::consume(size_t n) {
  n = std::min(n, unread());
  if (n == 0) {
    return 0;
  }
  read_ += n;
  consumed_ += n;
  if (read_ == buf_.size()) {
    buf_.clear();
    read_ = 0;
  } else if (read_ >= kCompactThreshold && read_ * 2 >= buf_.size()) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(read_));
    read_ = 0;
  }
  return n;
}

size_t RecvBuffer::drop() {
  size_t n = unread();
  buf_.clear();
  buf_.shrink_to_fit();
  read_ = 0;
  consumed_ += n;
  return n;
}

// ---------------------------------------------------------------------------------------------
// CreditWindow

bool CreditWindow::extend(uint64_t consumed, uint64_t window) {
  if (consumed + window - limit_ < window / 2) {
    return false;
  }
  limit_ = consumed + window;
  return true;
}

// ---------------------------------------------------------------------------------------------
// SendBudget

size_t SendBudget::capacity(StreamId id, size_t queued, const Entry& e) const {
  size_t stream_room = queued >= target_ ? 0 : target_ - queued;
  size_t session_room = unsent_ >= send_buffer_ ? 0 : send_buffer_ - unsent_;
  if (session_room == 0 && !e.blocked_on_session) {
    // The Entry lives in a non-const stream; only the const write_capacity() path reaches here.
    const_cast<Entry&>(e).blocked_on_session = true;
    blocked_.push_back(id);
  }
  return std::min(stream_room, session_room);
}

void SendBudget::on_queued(size_t n, size_t queued, Entry& e) {
  unsent_ += n;
  if (queued >= target_) {
    e.exhausted = true;
  }
}

bool SendBudget::take_stream_writable(size_t queued, Entry& e) {
  if (!e.exhausted || queued >= target_ / 2) {
    return false;
  }
  e.exhausted = false;
  return true;
}

}  // namespace moqd::transport
