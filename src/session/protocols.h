#pragma once
// Which WebSocket subprotocols carry a MoQ session moqd can run: the wire table's forms
// (wire::websocket_subprotocols) whose framing the WebSocket transport implements. The relay
// accepts them, `moq` offers them. Any thread.
#include <string>
#include <vector>

#include "wire/version.h"

namespace moqd::session {

// Most preferred first: newest MoQ protocol, then newest framing (see wire/version.h).
std::vector<std::string> websocket_subprotocols(const wire::VersionSet& enabled);

}  // namespace moqd::session
