#include "bench_relay.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "client/quic_connection.h"

namespace moqd::bench {

std::vector<int> CpuSplit::overlap() const {
  std::vector<int> out;
  for (int c : relay) {
    if (std::find(gen.begin(), gen.end(), c) != gen.end()) {
      out.push_back(c);
    }
  }
  return out;
}

std::optional<CpuSplit> split_cpus(const std::string& relay, const std::string& gen, std::string& error) {
  std::vector<int> all = allowed_cpus();
  CpuSplit s;
  if (!relay.empty()) {
    auto r = parse_cpu_list(relay);
    if (!r) {
      error = "bad --relay-cpus";
      return std::nullopt;
    }
    s.relay = *r;
  } else {
    s.relay.assign(all.begin() + static_cast<ptrdiff_t>(all.size() / 2), all.end());
  }
  if (!gen.empty()) {
    auto g = parse_cpu_list(gen);
    if (!g) {
      error = "bad --gen-cpus";
      return std::nullopt;
    }
    s.gen = *g;
  } else {
    for (int c : all) {
      if (std::find(s.relay.begin(), s.relay.end(), c) == s.relay.end()) {
        s.gen.push_back(c);
      }
    }
    if (s.gen.empty()) {
      s.gen = all;
    }
  }
  return s;
}

RelayCounters RelayCounters::operator-(const RelayCounters& o) const {
  RelayCounters d;
  d.datagrams_in = datagrams_in - o.datagrams_in;
  d.datagrams_out = datagrams_out - o.datagrams_out;
  d.messages_out = messages_out - o.messages_out;
  d.bytes_out = bytes_out - o.bytes_out;
  d.send_calls = send_calls - o.send_calls;
  d.recv_calls = recv_calls - o.recv_calls;
  d.loop_polls = loop_polls - o.loop_polls;
  d.loop_busy_us = loop_busy_us - o.loop_busy_us;
  d.turn_items = turn_items - o.turn_items;
  d.turn_slices_cut = turn_slices_cut - o.turn_slices_cut;
  d.gso_batches = gso_batches - o.gso_batches;
  d.heap_in_use = heap_in_use - o.heap_in_use;
  d.heap_ngtcp2 = heap_ngtcp2 - o.heap_ngtcp2;
  d.heap_ngtcp2_blocks = heap_ngtcp2_blocks - o.heap_ngtcp2_blocks;
  d.trim_calls = trim_calls - o.trim_calls;
  d.trim_max_us = trim_max_us;
  return d;
}

bool RelayUnderTest::start(const RelayTarget& target, const std::vector<int>& cpus,
                           bool need_certificate, std::string& error) {
  std::string url = target.url;
  pid_ = target.pid;
  if (url.empty()) {
    std::string bin = target.moqd.empty() ? self_dir() + "/moqd" : target.moqd;
    std::vector<std::string> argv = {bin, "--listen", "127.0.0.1:0", "--workers",
                                     std::to_string(cpus.size()), "--log-level", "warn",
                                     "--max-publisher-rate", "0",
                                     // every generator connection comes from 127.0.0.1
                                     "--max-connections-per-address", "1000000",
                                     "--max-connections", "1000000"};
    argv.insert(argv.end(), target.args.begin(), target.args.end());
    child_ = Child::spawn(argv, cpus);
    if (!child_) {
      error = "cannot start " + bin;
      return false;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (url.empty() && std::chrono::steady_clock::now() < deadline && !child_->eof()) {
      wait_for_output({&*child_}, 100);
      for (const auto& line : child_->read_lines()) {
        if (line.rfind("moqd ready url=", 0) == 0) {
          url = line.substr(15);
        }
      }
    }
    if (url.empty()) {
      error = "moqd did not print its ready line";
      return false;
    }
    pid_ = child_->pid();
  }
  auto parsed = client::parse_url(url);
  if (!parsed) {
    error = "bad relay URL " + url;
    return false;
  }
  url_ = *parsed;
  if (need_certificate) {
    auto hash = client::http_get(url_, "/certificate.sha256", std::chrono::seconds(5));
    if (!hash) {
      error = "cannot fetch the relay's /certificate.sha256";
      return false;
    }
    fingerprint_ = *hash;
    while (!fingerprint_.empty() && std::isspace(static_cast<unsigned char>(fingerprint_.back()))) {
      fingerprint_.pop_back();
    }
  }
  return true;
}

void RelayUnderTest::stop() {
  if (child_) {
    ::kill(child_->pid(), SIGTERM);
    if (child_->wait(5000) < 0) {
      ::kill(child_->pid(), SIGKILL);
    }
    child_.reset();
  }
}

namespace {

double json_number_after(const std::string& text, size_t from, const std::string& key) {
  auto at = text.find("\"" + key + "\":", from);
  return at == std::string::npos ? 0 : std::strtod(text.c_str() + at + key.size() + 3, nullptr);
}

}  // namespace

RelayCounters RelayUnderTest::counters() const {
  RelayCounters c;
  auto body = client::http_get(url_, "/stats", std::chrono::seconds(2));
  if (!body) {
    return c;
  }
  size_t total = body->find("\"total\"");
  if (total == std::string::npos) {
    return c;
  }
  c.datagrams_in = json_number_after(*body, total, "datagrams_in");
  c.datagrams_out = json_number_after(*body, total, "datagrams_out");
  c.messages_out = json_number_after(*body, total, "messages_out");
  c.bytes_out = json_number_after(*body, total, "bytes_out");
  c.send_calls = json_number_after(*body, total, "send_calls");
  c.recv_calls = json_number_after(*body, total, "recv_calls");
  c.loop_polls = json_number_after(*body, total, "loop_polls");
  c.loop_busy_us = json_number_after(*body, total, "loop_busy_us");
  c.turn_items = json_number_after(*body, total, "turn_items");
  c.turn_slices_cut = json_number_after(*body, total, "turn_slices_cut");
  c.gso_batches = json_number_after(*body, total, "gso_batches");
  if (size_t heap = body->find("\"heap\""); heap != std::string::npos) {
    c.heap_in_use = json_number_after(*body, heap, "in_use");
    c.heap_ngtcp2 = json_number_after(*body, heap, "ngtcp2_in_use");
    c.heap_ngtcp2_blocks = json_number_after(*body, heap, "ngtcp2_blocks");
  }
  if (size_t trim = body->find("\"trim\""); trim != std::string::npos) {
    c.trim_calls = json_number_after(*body, trim, "calls");
    c.trim_max_us = json_number_after(*body, trim, "max_us");
  }
  return c;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) {
    return "null";
  }
  char buf[64];
  snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

namespace {
std::vector<std::string> version_names(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = list.find(',', start);
    out.push_back(list.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) {
      return out;
    }
    start = comma + 1;
  }
}
}  // namespace

std::string check_version_list(const std::string& list) {
  for (const auto& name : version_names(list)) {
    if (!wire::version_from_name(name)) {
      return "unknown version name in --versions";
    }
  }
  return "";
}

wire::VersionSet version_set(const std::string& list) {
  if (list.empty()) {
    return wire::VersionSet::all();
  }
  wire::VersionSet set = wire::VersionSet::none();
  for (const auto& name : version_names(list)) {
    if (auto v = wire::version_from_name(name)) {
      set.add(*v);
    }
  }
  return set;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
    }
    out += ch;
  }
  return out + "\"";
}

}  // namespace moqd::bench
