#pragma once
// A group: an ordered run of objects (frames) that arrive as refcounted chunks. Groups are
// intrusively refcounted (non-atomic, one worker): the track's cache holds one reference and every
// subscriber forwarding the group holds one, so eviction never pulls bytes from under a reader.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/bytes.h"
#include "base/clock.h"

namespace moqd::model {

// IETF object status values; moq-lite only produces kNormal.
enum class ObjectStatus : uint8_t { kNormal = 0, kDoesNotExist = 1, kEndOfGroup = 3, kEndOfTrack = 4 };

// One object. Its payload arrives as chunks; `size` is declared up front (moq-lite FRAME size) so a
// 1 MiB frame can be forwarded while it is still arriving.
struct Object {
  uint64_t id = 0;              // ascending in the group; an IETF producer's may leave gaps
  ObjectStatus status = ObjectStatus::kNormal;
  // The IETF draft (14..20) whose Key-Value-Pair encoding `extensions` is in; 0 when empty.
  uint8_t extensions_draft = 0;
  // moq-lite cannot carry the object as it is: its id is not the previous one + 1 (or 0 first),
  // its group is a subgroup other than 0, or its extensions hold more than a timestamp. moq-lite
  // subscribers refuse it (the session's business); IETF ones forward it.
  bool lite_refused = false;
  // The producer sent it unreliably (its forwarding preference: a datagram, not a stream), whole
  // in one piece: readers whose peer takes datagrams may forward it the same way.
  bool unreliable = false;
  // Raw IETF Extension Headers / Properties block, held once and referenced by every reader;
  // empty for moq-lite producers.
  Bytes extensions;
  uint64_t size = 0;            // declared payload size
  // Presentation timestamp in the track's TrackProperties::timescale, as the producer gave it
  // (moq-lite-05 FRAME timestamps are carried exactly). A protocol without timestamps stamps the
  // time the object's first byte reached moqd (see TrackProperties). Kept modulo 2^64.
  uint64_t timestamp = 0;
  uint64_t received = 0;        // sum of chunk sizes so far
  std::vector<Bytes> chunks;
  // When the object's newest byte arrived (its last once complete), on the track's clock.
  Instant arrived{};
  // Bytes a protocol layer derived from the object for every reader (its frame header, maybe with
  // the payload after it, in the payload's buffer), kept so that readers share one copy; the tag
  // `header_format` says which encoding (0: none yet). The model never reads them.
  mutable Bytes header;
  mutable uint8_t header_format = 0;

  bool is_complete() const { return received == size; }
};

// A group's objects, in blocks that never move: block k holds 2^k objects (1, 2, 4, ...), each
// constructed when it is appended. Unlike a vector it never relocates what it holds: a chat track's
// one long group grows by one small object per message, and a vector's doublings copied every
// object again and faulted in fresh pages each time (a fifth of the relay's CPU in `moq bench
// msgs`). Indexing is a bit scan. References stay valid as the list grows. One worker thread.
class ObjectList {
 public:
  ObjectList() = default;
  ~ObjectList();
  ObjectList(const ObjectList&) = delete;
  ObjectList& operator=(const ObjectList&) = delete;

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Object& operator[](size_t i) { return block(block_of(i))[i - block_start(block_of(i))]; }
  const Object& operator[](size_t i) const {
    return block(block_of(i))[i - block_start(block_of(i))];
  }
  Object& back() { return (*this)[size_ - 1]; }
  const Object& back() const { return (*this)[size_ - 1]; }
  // Appends a default-constructed object.
  Object& emplace_back();

  class const_iterator {
   public:
    const_iterator(const ObjectList& list, size_t i) : list_(&list), i_(i) {}
    const Object& operator*() const { return (*list_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const ObjectList* list_;
    size_t i_;
  };
  const_iterator begin() const { return {*this, 0}; }
  const_iterator end() const { return {*this, size_}; }

 private:
  // Blocks whose pointers live in the list itself: enough for 255 objects, which covers most
  // groups without a further allocation; past that, `more_` holds the rest (2^48 objects in all,
  // far beyond any memory).
  static constexpr size_t kInlineBlocks = 8;
  static constexpr size_t kMaxBlocks = 48;
  static size_t block_of(size_t i) { return std::bit_width(i + 1) - 1; }
  static size_t block_start(size_t k) { return (size_t{1} << k) - 1; }
  Object* block(size_t k) const { return k < kInlineBlocks ? inline_[k] : more_[k - kInlineBlocks]; }
  Object*& block_slot(size_t k);

  Object* inline_[kInlineBlocks] = {};
  std::unique_ptr<Object*[]> more_;
  size_t size_ = 0;
};

class Group {
 public:
  Group(uint64_t sequence, uint64_t arrival, Instant created)
      : sequence_(sequence), arrival_(arrival), created_(created) {}

  uint64_t sequence() const { return sequence_; }
  // The IETF subgroup this group carries (0 for moq-lite, which has one per group): a track holds
  // one Group per (sequence, subgroup) it was sent as.
  uint64_t subgroup() const { return subgroup_; }
  // The producer's objects may carry extension blocks (an IETF SUBGROUP stream type with them),
  // so IETF readers choose a stream type that has them.
  bool has_extensions() const { return has_extensions_; }
  // Set by the track before the group is told to listeners.
  void set_subgroup(uint64_t subgroup, bool has_extensions) {
    subgroup_ = subgroup;
    has_extensions_ = has_extensions;
  }
  // Position in the track's arrival order (0, 1, 2, ...): subscribers follow arrivals, so a group
  // that arrives late with an old sequence is still forwarded.
  uint64_t arrival() const { return arrival_; }
  Instant created() const { return created_; }
  const ObjectList& objects() const { return objects_; }
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
  // The same with the producer's id, above the previous object's (gaps allowed; an id that does
  // not go up is a producer bug, as above). An id other than the index, or a group whose
  // subgroup is not 0, marks the object lite_refused.
  Object& begin_object_with_id(uint64_t id, uint64_t size, ObjectStatus status);
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
  ObjectList objects_;
  uint64_t bytes_ = 0;
  uint64_t subgroup_ = 0;
  bool has_extensions_ = false;
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
    // kChunk: a slice, at most `max_bytes`. Not written for kObjectStart: one taken `whole`
    // (completes_object set, a non-empty object) has its whole payload in `object->chunks[0]`,
    // which the caller copies only if it writes it (a reference count not moved per step).
    Bytes chunk;
    // kChunk: this slice takes the object's last byte; kObjectStart: the object is empty, or was
    // taken whole.
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
  // With `whole`, an object that is complete and whose payload is one chunk of at most `max_bytes`
  // comes as a single kObjectStart step (completes_object set; the payload is object->chunks[0]):
  // a chat-sized message is one step, not a kObjectStart and a kChunk. `step.chunk` is written
  // only by kChunk steps.
  Kind next(size_t max_bytes, Step& step, bool whole = false) {
    if (!done_ && group_) {
      const ObjectList& objects = group_->objects();
      if (object_ == objects.size()) {
        if (!group_->is_done()) {
          // Caught up with a group still open: how nearly every pump ends, answered without a call.
          step.object = nullptr;
          step.completes_object = false;
          return step.kind = Kind::kNothing;
        }
      } else if (whole && !object_started_ && !group_->is_aborted()) {
        // The fan-out's common step, also without a call: a complete object in one chunk.
        // (Empty chunks are never appended, so the one chunk holds the whole, non-empty payload.)
        const Object& o = objects[object_];
        if (o.chunks.size() == 1 && o.is_complete() && o.size <= max_bytes) {
          step.object = &o;
          step.completes_object = true;
          taken_ += o.size;
          ++object_;  // chunk_ and chunk_offset_ are still 0: the object was never started
          return step.kind = Kind::kObjectStart;
        }
      }
    }
    return next_step(max_bytes, step);
  }
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
  // next() for every step but the two it answers inline (caught up; an object taken whole).
  Kind next_step(size_t max_bytes, Step& step);
};

}  // namespace moqd::model
