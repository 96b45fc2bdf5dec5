// `moq bench churn` (bench_churn.h). One event loop in this process keeps `--concurrency`
// sessions in flight: each connects (cycle i over WebSocket when i is even and --transport mix,
// QUIC otherwise), waits for the MoQ session to be ready with a discovery request open, closes,
// and waits for its transport to finish closing. The relay is read from /proc: VmRSS and the
// entries of /proc/PID/fd, after a warm-up (the baseline), during the run (the peak), and after
// it, until both are back within --margin of the baseline or --settle seconds pass.
#include "bench_churn.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_proc.h"
#include "bench_relay.h"
#include "client/connection.h"
#include "client/quic_connection.h"
#include "model/origin.h"
#include "runtime/event_loop.h"

namespace moqd::bench {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
SteadyTime steady_now() { return std::chrono::steady_clock::now(); }
double seconds_since(SteadyTime t) {
  return std::chrono::duration<double>(steady_now() - t).count();
}

struct ChurnOptions {
  RelayTarget relay;
  std::string relay_cpus;      // default: the first two allowed CPUs (two workers)
  size_t cycles = 10000;       // measured connect/disconnect cycles
  size_t warmup = 500;         // cycles before the baseline (lazy initialisation, allocator caches)
  size_t concurrency = 32;     // sessions in flight at once
  std::string transport = "mix";  // mix, quic, ws
  std::string versions;        // --versions every session offers; empty: all
  double settle_s = 15;        // how long to wait for memory and fds to come back
  double margin = 0.10;        // "back" = within this fraction of the baseline
  double cycle_timeout_s = 10;  // a cycle not done by then is counted as failed
  bool json = false;
};

struct Reading {
  uint64_t rss = 0;
  size_t fds = 0;
};

struct CycleCounts {
  size_t done = 0, failed = 0, ws = 0, quic = 0;
};

// Runs connect/ready/close cycles on one loop, `concurrency` at a time.
class Churner {
 public:
  Churner(const ChurnOptions& o, const RelayUnderTest& relay) : o_(o), relay_(relay) {}

  // Runs `n` cycles; calls `tick` about every 200 ms (for sampling the relay).
  CycleCounts run(size_t n, const std::function<void()>& tick) {
    CycleCounts counts;
    size_t started = 0;
    slots_.clear();
    slots_.resize(std::min(o_.concurrency, n));
    SteadyTime last_tick = steady_now();
    while (counts.done + counts.failed < n ||
           std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return s.finished; })) {
      for (auto& s : slots_) {
        step(s, started, n, counts);
      }
      loop_.run_once(std::chrono::milliseconds(2));
      if (seconds_since(last_tick) > 0.2) {
        last_tick = steady_now();
        tick();
      }
    }
    for (auto& s : slots_) {
      s.release();
    }
    slots_.clear();
    loop_.run_once(std::chrono::milliseconds(1));
    return counts;
  }

 private:
  // A session in flight. The link refers to the origin: release() drops the link first.
  struct Slot {
    std::unique_ptr<model::Origin> origin;
    client::LinkPtr link;
    bool closing = false;
    bool was_ready = false;
    bool finished = false;  // counted; released after one more loop turn
    SteadyTime started{};

    void release() {
      link.reset();
      origin.reset();
      closing = was_ready = finished = false;
    }
  };

  client::ConnectionOptions options(bool websocket) const {
    client::ConnectionOptions c;
    if (auto url = client::parse_url(relay_.base_url())) {
      c.url = *url;
    }
    c.transport = websocket ? client::TransportKind::kWebSocket : client::TransportKind::kQuic;
    c.tls.fingerprint = relay_.fingerprint();
    c.versions = version_set(o_.versions);
    c.discover_prefix = "churn";
    return c;
  }

  void start(Slot& s, size_t index, CycleCounts& counts) {
    bool websocket = o_.transport == "ws" || (o_.transport == "mix" && index % 2 == 0);
    (websocket ? counts.ws : counts.quic)++;
    s.started = steady_now();
    s.origin = std::make_unique<model::Origin>(model::OriginConfig{}, loop_, loop_);
    s.link = client::make_link(loop_, *s.origin, options(websocket));
    if (auto st = s.link->connect(); !st) {
      s.link.reset();  // counted as failed in step()
    }
  }

  void step(Slot& s, size_t& started, size_t n, CycleCounts& counts) {
    if (!s.origin) {
      if (started < n) {
        start(s, started++, counts);
      }
      return;
    }
    if (s.finished) {
      // The turn since it closed sent its CONNECTION_CLOSE (QUIC writes it into the socket's send
      // batch, flushed at the end of a turn); destroying it earlier could leave the relay holding
      // the session until its idle timeout.
      s.release();
      return;
    }
    bool timed_out = seconds_since(s.started) > o_.cycle_timeout_s;
    if (!s.link || timed_out) {
      counts.failed++;
      s.release();
      return;
    }
    if (!s.closing && s.link->is_ready()) {
      s.was_ready = true;
      s.closing = true;
      s.link->close();
    }
    if (s.link->is_closed() && (s.link->is_transport_closed() || !s.closing)) {
      (s.was_ready ? counts.done : counts.failed)++;
      s.finished = true;
    }
  }

  const ChurnOptions& o_;
  const RelayUnderTest& relay_;
  runtime::EventLoop loop_;
  std::vector<Slot> slots_;
};

Reading read(const RelayUnderTest& relay) {
  return {relay.rss_bytes(), process_fd_count(relay.pid())};
}

bool within(const Reading& r, const Reading& base, double margin) {
  return static_cast<double>(r.rss) <= static_cast<double>(base.rss) * (1 + margin) &&
         static_cast<double>(r.fds) <= static_cast<double>(base.fds) * (1 + margin);
}

// Waits up to `seconds` for the relay to come back within `margin` of `base` (a zero base:
// for its readings to stop falling); returns the last reading and sets `took_s`.
Reading settle(const RelayUnderTest& relay, const Reading& base, double margin, double seconds,
               double& took_s) {
  SteadyTime start = steady_now();
  Reading r = read(relay);
  while (seconds_since(start) < seconds && !(base.rss != 0 && within(r, base, margin))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = read(relay);
  }
  took_s = seconds_since(start);
  return r;
}

double mib(uint64_t b) { return static_cast<double>(b) / (1 << 20); }

int run_churn(const ChurnOptions& o) {
  raise_fd_limit();
  std::vector<int> cpus;
  if (!o.relay_cpus.empty()) {
    auto list = parse_cpu_list(o.relay_cpus);
    if (!list) {
      fprintf(stderr, "moq bench churn: bad --relay-cpus\n");
      return 2;
    }
    cpus = *list;
  } else {
    cpus = allowed_cpus();
    cpus.resize(std::min<size_t>(cpus.size(), 2));
  }
  RelayUnderTest relay;
  std::string error;
  if (!relay.start(o.relay, cpus, true, error)) {
    fprintf(stderr, "moq bench churn: %s\n", error.c_str());
    return 1;
  }
  Churner churner(o, relay);
  auto noop = [] {};
  CycleCounts warm = churner.run(o.warmup, noop);
  double took = 0;
  // Let the warm-up's sessions finish closing and a trim run (worker 0 checks every second).
  settle(relay, Reading{}, o.margin, 3, took);
  Reading base = read(relay);
  Reading peak = base;
  SteadyTime t0 = steady_now();
  CycleCounts counts = churner.run(o.cycles, [&] {
    Reading r = read(relay);
    peak.rss = std::max(peak.rss, r.rss);
    peak.fds = std::max(peak.fds, r.fds);
  });
  double run_s = seconds_since(t0);
  Reading end = read(relay);
  double settle_s = 0;
  Reading after = settle(relay, base, o.margin, o.settle_s, settle_s);
  bool held = within(after, base, o.margin);
  double rss_ratio = static_cast<double>(after.rss) / static_cast<double>(std::max<uint64_t>(1, base.rss));
  double fd_ratio = static_cast<double>(after.fds) / static_cast<double>(std::max<size_t>(1, base.fds));
  if (o.json) {
    printf("{\"cycles\":%zu,\"done\":%zu,\"failed\":%zu,\"websocket\":%zu,\"quic\":%zu,"
           "\"versions\":%s,"
           "\"warmup\":%zu,\"warmup_failed\":%zu,\"concurrency\":%zu,\"seconds\":%s,"
           "\"cycles_per_s\":%s,\"baseline\":{\"rss_mib\":%s,\"fds\":%zu},"
           "\"peak\":{\"rss_mib\":%s,\"fds\":%zu},\"at_end\":{\"rss_mib\":%s,\"fds\":%zu},"
           "\"after\":{\"rss_mib\":%s,\"fds\":%zu,\"settle_s\":%s},\"rss_ratio\":%s,"
           "\"fd_ratio\":%s,\"margin\":%s,\"held\":%s}\n",
           o.cycles, counts.done, counts.failed, counts.ws, counts.quic,
           json_quote(o.versions.empty() ? "all" : o.versions).c_str(), o.warmup, warm.failed,
           o.concurrency, json_number(run_s).c_str(), json_number(o.cycles / run_s).c_str(),
           json_number(mib(base.rss)).c_str(), base.fds, json_number(mib(peak.rss)).c_str(),
           peak.fds, json_number(mib(end.rss)).c_str(), end.fds,
           json_number(mib(after.rss)).c_str(), after.fds, json_number(settle_s).c_str(),
           json_number(rss_ratio).c_str(), json_number(fd_ratio).c_str(),
           json_number(o.margin).c_str(), held ? "true" : "false");
  } else {
    printf("churn: %zu cycles (%zu WebSocket, %zu QUIC) in %.1f s, %zu done, %zu failed\n"
           "relay RSS %.1f MiB -> peak %.1f -> %.1f after %.1f s (x%.3f); fds %zu -> peak %zu "
           "-> %zu (x%.3f); within %.0f%%: %s\n",
           o.cycles, counts.ws, counts.quic, run_s, counts.done, counts.failed, mib(base.rss),
           mib(peak.rss), mib(after.rss), settle_s, rss_ratio, base.fds, peak.fds, after.fds,
           fd_ratio, o.margin * 100, held ? "yes" : "no");
  }
  relay.stop();
  return held && counts.failed == 0 ? 0 : 1;
}

}  // namespace

void add_churn_command(CLI::App& bench, int* exit_code) {
  static ChurnOptions o;
  auto* cmd = bench.add_subcommand(
      "churn", "connect/disconnect cycles against a relay; its memory and fds before and after");
  cmd->add_option("--moqd", o.relay.moqd, "relay binary to start (default: moqd beside moq)");
  cmd->add_option("--relay", o.relay.url, "measure this running relay instead (with --relay-pid)");
  cmd->add_option("--relay-pid", o.relay.pid, "pid of --relay");
  cmd->add_option("--relay-arg", o.relay.args, "extra moqd flag (repeatable)");
  cmd->add_option("--relay-cpus", o.relay_cpus,
                  "CPUs for the relay, one worker each (default: the first two allowed)");
  cmd->add_option("--cycles", o.cycles, "measured cycles (default 10000)");
  cmd->add_option("--warmup", o.warmup, "cycles before the baseline (default 500)");
  cmd->add_option("--concurrency", o.concurrency, "sessions in flight at once (default 32)");
  cmd->add_option("--transport", o.transport, "mix (alternate), quic or ws (default mix)")
      ->check(CLI::IsMember({"mix", "quic", "ws"}));
  cmd->add_option("--versions", o.versions,
                  "MoQ versions every session offers, comma-separated (e.g. moq-transport-16; "
                  "default all, which moqd answers with moq-lite)")
      ->check(check_version_list);
  cmd->add_option("--settle", o.settle_s, "seconds to wait for memory and fds to return (default 15)");
  cmd->add_option("--margin", o.margin, "allowed growth over the baseline, a fraction (default 0.10)");
  cmd->add_flag("--json", o.json, "one JSON object on stdout");
  cmd->callback([exit_code] {
    if (o.concurrency == 0 || o.cycles == 0) {
      fprintf(stderr, "moq bench churn: --cycles and --concurrency must be positive\n");
      *exit_code = 2;
      return;
    }
    *exit_code = run_churn(o);
  });
}

}  // namespace moqd::bench
