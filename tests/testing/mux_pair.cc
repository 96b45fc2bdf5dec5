#include "testing/mux_pair.h"

#include <utility>

namespace moqd::testing {

namespace ws = transport::websocket;

MuxPair::MuxPair(Timers& timers, const std::string& protocol, ws::Framing framing,
                 const std::string& server_peer, const std::string& client_peer,
                 ws::MuxConfig server_config, ws::MuxConfig client_config)
    : server_(std::make_unique<ws::MuxSession>(channels_.a(), timers, framing, ws::Role::kServer,
                                               protocol, "/", server_peer,
                                               std::move(server_config))),
      client_(std::make_unique<ws::MuxSession>(channels_.b(), timers, framing, ws::Role::kClient,
                                               protocol, "/", client_peer,
                                               std::move(client_config))) {
  channels_.a().set_handler(server_.get());
  channels_.b().set_handler(client_.get());
}

MuxPair::~MuxPair() {
  server_->set_visitor(nullptr);
  client_->set_visitor(nullptr);
  channels_.a().set_handler(nullptr);
  channels_.b().set_handler(nullptr);
  client_.reset();
  server_.reset();
}

}  // namespace moqd::testing
