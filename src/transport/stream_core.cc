#include "transport/stream_core.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace moqd::transport {

// ---------------------------------------------------------------------------------------------
// SendScheduler

Ring<StreamId>& SendScheduler::bucket(uint64_t order) {
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
  queue.erase(id);
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
  if (data.empty()) {
    return;
  }
  if (buf_.room().size() < data.size()) {
    make_room(data.size());
  }
  std::memcpy(buf_.room().data(), data.data(), data.size());
  buf_.commit(data.size());
  received_ += data.size();
}

// Room for `n` more bytes after the unread ones: in place when nothing shares the buffer and it is
// large enough, else in a new buffer that starts with a copy of the unread bytes (usually few:
// the application reads every turn).
void RecvBuffer::make_room(size_t n) {
  size_t unread = this->unread();
  if (!buf_.is_shared() && buf_.capacity() >= unread + n) {
    buf_.drop_front(read_);
    read_ = 0;
    return;
  }
  size_t capacity = std::max(next_capacity_, std::bit_ceil(unread + n));
  next_capacity_ = std::min(kMaxBuffer, capacity * 2);
  BytesBuffer fresh(capacity);
  if (unread > 0) {  // an empty buffer has no data(): memcpy from null is undefined even for 0
    std::memcpy(fresh.room().data(), buf_.data() + read_, unread);
    fresh.commit(unread);
  }
  buf_ = std::move(fresh);
  read_ = 0;
}

void RecvBuffer::after_read() {
  if (read_ != buf_.size() || buf_.is_shared()) {
    return;
  }
  // Nothing unread and nobody sees the bytes. A buffer that never grew past the smallest belongs
  // to a stream that sends a message now and then (a viewer's control streams): freed, so an idle
  // connection holds no receive memory (about 1.2 KB per QUIC viewer: its 4-5 streams' buffers),
  // and the next message takes a new smallest one. A larger buffer is a busy stream's: reused in
  // place, so a stream in steady flow allocates nothing.
  if (buf_.capacity() <= kMinBuffer) {
    buf_ = BytesBuffer();
    next_capacity_ = kMinBuffer;
  } else {
    buf_.drop_front(read_);
  }
  read_ = 0;
}

size_t RecvBuffer::consume(size_t n) {
  n = std::min(n, unread());
  if (n == 0) {
    return 0;
  }
  read_ += n;
  consumed_ += n;
  after_read();
  return n;
}

Bytes RecvBuffer::take(size_t n) {
  n = std::min(n, unread());
  if (n == 0) {
    return Bytes();
  }
  Bytes out = buf_.share(read_, n);
  read_ += n;
  consumed_ += n;
  // All of a smallest buffer taken (a control message read whole): the taken Bytes keep the block
  // as long as they need it, and the stream no longer does (after_read). next_capacity_ is not
  // reset here: a stream whose bytes keep being taken (a publisher's) goes on to the larger
  // buffers, which are kept, so it allocates at most once more than before.
  if (read_ == buf_.size() && buf_.capacity() <= kMinBuffer) {
    buf_ = BytesBuffer();
    read_ = 0;
  }
  return out;
}

size_t RecvBuffer::drop() {
  size_t n = unread();
  buf_ = BytesBuffer();
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
