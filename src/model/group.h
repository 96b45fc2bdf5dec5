#pragma once
// A group: an ordered run of objects (frames) that arrive as refcounted chunks. Groups are
// intrusively refcounted (non-atomic, one worker): the track's cache holds one reference and every
// subscriber forwarding the group holds one, so eviction never pulls bytes from under a reader.
#include <cstdint>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"

namespace moqd::model {

// IETF object status values; moq-lite only produces kNormal.
enum class ObjectStatus : uint8_t { kNormal = 0, kDoesNotExist = 1, kEndOfGroup = 3, kEndOfTrack = 4 };

// One object. Its payload arrives as chunks; `size` is declared up front (moq-lite FRAME size) so a
// 1 MiB frame can be forwarded while it is still arriving.
struct Object {
  uint64_t id = 0;
  ObjectStatus status = ObjectStatus::kNormal;
  Bytes extensions;             // raw IETF extension headers; empty for moq-lite
  uint64_t size = 0;            // declared payload size
  // Presentation timestamp in the track's TrackProperties::timescale, as the producer gave it
  // (moq-lite-05 FRAME timestamps are carried exactly). A protocol without timestamps stamps the
  // time the object's first byte reached moqd (see TrackProperties). Kept modulo 2^64.
  uint64_t timestamp = 0;
  uint64_t received = 0;        // sum of chunk sizes so far
  std::vector<Bytes> chunks;
  // When the object's newest byte arrived (its last once complete), on the track's clock.
  Instant arrived{};
  // Bytes a protocol layer derived from the object for every reader (its frame header), kept so
  // that readers share one copy; `header_format` is that layer's tag for their encoding (0: none
  // yet). The model never reads them.
  mutable Bytes header;
  mutable uint8_t header_format = 0;

  bool is_complete() const { return received == size; }
};

class Group {
 public:
  Group(uint64_t sequence, uint64_t arrival, Instant created)
      : sequence_(sequence), arrival_(arrival), created_(created) {}

  uint64_t sequence() const { return sequence_; }
  // Position in the track's arrival order (0, 1, 2, ...): subscribers follow arrivals, so a group
  // that arrives late with an old sequence is still forwarded.
  uint64_t arrival() const { return arrival_; }
  Instant created() const { return created_; }
  const std::vector<Object>& objects() const { return objects_; }
  // Payload bytes received so far.
  uint64_t bytes() const { return bytes_; }
  // The producer finished the group (FIN); no more objects or chunks follow.
  bool is_finished() const { return finished_; }
  // The producer aborted the group (RESET); readers should reset their copy too.
  bool is_aborted() const { return aborted_; }
  bool is_done() const { return finished_ || aborted_; }

  // --- producer side (the Track calls these and then notifies listeners) ---
  // Starts the next object (its id is its index); the previous one must be complete and the group
  // not done. Breaking that is a producer bug (the session validates peer input first): debug
  // builds abort, release builds log and abort the group.
  Object& begin_object(uint64_t size, ObjectStatus status = ObjectStatus::kNormal);
  // Its `timestamp` relative to the previous object of the group (the first: to 0), as a signed
  // difference modulo 2^64: what a moq-lite-05 FRAME header carries.
  int64_t timestamp_delta(const Object& o) const {
    uint64_t prev = o.id == 0 || o.id > objects_.size() ? 0 : objects_[o.id - 1].timestamp;
    return static_cast<int64_t>(o.timestamp - prev);
  }
  // Appends a chunk to the last object; must not pass its declared size (a producer bug: debug
  // builds abort, release builds keep only what fits). Empty chunks are ignored.
  void append_chunk(Bytes chunk);
  // Stamps the current object's `arrived` (the track does, as chunks come in).
  void mark_arrival(Instant at) {
    if (!objects_.empty()) {
      objects_.back().arrived = at;
    }
  }
  void finish() { finished_ = true; }
  void abort() { aborted_ = true; }

  // --- intrusive refcount ---
  void retain() { ++refs_; }
  // Deletes the group when the last reference goes.
  void release();

 private:
  uint64_t sequence_;
  uint64_t arrival_;
  Instant created_;
  std::vector<Object> objects_;
  uint64_t bytes_ = 0;
  bool finished_ = false;
  bool aborted_ = false;
  uint32_t refs_ = 0;
};

// An owning reference to a Group.
class GroupRef {
 public:
  GroupRef() = default;
  explicit GroupRef(Group* g) : g_(g) {
    if (g_) {
      g_->retain();
    }
  }
  GroupRef(const GroupRef& o) : GroupRef(o.g_) {}
  GroupRef(GroupRef&& o) noexcept : g_(o.g_) { o.g_ = nullptr; }
  GroupRef& operator=(GroupRef o) noexcept {
    std::swap(g_, o.g_);
    return *this;
  }
  ~GroupRef() {
    if (g_) {
      g_->release();
    }
  }
  Group* get() const { return g_; }
  Group* operator->() const { return g_; }
  Group& operator*() const { return *g_; }
  explicit operator bool() const { return g_ != nullptr; }

 private:
  Group* g_ = nullptr;
};

// A reader's position inside one group: which object, and how many of its payload bytes were
// already taken. peek() hands out what is available now without copying: kObjectStart once per
// object, then kChunk slices as chunks arrive, then kEnd (finished) or kAborted; kNothing when the
// reader has everything available so far (and after kEnd or kAborted was taken). Owned by one
// subscriber; the GroupRef keeps the group alive after cache eviction. One worker thread.
class GroupCursor {
 public:
  explicit GroupCursor(GroupRef group) : group_(std::move(group)) {}

  const GroupRef& group() const { return group_; }
  // What the reader may take next.
  enum class Kind { kNothing, kObjectStart, kChunk, kEnd, kAborted };
  struct Step {
    Kind kind = Kind::kNothing;
    const Object* object = nullptr;  // kObjectStart and kChunk
    Bytes chunk;                     // kChunk: a slice, at most `max_bytes`
    // kChunk: this slice takes the object's last byte; kObjectStart: the object is empty.
    bool completes_object = false;
  };
  // Peeks the next step; advance() moves past it. For kChunk at most `max_bytes` (> 0) are
  // returned; max_bytes == 0 yields kNothing where a chunk would come. `object` points into the
  // group and is valid until the group gains another object: take the step before that.
  Step peek(size_t max_bytes) const;
  // Moves past a step that peek() just returned (for kChunk, past `step.chunk.size()` bytes).
  void advance(const Step& step);
  // peek() and advance() in one, for the fan-out loop: fills `step` (reused from call to call) with
  // what comes next, moves past it, and returns its kind. The chunk is the caller's to keep.
  Kind next(size_t max_bytes, Step& step);
  // Bytes of the group not yet taken (what this reader is behind by, in this group). O(1).
  uint64_t backlog() const;
  // kEnd or kAborted was taken; nothing more will come.
  bool is_done() const { return done_; }

 private:
  GroupRef group_;
  size_t object_ = 0;         // index of the current object
  bool object_started_ = false;
  size_t chunk_ = 0;          // index of the current chunk in that object
  size_t chunk_offset_ = 0;   // bytes taken of that chunk
  uint64_t taken_ = 0;        // payload bytes taken of the whole group
  bool done_ = false;

  void settle();
};

}  // namespace moqd::model
