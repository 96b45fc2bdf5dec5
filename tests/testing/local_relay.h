// A whole relay (threads, sockets) on 127.0.0.1 for the relay tests that drive it through real
// client links (drain_test, reload_test, shared_client_socket_test): the config to start it with,
// and the client options that reach it once started. Header-only: moqd_testing does not link the
// relay, and only relay_tests includes this.
#pragma once

#include <cstddef>
#include <utility>

#include "base/error.h"
#include "client/connection.h"
#include "relay/config.h"
#include "relay/relay.h"

namespace moqd::testing {

// A relay config listening on 127.0.0.1, port 0 (free on TCP and UDP), with `workers` workers;
// the rest at its defaults, for the test to adjust before it constructs the Relay.
inline relay::RelayConfig local_relay_config(size_t workers) {
  relay::RelayConfig config;
  config.listen = {"127.0.0.1:0"};
  config.workers = workers;
  return config;
}

// Starts `relay` and returns the options of a client that reaches its first listener over
// `transport` (every other option at its default), or why the relay did not start or its URL did
// not parse.
inline Result<client::ConnectionOptions> start_local_relay(relay::Relay& relay,
                                                           client::TransportKind transport) {
  auto bound = relay.start();
  if (!bound) {
    return tl::unexpected(bound.error());
  }
  auto url = client::parse_url((*bound)[0].url());
  if (!url) {
    return tl::unexpected(url.error());
  }
  client::ConnectionOptions options;
  options.url = std::move(*url);
  options.transport = transport;
  return options;
}

}  // namespace moqd::testing
