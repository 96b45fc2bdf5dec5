#pragma once
// The relay under test, for `moq bench fanout` and `moq bench msgs`: started pinned to its CPUs
// (or one already running), and read from outside: its CPU time and memory from /proc, its UDP
// and event-loop counters from GET /stats.
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "bench_proc.h"
#include "client/connection.h"
#include "wire/version.h"

namespace moqd::bench {

// Which CPUs the relay and the generator get: given lists, or the allowed CPUs split in two
// (the relay the upper half). On one CPU both get it (and the runs say they overlap).
struct CpuSplit {
  std::vector<int> relay, gen;
  // The CPUs in both lists (a run with any is not valid).
  std::vector<int> overlap() const;
};
std::optional<CpuSplit> split_cpus(const std::string& relay, const std::string& gen, std::string& error);

// The "total" object of GET /stats (see Relay::stats_json).
struct RelayCounters {
  double datagrams_in = 0, datagrams_out = 0, messages_out = 0, bytes_out = 0, send_calls = 0, recv_calls = 0,
         loop_polls = 0, gso_batches = 0;
  // The loops' busy time (us), turn work items and slices cut short (0 from an older moqd).
  double loop_busy_us = 0, turn_items = 0, turn_slices_cut = 0;
  double heap_in_use = 0;  // /stats "heap" "in_use": the relay's heap, bytes (0 from an older moqd)
  double heap_ngtcp2 = 0;  // "heap" "ngtcp2_in_use": the part of it ngtcp2 holds (0 from an older moqd)
  double heap_ngtcp2_blocks = 0;  // "heap" "ngtcp2_blocks": ngtcp2's live blocks
  // /stats "trim": worker 0's malloc_trim calls and the longest one (us, since start: a difference
  // keeps the later maximum). 0 from an older moqd.
  double trim_calls = 0, trim_max_us = 0;
  RelayCounters operator-(const RelayCounters& o) const;
  double syscalls() const { return send_calls + recv_calls + loop_polls; }
  double packets() const { return datagrams_in + datagrams_out; }
};

struct RelayTarget {
  std::string moqd;              // binary to start (default: moqd beside moq)
  std::string url;               // or a running relay...
  pid_t pid = 0;                 // ...and its pid
  std::vector<std::string> args;  // extra moqd flags
};

class RelayUnderTest {
 public:
  // Starts moqd on 127.0.0.1, port 0, one worker per CPU (unless target.url is given) and reads
  // the certificate hash the QUIC clients pin. `error` says why not.
  bool start(const RelayTarget& target, const std::vector<int>& cpus, bool need_certificate,
             std::string& error);
  // SIGTERM, then SIGKILL after 5 s; a relay we did not start is left alone.
  void stop();
  ~RelayUnderTest() { stop(); }

  const client::Url& url() const { return url_; }
  std::string base_url() const { return "http://" + url_.authority() + url_.path; }
  const std::string& fingerprint() const { return fingerprint_; }
  pid_t pid() const { return pid_; }
  double cpu_seconds() const { return process_cpu_seconds(pid_); }
  uint64_t rss_bytes() const { return process_rss_bytes(pid_); }
  uint64_t socket_drops() const { return udp_socket_drops(pid_); }
  RelayCounters counters() const;

 private:
  std::optional<Child> child_;
  pid_t pid_ = 0;
  client::Url url_;
  std::string fingerprint_;
};

// `--versions` of the bench commands (fanout, msgs, churn): a comma-separated list of version
// names (wire/version.h). The CLI check: "" when every name is known, the error otherwise.
std::string check_version_list(const std::string& list);
// The versions the list names (unknown names skipped; check_version_list refuses them first);
// every version for an empty list.
wire::VersionSet version_set(const std::string& list);

// JSON pieces for the reports.
std::string json_number(double v);
std::string json_quote(const std::string& s);

}  // namespace moqd::bench
