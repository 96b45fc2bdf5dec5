#pragma once
// The server side of WebTransport over HTTP/3 (draft-ietf-webtrans-http3 as Chromium speaks it,
// ALPN "h3") on top of a QUIC connection seen as a transport::Session. It runs the HTTP/3
// connection (control streams, SETTINGS, QPACK through qpack.h), answers one extended CONNECT
// and exposes the accepted WebTransport session as a transport::Session of its own, so the MoQ
// session runs on it exactly as on raw QUIC or WebSocket. The session itself (streams, capsules,
// its end, datagrams) is session.h's WtSession, shared with the client in client.h.
//
// A connection that has no accepted session ServerConfig::session_timeout after the handshake is
// closed (H3_NO_ERROR), so idle HTTP/3 connections do not wait for the QUIC idle timeout.
//
// Streams: a WebTransport stream is a QUIC stream that starts with a preamble (bidi: 0x41 and the
// session id; uni: 0x54 and the session id). Incoming streams are classified here, their
// preamble consumed, and handed to the session's visitor wrapped so that application error codes
// travel in the HTTP/3 range (h3.h wt_to_h3_code). Stream ids are the QUIC stream ids. Streams
// that arrive before their CONNECT has been answered are held (at most
// ServerConfig::max_buffered_streams); streams for any other session are refused with
// WT_BUFFERED_STREAM_REJECTED.
//
// One session per connection (WT_MAX_SESSIONS 1; browsers open a connection per WebTransport
// without pooling), so the QUIC stream limits are the session's stream limits. The session ends
// when its CONNECT stream ends: the peer's CLOSE_WEBTRANSPORT_SESSION capsule, FIN or reset, or
// our close(), which sends the capsule and FIN. After it ends, every stream is reset with
// WT_SESSION_GONE and the connection is closed with H3_NO_ERROR once the peer has finished its
// CONNECT stream, or after ServerConfig::close_linger.
//
// Threading and events follow transport.h: one worker thread; visitor callbacks come from the
// loop, never from inside a call the visitor made.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "transport/transport.h"
#include "transport/webtransport/h3.h"
#include "transport/webtransport/peer_streams.h"
#include "transport/webtransport/session.h"

namespace moqd::transport::webtransport {

struct ServerConfig {
  // WT protocols we accept, most preferred first (for WT-Protocol); see select_protocol().
  std::vector<std::string> protocols;
  // Largest HEADERS field section we decode (advertised as SETTINGS_MAX_FIELD_SECTION_SIZE).
  size_t max_field_section_size = 16 << 10;
  // WebTransport streams held while their session's CONNECT is not answered yet.
  size_t max_buffered_streams = 16;
  // A connection with no accepted session this long after the handshake is closed.
  Duration session_timeout = std::chrono::seconds(10);
  // How long a closed session waits for the peer's FIN on the CONNECT stream before the
  // connection is closed.
  Duration close_linger = std::chrono::seconds(2);
};

// What the server asks of its owner.
class ServerObserver {
 public:
  virtual ~ServerObserver() = default;
  // A well-formed WebTransport CONNECT for which a protocol was agreed ("" when the client
  // offered none). Return a refusal (403 for an unauthorized path, ...) or nullopt to accept.
  virtual std::optional<Refusal> on_connect(const ConnectRequest& request) = 0;
  // A CONNECT was refused (by the rules of parse_connect, the protocol choice or on_connect):
  // for the log.
  virtual void on_refused(int status, const char* reason) = 0;
  // The session was accepted (200 sent): set its visitor now; streams may follow at once.
  virtual void on_session(Session& session, const ConnectRequest& request) = 0;
};

class ServerStream;

// One HTTP/3 connection. Owned by the QUIC connection's owner and destroyed before it; becomes
// the QUIC session's visitor on construction.
class Server final : public SessionVisitor, private SessionHost {
 public:
  Server(Session& quic, Timers& timers, ServerObserver& observer, ServerConfig config);
  ~Server() override;
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops taking sessions: sends GOAWAY, and DRAIN_WEBTRANSPORT_SESSION to an open session (the
  // MoQ session above closes it in its own time).
  void drain();

  // The accepted session, or null.
  Session* session();
  // SETTINGS from the peer so far, for tests.
  const PeerSettings& peer_settings() const { return peer_settings_; }

  // transport::SessionVisitor (the QUIC connection's events)
  void on_incoming_stream(Stream& stream) override;
  void on_streams_available() override;
  void on_closed(uint64_t code, std::string_view reason) override;
  void on_datagram(std::span<const uint8_t> payload) override;

 private:
  friend class ServerStream;

  // SessionHost
  Session& quic() override { return quic_; }
  Timers& timers() override { return timers_; }
  bool peer_datagrams() const override;
  Duration close_linger() const override;

  void open_control_stream();
  // A connection error: closes the QUIC connection with an HTTP/3 code.
  void fail(const H3Error& error) override;
  // Classified incoming streams.
  void on_control_frame(const Frame& frame);
  void defer_request(ServerStream& stream);
  void on_request_headers(ServerStream& stream, const Frame& frame);
  void answer(ServerStream& stream, int status, const char* reason);
  void accept(ServerStream& stream, const ConnectRequest& request, const std::string& protocol);
  void adopt_wt_stream(Stream& raw, uint64_t session_id);
  void remove_stream(ServerStream& stream);
  // Deferred work from the loop: requests that waited for SETTINGS, freeing removed streams.
  void schedule_pump();
  void pump();
  Session& quic_;
  Timers& timers_;
  ServerObserver& observer_;
  const ServerConfig config_;
  std::unique_ptr<QpackDecoder> qpack_;
  Stream* control_ = nullptr;  // ours
  PeerStreams peer_streams_;  // the client's critical streams seen so far
  bool settings_received_ = false;
  PeerSettings peer_settings_;
  bool draining_ = false;
  bool closed_ = false;  // the QUIC connection reported on_closed
  bool failed_ = false;  // we closed it with an HTTP/3 error: stop reading
  std::vector<std::unique_ptr<ServerStream>> streams_;  // classifying, control, QPACK, request
  std::vector<std::unique_ptr<ServerStream>> graveyard_;  // removed inside their own callbacks
  std::vector<ServerStream*> deferred_requests_;        // CONNECTs waiting for SETTINGS
  std::unique_ptr<WtSession> session_;
  // Held WebTransport streams whose session is not established yet: (raw stream, session id).
  std::vector<std::pair<Stream*, uint64_t>> held_;
  TimerId pump_timer_ = 0;
  TimerId session_timer_ = 0;
};

}  // namespace moqd::transport::webtransport
