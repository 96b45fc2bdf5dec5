#include "base/bytes.h"

#include <cstdlib>
#include <new>

namespace moqd {
namespace {
thread_local int64_t g_live_buffers = 0;
}

Bytes Bytes::copy(std::span<const uint8_t> data) {
  Bytes b;
  if (data.empty()) {
    return b;
  }
  void* mem = std::malloc(sizeof(Block) + data.size());
  if (mem == nullptr) {
    std::abort();  // allocation failure is fatal (no exceptions in the core)
  }
  b.block_ = static_cast<Block*>(mem);
  b.block_->refs = 1;
  b.block_->capacity = data.size();
  std::memcpy(b.block_->data, data.data(), data.size());
  b.size_ = data.size();
  ++g_live_buffers;
  return b;
}

Bytes Bytes::slice(size_t offset, size_t len) const {
  Bytes out(*this);
  if (offset > size_) {
    offset = size_;
  }
  if (len > size_ - offset) {
    len = size_ - offset;
  }
  out.offset_ += offset;
  out.size_ = len;
  return out;
}

void Bytes::release() {
  if (block_ && --block_->refs == 0) {
    std::free(block_);
    --g_live_buffers;
  }
  block_ = nullptr;
}

int64_t Bytes::live_buffers() { return g_live_buffers; }

}  // namespace moqd
