#pragma once
// The client side of WebTransport over HTTP/3 (ALPN "h3"), the counterpart of server.h: on a
// client QUIC connection seen as a transport::Session, it opens its control stream (SETTINGS:
// ENABLE_WEBTRANSPORT, H3_DATAGRAM, no QPACK dynamic table), waits for the server's SETTINGS
// (which must enable the extended CONNECT and WebTransport), sends one extended CONNECT and, on a
// 2xx answer, exposes the WebTransport session as a transport::Session (session.h), so the MoQ
// session runs on it as on raw QUIC or WebSocket.
//
// Any other answer, a connection error (the critical-stream rules of RFC 9114 §6.2.1 and RFC 9204
// §4.2, as the server applies them) or the connection's loss before the answer is reported once
// to ClientObserver::on_failed, and the connection is closed. After the session is up, its end is
// the session's on_closed (session.h).
//
// Server-opened WebTransport streams (uni 0x54, bidi 0x41) for our session are delivered without
// their preamble; ones that arrive before the answer are held (at most
// ClientConfig::max_buffered_streams); any other server-opened bidi stream is a connection error.
//
// Threading and events follow transport.h: one worker thread; observer and visitor callbacks come
// from the loop, never from inside a call the caller made.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "transport/transport.h"
#include "transport/webtransport/h3.h"
#include "transport/webtransport/peer_streams.h"
#include "transport/webtransport/session.h"

namespace moqd::transport::webtransport {

struct ClientConfig {
  std::string authority;  // ":authority": host:port of the URL
  std::string path = "/";  // ":path", query included ("/room?jwt=..")
  // WT-Available-Protocols, most preferred first; the header is omitted when empty.
  std::vector<std::string> protocols;
  // Largest response HEADERS field section we decode; a larger one is a connection error.
  size_t max_field_section_size = 16 << 10;
  // Server-opened WebTransport streams held while the CONNECT is not answered yet.
  size_t max_buffered_streams = 16;
  // How long a session we closed waits for the server's FIN on the CONNECT stream before the
  // connection is closed.
  Duration close_linger = std::chrono::seconds(2);
};

// What the client tells its owner. Exactly one of the two is called, at most once, from the loop;
// neither may destroy the Client.
class ClientObserver {
 public:
  virtual ~ClientObserver() = default;
  // The CONNECT got a 2xx answer: set the session's visitor now; streams may follow at once.
  virtual void on_session(Session& session) = 0;
  // No session: `status` is the HTTP status of a non-2xx answer, or 0 when the connection failed
  // or closed first. `reason` is static, for the log. The connection is closed (or closing).
  virtual void on_failed(int status, const char* reason) = 0;
};

class ClientStream;

// One HTTP/3 connection carrying one WebTransport session. Owned by the QUIC connection's owner
// and destroyed before it; becomes the QUIC session's visitor on construction, which must be
// after the handshake completed.
class Client final : public SessionVisitor, private SessionHost {
 public:
  Client(Session& quic, Timers& timers, ClientObserver& observer, ClientConfig config);
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The established session, or null.
  Session* session();
  // SETTINGS from the server so far, for tests.
  const PeerSettings& peer_settings() const { return peer_settings_; }

  // transport::SessionVisitor (the QUIC connection's events)
  void on_incoming_stream(Stream& stream) override;
  void on_streams_available() override;
  void on_closed(uint64_t code, std::string_view reason) override;
  void on_datagram(std::span<const uint8_t> payload) override;

 private:
  friend class ClientStream;

  // SessionHost
  Session& quic() override { return quic_; }
  Timers& timers() override { return timers_; }
  bool peer_datagrams() const override { return peer_settings_.h3_datagram; }
  Duration close_linger() const override { return config_.close_linger; }
  // A connection error: closes the QUIC connection with an HTTP/3 code.
  void fail(const H3Error& error) override;

  void report_failure(int status, const char* reason);
  void open_control_stream();
  void on_control_frame(const Frame& frame);
  void on_goaway(std::span<const uint8_t> payload);
  void on_settings(std::span<const uint8_t> payload);
  void send_connect();
  // The response HEADERS on the CONNECT stream.
  void on_response(const Frame& frame);
  void establish(std::string protocol);
  void adopt_wt_stream(Stream& raw, uint64_t session_id);
  void remove_stream(ClientStream& stream);
  void schedule_pump();

  Session& quic_;
  Timers& timers_;
  ClientObserver& observer_;
  const ClientConfig config_;
  std::unique_ptr<QpackDecoder> qpack_;
  Stream* control_ = nullptr;  // ours
  PeerStreams peer_streams_;  // the server's critical streams seen so far
  bool settings_received_ = false;
  PeerSettings peer_settings_;
  bool closed_ = false;    // the QUIC connection reported on_closed
  bool failed_ = false;    // we closed it with an HTTP/3 error: stop reading
  bool reported_ = false;  // the observer heard on_session or on_failed
  ClientStream* connect_ = nullptr;  // the CONNECT stream until the session takes it over
  uint64_t last_goaway_ = UINT64_MAX;  // the lowest GOAWAY id so far
  std::vector<std::unique_ptr<ClientStream>> streams_;  // classifying, control, QPACK, CONNECT
  std::vector<std::unique_ptr<ClientStream>> graveyard_;  // removed inside their own callbacks
  std::unique_ptr<WtSession> session_;
  // Held WebTransport streams that came before the answer: (raw stream, session id).
  std::vector<std::pair<Stream*, uint64_t>> held_;
  TimerId pump_timer_ = 0;
};

}  // namespace moqd::transport::webtransport
