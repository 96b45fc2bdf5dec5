#include "model/group.h"

#include <new>

#include "model/bug.h"

namespace moqd::model {

ObjectList::~ObjectList() {
  for (size_t i = 0; i < size_; ++i) {
    (*this)[i].~Object();
  }
  for (size_t k = 0; k < kMaxBlocks && (k < kInlineBlocks || more_); ++k) {
    if (block(k) == nullptr) {
      break;
    }
    ::operator delete(block(k));
  }
}

Object*& ObjectList::block_slot(size_t k) {
  if (k < kInlineBlocks) {
    return inline_[k];
  }
  if (!more_) {
    more_ = std::make_unique<Object*[]>(kMaxBlocks - kInlineBlocks);  // value-initialised: null
  }
  return more_[k - kInlineBlocks];
}

// Storage for block k is allocated uninitialised when its first object is appended; its objects
// are constructed one at a time, so pages of a large block are touched only as it fills.
Object& ObjectList::emplace_back() {
  size_t k = block_of(size_);
  Object*& b = block_slot(k);
  if (b == nullptr) {
    b = static_cast<Object*>(::operator new(sizeof(Object) << k));
  }
  Object* o = new (&b[size_ - block_start(k)]) Object();
  ++size_;
  return *o;
}

Object& Group::begin_object(uint64_t size, ObjectStatus status) {
  return begin_object_with_id(objects_.size(), size, status);
}

Object& Group::begin_object_with_id(uint64_t id, uint64_t size, ObjectStatus status) {
  if (!objects_.empty() && id <= objects_.back().id) {
    MOQD_MODEL_BUG("begin_object with an id that does not go up");
    aborted_ = true;
  }
  if (is_done()) {
    MOQD_MODEL_BUG("begin_object on a finished or aborted group");
    aborted_ = true;
  } else if (!objects_.empty() && !objects_.back().is_complete()) {
    MOQD_MODEL_BUG("begin_object before the previous object is complete");
    aborted_ = true;
  }
  const uint64_t index = objects_.size();
  Object& o = objects_.emplace_back();
  o.id = id;
  o.lite_refused = id != index || subgroup_ != 0;
  o.status = status;
  o.size = size;
  return o;
}

void Group::append_chunk(Bytes chunk) {
  if (chunk.empty()) {
    return;
  }
  if (objects_.empty() || is_done()) {
    MOQD_MODEL_BUG("append_chunk without an open object");
    return;
  }
  Object& o = objects_.back();
  uint64_t room = o.size - o.received;
  if (chunk.size() > room) {
    MOQD_MODEL_BUG("append_chunk past the object's declared size");
    if (room == 0) {
      return;
    }
    chunk = chunk.slice(0, room);
  }
  o.received += chunk.size();
  bytes_ += chunk.size();
  o.chunks.push_back(std::move(chunk));
}

void Group::release() {
  if (--refs_ == 0) {
    delete this;
  }
}

GroupCursor::Step GroupCursor::peek(size_t max_bytes) const {
  Step step;
  if (done_ || !group_) {
    return step;
  }
  if (group_->is_aborted()) {
    step.kind = Kind::kAborted;
    return step;
  }
  const ObjectList& objects = group_->objects();
  if (object_ == objects.size()) {
    step.kind = group_->is_finished() ? Kind::kEnd : Kind::kNothing;
    return step;
  }
  const Object& o = objects[object_];
  step.object = &o;
  if (!object_started_) {
    step.kind = Kind::kObjectStart;
    step.completes_object = o.size == 0;
  } else if (chunk_ < o.chunks.size() && max_bytes > 0) {
    step.kind = Kind::kChunk;
    step.chunk = o.chunks[chunk_].slice(chunk_offset_, max_bytes);
    step.completes_object = o.is_complete() && chunk_ + 1 == o.chunks.size() &&
                            chunk_offset_ + step.chunk.size() == o.chunks[chunk_].size();
  } else if (chunk_ == o.chunks.size() && group_->is_finished()) {
    // Finished with the object short of its declared size: the stream was truncated.
    step.kind = Kind::kAborted;
    step.object = nullptr;
  } else {
    step.object = nullptr;
  }
  return step;
}

void GroupCursor::advance(const Step& step) {
  switch (step.kind) {
    case Kind::kNothing:
      return;
    case Kind::kEnd:
    case Kind::kAborted:
      done_ = true;
      return;
    case Kind::kObjectStart:
      object_started_ = true;
      break;
    case Kind::kChunk: {
      const Object& o = group_->objects()[object_];
      chunk_offset_ += step.chunk.size();
      taken_ += step.chunk.size();
      if (chunk_offset_ >= o.chunks[chunk_].size()) {
        ++chunk_;
        chunk_offset_ = 0;
      }
      break;
    }
  }
  settle();
}

GroupCursor::Kind GroupCursor::next_step(size_t max_bytes, Step& step) {
  step.object = nullptr;
  step.completes_object = false;
  if (done_ || !group_) {
    return step.kind = Kind::kNothing;
  }
  if (group_->is_aborted()) {
    done_ = true;
    return step.kind = Kind::kAborted;
  }
  const ObjectList& objects = group_->objects();
  if (object_ == objects.size()) {
    if (!group_->is_finished()) {
      return step.kind = Kind::kNothing;
    }
    done_ = true;
    return step.kind = Kind::kEnd;
  }
  const Object& o = objects[object_];
  // settle() for `o`, without indexing the group again (this is the fan-out's inner loop).
  auto settle_on = [this](const Object& obj) {
    if (chunk_ == obj.chunks.size() && obj.is_complete()) {
      ++object_;
      object_started_ = false;
      chunk_ = 0;
      chunk_offset_ = 0;
    }
  };
  if (!object_started_) {
    step.object = &o;
    object_started_ = true;
    step.completes_object = o.size == 0;
    settle_on(o);
    return step.kind = Kind::kObjectStart;
  }
  if (chunk_ < o.chunks.size() && max_bytes > 0) {
    const Bytes& chunk = o.chunks[chunk_];
    size_t n = std::min(max_bytes, chunk.size() - chunk_offset_);
    step.chunk = chunk_offset_ == 0 && n == chunk.size() ? chunk : chunk.slice(chunk_offset_, n);
    step.object = &o;
    chunk_offset_ += n;
    taken_ += n;
    if (chunk_offset_ == chunk.size()) {
      ++chunk_;
      chunk_offset_ = 0;
    }
    step.completes_object = o.is_complete() && chunk_ == o.chunks.size();
    settle_on(o);
    return step.kind = Kind::kChunk;
  }
  if (chunk_ == o.chunks.size() && group_->is_finished()) {
    done_ = true;  // finished short of the object's declared size: the stream was truncated
    return step.kind = Kind::kAborted;
  }
  return step.kind = Kind::kNothing;
}

// Moves to the next object once every byte of the current, complete object is taken, so a
// zero-size object is passed right after its kObjectStart.
void GroupCursor::settle() {
  const Object& o = group_->objects()[object_];
  if (object_started_ && chunk_ == o.chunks.size() && o.is_complete()) {
    ++object_;
    object_started_ = false;
    chunk_ = 0;
    chunk_offset_ = 0;
  }
}

uint64_t GroupCursor::backlog() const {
  return group_ ? group_->bytes() - taken_ : 0;
}

}  // namespace moqd::model
