#pragma once
// Ring<T>: a first-in first-out sequence in one circular buffer whose capacity doubles as it fills
// and which allocates nothing until the first push. For per-stream and per-connection queues:
// std::deque allocates a 512-byte block and its map when it is constructed, even for a queue that
// stays empty (a receive-only stream's send queue), and a block every 512 bytes of pushes in
// steady state; a Ring allocates once its contents outgrow it, and not again while a stream's
// queue stays at the same depth. T must be default constructible and movable; a popped slot is
// reset to T() at once, so a Ring of Bytes releases each buffer when it is popped. One thread.
#include <cstddef>
#include <memory>
#include <utility>

namespace moqd {

template <typename T>
class Ring {
 public:
  Ring() = default;
  Ring(const Ring&) = delete;
  Ring& operator=(const Ring&) = delete;
  Ring(Ring&&) noexcept = default;
  Ring& operator=(Ring&&) noexcept = default;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return capacity_; }

  T& operator[](size_t i) { return slots_[(head_ + i) & (capacity_ - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (capacity_ - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(T value) {
    if (size_ == capacity_) {
      grow();
    }
    (*this)[size_] = std::move(value);
    ++size_;
  }
  // Puts `value` before the front (the next pop_front returns it).
  void push_front(T value) {
    if (size_ == capacity_) {
      grow();
    }
    head_ = (head_ + capacity_ - 1) & (capacity_ - 1);
    front() = std::move(value);
    ++size_;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  // Removes the front; the ring must not be empty.
  void pop_front() {
    front() = T();
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }
  // Keeps the first `n` elements and drops the rest (n <= size()).
  void truncate(size_t n) {
    while (size_ > n) {
      back() = T();
      --size_;
    }
  }
  // Removes every element equal to `value`, keeping the others in order; returns how many went.
  size_t erase(const T& value) {
    size_t kept = 0;
    for (size_t i = 0; i < size_; ++i) {
      if (!((*this)[i] == value)) {
        if (kept != i) {
          (*this)[kept] = std::move((*this)[i]);
        }
        ++kept;
      }
    }
    size_t removed = size_ - kept;
    truncate(kept);
    return removed;
  }
  // Drops every element and frees the buffer.
  void clear() {
    slots_.reset();
    capacity_ = 0;
    head_ = 0;
    size_ = 0;
  }

 private:
  static constexpr size_t kFirstCapacity = 4;

  void grow() {
    size_t capacity = capacity_ == 0 ? kFirstCapacity : capacity_ * 2;
    auto slots = std::make_unique<T[]>(capacity);
    for (size_t i = 0; i < size_; ++i) {
      slots[i] = std::move((*this)[i]);
    }
    slots_ = std::move(slots);
    capacity_ = capacity;
    head_ = 0;
  }

  std::unique_ptr<T[]> slots_;
  size_t capacity_ = 0;  // a power of two, or 0
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace moqd
