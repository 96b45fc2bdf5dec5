#pragma once
// The client side of a relay connection for the `moq` CLI and the load generator. Link is what
// they hold: a MoQ session in the client role over some transport, on one event loop, serving
// and filling the given Origin exactly as the relay's sessions do. Connection is the WebSocket
// stack (TCP, the upgrade, the stream multiplexer); QuicConnection (quic_connection.h) is the
// QUIC one, raw or carrying WebTransport over HTTP/3, and make_link() there picks between them.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/origin.h"
#include "runtime/event_loop.h"
#include "runtime/tcp.h"
#include "runtime/udp.h"
#include "session/moq_session.h"
#include "transport/quic/connection.h"
#include "transport/websocket/mux_session.h"
#include "transport/websocket/ws_connection.h"

namespace moqd::client {

class SharedQuicSocket;  // shared_quic_socket.h

struct Url {
  std::string scheme;  // http, https, ws, wss
  std::string host;    // without brackets
  uint16_t port = 0;
  std::string path = "/";
  std::string query;
  std::string target() const { return query.empty() ? path : path + "?" + query; }
  std::string authority() const;
};
Result<Url> parse_url(std::string_view url);

enum class TransportKind {
  kWebSocket,
  kQuic,
  kWebTransport,  // over HTTP/3 on QUIC: the URL path travels in the CONNECT's :path
};

// How a QUIC (or WebTransport) client checks the relay's certificate. https:// URLs use the
// system trust store unless ca_file, fingerprint or insecure is set; http:// URLs fetch
// GET /certificate.sha256 over plain HTTP and pin it, as the JS client does (so they trust the
// network path).
struct TlsOptions {
  std::string ca_file;      // PEM CAs (or self-signed certificates) to trust instead
  std::string fingerprint;  // hex SHA-256 of the leaf's DER, as --tls-fingerprint takes it
  bool insecure = false;    // accept any certificate
};

struct ConnectionOptions {
  Url url;
  TransportKind transport = TransportKind::kWebSocket;
  TlsOptions tls;
  // WebSocket: offer only this framing ("qmux-00", "webtransport"); empty offers every framing.
  // The subprotocols offered are session::websocket_subprotocols(versions), most preferred first.
  std::string framing;
  wire::VersionSet versions = wire::VersionSet::all();
  // Ask the relay for its broadcasts under this prefix (see SessionConfig::discover_prefix).
  std::optional<std::string> discover_prefix;
  // QUIC and WebTransport only: the connection's settings (windows, ACK policy) and its UDP
  // socket's (buffer sizes, GSO/GRO).
  transport::quic::ConnectionConfig quic;
  runtime::UdpSocket::Options udp;
  // QUIC only: share this socket (and its local port) with the other connections on it instead
  // of opening one (then `udp` is unused); it must outlive the link. Null: a socket of its own.
  SharedQuicSocket* shared_udp = nullptr;
  // A relay's link to a cluster peer: its hop id (SessionConfig::hop_id), its session limits, and
  // the worker's counters (null: not counted).
  uint64_t hop_id = 0;
  std::optional<session::SessionLimits> limits;
  session::SkipCounters* skips = nullptr;
  session::TrafficCounters* traffic = nullptr;
};

// The prefix a client joins to its broadcast paths (and discovery prefix) for `options`. WebSocket
// and WebTransport carry the URL path and the relay roots the session there, so it is empty; raw
// QUIC carries no path, so the session sees the whole origin and it is the URL's path.
std::string path_prefix_for(const ConnectionOptions& options);

// One client session to a relay over one transport. Owned by the CLI; one event loop, not
// thread-safe. on_ready fires once the MoQ session is set up; on_closed once, when the session or
// the transport ends (also for a failed handshake). A derived class destroys session_ before its
// transport.
class Link : public session::SessionHandler {
 public:
  ~Link() override = default;
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // Starts connecting: may block for name resolution and the TCP connect (or, for QUIC over
  // http://, the certificate fetch); the handshakes then run on the loop. An error means nothing
  // was started.
  virtual Status connect() = 0;
  // Closes the session (on_closed follows from the loop), or the transport before it exists.
  virtual void close() = 0;
  // True once every byte written so far is delivered as far as this process can tell: over QUIC,
  // acknowledged by the relay (a lost packet is retransmitted only while the connection lives);
  // over WebSocket, handed to the kernel (TCP delivers it, given a graceful close).
  virtual bool is_flushed() const = 0;
  // True once the transport has finished closing after close(), so that the process may exit
  // without cutting the relay off: WebSocket, the relay answered our close frame (or the close
  // handshake timed out) and TCP is closed; QUIC, our CONNECTION_CLOSE has gone to the socket.
  virtual bool is_transport_closed() const = 0;
  // The UDP socket under a QUIC or WebTransport link (null over WebSocket), for its counters.
  virtual const runtime::UdpSocket* udp_socket() const { return nullptr; }
  // path_prefix_for(the options).
  std::string path_prefix() const { return path_prefix_for(options_); }

  bool is_ready() const { return ready_; }
  bool is_closed() const { return closed_; }
  // Why it closed, once closed.
  Error close_reason() const { return close_reason_; }
  session::MoqSession* session() { return session_.get(); }

  std::function<void()> on_ready;
  std::function<void(Error)> on_closed;
  // The relay sent GOAWAY (lite-04): reconnect to the URL ("" = the same one).
  std::function<void(const std::string&)> on_goaway_fn;
  // When set, the peer's announcements go here instead of into the origin (a relay's cluster
  // link adds the link's cost and tells its other workers).
  std::function<void(const std::string&, bool, const model::Hops&, model::BroadcastSource&)>
      on_announce_fn;

  // session::SessionHandler
  bool authorize(session::Action, std::string_view, std::string_view) override { return true; }
  // A link with a hop id is a relay's cluster link: its peer is a relay.
  bool is_relay_link() const override { return options_.hop_id != 0; }
  void on_session_ready(wire::Version version) override;
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override;
  void on_session_closed(Error reason) override;
  void on_goaway(const std::string& uri) override {
    if (on_goaway_fn) {
      on_goaway_fn(uri);
    }
  }

 protected:
  Link(runtime::EventLoop& loop, model::Origin& origin, ConnectionOptions options)
      : loop_(loop), origin_(origin), options_(std::move(options)) {}
  // Makes and starts the client session over `transport`, which must outlive session_.
  void start_session(transport::Session& transport);
  void mark_closed(Error reason);

  runtime::EventLoop& loop_;
  model::Origin& origin_;
  ConnectionOptions options_;
  std::unique_ptr<session::MoqSession> session_;

 private:
  bool ready_ = false;
  bool closed_ = false;
  Error close_reason_{ErrorCode::kCancel, ""};
};

using LinkPtr = std::unique_ptr<Link>;

// The WebSocket stack: TCP, the upgrade, the stream multiplexer, then the session. Closing runs
// the WebSocket close handshake (RFC 6455 §7.1.1: the client waits for the server to close TCP),
// waiting at most kCloseTimeout for the relay's close frame.
class Connection final : public Link, public transport::PipeHandler {
 public:
  Connection(runtime::EventLoop& loop, model::Origin& origin, ConnectionOptions options);
  ~Connection() override;

  // How long the close handshake waits for the relay's close frame before dropping TCP.
  static constexpr Duration kCloseTimeout = std::chrono::seconds(1);

  // Connects (blocking TCP connect, then the handshake on the loop).
  Status connect() override;
  void close() override;
  bool is_flushed() const override;
  bool is_transport_closed() const override;

  // transport::PipeHandler
  void on_pipe_data(std::span<const uint8_t> data) override;
  void on_pipe_writable() override;
  void on_pipe_closed() override;

 private:
  void on_upgraded(std::string_view subprotocol);

  std::unique_ptr<runtime::TcpConnection> tcp_;
  std::unique_ptr<transport::websocket::WsClientConnection> ws_;
  std::unique_ptr<transport::websocket::MuxSession> mux_;
  bool tcp_closed_ = false;
};

// Reads whole frames of a track as they complete, starting at the newest group (a late joiner),
// and emits them in group-sequence order. Relays send newer groups first, so group N+1 may arrive
// before group N: a group is emitted once the group before it was, or once it has waited
// `reorder_wait` (the missing one may never come). A group older than one already emitted is
// emitted when it arrives. One per track; remove before the track dies (on_ended is
// called when the track ends, after which it is detached).
// on_frame gets each complete frame's first `keep` bytes (all of it when shorter) and its whole
// size: a reader that needs only a header (the load generator's 16-byte stamp) does not copy
// the rest of every frame. A frame cut short (its group aborted) is never emitted.
class FrameReader final : public model::TrackListener {
 public:
  using FrameFn = std::function<void(uint64_t group, uint64_t index, std::span<const uint8_t> bytes,
                                     uint64_t size)>;
  static constexpr size_t kWholeFrame = SIZE_MAX;
  FrameReader(model::Track& track, const Clock& clock, Timers& timers, Duration reorder_wait,
              FrameFn on_frame, std::function<void(Error)> on_ended, size_t keep = kWholeFrame);
  ~FrameReader() override;

  void on_track_data(model::Track& track) override;
  void on_track_ended(model::Track& track, Error reason) override;

 private:
  void drain();

  bool may_emit(uint64_t sequence, Instant arrived) const;

  model::Track* track_;
  const Clock& clock_;
  Timers& timers_;
  Duration reorder_wait_;
  size_t keep_;
  TimerId timer_ = 0;
  std::optional<uint64_t> last_sequence_;
  FrameFn on_frame_;
  std::function<void(Error)> on_ended_;
  uint64_t next_arrival_;
  struct Open {
    model::GroupCursor cursor;
    Instant arrived;
    uint64_t index = 0;
    std::vector<uint8_t> frame;  // the current frame's first keep_ bytes
    uint64_t size = 0;
    uint64_t received = 0;  // of the current frame
    bool in_frame = false;
  };
  std::vector<Open> open_;
};

}  // namespace moqd::client
