#include "base/bytes.h"

#include <cstdlib>
#include <new>

namespace moqd {
namespace {
thread_local int64_t g_live_buffers = 0;

// Small buffers (FRAME and GROUP headers: a few bytes written per subscriber per object) come from
// a per-thread free list of fixed-size blocks, so that in steady state a header costs no malloc.
// A block goes back to the list of the thread that drops its last reference (the worker that owns
// it, by Bytes' one-thread contract). The list keeps at most kMaxPooledBlocks (64 bytes each:
// 1 MiB per thread); past that, and after the thread's destructors have run, blocks are freed.
constexpr size_t kMaxPooledBlocks = 16384;

struct FreeBlock {
  FreeBlock* next;
};
thread_local FreeBlock* t_free = nullptr;
thread_local size_t t_free_count = 0;
thread_local bool t_pool_registered = false;
thread_local bool t_pool_closed = false;

// Frees the thread's list when the thread ends; touched once, by the first block pooled.
struct PoolReaper {
  ~PoolReaper() {
    t_pool_closed = true;
    while (t_free != nullptr) {
      FreeBlock* b = t_free;
      t_free = b->next;
      std::free(b);
    }
    t_free_count = 0;
  }
};
thread_local PoolReaper t_reaper;

void* allocate(size_t bytes) {
  void* mem = std::malloc(bytes);
  if (mem == nullptr) {
    std::abort();  // allocation failure is fatal (no exceptions in the core)
  }
  return mem;
}

}  // namespace

void* Bytes::allocate_block(size_t capacity) {
  if (kRecyclesSmallBlocks && capacity == kPooledCapacity && t_free != nullptr) {
    FreeBlock* b = t_free;
    t_free = b->next;
    --t_free_count;
    return b;
  }
  return allocate(sizeof(Block) + capacity);
}

void Bytes::free_block(Block* b) {
  if (kRecyclesSmallBlocks && b->capacity == kPooledCapacity && !t_pool_closed &&
      t_free_count < kMaxPooledBlocks) {
    if (!t_pool_registered) {
      t_pool_registered = true;
      (void)&t_reaper;  // constructs it, so its destructor runs at thread exit
    }
    auto* f = reinterpret_cast<FreeBlock*>(b);
    f->next = t_free;
    t_free = f;
    ++t_free_count;
    return;
  }
  std::free(b);
}

Bytes Bytes::copy(std::span<const uint8_t> data) {
  Bytes b;
  if (data.empty()) {
    return b;
  }
  const size_t capacity = data.size() <= kPooledCapacity ? kPooledCapacity : data.size();
  b.block_ = static_cast<Block*>(allocate_block(capacity));
  b.block_->refs = 1;
  b.block_->capacity = capacity;
  std::memcpy(b.block_->data, data.data(), data.size());
  b.size_ = data.size();
  ++g_live_buffers;
  return b;
}

Bytes Bytes::uninitialized(size_t capacity) {
  Bytes b;
  if (capacity == 0) {
    return b;
  }
  b.block_ = static_cast<Block*>(allocate_block(capacity));
  b.block_->refs = 1;
  b.block_->capacity = capacity;
  b.size_ = capacity;
  ++g_live_buffers;
  return b;
}

Bytes Bytes::widened_by(std::span<const uint8_t> prefix) const {
  if (block_ == nullptr || size_ == 0 || prefix.empty() || offset_ < prefix.size() ||
      std::memcmp(block_->data + offset_ - prefix.size(), prefix.data(), prefix.size()) != 0) {
    return Bytes();
  }
  Bytes out(*this);
  out.offset_ -= prefix.size();
  out.size_ += prefix.size();
  return out;
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

void Bytes::destroy(Block* b) {
  free_block(b);
  --g_live_buffers;
}

int64_t Bytes::live_buffers() { return g_live_buffers; }

}  // namespace moqd
