#include "testing/memory_pipe.h"

#include <algorithm>

namespace moqd::test {

void MemoryPipe::send(Bytes data) {
  if (closing_ || aborted_ || peer_closed_ || data.empty()) {
    return;
  }
  sent_.insert(sent_.end(), data.data(), data.data() + data.size());
  queued_bytes_ += data.size();
  queue_.push_back(std::move(data));
  if (queued_bytes_ >= low_water_) {
    above_low_water_ = true;
  }
}

void MemoryPipe::close() { closing_ = true; }

void MemoryPipe::abort() {
  aborted_ = true;
  queue_.clear();
  queued_bytes_ = 0;
}

MemoryPipePair::MemoryPipePair() {
  a_.peer_ = &b_;
  b_.peer_ = &a_;
}

size_t MemoryPipePair::pump(size_t max_rounds) {
  size_t total = 0;
  for (size_t round = 0; round < max_rounds; ++round) {
    int closes = int{a_.close_delivered_} + int{b_.close_delivered_};
    size_t moved = deliver(a_) + deliver(b_);
    total += moved;
    // Handlers run only when something moved, so nothing new can be queued otherwise.
    if (moved == 0 && closes == int{a_.close_delivered_} + int{b_.close_delivered_}) {
      break;
    }
  }
  return total;
}

size_t MemoryPipePair::deliver(MemoryPipe& from, size_t max_bytes) {
  MemoryPipe& to = *from.peer_;
  // Take what fits in max_bytes into one contiguous buffer, splitting the last Bytes if needed.
  std::vector<uint8_t> batch;
  while (!from.queue_.empty() && batch.size() < max_bytes) {
    Bytes& front = from.queue_.front();
    size_t take = std::min(front.size(), max_bytes - batch.size());
    batch.insert(batch.end(), front.data(), front.data() + take);
    if (take == front.size()) {
      from.queue_.pop_front();
    } else {
      front = front.slice(take);
    }
  }
  from.queued_bytes_ -= batch.size();
  bool receiving = !to.closing_ && !to.aborted_ && !to.peer_closed_;
  for (size_t pos = 0; pos < batch.size() && receiving; pos += chunk_size_) {
    size_t n = std::min(chunk_size_, batch.size() - pos);
    if (to.handler_ != nullptr) {
      to.handler_->on_pipe_data(std::span<const uint8_t>(batch).subspan(pos, n));
    }
    receiving = !to.closing_ && !to.aborted_ && !to.peer_closed_;
  }
  if (from.above_low_water_ && from.queued_bytes_ < from.low_water_) {
    from.above_low_water_ = false;
    if (from.handler_ != nullptr && !from.is_closed() && !from.peer_closed_) {
      from.handler_->on_pipe_writable();
    }
  }
  if (from.queue_.empty()) {
    deliver_close(from);
  }
  return batch.size();
}

void MemoryPipePair::deliver_close(MemoryPipe& from) {
  if (!from.is_closed() || from.close_delivered_) {
    return;
  }
  from.close_delivered_ = true;
  MemoryPipe& to = *from.peer_;
  if (to.peer_closed_ || to.is_closed()) {
    return;
  }
  to.peer_closed_ = true;
  to.queue_.clear();  // a socket whose peer is gone cannot deliver what it still holds
  to.queued_bytes_ = 0;
  if (to.handler_ != nullptr) {
    to.handler_->on_pipe_closed();
  }
}

}  // namespace moqd::test
