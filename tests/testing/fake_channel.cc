#include "testing/fake_channel.h"

namespace moqd::testing {

void FakeChannel::send_message(std::span<const Bytes> parts) {
  if (is_closed()) {
    return;
  }
  std::vector<uint8_t> message;
  for (const Bytes& part : parts) {
    message.insert(message.end(), part.data(), part.data() + part.size());
  }
  buffered_ += message.size();
  if (buffered_ >= low_water_) {
    above_low_water_ = true;
  }
  sent_.push_back(message);
  outbox_.push_back(std::move(message));
}

void FakeChannel::close(uint16_t code, std::string_view reason) {
  if (!is_closed()) {
    close_code_ = code;
    close_reason_ = std::string(reason);
  }
}

size_t FakeChannelPair::deliver(size_t max) {
  size_t moved = 0;
  while (moved < max) {
    bool any = deliver_one(a_, b_);
    moved += any ? 1 : 0;
    if (moved < max && deliver_one(b_, a_)) {
      ++moved;
      any = true;
    }
    if (!any) {
      break;
    }
  }
  if (a_.is_closed() && a_.outbox_.empty()) {
    complete_close(a_, b_);
  } else if (b_.is_closed() && b_.outbox_.empty()) {
    complete_close(b_, a_);
  }
  return moved;
}

bool FakeChannelPair::deliver_one(FakeChannel& from, FakeChannel& to) {
  if (from.outbox_.empty() || from.closed_notified_) {
    return false;
  }
  std::vector<uint8_t> message = std::move(from.outbox_.front());
  from.outbox_.pop_front();
  from.buffered_ -= message.size();
  if (!to.closed_notified_ && to.handler_ != nullptr) {
    to.handler_->on_message(message);
  }
  if (from.above_low_water_ && from.buffered_ < from.low_water_) {
    from.above_low_water_ = false;
    if (from.handler_ != nullptr && !from.closed_notified_) {
      from.handler_->on_channel_writable();
    }
  }
  return true;
}

void FakeChannelPair::complete_close(FakeChannel& closer, FakeChannel& other) {
  uint16_t code = *closer.close_code_;
  std::string reason = closer.close_reason_;
  if (!other.closed_notified_) {
    other.closed_notified_ = true;
    other.outbox_.clear();
    other.buffered_ = 0;
    if (other.handler_ != nullptr) {
      other.handler_->on_channel_closed(code, reason);
    }
  }
  if (!closer.closed_notified_) {
    closer.closed_notified_ = true;
    if (closer.handler_ != nullptr) {
      closer.handler_->on_channel_closed(code, reason);
    }
  }
}

}  // namespace moqd::testing
