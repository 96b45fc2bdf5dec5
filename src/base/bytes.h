#pragma once
// Bytes: an immutable view into a refcounted heap buffer. A frame's payload is held once and every
// subscriber, cache entry and send queue holds a Bytes that references it. The refcount is NOT
// atomic: a Bytes and all its copies belong to one worker. To hand bytes to another worker, make a
// fresh Bytes (Bytes::copy) and move the only reference through the mailbox (the relay's Bridge
// does this once per chunk; the TSan build checks that nothing else shares one across threads).
// Buffers of up to kPooledCapacity bytes (FRAME and GROUP headers) are recycled through a
// per-thread free list, so writing a header costs no malloc in steady state.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

// AddressSanitizer would not see a use after free of a recycled block: no recycling under it.
#if defined(__SANITIZE_ADDRESS__)
#define MOQD_BYTES_RECYCLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOQD_BYTES_RECYCLE 0
#endif
#endif
#ifndef MOQD_BYTES_RECYCLE
#define MOQD_BYTES_RECYCLE 1
#endif

namespace moqd {

class BytesBuffer;

class Bytes {
 public:
  Bytes() = default;
  // Copies `data` into a new buffer holding exactly that many bytes.
  static Bytes copy(std::span<const uint8_t> data);
  static Bytes copy(std::string_view s) {
    return copy(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  }
  // Copies of at most this many bytes take a recycled block (bytes.cc).
  static constexpr size_t kPooledCapacity = 48;
  static constexpr bool kRecyclesSmallBlocks = MOQD_BYTES_RECYCLE;
  // Takes a vector's bytes (one copy into the refcounted block).
  static Bytes from(const std::vector<uint8_t>& v) { return copy(std::span<const uint8_t>(v)); }

  Bytes(const Bytes& o) : block_(o.block_), offset_(o.offset_), size_(o.size_) { retain(); }
  Bytes(Bytes&& o) noexcept
      : block_(std::exchange(o.block_, nullptr)),
        offset_(std::exchange(o.offset_, 0)),
        size_(std::exchange(o.size_, 0)) {}
  Bytes& operator=(const Bytes& o) {
    if (this != &o) {
      Bytes tmp(o);
      swap(tmp);
    }
    return *this;
  }
  Bytes& operator=(Bytes&& o) noexcept {
    Bytes tmp(std::move(o));
    swap(tmp);
    return *this;
  }
  ~Bytes() { release(); }

  const uint8_t* data() const { return block_ ? block_->data + offset_ : nullptr; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const uint8_t> span() const { return {data(), size_}; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data()), size_}; }

  // A view of [offset, offset + len) sharing the same buffer. Clamped to the view's bounds.
  Bytes slice(size_t offset, size_t len = SIZE_MAX) const;

  // This view widened to the front by prefix.size() bytes, when the bytes just before it in its
  // buffer are exactly `prefix`: the result reads `prefix` and then this view, sharing the buffer
  // (no copy, no allocation). Empty when they differ, when the view starts fewer than that many
  // bytes into its buffer, or when `prefix` or this view is empty. (A buffer is filled front to
  // back before any view of it is handed out, so the bytes before a view were written; and what a
  // view covers is never written again, so the widened view stays exactly `prefix` + this view.)
  Bytes widened_by(std::span<const uint8_t> prefix) const;

  // Number of Bytes referencing the underlying buffer (for tests and leak accounting).
  uint32_t use_count() const { return block_ ? block_->refs : 0; }

  // Live buffers across this thread (tests count them to prove that nothing leaks).
  static int64_t live_buffers();

  void swap(Bytes& o) noexcept {
    std::swap(block_, o.block_);
    std::swap(offset_, o.offset_);
    std::swap(size_, o.size_);
  }

  friend bool operator==(const Bytes& a, const Bytes& b) {
    return a.size_ == b.size_ && (a.size_ == 0 || std::memcmp(a.data(), b.data(), a.size_) == 0);
  }

 private:
  friend class BytesBuffer;
  struct Block {
    uint32_t refs;
    size_t capacity;
    uint8_t data[];
  };
  // A new buffer of `capacity` bytes, not initialised; the view covers all of it.
  static Bytes uninitialized(size_t capacity);
  uint8_t* writable_data() const { return block_ ? block_->data + offset_ : nullptr; }
  void retain() {
    if (block_) {
      ++block_->refs;
    }
  }
  // Inline because the fan-out releases ~15 Bytes per delivered message, most of them moved-from
  // (null): the null test should cost no call.
  void release() {
    if (block_ != nullptr) {
      if (--block_->refs == 0) {
        destroy(block_);
      }
      block_ = nullptr;
    }
  }
  static void destroy(Block* b);  // the last reference is gone: free it (or recycle it)
  static void* allocate_block(size_t capacity);
  static void free_block(Block* b);

  Block* block_ = nullptr;
  size_t offset_ = 0;
  size_t size_ = 0;
};

// Bytes written in place: a buffer of fixed capacity filled front to back, whose filled part can be
// shared as Bytes (slices of the same block, no copy) while the rest is still being written. What a
// slice covers is never written again: reset() reuses the buffer only when no slice is alive. So a
// transport can receive a stream's bytes into it and hand each frame's payload to the cache
// without copying it a second time. One thread, like Bytes.
class BytesBuffer {
 public:
  BytesBuffer() = default;
  explicit BytesBuffer(size_t capacity) : block_(Bytes::uninitialized(capacity)) {}

  size_t capacity() const { return block_.size(); }
  size_t size() const { return size_; }
  const uint8_t* data() const { return block_.data(); }
  // The unwritten rest, to be filled and then commit()ted.
  std::span<uint8_t> room() { return {block_.writable_data() + size_, capacity() - size_}; }
  void commit(size_t n) { size_ += n; }
  // [offset, offset + len) of the filled part, sharing the buffer.
  Bytes share(size_t offset, size_t len) const { return block_.slice(offset, len); }
  // A slice handed out by share() is still alive.
  bool is_shared() const { return block_.use_count() > 1; }
  // Moves the filled bytes from `offset` on to the front, dropping those before it; only when
  // !is_shared() (no slice may see its bytes move).
  void drop_front(size_t offset) {
    if (offset < size_) {  // memmove from an empty buffer's null data() is undefined
      std::memmove(block_.writable_data(), block_.data() + offset, size_ - offset);
    }
    size_ -= offset;
  }

 private:
  Bytes block_;  // the whole capacity
  size_t size_ = 0;
};

}  // namespace moqd
