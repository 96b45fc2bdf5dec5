// moq bench fanout: the orchestrator. It starts (or finds) the relay, the publisher, the viewer
// processes and the bystander, each pinned; tells the publisher to go; samples the relay's CPU,
// memory and /stats counters around the publishing window; collects what every process measured;
// probes the machine's limit; and judges whether the generator itself stayed out of the way.
#include "bench_fanout.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "bench_histogram.h"
#include "bench_limits.h"
#include "bench_proc.h"
#include "bench_relay.h"
#include "bench_worker.h"
#include "client/connection.h"
#include "client/quic_connection.h"
#include "wire/version.h"

namespace moqd::bench {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using Fields = std::vector<std::pair<std::string, std::string>>;

SteadyTime steady_now() { return std::chrono::steady_clock::now(); }
double seconds_since(SteadyTime t) {
  return std::chrono::duration<double>(steady_now() - t).count();
}

// One process of the generator, its CPU and what it last said.
struct GenProcess {
  std::string role;
  int cpu = -1;
  size_t relay = 0;  // index of the relay it connects to
  Child child;
  bool ready = false;
  Fields last;      // the last progress or result line
  bool has_result = false;
  double cpu_start = 0, cpu_end = 0;
};

// One relay's share of a run over several (--relay given more than once).
struct RelayShare {
  std::string url;
  size_t viewers = 0;
  uint64_t frames = 0, bytes = 0;
  double cpu_s = 0;       // its CPU in the window (0 without its pid)
  double ns_per_byte = 0;  // cpu_s per byte its viewers received
  Histogram latency;
};

struct Trial {
  size_t viewers = 0;
  std::vector<RelayShare> relays;  // per relay, when there are several
  bool valid = true;
  std::string invalid_reason;
  bool started = false;  // every process came up
  std::string error;     // why it could not run at all
  uint64_t sent = 0;
  uint64_t frames = 0;
  uint64_t frames_lost = 0;
  uint64_t bytes = 0;
  double delivered_ratio = 0;
  Histogram latency, bystander;
  uint64_t bystander_frames = 0;
  double window_s = 0;
  double relay_cpu_s = 0;
  double relay_ns_per_byte = 0;
  double throughput_gbps = 0;
  double relay_rss_per_viewer_kb = 0;
  double relay_heap_per_viewer_kb = 0;  // growth of the relay's heap in use (its /stats), per viewer
  double relay_ngtcp2_per_viewer_kb = 0;      // the part of that growth ngtcp2 holds
  double relay_ngtcp2_blocks_per_viewer = 0;  // ngtcp2's live heap blocks, growth per viewer
  double relay_syscalls_per_packet = 0;
  // Worker 0's malloc_trim calls from the relay's start to the window's end, and the longest one.
  double relay_trims = 0, relay_trim_max_ms = 0;
  double relay_datagrams_per_send = 0;    // per send syscall
  // The relay's loops in the window: busy time per poll (us: a turn's mean length, waits left out),
  // slices cut short (a burst's write passes served a slice at a time, EventLoop::TurnSlice).
  double relay_turn_busy_us = 0, relay_slices_cut = 0, relay_items_per_turn = 0;
  double relay_segments_per_message = 0;  // the GSO run length
  double generator_cpu_share = 0;
  // The viewer processes over the window: CPU seconds, sockets, datagrams received, socket
  // syscalls (recvmmsg + sendmmsg/sendmsg, over the whole run), GRO reads, datagrams whose DCID
  // named no viewer of a shared socket.
  double generator_cpu_s = 0;
  uint64_t generator_sockets = 0;
  double generator_datagrams_in = 0, generator_syscalls = 0, generator_gro_batches = 0;
  uint64_t generator_unknown_dcid = 0;
  uint64_t generator_drops = 0;
  uint64_t clamped_sockets = 0;
  uint64_t relay_drops = 0;
  double relay_udp_bytes_out = 0, relay_datagrams_out = 0;  // in the window (the relay's /stats)
  double limit_ns_per_byte = 0;
  size_t limit_packet_size = 0;  // the datagram size the limit was measured at
  bool has_limit = false;

  bool held(double max_p99_ms) const {
    return started && valid && frames_lost == 0 && latency.quantile_ms(0.99) <= max_p99_ms;
  }
};

void mark_invalid(Trial& t, const std::string& why) {
  if (t.valid) {
    t.valid = false;
    t.invalid_reason = why;
  } else {
    t.invalid_reason += "; " + why;
  }
}

class Fanout {
 public:
  explicit Fanout(const FanoutOptions& o) : o_(o) {}

  bool resolve_cpus(std::string& error) {
    auto split = split_cpus(o_.relay_cpus, o_.gen_cpus, error);
    if (!split) {
      return false;
    }
    cpus_ = *split;
    return true;
  }

  // One run with `viewers`; never valid when it could not run (error says why).
  Trial run(size_t viewers);
  const std::vector<int>& relay_cpus() const { return cpus_.relay; }
  const std::vector<int>& gen_cpus() const { return cpus_.gen; }
  size_t frame_size() const {
    if (o_.frame_size != 0) {
      return std::max<size_t>(o_.frame_size, 16);
    }
    double bits = o_.bitrate > 0 ? o_.bitrate : 1e6;
    return std::max<size_t>(static_cast<size_t>(bits / 8 / o_.fps), 16);
  }
  double bitrate() const { return static_cast<double>(frame_size()) * 8 * o_.fps; }

 private:
  std::vector<std::string> worker_argv(const std::string& role, const std::string& path,
                                       size_t count, size_t relay) const;
  std::optional<GenProcess> spawn(const std::string& role, const std::string& path, size_t count,
                                  int cpu, Trial& t, size_t relay = 0);
  // Starts (or finds) every relay; the first is relay_.
  bool start_relays(Trial& t);
  void stop_relays();
  // The relays viewers connect to (indices into relays_).
  std::vector<size_t> viewer_relays() const;
  bool wait_ready(std::vector<GenProcess*> procs, double timeout_s, Trial& t, const char* what);
  Trial measure(size_t viewers);
  void pump(std::vector<GenProcess>& procs, double timeout_s);
  void print_progress(const std::vector<GenProcess>& viewers, size_t total, bool final);
  // --sample-every: one line with the relay's memory and fds and the latency since the last one.
  void sample(const std::vector<GenProcess>& procs, SteadyTime t0);

  const FanoutOptions& o_;
  CpuSplit cpus_;
  std::vector<std::unique_ptr<RelayUnderTest>> relays_;
  RelayUnderTest* relay_ = nullptr;  // the publisher's: relays_[0]
  SteadyTime last_progress_{};
  double progress_bytes_ = 0;
  SteadyTime progress_bytes_at_ = steady_now();
  SteadyTime last_sample_{};
  Histogram sampled_;       // the viewers' cumulative latency at the last sample
  double sampled_frames_ = 0;
};

std::vector<std::string> Fanout::worker_argv(const std::string& role, const std::string& path,
                                             size_t count, size_t relay) const {
  const RelayUnderTest& r = *relays_[relay];
  std::vector<std::string> argv{
      self_dir() + "/moq", "bench", "worker", "--role", role, "--url", r.base_url(), "--path", path,
      "--count", std::to_string(count), "--transport", o_.transport, "--fingerprint",
      r.fingerprint().empty() ? "none" : r.fingerprint(), "--frame-size",
      std::to_string(frame_size()), "--fps", std::to_string(o_.fps), "--group-frames",
      std::to_string(o_.group_frames), "--duration", std::to_string(o_.duration_s),
      "--socket-buffer", std::to_string(o_.socket_buffer), "--ack-thresh",
      o_.ack_mode == "chromium" ? "10" : "2"};
  if (!o_.versions.empty()) {
    argv.push_back("--versions");
    argv.push_back(o_.versions);
  }
  if (role == "viewers" && o_.viewers_per_socket > 0) {
    argv.push_back("--viewers-per-socket");
    argv.push_back(std::to_string(o_.viewers_per_socket));
  }
  return argv;
}

std::optional<GenProcess> Fanout::spawn(const std::string& role, const std::string& path,
                                        size_t count, int cpu, Trial& t, size_t relay) {
  auto child = Child::spawn(worker_argv(role, path, count, relay), {cpu});
  if (!child) {
    t.error = "cannot start a generator process";
    return std::nullopt;
  }
  GenProcess p{role, cpu, relay, std::move(*child)};
  return p;
}

bool Fanout::start_relays(Trial& t) {
  relays_.clear();
  const size_t n = std::max<size_t>(1, o_.relay_urls.size());
  for (size_t i = 0; i < n; ++i) {
    RelayTarget target{o_.moqd, i < o_.relay_urls.size() ? o_.relay_urls[i] : std::string(),
                       i < o_.relay_pids.size() ? o_.relay_pids[i] : 0, o_.relay_args};
    relays_.push_back(std::make_unique<RelayUnderTest>());
    if (!relays_.back()->start(target, cpus_.relay, o_.transport != "ws", t.error)) {
      stop_relays();
      return false;
    }
  }
  relay_ = relays_[0].get();
  return true;
}

void Fanout::stop_relays() {
  for (auto& r : relays_) {
    r->stop();
  }
}

std::vector<size_t> Fanout::viewer_relays() const {
  std::vector<size_t> out;
  for (size_t i : o_.viewer_relays) {
    if (i < relays_.size()) {
      out.push_back(i);
    }
  }
  if (out.empty()) {
    for (size_t i = 0; i < relays_.size(); ++i) {
      out.push_back(i);
    }
  }
  return out;
}

bool Fanout::wait_ready(std::vector<GenProcess*> procs, double timeout_s, Trial& t,
                        const char* what) {
  auto start = steady_now();
  std::vector<Child*> children;
  for (auto* p : procs) {
    children.push_back(&p->child);
  }
  while (seconds_since(start) < timeout_s) {
    bool all = true;
    for (auto* p : procs) {
      for (const auto& line : p->child.read_lines()) {
        if (line.rfind("ready", 0) == 0) {
          p->ready = true;
        } else if (line.rfind("progress ", 0) == 0) {
          p->last = parse_fields(line);
        }
      }
      if (p->child.eof() && !p->ready) {
        t.error = std::string(what) + " exited before it was ready";
        return false;
      }
      all = all && p->ready;
    }
    if (all) {
      return true;
    }
    wait_for_output(children, 100);
  }
  t.error = std::string(what) + " not ready after " + std::to_string(static_cast<int>(timeout_s)) + " s";
  return false;
}

void Fanout::print_progress(const std::vector<GenProcess>& procs, size_t total, bool final) {
  if (!o_.progress || (!final && seconds_since(last_progress_) < 1.0)) {
    return;
  }
  last_progress_ = steady_now();
  double attached = 0, bytes = 0;
  Histogram h;
  for (const auto& p : procs) {
    if (p.role != "viewers") {
      continue;
    }
    attached += field_number(p.last, "attached");
    bytes += field_number(p.last, "bytes");
    h.merge(Histogram::parse(field_text(p.last, "hist")));
  }
  double dt = std::max(1e-3, seconds_since(progress_bytes_at_));
  double mbps = (bytes - progress_bytes_) * 8 / dt / 1e6;
  progress_bytes_ = bytes;
  progress_bytes_at_ = steady_now();
  fprintf(stderr, "fanout: %.0f/%zu viewers attached, %.1f Mbit/s delivered, p99 %.1f ms so far\n",
          attached, total, std::max(0.0, mbps), h.quantile_ms(0.99));
}

void Fanout::sample(const std::vector<GenProcess>& procs, SteadyTime t0) {
  if (o_.sample_every_s <= 0 || seconds_since(last_sample_) < o_.sample_every_s) {
    return;
  }
  last_sample_ = steady_now();
  Histogram h;
  double frames = 0;
  for (const auto& p : procs) {
    if (p.role == "viewers") {
      h.merge(Histogram::parse(field_text(p.last, "hist")));
      frames += field_number(p.last, "frames");
    }
  }
  Histogram d = h.since(sampled_);
  fprintf(stderr,
          "sample {\"t_s\":%.0f,\"rss_mib\":%.2f,\"fds\":%zu,\"frames\":%.0f,\"p50_ms\":%.2f,"
          "\"p99_ms\":%.2f,\"p999_ms\":%.2f,\"max_ms\":%.2f}\n",
          seconds_since(t0), static_cast<double>(relay_->rss_bytes()) / (1 << 20),
          process_fd_count(relay_->pid()), frames - sampled_frames_, d.quantile_ms(0.5),
          d.quantile_ms(0.99), d.quantile_ms(0.999), d.quantile_ms(1));
  sampled_ = h;
  sampled_frames_ = frames;
}

Trial Fanout::run(size_t viewers) {
  Trial t = measure(viewers);
  t.started = t.error.empty();
  if (!t.started) {
    mark_invalid(t, t.error);  // a run that could not run is never a valid one
  }
  return t;
}

Trial Fanout::measure(size_t viewers) {
  Trial t;
  t.viewers = viewers;
  if (!start_relays(t)) {
    return t;
  }
  const std::vector<size_t> vrelays = viewer_relays();
  if (viewers < vrelays.size()) {
    t.error = "fewer viewers than relays to spread them over";
    stop_relays();
    return t;
  }
  const std::string path = "bench/fanout";
  size_t workers = o_.gen_workers != 0 ? o_.gen_workers : cpus_.gen.size();
  workers = std::max<size_t>(1, std::min(workers, viewers));
  // At least one viewer process per relay, and as many on each: viewer process i goes to relay
  // vrelays[i % relays], so the viewers are dealt round-robin.
  workers = (std::max(workers, vrelays.size()) + vrelays.size() - 1) / vrelays.size() * vrelays.size();
  std::vector<GenProcess> procs;
  procs.reserve(workers + 2);  // pointers into it are kept below: it never reallocates
  // The publisher, then the relay's memory before any viewer.
  auto pub = spawn("publisher", path, 1, cpus_.gen[0], t);
  if (!pub) {
    stop_relays();
    return t;
  }
  procs.push_back(std::move(*pub));
  if (!wait_ready({&procs[0]}, 15, t, "the publisher")) {
    stop_relays();
    return t;
  }
  uint64_t rss_before = relay_->rss_bytes();
  RelayCounters heap_c0 = relay_->counters();
  double heap_before = heap_c0.heap_in_use;
  for (size_t i = 0; i < workers; ++i) {
    size_t n = viewers / workers + (i < viewers % workers ? 1 : 0);
    auto p = spawn("viewers", path, n, cpus_.gen[i % cpus_.gen.size()], t, vrelays[i % vrelays.size()]);
    if (!p) {
      stop_relays();
      return t;
    }
    procs.push_back(std::move(*p));
  }
  std::vector<GenProcess*> viewer_procs;
  for (size_t i = 1; i < procs.size(); ++i) {
    viewer_procs.push_back(&procs[i]);
  }
  auto setup_start = steady_now();
  while (!std::all_of(viewer_procs.begin(), viewer_procs.end(), [](auto* p) { return p->ready; })) {
    if (wait_ready(viewer_procs, 1, t, "a viewer process")) {
      break;
    }
    if (!t.error.empty() && t.error.find("exited") != std::string::npos) {
      stop_relays();
      return t;
    }
    t.error.clear();
    print_progress(procs, viewers, false);
    if (seconds_since(setup_start) > 30 + static_cast<double>(viewers) / 50) {
      t.error = "viewers not attached in time";
      print_progress(procs, viewers, true);
      stop_relays();
      return t;
    }
  }
  auto by = spawn("bystander", "bench/bystander", 1, cpus_.gen.back(), t);
  if (!by) {
    stop_relays();
    return t;
  }
  procs.push_back(std::move(*by));
  GenProcess& bystander = procs.back();
  if (!wait_ready({&bystander}, 15, t, "the bystander")) {
    mark_invalid(t, "the bystander could not run: " + t.error);
    t.error.clear();
  }
  // Let the last SUBSCRIBEs reach the relay before the first frame.
  pump(procs, 0.3);

  // The measured window: from "go" until every frame reached every viewer (or 2 s after the
  // last one was published).
  RelayCounters c0 = relay_->counters();
  double relay_cpu0 = relay_->cpu_seconds();
  std::vector<double> cpu0;
  for (const auto& r : relays_) {
    cpu0.push_back(r->cpu_seconds());
  }
  for (auto& p : procs) {
    p.cpu_start = process_cpu_seconds(p.child.pid());
  }
  auto t0 = steady_now();
  last_sample_ = t0;
  procs[0].child.send("go");
  bystander.child.send("go");
  std::optional<SteadyTime> done_at;
  double expected = 0;
  for (;;) {
    wait_for_output({&procs[0].child}, 50);
    for (auto& p : procs) {
      for (const auto& line : p.child.read_lines()) {
        if (line.rfind("progress ", 0) == 0) {
          p.last = parse_fields(line);
        } else if (line.rfind("done ", 0) == 0) {
          t.sent = static_cast<uint64_t>(field_number(parse_fields(line), "sent"));
          expected = static_cast<double>(t.sent) * static_cast<double>(viewers);
          done_at = steady_now();
        }
      }
    }
    print_progress(procs, viewers, false);
    sample(procs, t0);
    if (procs[0].child.eof()) {
      t.error = "the publisher exited";
      break;
    }
    if (done_at) {
      double frames = 0;
      for (auto* p : viewer_procs) {
        frames += field_number(p->last, "frames");
      }
      if (frames >= expected || seconds_since(*done_at) > 2) {
        break;
      }
    }
    if (seconds_since(t0) > o_.duration_s + 30) {
      t.error = "the publisher never finished";
      break;
    }
  }
  t.window_s = seconds_since(t0);
  t.relay_cpu_s = relay_->cpu_seconds() - relay_cpu0;
  if (relays_.size() > 1) {
    for (size_t i = 0; i < relays_.size(); ++i) {
      RelayShare share;
      share.url = relays_[i]->base_url();
      share.cpu_s = relays_[i]->cpu_seconds() - cpu0[i];
      t.relays.push_back(std::move(share));
    }
  }
  RelayCounters c1 = relay_->counters();
  uint64_t rss_after = relay_->rss_bytes();
  double heap_after = c1.heap_in_use;
  t.relay_trims = c1.trim_calls;
  t.relay_trim_max_ms = c1.trim_max_us / 1000;
  t.relay_drops = relay_->socket_drops();
  for (auto& p : procs) {
    p.cpu_end = process_cpu_seconds(p.child.pid());
  }
  for (auto& p : procs) {
    p.child.send("stop");
  }
  auto collect_start = steady_now();
  while (seconds_since(collect_start) < 15 &&
         !std::all_of(procs.begin(), procs.end(), [](const GenProcess& p) { return p.has_result || p.child.eof(); })) {
    std::vector<Child*> children;
    for (auto& p : procs) {
      children.push_back(&p.child);
    }
    wait_for_output(children, 100);
    for (auto& p : procs) {
      for (const auto& line : p.child.read_lines()) {
        if (line.rfind("result ", 0) == 0) {
          p.last = parse_fields(line);
          p.has_result = true;
        }
      }
    }
  }
  print_progress(procs, viewers, true);
  for (auto& p : procs) {
    p.child.wait(3000);
  }
  stop_relays();

  // What the processes measured.
  std::map<int, double> cpu_by_core;
  for (const auto& p : procs) {
    if (!p.has_result) {
      mark_invalid(t, "a " + p.role + " process gave no result");
    }
    cpu_by_core[p.cpu] += std::max(0.0, p.cpu_end - p.cpu_start);
    if (p.role == "viewers" && p.relay < t.relays.size()) {
      RelayShare& r = t.relays[p.relay];
      r.viewers += static_cast<size_t>(field_number(p.last, "attached"));
      r.frames += static_cast<uint64_t>(field_number(p.last, "frames"));
      r.bytes += static_cast<uint64_t>(field_number(p.last, "bytes"));
      r.latency.merge(Histogram::parse(field_text(p.last, "hist")));
    }
    if (p.role == "viewers") {
      t.frames += static_cast<uint64_t>(field_number(p.last, "frames"));
      t.bytes += static_cast<uint64_t>(field_number(p.last, "bytes"));
      t.latency.merge(Histogram::parse(field_text(p.last, "hist")));
    }
    if (p.role == "viewers" || p.role == "bystander") {
      t.generator_drops += static_cast<uint64_t>(field_number(p.last, "drops") +
                                                 field_number(p.last, "send_drops"));
      t.clamped_sockets += static_cast<uint64_t>(field_number(p.last, "clamped"));
    }
    if (p.role == "viewers") {
      t.generator_cpu_s += std::max(0.0, p.cpu_end - p.cpu_start);
      t.generator_sockets += static_cast<uint64_t>(field_number(p.last, "sockets"));
      t.generator_datagrams_in += field_number(p.last, "datagrams_in");
      t.generator_syscalls +=
          field_number(p.last, "recv_calls") + field_number(p.last, "send_calls");
      t.generator_gro_batches += field_number(p.last, "gro_batches");
      t.generator_unknown_dcid += static_cast<uint64_t>(field_number(p.last, "unknown_dcid"));
    }
  }
  t.bystander = Histogram::parse(field_text(bystander.last, "hist"));
  t.bystander_frames = static_cast<uint64_t>(field_number(bystander.last, "frames"));
  double wanted = static_cast<double>(t.sent) * static_cast<double>(viewers);
  t.frames_lost = wanted > static_cast<double>(t.frames) ? static_cast<uint64_t>(wanted) - t.frames : 0;
  t.delivered_ratio = wanted > 0 ? static_cast<double>(t.frames) / wanted : 0;
  t.relay_ns_per_byte = t.bytes > 0 ? t.relay_cpu_s * 1e9 / static_cast<double>(t.bytes) : 0;
  for (auto& r : t.relays) {
    r.ns_per_byte = r.bytes > 0 ? r.cpu_s * 1e9 / static_cast<double>(r.bytes) : 0;
  }
  t.throughput_gbps = t.window_s > 0 ? static_cast<double>(t.bytes) * 8 / t.window_s / 1e9 : 0;
  t.relay_rss_per_viewer_kb =
      rss_after > rss_before ? static_cast<double>(rss_after - rss_before) / 1024 / static_cast<double>(viewers) : 0;
  t.relay_heap_per_viewer_kb =
      heap_after > heap_before ? (heap_after - heap_before) / 1024 / static_cast<double>(viewers) : 0;
  t.relay_ngtcp2_per_viewer_kb = (c1.heap_ngtcp2 - heap_c0.heap_ngtcp2) / 1024 / static_cast<double>(viewers);
  t.relay_ngtcp2_blocks_per_viewer =
      (c1.heap_ngtcp2_blocks - heap_c0.heap_ngtcp2_blocks) / static_cast<double>(viewers);
  RelayCounters d = c1 - c0;
  t.relay_syscalls_per_packet = d.packets() > 0 ? d.syscalls() / d.packets() : 0;
  t.relay_datagrams_per_send = d.send_calls > 0 ? d.datagrams_out / d.send_calls : 0;
  t.relay_turn_busy_us = d.loop_polls > 0 ? d.loop_busy_us / d.loop_polls : 0;
  t.relay_items_per_turn = d.loop_polls > 0 ? d.turn_items / d.loop_polls : 0;
  t.relay_slices_cut = d.turn_slices_cut;
  t.relay_segments_per_message = d.messages_out > 0 ? d.datagrams_out / d.messages_out : 0;
  t.relay_udp_bytes_out = d.bytes_out;
  t.relay_datagrams_out = d.datagrams_out;
  for (const auto& [core, cpu] : cpu_by_core) {
    t.generator_cpu_share = std::max(t.generator_cpu_share, t.window_s > 0 ? cpu / t.window_s : 0);
  }

  // Is the generator to be believed?
  if (t.generator_cpu_share > 0.8) {
    char why[160];
    snprintf(why, sizeof why, "the generator used %.0f%% of a core (above 80%%: it may be the bottleneck)",
             100 * t.generator_cpu_share);
    mark_invalid(t, why);
  }
  if (t.generator_drops > 0) {
    mark_invalid(t, "the generator's sockets dropped " + std::to_string(t.generator_drops) + " datagrams");
  }
  if (t.bystander_frames == 0) {
    mark_invalid(t, "the bystander received nothing");
  }
  if (t.clamped_sockets > 0) {
    fprintf(stderr, "fanout: warning: %llu generator sockets got smaller buffers than %zu bytes "
            "(kernel clamp; raise net.core.rmem_max)\n",
            static_cast<unsigned long long>(t.clamped_sockets), o_.socket_buffer);
  }
  if (auto overlap = cpus_.overlap(); !overlap.empty()) {
    mark_invalid(t, "relay and generator share CPUs " + format_cpu_list(overlap));
  }
  return t;
}

void Fanout::pump(std::vector<GenProcess>& procs, double timeout_s) {
  auto start = steady_now();
  while (seconds_since(start) < timeout_s) {
    std::vector<Child*> children;
    for (auto& p : procs) {
      children.push_back(&p.child);
    }
    wait_for_output(children, 50);
    for (auto& p : procs) {
      for (const auto& line : p.child.read_lines()) {
        if (line.rfind("progress ", 0) == 0) {
          p.last = parse_fields(line);
        }
      }
    }
  }
}

std::string trial_json(const Trial& t, const Fanout& f, const FanoutOptions& o) {
  std::string j = "{";
  auto add = [&](const std::string& k, const std::string& v) {
    j += (j.size() > 1 ? "," : "") + json_quote(k) + ":" + v;
  };
  add("viewers", std::to_string(t.viewers));
  add("transport", json_quote(o.transport));
  add("ack_mode", json_quote(o.ack_mode));
  add("bitrate_bps", json_number(f.bitrate()));
  add("fps", json_number(o.fps));
  add("frame_size", std::to_string(f.frame_size()));
  add("group_frames", std::to_string(o.group_frames));
  add("duration_s", json_number(o.duration_s));
  add("relay_cpus", json_quote(format_cpu_list(f.relay_cpus())));
  add("gen_cpus", json_quote(format_cpu_list(f.gen_cpus())));
  add("frames_sent", std::to_string(t.sent));
  add("frames_delivered", std::to_string(t.frames));
  add("delivered_ratio", json_number(t.delivered_ratio));
  add("frames_lost", std::to_string(t.frames_lost));
  add("latency_ms", "{\"p50\":" + json_number(t.latency.quantile_ms(0.5)) + ",\"p99\":" +
                        json_number(t.latency.quantile_ms(0.99)) + ",\"p999\":" +
                        json_number(t.latency.quantile_ms(0.999)) + ",\"max\":" +
                        json_number(t.latency.quantile_ms(1)) + "}");
  add("bystander_latency_ms", "{\"p50\":" + json_number(t.bystander.quantile_ms(0.5)) + ",\"p99\":" +
                                  json_number(t.bystander.quantile_ms(0.99)) + "}");
  add("relay_cpu_s", json_number(t.relay_cpu_s));
  add("window_s", json_number(t.window_s));
  add("relay_ns_per_byte", json_number(t.relay_ns_per_byte));
  add("limit_ns_per_byte", t.has_limit ? json_number(t.limit_ns_per_byte) : "null");
  add("limit_packet_size", t.has_limit ? std::to_string(t.limit_packet_size) : "null");
  add("relay_udp_bytes_out", json_number(t.relay_udp_bytes_out));
  add("relay_datagrams_out", json_number(t.relay_datagrams_out));
  add("relay_vs_limit",
      t.has_limit && t.limit_ns_per_byte > 0 ? json_number(t.relay_ns_per_byte / t.limit_ns_per_byte) : "null");
  add("throughput_gbps", json_number(t.throughput_gbps));
  add("relay_rss_per_viewer_kb", json_number(t.relay_rss_per_viewer_kb));
  add("relay_heap_per_viewer_kb", json_number(t.relay_heap_per_viewer_kb));
  add("relay_ngtcp2_per_viewer_kb", json_number(t.relay_ngtcp2_per_viewer_kb));
  add("relay_ngtcp2_blocks_per_viewer", json_number(t.relay_ngtcp2_blocks_per_viewer));
  add("relay_syscalls_per_packet", json_number(t.relay_syscalls_per_packet));
  add("relay_datagrams_per_send", json_number(t.relay_datagrams_per_send));
  add("relay_turn_busy_us", json_number(t.relay_turn_busy_us));
  add("relay_items_per_turn", json_number(t.relay_items_per_turn));
  add("relay_slices_cut", json_number(t.relay_slices_cut));
  add("relay_gso_segments_per_message", json_number(t.relay_segments_per_message));
  add("relay_drops", std::to_string(t.relay_drops));
  add("relay_trims", json_number(t.relay_trims));
  add("relay_trim_max_ms", json_number(t.relay_trim_max_ms));
  add("generator_cpu_share", json_number(t.generator_cpu_share));
  add("generator_drops", std::to_string(t.generator_drops));
  add("generator_socket_buffer", std::to_string(o.socket_buffer));
  add("generator_viewers_per_socket", std::to_string(o.viewers_per_socket));
  add("generator_sockets", std::to_string(t.generator_sockets));
  add("generator_cpu_ns_per_byte",
      json_number(t.bytes > 0 ? t.generator_cpu_s * 1e9 / static_cast<double>(t.bytes) : 0));
  add("generator_syscalls_per_datagram",
      json_number(t.generator_datagrams_in > 0 ? t.generator_syscalls / t.generator_datagrams_in
                                               : 0));
  add("generator_datagrams_per_gro_read",
      json_number(t.generator_gro_batches > 0
                      ? t.generator_datagrams_in / t.generator_gro_batches
                      : 0));
  add("generator_unknown_dcid", std::to_string(t.generator_unknown_dcid));
  if (!t.relays.empty()) {
    std::string rs;
    for (const auto& r : t.relays) {
      rs += (rs.empty() ? "{" : ",{") + std::string("\"url\":") + json_quote(r.url) +
            ",\"viewers\":" + std::to_string(r.viewers) + ",\"frames_delivered\":" +
            std::to_string(r.frames) + ",\"bytes\":" + std::to_string(r.bytes) + ",\"cpu_s\":" +
            json_number(r.cpu_s) + ",\"ns_per_byte\":" + json_number(r.ns_per_byte) +
            ",\"latency_ms\":{\"p50\":" + json_number(r.latency.quantile_ms(0.5)) + ",\"p99\":" +
            json_number(r.latency.quantile_ms(0.99)) + "}}";
    }
    add("relays", "[" + rs + "]");
  }
  add("valid", t.valid ? "true" : "false");
  if (!t.valid) {
    add("invalid_reason", json_quote(t.invalid_reason));
  }
  return j + "}";
}

void print_trial(const Trial& t, const Fanout& f, const FanoutOptions& o) {
  printf("fanout %zu viewers over %s (%.2f Mbit/s, %zu-byte frames at %.0f fps, ack %s), relay on "
         "CPUs %s, generator on %s\n",
         t.viewers, o.transport.c_str(), f.bitrate() / 1e6, f.frame_size(), o.fps,
         o.ack_mode.c_str(), format_cpu_list(f.relay_cpus()).c_str(),
         format_cpu_list(f.gen_cpus()).c_str());
  printf("  delivered %llu of %llu frames (%.4f), lost %llu; %.3f Gbit/s\n",
         static_cast<unsigned long long>(t.frames),
         static_cast<unsigned long long>(t.sent * t.viewers), t.delivered_ratio,
         static_cast<unsigned long long>(t.frames_lost), t.throughput_gbps);
  printf("  latency ms p50 %.2f p99 %.2f p99.9 %.2f max %.2f; bystander p50 %.2f p99 %.2f\n",
         t.latency.quantile_ms(0.5), t.latency.quantile_ms(0.99), t.latency.quantile_ms(0.999),
         t.latency.quantile_ms(1), t.bystander.quantile_ms(0.5), t.bystander.quantile_ms(0.99));
  printf("  relay %.2f s CPU in %.2f s: %.2f ns/byte", t.relay_cpu_s, t.window_s, t.relay_ns_per_byte);
  if (t.has_limit) {
    printf(" vs limit %.2f ns/byte at %zu-byte datagrams (%.2fx)", t.limit_ns_per_byte,
           t.limit_packet_size, t.limit_ns_per_byte > 0 ? t.relay_ns_per_byte / t.limit_ns_per_byte : 0);
  }
  printf("\n  relay: %.1f KB RSS and %.1f KB heap per viewer (ngtcp2 %.1f KB in %.1f blocks); %.2f datagrams "
         "per send call in GSO runs of %.2f; %.3f syscalls per packet\n",
         t.relay_rss_per_viewer_kb, t.relay_heap_per_viewer_kb, t.relay_ngtcp2_per_viewer_kb,
         t.relay_ngtcp2_blocks_per_viewer, t.relay_datagrams_per_send, t.relay_segments_per_message,
         t.relay_syscalls_per_packet);
  for (const auto& r : t.relays) {
    printf("  relay %s: %zu viewers, %llu frames, %.2f s CPU, %.2f ns per byte its viewers got; "
           "latency ms p50 %.2f p99 %.2f\n",
           r.url.c_str(), r.viewers, static_cast<unsigned long long>(r.frames), r.cpu_s,
           r.ns_per_byte, r.latency.quantile_ms(0.5), r.latency.quantile_ms(0.99));
  }
  printf("  generator: %.0f%% of its busiest core, %llu socket drops -> %s%s\n",
         100 * t.generator_cpu_share, static_cast<unsigned long long>(t.generator_drops),
         t.valid ? "valid" : "INVALID: ", t.valid ? "" : t.invalid_reason.c_str());
}

void add_limit(Trial& t, const Fanout& f, const FanoutOptions& o) {
  if (o.transport == "ws" || !t.started) {
    return;  // the probe is of QUIC's costs (crypto and UDP)
  }
  std::vector<int> here = allowed_cpus();
  pin_to({f.relay_cpus()[0]});
  LimitsOptions lo;
  lo.seconds = o.limits_seconds;
  // At the size the relay's datagrams had in this window (1,452-byte data packets on loopback
  // and shorter ones), not the probe's default 1,200: per-packet costs spread over other bytes
  // would make the ratio read better or worse than a same-size comparison.
  lo.packet_size = o.limit_packet_size != 0
                       ? o.limit_packet_size
                       : limit_packet_size(t.relay_udp_bytes_out, t.relay_datagrams_out, lo.gso_segments);
  Limits limits;
  try {
    limits = measure_limits(lo);
  } catch (const std::exception& e) {
    pin_to(here);
    fprintf(stderr, "moq bench fanout: the limits probe failed: %s\n", e.what());
    return;
  }
  pin_to(here);
  // The UDP term at the relay's GSO run length: what one send of that many segments costs per
  // byte (the probe sends one message per call, so sendmmsg's batching of several runs is a
  // further saving the limit does not claim).
  t.limit_ns_per_byte = limit_ns_per_byte(limits, t.relay_segments_per_message, true);
  t.limit_packet_size = limits.packet_size;
  t.has_limit = true;
}

int run_fanout(const FanoutOptions& o) {
  raise_fd_limit();
  signal(SIGPIPE, SIG_IGN);
  Fanout f(o);
  std::string error;
  if (!f.resolve_cpus(error)) {
    fprintf(stderr, "moq bench fanout: %s\n", error.c_str());
    return 2;
  }
  if (!o.find_max) {
    Trial t = f.run(o.viewers);
    if (!t.started) {
      fprintf(stderr, "moq bench fanout: %s\n", t.error.c_str());
    }
    add_limit(t, f, o);
    if (o.json) {
      printf("%s\n", trial_json(t, f, o).c_str());
    } else {
      print_trial(t, f, o);
    }
    return t.started ? 0 : 1;
  }
  // --find-max: double the viewers while the run holds, then bisect twice.
  std::vector<Trial> trials;
  size_t n = std::max<size_t>(1, o.viewers);
  std::optional<size_t> best, failed;
  while (trials.size() < o.max_trials) {
    Trial t = f.run(n);
    bool held = t.held(o.max_p99_ms);
    if (o.progress) {
      fprintf(stderr, "fanout --find-max: %zu viewers %s (p99 %.1f ms, lost %llu%s%s)\n", n,
              held ? "held" : "did not hold", t.latency.quantile_ms(0.99),
              static_cast<unsigned long long>(t.frames_lost), t.valid ? "" : ", invalid: ",
              t.valid ? "" : t.invalid_reason.c_str());
    }
    trials.push_back(std::move(t));
    if (held) {
      best = n;
    } else {
      failed = n;
    }
    if (!failed) {
      n *= 2;
    } else if (!best || *failed - *best <= std::max<size_t>(1, *best / 8)) {
      break;
    } else {
      n = (*best + *failed) / 2;
    }
  }
  const Trial* last_good = nullptr;
  const Trial* first_bad = nullptr;
  for (const auto& t : trials) {
    if (best && t.viewers == *best && t.held(o.max_p99_ms)) {
      last_good = &t;
    }
    if (failed && t.viewers == *failed) {
      first_bad = &t;
    }
  }
  std::string limited_by = !first_bad ? "none (trials exhausted)"
                           : !first_bad->valid ? "generator"
                                               : "relay";
  if (last_good != nullptr) {
    add_limit(const_cast<Trial&>(*last_good), f, o);
  }
  if (o.json) {
    std::string j = "{\"find_max\":true,\"max_p99_ms\":" + json_number(o.max_p99_ms) +
                    ",\"max_viewers_held\":" + (best ? std::to_string(*best) : "0") +
                    ",\"limited_by\":" + json_quote(limited_by) + ",\"best\":" +
                    (last_good ? trial_json(*last_good, f, o) : "null") + ",\"trials\":[";
    for (size_t i = 0; i < trials.size(); ++i) {
      j += (i ? "," : "") + trial_json(trials[i], f, o);
    }
    printf("%s]}\n", j.c_str());
  } else {
    printf("find-max: largest viewer count that held (p99 <= %.0f ms, nothing lost, valid): %s; "
           "ran out first: %s\n",
           o.max_p99_ms, best ? std::to_string(*best).c_str() : "none", limited_by.c_str());
    if (last_good != nullptr) {
      print_trial(*last_good, f, o);
    }
  }
  return 0;
}

double parse_bitrate(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit(end);
  if (unit == "k" || unit == "K" || unit == "kbit") return v * 1e3;
  if (unit == "M" || unit == "m" || unit == "Mbit") return v * 1e6;
  if (unit == "G" || unit == "g" || unit == "Gbit") return v * 1e9;
  return unit.empty() ? v : -1;
}

double parse_seconds(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string unit(end);
  if (unit.empty() || unit == "s") return v;
  if (unit == "ms") return v / 1e3;
  if (unit == "m") return v * 60;
  if (unit == "h") return v * 3600;
  return -1;
}

}  // namespace

void add_fanout_command(CLI::App& bench, int* exit_code) {
  static FanoutOptions o;
  static std::string bitrate, duration = "10s", max_p99 = "50ms", sample_every;
  auto* cmd = bench.add_subcommand("fanout", "one track to N viewers through a relay, against the machine's limit");
  cmd->add_option("--moqd", o.moqd, "relay binary to start (default: moqd beside moq)");
  cmd->add_option("--relay", o.relay_urls,
                  "measure this running relay instead (with --relay-pid); repeatable or a comma list: "
                  "a cluster, the publisher on the first, viewers round-robin, reported per relay")
      ->delimiter(',');
  cmd->add_option("--relay-pid", o.relay_pids, "pid of each --relay, in order, for its CPU and memory")
      ->delimiter(',');
  cmd->add_option("--viewer-relays", o.viewer_relays,
                  "the --relay indices (from 0) viewers connect to, e.g. 1 or 0,1 (default: all)")
      ->delimiter(',');
  cmd->add_option("--relay-cpus", o.relay_cpus, "CPUs for the relay, e.g. 1 or 8-15 (default: upper half)");
  cmd->add_option("--gen-cpus", o.gen_cpus, "CPUs for the generator (default: the others)");
  cmd->add_option("--gen-workers", o.gen_workers, "viewer processes (default: one per generator CPU)");
  cmd->add_option("--viewers", o.viewers, "viewer sessions (default 100; with --find-max the first count)");
  cmd->add_option("--duration", duration, "how long to publish, e.g. 20s, 5m, 1h (default 10s)");
  cmd->add_option("--bitrate", bitrate, "track bitrate, e.g. 1M (default 1M, or from --frame-size)");
  cmd->add_option("--fps", o.fps, "frames per second (default 30)");
  cmd->add_option("--group-frames", o.group_frames, "frames per group (default 60)");
  cmd->add_option("--frame-size", o.frame_size, "bytes per frame (default bitrate / 8 / fps)");
  cmd->add_option("--versions", o.versions,
                  "MoQ versions the publisher and viewers offer, comma-separated (e.g. "
                  "moq-transport-16; default all, which moqd answers with moq-lite)")
      ->check(check_version_list);
  cmd->add_option("--transport", o.transport, "quic, wt or ws (default quic)")
      ->check(CLI::IsMember({"quic", "wt", "ws"}));
  cmd->add_option("--socket-buffer", o.socket_buffer, "generator socket buffers, bytes (default 4194304)");
  cmd->add_option("--viewers-per-socket", o.viewers_per_socket,
                  "QUIC viewers sharing one generator UDP socket, routed by connection ID (0: a "
                  "socket each; default " + std::to_string(kDefaultViewersPerSocket) + ")");
  cmd->add_option("--ack-mode", o.ack_mode,
                  "viewers' ACKs: chromium (every 10 packets, as Chromium decimates) or ngtcp2 "
                  "(every 2; default chromium)")
      ->check(CLI::IsMember({"chromium", "ngtcp2"}));
  cmd->add_option("--relay-arg", o.relay_args, "extra moqd flag (repeatable; value as a separate --relay-arg)");
  cmd->add_flag("--json", o.json, "one JSON object on stdout");
  cmd->add_flag("--find-max", o.find_max, "raise viewers until p99 passes --max-p99 or a frame is lost");
  cmd->add_option("--max-p99", max_p99, "latency bound for --find-max (default 50ms)");
  cmd->add_option("--max-trials", o.max_trials, "runs --find-max may make (default 8)");
  cmd->add_option("--limits-seconds", o.limits_seconds, "time per point of the limits probe (default 0.3)");
  cmd->add_option("--limit-packet-size", o.limit_packet_size,
                  "datagram bytes the limits probe uses (default 0: the mean size of the relay's "
                  "datagrams in the run)");
  cmd->add_option("--sample-every", sample_every,
                  "soak: a 'sample {json}' line on stderr this often, e.g. 60s (relay RSS, fds, "
                  "latency over the interval)");
  cmd->callback([exit_code] {
    o.bitrate = bitrate.empty() ? 0 : parse_bitrate(bitrate);
    o.sample_every_s = sample_every.empty() ? 0 : parse_seconds(sample_every);
    o.duration_s = parse_seconds(duration);
    o.max_p99_ms = parse_seconds(max_p99) * 1e3;
    if (o.bitrate < 0 || o.duration_s <= 0 || o.sample_every_s < 0 || o.max_p99_ms <= 0 || o.fps <= 0 || o.group_frames == 0) {
      fprintf(stderr, "moq bench fanout: bad --bitrate, --duration, --max-p99, --fps or --group-frames\n");
      *exit_code = 2;
      return;
    }
    *exit_code = run_fanout(o);
  });

  static WorkerOptions w;
  auto* worker = bench.add_subcommand("worker", "");  // no description: hidden
  worker->add_option("--role", w.role)->required();
  worker->add_option("--url", w.url)->required();
  worker->add_option("--path", w.path)->required();
  worker->add_option("--count", w.count);
  worker->add_option("--transport", w.transport);
  worker->add_option("--versions", w.versions);
  worker->add_option("--fingerprint", w.fingerprint);
  worker->add_option("--frame-size", w.frame_size);
  worker->add_option("--fps", w.fps);
  worker->add_option("--group-frames", w.group_frames);
  worker->add_option("--duration", w.duration_s);
  worker->add_option("--socket-buffer", w.socket_buffer);
  worker->add_option("--viewers-per-socket", w.viewers_per_socket);
  worker->add_option("--ack-thresh", w.ack_thresh);
  worker->add_option("--rate", w.rate);
  worker->add_option("--subscribers", w.subscribers);
  worker->group("");
  worker->callback([exit_code] {
    if (w.fingerprint == "none") {
      w.fingerprint.clear();
    }
    *exit_code = run_worker(w);
  });
}

}  // namespace moqd::bench
