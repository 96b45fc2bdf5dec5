#pragma once
// Two connected in-memory transport::Pipe endpoints for tests. Bytes sent on one end wait in a
// queue until the test calls pump() (or deliver()), which hands them to the other end's
// PipeHandler; nothing is ever delivered from inside send(), close() or abort(), as with a real
// socket driven by an event loop. Single-threaded.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "transport/transport.h"

namespace moqd::test {

class MemoryPipePair;

// One end. Its handler receives what the other end sends. close() delivers what is queued, then
// the other end's handler gets on_pipe_closed(); abort() drops the queue first. After close() or
// abort() this end's own handler gets no further calls (as after closing a socket), and once the
// peer has closed, sends here are dropped.
class MemoryPipe final : public transport::Pipe {
 public:
  void set_handler(transport::PipeHandler* handler) { handler_ = handler; }

  void send(Bytes data) override;
  size_t buffered() const override { return queued_bytes_; }
  void close() override;
  void abort() override;

  bool is_closed() const { return closing_ || aborted_; }  // close() or abort() called here
  bool is_aborted() const { return aborted_; }
  bool is_peer_closed() const { return peer_closed_; }  // on_pipe_closed() was delivered here
  // on_pipe_writable() fires when buffered() drops below this after reaching it. Default 64 KiB.
  void set_low_water(size_t bytes) { low_water_ = bytes; }
  // Every byte ever sent from this end, in order (what the peer saw or will see).
  const std::vector<uint8_t>& sent() const { return sent_; }
  std::string sent_string() const { return std::string(sent_.begin(), sent_.end()); }

 private:
  friend class MemoryPipePair;

  transport::PipeHandler* handler_ = nullptr;
  MemoryPipe* peer_ = nullptr;
  std::deque<Bytes> queue_;
  size_t queued_bytes_ = 0;
  size_t low_water_ = 64 * 1024;
  bool above_low_water_ = false;
  bool closing_ = false;
  bool aborted_ = false;
  bool close_delivered_ = false;  // the peer has been told we closed
  bool peer_closed_ = false;
  std::vector<uint8_t> sent_;
};

// Owns both ends. The ends never outlive the pair.
class MemoryPipePair {
 public:
  MemoryPipePair();
  MemoryPipePair(const MemoryPipePair&) = delete;
  MemoryPipePair& operator=(const MemoryPipePair&) = delete;

  MemoryPipe& a() { return a_; }
  MemoryPipe& b() { return b_; }

  // Delivers queued bytes in both directions, and closes, until nothing moves (handlers may send
  // more while being called) or `max_rounds` rounds pass. Returns the bytes delivered.
  size_t pump(size_t max_rounds = 1000);
  // Delivers at most `max_bytes` of what `from` has queued to its peer, in on_pipe_data() calls of
  // at most chunk_size() bytes; then the close, if everything queued went. Returns bytes delivered.
  size_t deliver(MemoryPipe& from, size_t max_bytes = SIZE_MAX);
  // Largest span handed to one on_pipe_data() call (default unlimited: each round coalesces what
  // is queued, as TCP would). Set to 1 to make parsers see every split point.
  void set_chunk_size(size_t bytes) { chunk_size_ = bytes; }
  size_t chunk_size() const { return chunk_size_; }

 private:
  void deliver_close(MemoryPipe& from);

  MemoryPipe a_;
  MemoryPipe b_;
  size_t chunk_size_ = SIZE_MAX;
};

// A PipeHandler that records what arrives, for tests that play one side by hand.
class PipeRecorder : public transport::PipeHandler {
 public:
  void on_pipe_data(std::span<const uint8_t> data) override {
    received_.insert(received_.end(), data.begin(), data.end());
  }
  void on_pipe_writable() override { ++writable_count_; }
  void on_pipe_closed() override { ++closed_count_; }

  std::vector<uint8_t>& received() { return received_; }
  std::string received_string() const { return std::string(received_.begin(), received_.end()); }
  int writable_count() const { return writable_count_; }
  int closed_count() const { return closed_count_; }
  bool is_closed() const { return closed_count_ > 0; }

 private:
  std::vector<uint8_t> received_;
  int writable_count_ = 0;
  int closed_count_ = 0;
};

}  // namespace moqd::test
