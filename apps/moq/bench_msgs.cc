#include "bench_msgs.h"

#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_histogram.h"
#include "bench_proc.h"
#include "bench_relay.h"

namespace moqd::bench {
namespace {

struct MsgsOptions {
  RelayTarget relay;
  std::string relay_cpus, gen_cpus;
  size_t publishers = 0;   // with subscribers: one case; 0 runs both 1->8 and 8->1
  size_t subscribers = 0;
  size_t size = 16;
  double rate = 0;         // per publisher; 0: as fast as it goes (a closed loop)
  double duration_s = 5;
  std::string transport = "quic";
  std::string versions;  // --versions for every generator session; empty: all
  bool json = false;
};

struct MsgsResult {
  size_t publishers = 0, subscribers = 0;
  bool started = false;
  std::string error;
  uint64_t sent = 0, delivered = 0;
  double window_s = 0, relay_cpu_s = 0, gen_cpu_s = 0;
  RelayCounters counters;
  Histogram latency;
  uint64_t generator_drops = 0;
};

MsgsResult run_case(const MsgsOptions& o, const CpuSplit& cpus, size_t publishers, size_t subscribers) {
  MsgsResult r;
  r.publishers = publishers;
  r.subscribers = subscribers;
  RelayUnderTest relay;
  if (!relay.start(o.relay, cpus.relay, o.transport != "ws", r.error)) {
    return r;
  }
  std::vector<std::string> argv = {self_dir() + "/moq", "bench", "worker", "--role", "msgs",
                                   "--url", relay.base_url(), "--path", "bench/msgs",
                                   "--count", std::to_string(publishers), "--subscribers",
                                   std::to_string(subscribers), "--transport", o.transport,
                                   "--fingerprint", relay.fingerprint().empty() ? "none" : relay.fingerprint(),
                                   "--frame-size", std::to_string(o.size), "--rate", std::to_string(o.rate),
                                   "--duration", std::to_string(o.duration_s), "--ack-thresh", "10"};
  if (!o.versions.empty()) {
    argv.push_back("--versions");
    argv.push_back(o.versions);
  }
  auto child = Child::spawn(argv, cpus.gen);
  if (!child) {
    r.error = "cannot start the generator";
    return r;
  }
  auto wait_line = [&](const std::string& prefix, double timeout_s) -> std::string {
    auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timeout_s &&
           !child->eof()) {
      wait_for_output({&*child}, 100);
      for (const auto& line : child->read_lines()) {
        if (line.rfind(prefix, 0) == 0) {
          return line;
        }
      }
    }
    return "";
  };
  if (wait_line("ready", 30).empty()) {
    r.error = "the generator did not come up";
    return r;
  }
  RelayCounters c0 = relay.counters();
  double cpu0 = relay.cpu_seconds();
  double gen0 = process_cpu_seconds(child->pid());
  auto t0 = std::chrono::steady_clock::now();
  child->send("go");
  std::string done = wait_line("done", o.duration_s + 30);
  r.window_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.relay_cpu_s = relay.cpu_seconds() - cpu0;
  r.gen_cpu_s = process_cpu_seconds(child->pid()) - gen0;
  r.counters = relay.counters() - c0;
  child->send("stop");
  std::string result = wait_line("result", 15);
  child->wait(3000);
  relay.stop();
  if (done.empty() || result.empty()) {
    r.error = "the generator did not finish";
    return r;
  }
  auto f = parse_fields(result);
  r.sent = static_cast<uint64_t>(field_number(f, "sent"));
  r.delivered = static_cast<uint64_t>(field_number(f, "frames"));
  r.latency = Histogram::parse(field_text(f, "hist"));
  r.generator_drops = static_cast<uint64_t>(field_number(f, "drops") + field_number(f, "send_drops"));
  r.started = true;
  return r;
}

std::string result_json(const MsgsResult& r, const MsgsOptions& o) {
  double d = static_cast<double>(r.delivered);
  double gen_share = r.window_s > 0 ? r.gen_cpu_s / r.window_s : 0;
  std::string reason = !r.started ? r.error
                       : gen_share > 0.8 ? "the generator used more than 80% of its core"
                       : r.generator_drops > 0 ? "the generator's sockets dropped datagrams"
                                               : "";
  std::string j = "{\"publishers\":" + std::to_string(r.publishers) +
                  ",\"subscribers\":" + std::to_string(r.subscribers) +
                  ",\"transport\":" + json_quote(o.transport) +
                  ",\"versions\":" + json_quote(o.versions.empty() ? "all" : o.versions) +
                  ",\"message_size\":" + std::to_string(o.size) +
                  ",\"rate_per_publisher\":" + json_number(o.rate) +
                  ",\"messages_sent\":" + std::to_string(r.sent) +
                  ",\"messages_delivered\":" + std::to_string(r.delivered) +
                  ",\"messages_per_second\":" + json_number(r.window_s > 0 ? d / r.window_s : 0) +
                  ",\"relay_cpu_s\":" + json_number(r.relay_cpu_s) +
                  ",\"relay_ns_per_message\":" + json_number(d > 0 ? r.relay_cpu_s * 1e9 / d : 0) +
                  ",\"relay_packets_per_message\":" + json_number(d > 0 ? r.counters.datagrams_out / d : 0) +
                  ",\"relay_syscalls_per_packet\":" +
                  json_number(r.counters.packets() > 0 ? r.counters.syscalls() / r.counters.packets() : 0) +
                  ",\"latency_ms\":{\"p50\":" + json_number(r.latency.quantile_ms(0.5)) +
                  ",\"p99\":" + json_number(r.latency.quantile_ms(0.99)) + "}" +
                  ",\"generator_cpu_share\":" + json_number(gen_share) +
                  ",\"generator_drops\":" + std::to_string(r.generator_drops) +
                  ",\"valid\":" + (reason.empty() ? "true" : "false");
  if (!reason.empty()) {
    j += ",\"invalid_reason\":" + json_quote(reason);
  }
  return j + "}";
}

int run_msgs_bench(const MsgsOptions& o) {
  signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();
  std::string error;
  auto cpus = split_cpus(o.relay_cpus, o.gen_cpus, error);
  if (!cpus) {
    fprintf(stderr, "moq bench msgs: %s\n", error.c_str());
    return 2;
  }
  std::vector<std::pair<size_t, size_t>> cases;
  if (o.publishers != 0 || o.subscribers != 0) {
    cases.push_back({std::max<size_t>(1, o.publishers), std::max<size_t>(1, o.subscribers)});
  } else {
    cases = {{1, 8}, {8, 1}};
  }
  int rc = 0;
  std::string all;
  for (auto [p, s] : cases) {
    MsgsResult r = run_case(o, *cpus, p, s);
    if (!r.started) {
      fprintf(stderr, "moq bench msgs: %zu->%zu: %s\n", p, s, r.error.c_str());
      rc = 1;
    }
    std::string j = result_json(r, o);
    if (o.json) {
      all += (all.empty() ? "" : ",") + j;
    } else {
      double d = static_cast<double>(r.delivered);
      printf("msgs %zu -> %zu over %s, %zu-byte messages: %llu of %llu delivered, %.0f msgs/s, relay "
             "%.0f ns and %.3f packets per message, latency p50 %.2f p99 %.2f ms, generator %.0f%% of "
             "its core\n",
             p, s, o.transport.c_str(), o.size, static_cast<unsigned long long>(r.delivered),
             static_cast<unsigned long long>(r.sent * s), r.window_s > 0 ? d / r.window_s : 0,
             d > 0 ? r.relay_cpu_s * 1e9 / d : 0, d > 0 ? r.counters.datagrams_out / d : 0,
             r.latency.quantile_ms(0.5), r.latency.quantile_ms(0.99),
             r.window_s > 0 ? 100 * r.gen_cpu_s / r.window_s : 0);
    }
  }
  if (o.json) {
    printf("{\"msgs\":[%s]}\n", all.c_str());
  }
  return rc;
}

}  // namespace

void add_msgs_command(CLI::App& bench, int* exit_code) {
  static MsgsOptions o;
  auto* cmd = bench.add_subcommand("msgs", "chat-shaped traffic: 16-byte messages, 1->8 and 8->1");
  cmd->add_option("--moqd", o.relay.moqd, "relay binary to start (default: moqd beside moq)");
  cmd->add_option("--relay", o.relay.url, "measure this running relay instead (with --relay-pid)");
  cmd->add_option("--relay-pid", o.relay.pid, "pid of --relay");
  cmd->add_option("--relay-arg", o.relay.args, "extra moqd flag (repeatable)");
  cmd->add_option("--relay-cpus", o.relay_cpus, "CPUs for the relay (default: upper half)");
  cmd->add_option("--gen-cpus", o.gen_cpus, "CPUs for the generator (default: the others)");
  cmd->add_option("--publishers", o.publishers, "run one case with this many publishers");
  cmd->add_option("--subscribers", o.subscribers, "... and this many subscribers");
  cmd->add_option("--size", o.size, "bytes per message (at least 16; default 16)");
  cmd->add_option("--rate", o.rate, "messages per second per publisher (default 0: as fast as it goes)");
  cmd->add_option("--duration", o.duration_s, "seconds per case (default 5)");
  cmd->add_option("--versions", o.versions,
                  "MoQ versions the publishers and subscribers offer, comma-separated (e.g. "
                  "moq-transport-16; default all, which moqd answers with moq-lite)")
      ->check(check_version_list);
  cmd->add_option("--transport", o.transport, "quic, wt or ws (default quic)")
      ->check(CLI::IsMember({"quic", "wt", "ws"}));
  cmd->add_flag("--json", o.json, "one JSON object on stdout");
  cmd->callback([exit_code] { *exit_code = run_msgs_bench(o); });
}

}  // namespace moqd::bench
