#pragma once
// One WebTransport session over HTTP/3, shared by the server (server.h) and the client
// (client.h): the session as a transport::Session, its data streams (WtStream), the CONNECT
// stream's capsules and FIN, the session's end and its datagrams. The HTTP/3 connection around
// it (control streams, QPACK, the CONNECT exchange, stream classification) stays with its host.
//
// A WtSession is created once the CONNECT got its 200, owned by its host and destroyed before
// the QUIC connection. One worker thread; visitor callbacks come from the loop, never from
// inside a call the visitor made (transport.h).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "transport/transport.h"
#include "transport/webtransport/h3.h"

namespace moqd::transport::webtransport {

// What a WebTransport session needs from the HTTP/3 connection that carries it. The host
// outlives the session.
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  // The QUIC connection (for opening streams, datagrams, counters and close).
  virtual Session& quic() = 0;
  virtual Timers& timers() = 0;
  // The peer's SETTINGS enabled HTTP datagrams.
  virtual bool peer_datagrams() const = 0;
  // How long a session we closed waits for the peer's FIN on the CONNECT stream before the
  // connection is closed.
  virtual Duration close_linger() const = 0;
  // A connection error found on the CONNECT stream: close the QUIC connection with it.
  virtual void fail(const H3Error& error) = 0;
};

class WtStream;

// The established session. After it ends (either side's CLOSE_WEBTRANSPORT_SESSION, FIN or
// reset of the CONNECT stream), every stream is reset with WT_SESSION_GONE and the QUIC
// connection is closed with the transport's NO_ERROR (Session::close_without_error): soon when
// the peer ended it or has finished its CONNECT stream, else after the host's close_linger().
class WtSession final : public Session {
 public:
  // `connect`: the CONNECT stream (its bytes up to the response already consumed); `server`:
  // our side, which tells local streams from the peer's.
  WtSession(SessionHost& host, Stream& connect, bool server, std::string protocol,
            std::string path);
  ~WtSession() override;
  WtSession(const WtSession&) = delete;
  WtSession& operator=(const WtSession&) = delete;

  uint64_t id() const { return id_; }
  bool is_ended() const { return ended_; }
  Stream* connect_stream() { return connect_; }
  SessionVisitor* visitor() { return visitor_; }

  // A peer-opened stream for this session, its preamble consumed.
  void add_incoming(Stream& raw);
  // The CONNECT stream is readable: DATA frames carrying capsules, then the FIN.
  void on_connect_readable();
  // The peer reset the CONNECT stream or asked us to stop sending on it.
  void on_connect_reset(uint64_t code);
  // A datagram for this session (its quarter stream id already removed).
  void on_datagram(std::span<const uint8_t> payload);
  // Sends DRAIN_WEBTRANSPORT_SESSION.
  void drain();
  // The QUIC connection is gone: every raw stream is invalid now; on_closed() is delivered now.
  void on_transport_closed(uint64_t code, std::string_view reason);

  // transport::Session
  void set_visitor(SessionVisitor* visitor) override { visitor_ = visitor; }
  Stream* open_bidi() override { return open(false); }
  Stream* open_uni() override { return open(true); }
  void close(uint64_t code, std::string_view reason) override;
  std::string_view protocol() const override { return protocol_; }
  std::string_view path() const override { return path_; }
  std::string_view peer() const override { return host_.quic().peer(); }
  std::string_view kind() const override { return "webtransport"; }
  uint64_t bytes_sent() const override { return host_.quic().bytes_sent(); }
  size_t unsent_bytes() const override { return host_.quic().unsent_bytes(); }
  size_t max_datagram_size() const override;
  bool send_datagram(std::span<const uint8_t> payload) override;

 private:
  friend class WtStream;

  Stream* open(bool uni);
  bool is_local(StreamId id) const { return is_server_initiated(id) == server_; }
  // One step of the CONNECT stream (a frame header or frame bytes); false when waiting.
  bool read_connect_stream(Stream& raw);
  void on_capsule_bytes(std::span<const uint8_t> data);
  void read_capsules();
  // A malformed capsule ends the session (and with it this one-session connection).
  void capsule_fail(const H3Error& error);
  // The peer ended the session: our FIN, then end() and a close of the connection soon.
  void on_peer_ended(uint64_t code, std::string_view reason);
  // Streams are abandoned now and on_closed() is delivered from the loop.
  void end(uint64_t code, std::string_view reason);
  void forget(WtStream& s, StreamId id);
  void close_connection_after(Duration delay);
  void schedule_pump();
  void pump();
  void deliver_closed();

  SessionHost& host_;
  Stream* connect_;
  const uint64_t id_;
  const bool server_;
  std::string protocol_;
  std::string path_;
  SessionVisitor* visitor_ = nullptr;
  std::unordered_map<StreamId, std::unique_ptr<WtStream>> streams_;
  std::vector<std::unique_ptr<WtStream>> graveyard_;  // released in a call, freed from the loop
  std::vector<StreamId> kicks_;
  // The CONNECT stream after its HEADERS: the frame being read, and the capsule bytes of DATA
  // frames not yet parsed (one capsule of at most kMaxCapsuleValue, or the rest of one skipped).
  uint64_t frame_left_ = 0;
  bool frame_is_data_ = false;
  std::vector<uint8_t> capsule_buf_;
  uint64_t capsule_skip_ = 0;
  bool peer_connect_fin_ = false;
  TimerId pump_timer_ = 0;
  TimerId linger_timer_ = 0;
  bool ended_ = false;
  bool closed_delivered_ = false;
  uint64_t close_code_ = 0;
  std::string close_reason_;
};

// Frames that may not appear on a request stream (RFC 9114 §7.2), including the HTTP/2 types
// reserved in §7.2.8.
bool is_control_only_frame(uint64_t type);

}  // namespace moqd::transport::webtransport
