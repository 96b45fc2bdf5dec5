#pragma once
// MuxPair: a server-role and a client-role MuxSession joined by a FakeChannelPair (the server's on
// channel a, the client's on b, each its channel's handler), for tests of what runs on top of a
// WebSocket mux. Nothing moves until the test delivers (channels().deliver()). Destroying it
// detaches the muxes' visitors and the channels' handlers, then destroys the client's mux and the
// server's: end the sessions on them first, and keep their visitors alive until then (declare a
// visitor the pair does not own before the pair). Single-threaded; test only.
#include <memory>
#include <string>

#include "base/clock.h"
#include "testing/fake_channel.h"
#include "transport/websocket/mux_session.h"

namespace moqd::testing {

class MuxPair {
 public:
  // Both speak `protocol` in `framing`; `server_peer` and `client_peer` name each side's peer.
  MuxPair(Timers& timers, const std::string& protocol,
          transport::websocket::Framing framing = transport::websocket::Framing::kQmux00,
          const std::string& server_peer = "client", const std::string& client_peer = "server",
          transport::websocket::MuxConfig server_config = {},
          transport::websocket::MuxConfig client_config = {});
  ~MuxPair();
  MuxPair(const MuxPair&) = delete;
  MuxPair& operator=(const MuxPair&) = delete;

  FakeChannelPair& channels() { return channels_; }
  transport::websocket::MuxSession& server() { return *server_; }
  transport::websocket::MuxSession& client() { return *client_; }

 private:
  FakeChannelPair channels_;  // before the muxes, which it outlives
  std::unique_ptr<transport::websocket::MuxSession> server_;
  std::unique_ptr<transport::websocket::MuxSession> client_;
};

}  // namespace moqd::testing
