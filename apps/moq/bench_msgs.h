#pragma once
// `moq bench msgs`: chat-shaped traffic over QUIC: 16-byte messages in one long group per
// publisher, one publisher to 8 subscribers and 8 publishers to one subscriber; messages
// delivered per second, relay CPU per delivered message, relay packets per message.
namespace CLI {
class App;
}

namespace moqd::bench {

// Adds `msgs` to `bench`; the callback sets *exit_code.
void add_msgs_command(CLI::App& bench, int* exit_code);

}  // namespace moqd::bench
