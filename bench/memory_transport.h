#pragma once
// An in-memory transport::Session pair for the benchmarks: two MemorySessions joined back to back
// on one event loop, with QUIC stream semantics (ids, FIN, RESET_STREAM, STOP_SENDING). Events
// for the receiving side (a new stream, new bytes, a reset, the close) are queued on the loop's
// MemoryNet and delivered from the loop, never re-entrantly from the call that caused them, as
// transport.h requires. Bytes written on a stream are appended to the peer stream's contiguous
// receive buffer (one copy, as a socket's receive path would make).
//
// A subscriber end may instead take its incoming uni streams as a GroupStreamSink: the bytes the
// relay writes on a group stream are then parsed (GROUP header and FRAME sizes, payload skipped)
// and counted where they arrive, without buffering, so the benchmark measures the relay's send
// path and can still prove every frame arrived.
//
// Flow control is infinite (write_capacity() is always kWriteCapacity, nothing is ever queued), and
// streams are recycled through a per-session free list, so the transport itself allocates nothing
// in steady state. One worker thread; bench only.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/event_loop.h"
#include "transport/stream_core.h"
#include "transport/transport.h"

namespace moqd::bench {

class MemorySession;
class MemoryStream;

// Receives what arrives on group uni streams at a subscriber end (see the file comment). One
// counter per subscriber; on_group_end() is the rig's hook for "one more group fully received".
class GroupStreamSink {
 public:
  virtual ~GroupStreamSink() = default;
  virtual void on_group_end() {}

  uint64_t bytes() const { return bytes_; }
  uint64_t frames() const { return frames_; }
  uint64_t payload_bytes() const { return payload_bytes_; }
  uint64_t groups() const { return groups_; }
  uint64_t resets() const { return resets_; }

 private:
  friend class MemoryStream;
  uint64_t bytes_ = 0;          // every byte of every group stream
  uint64_t frames_ = 0;         // FRAME headers parsed
  uint64_t payload_bytes_ = 0;  // frame payload bytes
  uint64_t groups_ = 0;         // group streams ended with FIN
  uint64_t resets_ = 0;         // group streams reset
};

// The event queue of one loop's memory transports. Owned by the bench rig, one per worker; must
// outlive every MemorySession on it.
class MemoryNet {
 public:
  explicit MemoryNet(runtime::EventLoop& loop) : loop_(loop) {}
  MemoryNet(const MemoryNet&) = delete;
  MemoryNet& operator=(const MemoryNet&) = delete;

  runtime::EventLoop& loop() { return loop_; }
  // Delivers every queued event now (also what the loop does when it gets to it).
  void run();
  size_t pending() const { return events_.size(); }

 private:
  friend class MemoryStream;
  friend class MemorySession;
  enum class Kind : uint8_t { kIncoming, kReadable, kReset, kStopSending, kClosed };
  struct Event {
    Kind kind;
    MemoryStream* stream;    // all but kClosed
    uint32_t generation;     // the stream's generation when queued: a recycled stream skips it
    MemorySession* session;  // kClosed
    uint64_t code;
  };
  void post(const Event& e);
  void dispatch(const Event& e);

  runtime::EventLoop& loop_;
  std::vector<Event> events_;
  std::vector<Event> running_;
  bool scheduled_ = false;
};

class MemoryStream final : public transport::Stream {
 public:
  // Bytes write() always accepts.
  static constexpr size_t kWriteCapacity = 1 << 20;

  explicit MemoryStream(MemorySession& owner) : owner_(owner) {}

  transport::StreamId id() const override { return id_; }
  void set_visitor(transport::StreamVisitor* visitor) override { visitor_ = visitor; }
  std::span<const uint8_t> peek() const override;
  void consume(size_t n) override;
  // Shares the receive buffer, as QUIC's streams do (the cache's payloads are slices of it).
  Bytes read(size_t n) override { return recv_.take(n); }
  bool is_fin_received() const override { return peer_fin_ && recv_.unread() == 0; }
  bool has_peer_fin() const override { return peer_fin_; }
  void stop_sending(uint64_t code) override;
  size_t write_capacity() const override { return send_done_ ? 0 : kWriteCapacity; }
  void write(Bytes data) override;
  void write_pair(Bytes first, Bytes second) override;
  void finish() override;
  void reset(uint64_t code) override;
  size_t buffered() const override { return 0; }
  void set_send_order(uint64_t order) override { send_order_ = order; }
  void release() override;

 private:
  friend class MemorySession;
  friend class MemoryNet;
  // Parse state of a group stream written into a GroupStreamSink.
  enum class Parse : uint8_t { kType, kHeaderSize, kSkipHeader, kFrameSize, kPayload };

  void open(transport::StreamId id);
  void deliver(std::span<const uint8_t> data);
  void sink_bytes(std::span<const uint8_t> data);
  bool read_varint(std::span<const uint8_t>& data, uint64_t& out);
  void notify_peer(MemoryNet::Kind kind, uint64_t code = 0);

  MemorySession& owner_;
  transport::StreamId id_ = 0;
  uint32_t generation_ = 0;
  bool in_use_ = false;
  transport::StreamVisitor* visitor_ = nullptr;
  MemoryStream* peer_ = nullptr;  // the other end's stream (null: sink mode, or peer released)
  GroupStreamSink* sink_ = nullptr;
  // Receive side: QUIC's receive buffer (transport/stream_core.h), so that a payload read is a
  // slice of the stream's bytes, its FRAME header just before it, as over QUIC.
  transport::RecvBuffer recv_;
  bool peer_fin_ = false;
  bool readable_queued_ = false;
  bool stopped_ = false;  // we sent STOP_SENDING
  // Send side.
  bool send_done_ = false;  // finished or reset
  uint64_t send_order_ = 0;
  // Sink parse state.
  Parse parse_ = Parse::kType;
  uint64_t skip_ = 0;
  uint8_t varint_len_ = 0;
  uint8_t varint_have_ = 0;
  uint64_t varint_ = 0;
};

class MemorySession final : public transport::Session {
 public:
  // `server` picks the stream-id bits (RFC 9000 §2.1). `protocol` is what protocol() reports,
  // e.g. "moq-lite-04" (then no SETUP is exchanged).
  MemorySession(MemoryNet& net, bool server, std::string protocol);
  ~MemorySession() override;
  MemorySession(const MemorySession&) = delete;
  MemorySession& operator=(const MemorySession&) = delete;

  // Joins two sessions; call once, before either opens a stream.
  static void connect(MemorySession& a, MemorySession& b);
  // Incoming uni streams of this end go to `sink` (see the file comment) instead of the visitor.
  void set_uni_sink(GroupStreamSink* sink) { uni_sink_ = sink; }

  void set_visitor(transport::SessionVisitor* visitor) override { visitor_ = visitor; }
  transport::Stream* open_bidi() override { return open(false); }
  transport::Stream* open_uni() override { return open(true); }
  void close(uint64_t code, std::string_view reason) override;
  std::string_view protocol() const override { return protocol_; }
  std::string_view path() const override { return "/"; }
  std::string_view peer() const override { return "memory"; }
  std::string_view kind() const override { return "memory"; }
  uint64_t bytes_sent() const override { return bytes_sent_; }
  size_t unsent_bytes() const override { return 0; }

  bool is_closed() const { return closed_; }
  size_t streams_allocated() const { return streams_.size(); }

 private:
  friend class MemoryStream;
  friend class MemoryNet;
  MemoryStream* open(bool uni);
  MemoryStream* acquire();
  void recycle(MemoryStream* s);
  void on_closed_event(uint64_t code);

  MemoryNet& net_;
  bool server_;
  std::string protocol_;
  MemorySession* peer_ = nullptr;
  transport::SessionVisitor* visitor_ = nullptr;
  GroupStreamSink* uni_sink_ = nullptr;
  uint64_t next_bidi_ = 0;
  uint64_t next_uni_ = 0;
  uint64_t bytes_sent_ = 0;
  bool closed_ = false;
  std::vector<std::unique_ptr<MemoryStream>> streams_;
  std::vector<MemoryStream*> free_;
};

}  // namespace moqd::bench
