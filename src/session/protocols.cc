#include "session/protocols.h"

#include "transport/websocket/handshake.h"

namespace moqd::session {

std::vector<std::string> websocket_subprotocols(const wire::VersionSet& enabled) {
  std::vector<std::string> out;
  for (auto& token : wire::websocket_subprotocols(enabled)) {
    if (transport::websocket::parse_subprotocol(token)) {
      out.push_back(std::move(token));
    }
  }
  return out;
}

}  // namespace moqd::session
