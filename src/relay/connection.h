#pragma once
// One accepted TCP connection and the layers on it: the socket, the WebSocket handshake and
// framing, the stream multiplexer, and the MoQ session. Owned by its RelayWorker; destroyed from
// the loop once the socket has closed.
#include <memory>
#include <string>

#include "runtime/tcp.h"
#include "relay/relay_session.h"
#include "transport/websocket/mux_session.h"
#include "transport/websocket/ws_connection.h"

namespace moqd::relay {

class RelayWorker;

class ServerConnection final : public transport::PipeHandler {
 public:
  ServerConnection(RelayWorker& worker, int fd, std::string peer);
  ~ServerConnection() override;

  // Closes the session (if any) with `reason`, or the socket.
  void close(Error reason);
  // Drops the TCP connection at once (RST).
  void abort() { tcp_.abort(); }

  // transport::PipeHandler: forwards to the WebSocket layer; a closed pipe retires us.
  void on_pipe_data(std::span<const uint8_t> data) override;
  void on_pipe_writable() override;
  void on_pipe_closed() override;


 private:
  transport::websocket::RequestDecision on_request(const transport::websocket::HttpRequest& r);
  void on_upgraded();

  RelayWorker& worker_;
  std::string peer_;
  runtime::TcpConnection tcp_;
  transport::websocket::WsServerConnection ws_;
  std::unique_ptr<transport::websocket::MuxSession> mux_;
  RelaySession session_;  // destroyed before mux_
};

}  // namespace moqd::relay
