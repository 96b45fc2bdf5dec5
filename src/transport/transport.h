#pragma once
// The transport interface: a session of ordered, flow-controlled, bidirectional and unidirectional
// streams with QUIC semantics (FIN, RESET_STREAM, STOP_SENDING, stream ids, send order). WebSocket
// (qmux-00 and the legacy "webtransport" framing), raw QUIC and WebTransport each implement it.
// The MoQ session layer sees only this header; transports know nothing of MoQ.
//
// Threading: a transport session and its streams belong to one worker thread. No call here blocks,
// and no callback is made re-entrantly from inside a call made by the visitor: events raised while
// the visitor is calling in are delivered later from the loop.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/bytes.h"

namespace moqd::transport {

using StreamId = uint64_t;

// QUIC stream-id layout (RFC 9000 §2.1), used by every transport: bit 0 server-initiated,
// bit 1 unidirectional.
inline bool is_uni(StreamId id) { return (id & 2) != 0; }
inline bool is_server_initiated(StreamId id) { return (id & 1) != 0; }

// Events of one stream, implemented by the stream's user. Each callback is edge-triggered: after
// on_readable(), read until peek() is empty or stop; after on_writable(), write until
// write_capacity() is 0.
class StreamVisitor {
 public:
  virtual ~StreamVisitor() = default;
  // New bytes, or the FIN, can be read.
  virtual void on_readable() = 0;
  // write_capacity() rose above zero after it had been exhausted.
  virtual void on_writable() = 0;
  // The peer aborted its send side (RESET_STREAM). Bytes not yet read are gone.
  virtual void on_reset(uint64_t code) = 0;
  // The peer asked us to stop sending (STOP_SENDING); the transport has already reset our send
  // side with the same code.
  virtual void on_stop_sending(uint64_t code) = 0;
  // Everything write() queued, and the FIN once finish() was called, has left the stream's queue:
  // buffered() fell to 0 (QUIC: sent in a packet, not yet acknowledged; WebSocket/qmux: written
  // to the connection). Fires each time that happens after a write() or finish(), from the loop
  // like on_writable(); never for a reset send side. Lets a sender wait for its streams to drain
  // without polling buffered().
  virtual void on_sent() {}
  // On a transport that confirms receipt (Stream::confirms_receipt()): the peer's transport has
  // received every byte and the FIN of this finished stream (receipt_pending() fell to false).
  // From the loop, once per stream; never for a reset send side.
  virtual void on_received() {}
};

// One stream. Owned by its transport session; the user holds a raw pointer until it calls
// release() or the session reports on_closed(), after which the pointer is invalid.
class Stream {
 public:
  virtual ~Stream() = default;

  virtual StreamId id() const = 0;
  bool is_uni() const { return transport::is_uni(id()); }
  // Callbacks go to `visitor` (may be null: events are then dropped, not queued).
  virtual void set_visitor(StreamVisitor* visitor) = 0;

  // --- receive side (not for local uni streams) ---
  // Received bytes not yet consumed, contiguous. Empty when nothing is buffered.
  virtual std::span<const uint8_t> peek() const = 0;
  // Drops the first n bytes of peek(); grants the peer flow-control credit for them.
  virtual void consume(size_t n) = 0;
  // Takes the first min(n, peek().size()) bytes as Bytes and consumes them, as consume() does.
  // Transports that receive into refcounted buffers share them (no copy); the default copies.
  virtual Bytes read(size_t n) {
    auto data = peek();
    Bytes out = Bytes::copy(data.first(std::min(n, data.size())));
    consume(out.size());
    return out;
  }
  // True once every byte has been consumed and the peer's FIN has arrived.
  virtual bool is_fin_received() const = 0;
  // True once the peer's FIN has arrived, even if bytes before it are still unread (so a reader
  // can tell a message cut short by FIN from one still arriving).
  virtual bool has_peer_fin() const = 0;
  // Tells the peer to stop sending; further bytes are discarded.
  virtual void stop_sending(uint64_t code) = 0;

  // --- send side (not for remote uni streams) ---
  // Bytes write() will take now. The transport keeps a bounded queue per stream, and bounds the
  // bytes queued over all streams of the session; once the queue that limited it drains below its
  // low-water mark after this returned 0, on_writable() fires.
  virtual size_t write_capacity() const = 0;
  // Queues bytes without copying them (the transport keeps the reference until sent, or for
  // QUIC until acknowledged). Takes all of `data` even past write_capacity(); callers pace
  // themselves with write_capacity().
  virtual void write(Bytes data) = 0;
  // write(first) then write(second), as one call: a FRAME header and its payload cost the
  // transport one set of state checks and one scheduling step instead of two.
  virtual void write_pair(Bytes first, Bytes second) {
    write(std::move(first));
    write(std::move(second));
  }
  // FIN after everything queued.
  virtual void finish() = 0;
  // Abandons the send side: queued bytes are dropped and RESET_STREAM goes to the peer.
  virtual void reset(uint64_t code) = 0;
  // Bytes queued but not yet handed to the network.
  virtual size_t buffered() const = 0;
  // Whether this transport learns that the peer received a finished stream's bytes
  // (qmux-01/02: a QX_PING sent after the FIN is answered). False: only on_sent() is known.
  virtual bool confirms_receipt() const { return false; }
  // True from finish() until the peer is known to have received every byte and the FIN
  // (on_received()); always false where confirms_receipt() is false or the send side was reset.
  virtual bool receipt_pending() const { return false; }
  // Among streams with queued data, higher send order goes first; equal orders share round robin.
  virtual void set_send_order(uint64_t order) = 0;

  // Hands the stream back: no more callbacks and the pointer becomes invalid. A send side that was
  // neither finished nor reset is reset with code 0, and an unfinished receive side gets
  // STOP_SENDING 0. Data already queued before finish() is still delivered.
  virtual void release() = 0;
};

// Events of a whole transport session, implemented by the MoQ session.
class SessionVisitor {
 public:
  virtual ~SessionVisitor() = default;
  // The peer opened a stream. Call set_visitor() on it (synchronously) to receive its events.
  virtual void on_incoming_stream(Stream& stream) = 0;
  // open_bidi()/open_uni() returned null earlier and the peer has since raised its limit.
  virtual void on_streams_available() = 0;
  // The session is over (peer close, transport error, or our own close()). Every Stream pointer is
  // invalid once this returns. Called exactly once.
  virtual void on_closed(uint64_t code, std::string_view reason) = 0;
  // An unreliable datagram arrived (RFC 9221; WebTransport strips its session prefix first).
  // Transports without datagrams never call it; MoQ sessions that use none may ignore it.
  virtual void on_datagram(std::span<const uint8_t> /*payload*/) {}
};

// A multiplexed session with one peer. Owned by the transport's connection object; the MoQ
// session holds it by reference and is destroyed no later than on_closed() returns.
class Session {
 public:
  virtual ~Session() = default;
  virtual void set_visitor(SessionVisitor* visitor) = 0;
  // A new local stream, or null when the peer's stream limit is reached (see
  // on_streams_available) or the session is closing.
  virtual Stream* open_bidi() = 0;
  virtual Stream* open_uni() = 0;
  // Closes with an application error code; on_closed() follows from the loop.
  virtual void close(uint64_t code, std::string_view reason) = 0;
  // Closes with nothing wrong to report, in the transport's own words where it has them (QUIC:
  // a transport CONNECTION_CLOSE with NO_ERROR); a transport without such a close uses
  // close(app_code, reason). on_closed() follows from the loop, as for close().
  virtual void close_without_error(uint64_t app_code, std::string_view reason) {
    close(app_code, reason);
  }

  // The application protocol the handshake selected ("" when none: then the MoQ version is chosen
  // by SETUP on the first bidi stream). E.g. "moq-lite-04" (ALPN or WT-Protocol).
  virtual std::string_view protocol() const = 0;
  // The request path and query ("/room?jwt=..") the peer connected to; "/" when none.
  virtual std::string_view path() const = 0;
  // The peer's address, for logs ("127.0.0.1:5555").
  virtual std::string_view peer() const = 0;
  // Transport name for logs and metrics: "websocket/qmux-00", "websocket/webtransport", "quic".
  virtual std::string_view kind() const = 0;
  // Stream payload bytes handed to the network since the session began. A reader that makes
  // progress moves it; bytes merely queued do not.
  virtual uint64_t bytes_sent() const = 0;
  // Stream payload bytes written by the user and not yet handed to the network.
  virtual size_t unsent_bytes() const = 0;

  // Unreliable datagrams (RFC 9221). The largest payload send_datagram() takes now; 0 when the
  // transport or the peer has none.
  virtual size_t max_datagram_size() const { return 0; }
  // Queues one datagram (copied); it may still be lost. False when it is over
  // max_datagram_size() or the transport has no datagrams.
  virtual bool send_datagram(std::span<const uint8_t> /*payload*/) { return false; }
};

// The byte pipe under a stream-multiplexing transport such as WebSocket: a TCP socket in
// production, a memory pipe in tests. Owned by whoever owns the transport connection.
class Pipe {
 public:
  virtual ~Pipe() = default;
  // Queues bytes for sending without copying; never blocks.
  virtual void send(Bytes data) = 0;
  // Bytes queued but not yet accepted by the kernel (or the other end of a test pipe).
  virtual size_t buffered() const = 0;
  // Sends what is queued, then closes. abort() closes at once (TCP RST where possible).
  virtual void close() = 0;
  virtual void abort() = 0;
};

// What a pipe's owner tells the protocol on top of it.
class PipeHandler {
 public:
  virtual ~PipeHandler() = default;
  // Bytes arrived. The handler may keep none of the span after returning.
  virtual void on_pipe_data(std::span<const uint8_t> data) = 0;
  // buffered() fell below the pipe's low-water mark.
  virtual void on_pipe_writable() = 0;
  // The peer closed or the pipe failed. No further calls follow.
  virtual void on_pipe_closed() = 0;
};

}  // namespace moqd::transport
