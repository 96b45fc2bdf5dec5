#pragma once
// One accepted TCP connection and the layers on it: the socket, the WebSocket handshake and
// framing, the stream multiplexer, and the MoQ session. Owned by its RelayWorker; destroyed from
// the loop once the socket has closed.
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/tcp.h"
#include "relay/relay_session.h"
#include "transport/tls/server_pipe.h"
#include "transport/websocket/mux_session.h"
#include "transport/websocket/ws_connection.h"

namespace moqd::relay {

class RelayWorker;

// "1.2.3.4:5" -> "1.2.3.4", "[::1]:5" -> "[::1]": what --max-connections-per-address counts.
std::string_view peer_address(std::string_view peer);

class ServerConnection final : public transport::PipeHandler {
 public:
  // The public listener serves MoQ over WebSocket and the public GETs; the metrics listener
  // (--metrics-listen) serves /metrics, /health, /ready and the status page, and no WebSocket.
  enum class Listener { kPublic, kMetrics };
  // `counted`: admitted by Relay::admit_connection (released at destruction); `ops_only`: past
  // --max-connections, so plain HTTP is answered but an upgrade gets 503.
  ServerConnection(RelayWorker& worker, int fd, std::string peer,
                   Listener listener = Listener::kPublic, bool counted = false,
                   bool ops_only = false);
  ~ServerConnection() override;

  // Closes the session (if any) with `reason`, or the socket.
  void close(Error reason);
  // GOAWAY naming `url` when the session's version has it; false otherwise.
  bool goaway(const std::string& url) { return session_.send_goaway(url); }
  // Drops the TCP connection at once (RST).
  void abort() { tcp_.abort(); }

  // transport::PipeHandler: forwards to the WebSocket layer; a closed pipe retires us.
  void on_pipe_data(std::span<const uint8_t> data) override;
  void on_pipe_writable() override;
  void on_pipe_closed() override;


 private:
  // Makes the HTTP/WebSocket layer over `pipe` (the TCP connection, or TLS on it).
  void make_ws(transport::Pipe& pipe);
  // The first bytes are a TLS handshake: put TLS between TCP and HTTP.
  bool start_tls();
  transport::websocket::RequestDecision on_request(const transport::websocket::HttpRequest& r);
  // GETs of the metrics listener (and of the status page on the public one); nullopt: not ours.
  std::optional<transport::websocket::PlainResponse> on_ops_request(
      const transport::websocket::HttpRequest& r);
  void on_upgraded();

  RelayWorker& worker_;
  std::string peer_;
  Listener listener_;
  bool counted_;
  bool ops_only_;
  runtime::TcpConnection tcp_;
  bool first_data_ = true;
  std::unique_ptr<transport::tls::ServerPipe> tls_;  // when the client spoke TLS
  std::unique_ptr<transport::websocket::WsServerConnection> ws_;
  std::unique_ptr<transport::websocket::MuxSession> mux_;
  RelaySession session_;  // destroyed before mux_
};

}  // namespace moqd::relay
