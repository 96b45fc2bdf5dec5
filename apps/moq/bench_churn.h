#pragma once
// `moq bench churn`: sessions that connect, come up and leave, over and over (WebSocket and QUIC
// mixed), against a relay with two workers; the relay's resident memory and open file
// descriptors before and after, which should come back to their baseline. See
// docs/BENCHMARKS.md.
namespace CLI {
class App;
}

namespace moqd::bench {

// Adds `churn` to `bench`; the callback sets *exit_code (1 when memory or fds did not return).
void add_churn_command(CLI::App& bench, int* exit_code);

}  // namespace moqd::bench
