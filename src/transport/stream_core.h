#pragma once
// Per-stream bookkeeping shared by the stream-multiplexing transports (quic::Connection and
// websocket::MuxSession): the send-order ready set, the receive buffer, the send-queue budget
// that paces write_capacity()/on_writable(), and the table that frees released streams only
// from the loop. Each piece belongs to one transport session and its worker thread; none of them
// calls a visitor or does I/O, so the transports keep every protocol rule and every callback.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/ring.h"
#include "transport/transport.h"

namespace moqd::transport {

// The streams that have something to send, by send order: higher orders first, round robin among
// equal orders. Holds stream ids, not pointers, so an id whose stream is gone is skipped, never
// dereferenced. Each stream keeps its Entry (its order, and whether it is listed) and hands it to
// every call; an Entry may be listed in one scheduler only. A bucket emptied by pop() or remove()
// is kept as a spare for the next new order, so rescheduling a stream that is alone in its order
// (once per packet or frame) allocates nothing.
class SendScheduler {
 public:
  struct Entry {
    uint64_t order = 0;
    bool queued = false;
  };

  bool empty() const { return ready_.empty(); }
  // Lists the stream last among its order; a no-op if it is listed.
  void push_back(StreamId id, Entry& e);
  // Lists the stream first among its order, so it keeps the turn it just had; a no-op if listed.
  void push_front(StreamId id, Entry& e);
  // Unlists the stream; a no-op if it is not listed.
  void remove(StreamId id, Entry& e);
  // Moves the stream to `order`; a listed stream goes last among its new order.
  void set_order(StreamId id, Entry& e, uint64_t order);
  // Unlists and returns the stream that goes next, or null when none is. `find` maps an id to its
  // stream (S*; null for a stream that is gone, which is skipped) and `entry` names the stream's
  // Entry member; the returned stream's Entry is marked unlisted.
  template <typename S, typename Find>
  S* pop(Find&& find, Entry S::*entry);
  // Unlists everything; the streams' Entries are left stale, so only call it when the streams
  // are about to go (the session is closing).
  void clear() { ready_.clear(); }

 private:
  // A Ring, not a std::deque: a deque allocates a 512-byte block and its map when constructed, and
  // a connection keeps one bucket (the spare) for its whole life.
  using Buckets = std::map<uint64_t, Ring<StreamId>, std::greater<>>;
  Ring<StreamId>& bucket(uint64_t order);
  StreamId pop_id();

  Buckets ready_;
  Buckets::node_type spare_;  // an emptied bucket, reused for the next new order
};

template <typename S, typename Find>
S* SendScheduler::pop(Find&& find, Entry S::*entry) {
  while (!ready_.empty()) {
    if (S* s = find(pop_id()); s != nullptr) {
      (s->*entry).queued = false;
      return s;
    }
  }
  return nullptr;
}

// A stream's received bytes not yet consumed, contiguous, and the byte counts that flow control
// needs: received (the highest offset so far) and consumed (read by the application, dropped, or
// discarded on arrival). Bytes arrive into a BytesBuffer, so the application can take() a run of
// them as Bytes without a copy (a frame's payload for the cache): arriving bytes are copied once,
// from the transport's decrypted packet, and never again. Memory read past is reused when nothing
// shares it; each new buffer is twice the last, from kMinBuffer to kMaxBuffer, so a control stream
// holds 256 bytes while it has a message unread (none once all is read) and a media stream 16 KiB
// blocks that the cache's slices share.
class RecvBuffer {
 public:
  static constexpr size_t kMinBuffer = 256;
  static constexpr size_t kMaxBuffer = 16 * 1024;

  std::span<const uint8_t> peek() const {
    return {buf_.data() + read_, buf_.size() - read_};
  }
  size_t unread() const { return buf_.size() - read_; }
  uint64_t received() const { return received_; }
  uint64_t consumed() const { return consumed_; }
  // Bytes of the buffer being filled (0 before the first byte and after drop()).
  size_t capacity() const { return buf_.capacity(); }

  // Keeps `data` (copied) for the application.
  void append(std::span<const uint8_t> data);
  // Counts `n` bytes that arrived and are thrown away at once (the reader is gone).
  void discard(uint64_t n) {
    received_ += n;
    consumed_ += n;
  }
  // Consumes up to `n` unread bytes; returns how many.
  size_t consume(size_t n);
  // Consumes up to `n` unread bytes and returns them, sharing the buffer (no copy).
  Bytes take(size_t n);
  // Drops every unread byte and frees the memory; returns how many were dropped.
  size_t drop();

 private:
  void make_room(size_t n);
  void after_read();

  BytesBuffer buf_;
  size_t read_ = 0;  // buf_[read_..] is unread
  size_t next_capacity_ = kMinBuffer;
  uint64_t received_ = 0;
  uint64_t consumed_ = 0;
};

// A receive-side flow-control limit that we advertise, QUIC style: once half a window has been
// consumed since the limit was set, it moves to consumed + window. Callers keep the limit at or
// below consumed + window (it only ever grows from there), so an "unlimited" window is never
// extended, only read.
class CreditWindow {
 public:
  explicit CreditWindow(uint64_t limit = 0) : limit_(limit) {}
  uint64_t limit() const { return limit_; }
  // True when the limit moved (advertise limit()); false when it is not yet due.
  bool extend(uint64_t consumed, uint64_t window);

 private:
  uint64_t limit_;
};

// Bounds the bytes a session queues for sending, per stream (stream_queue_target) and over all
// its streams (send_buffer), and remembers whom write_capacity() turned away: a stream that
// filled its own queue is owed on_writable() once that queue drains below half the target, and
// one refused for the session's sake once the session drains below half its buffer. Each stream
// keeps its Entry; the owner delivers the owed callbacks (from the loop, never re-entrantly).
class SendBudget {
 public:
  struct Entry {
    bool exhausted = false;           // its queue hit the target; on_writable() owed
    bool blocked_on_session = false;  // listed among those refused for the session's sake
  };

  // `stream_queue_target` and `send_buffer` in bytes, as in the transports' configs.
  SendBudget(size_t stream_queue_target, size_t send_buffer)
      : target_(stream_queue_target), send_buffer_(send_buffer) {}

  // Bytes queued over all streams and not yet sent.
  size_t unsent() const { return unsent_; }
  // What write() may take now for a stream with `queued` unsent bytes. Returning 0 for the
  // session's sake lists the stream for on_writable(); const because write_capacity() is.
  size_t capacity(StreamId id, size_t queued, const Entry& e) const;
  // `n` bytes were queued, leaving `queued` on the stream.
  void on_queued(size_t n, size_t queued, Entry& e);
  // `n` bytes went to the network.
  void on_sent(size_t n) { unsent_ -= n; }
  // `n` unsent bytes were dropped (reset): nothing is owed to the stream any more.
  void on_dropped(size_t n, Entry& e) {
    unsent_ -= n;
    e.exhausted = false;
  }
  // After on_sent(): true (and owed no more) when the stream, now with `queued` unsent bytes, is
  // owed on_writable().
  bool take_stream_writable(size_t queued, Entry& e);
  // After on_sent(): once the session has drained, calls `owe(id)` for each stream refused for
  // the session's sake (owe clears the stream's blocked_on_session, if the stream still exists).
  template <typename Owe>
  void take_session_writable(Owe&& owe);
  // Forgets everything (the session closed).
  void clear() {
    blocked_.clear();
    unsent_ = 0;
  }

 private:
  const size_t target_;
  const size_t send_buffer_;
  size_t unsent_ = 0;
  mutable std::vector<StreamId> blocked_;
};

template <typename Owe>
void SendBudget::take_session_writable(Owe&& owe) {
  if (blocked_.empty() || unsent_ > send_buffer_ / 2) {
    return;
  }
  for (StreamId id : blocked_) {
    owe(id);
  }
  blocked_.clear();
}

// A session's streams by id, owning them. A released stream is freed only by reap(), from the
// loop, so that no stream is destroyed while one of its methods (or a library callback about it)
// is on the stack: the transport doom()s it once it is released and done, and reap() frees it if
// it is still found done then.
template <typename S>
class StreamTable {
 public:
  S* find(StreamId id) const {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second.get();
  }
  S& add(StreamId id, std::unique_ptr<S> stream) {
    S& s = *stream;
    streams_[id] = std::move(stream);
    return s;
  }
  size_t size() const { return streams_.size(); }
  auto begin() const { return streams_.begin(); }
  auto end() const { return streams_.end(); }

  void doom(StreamId id) { doomed_.push_back(id); }
  // Frees each doomed stream for which `done(s)` holds; `before_free(s)` runs first (unlist it).
  template <typename Done, typename BeforeFree>
  void reap(Done&& done, BeforeFree&& before_free);
  void clear_doomed() { doomed_.clear(); }
  void clear() { streams_.clear(); }

 private:
  std::unordered_map<StreamId, std::unique_ptr<S>> streams_;
  std::vector<StreamId> doomed_;
};

template <typename S>
template <typename Done, typename BeforeFree>
void StreamTable<S>::reap(Done&& done, BeforeFree&& before_free) {
  std::vector<StreamId> ids;
  ids.swap(doomed_);
  for (StreamId id : ids) {
    S* s = find(id);
    if (s != nullptr && done(*s)) {
      before_free(*s);
      streams_.erase(id);
    }
  }
}

}  // namespace moqd::transport
