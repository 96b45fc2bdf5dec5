#include "relay/relay.h"

#include <malloc.h>

#include <algorithm>
#include <thread>

#include "base/log.h"
#include "relay/quic_endpoint.h"
#include "relay/steering.h"
#include "relay/cluster_dns.h"
#include "relay/worker.h"
#include "transport/quic/heap.h"
#include "runtime/tcp.h"

namespace moqd::relay {

std::string BoundAddress::url() const {
  bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/";
}

Relay::Relay(RelayConfig config)
    : config_(std::move(config)),
      workers_(config_.workers < 1 ? 1 : config_.workers) {
  bridges_.resize(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    relay_workers_.push_back(std::make_unique<RelayWorker>(*this, i, workers_, bridges_));
    bridges_[i] = &relay_workers_.back()->bridge();
  }
}

Relay::~Relay() {
  if (started_) {
    workers_.stop_and_join();
  }
  relay_workers_.clear();
}

Result<std::vector<BoundAddress>> Relay::start() {
  std::vector<BoundAddress> bound;
  for (const auto& addr : config_.listen) {
    auto hp = runtime::parse_host_port(addr);
    if (!hp) {
      return tl::unexpected(hp.error());
    }
    uint16_t port = hp->port;
    if (port == 0) {
      auto picked = runtime::pick_port(hp->host);
      if (!picked) {
        return tl::unexpected(picked.error());
      }
      port = *picked;
    }
    for (auto& w : relay_workers_) {
      if (auto st = w->listen(hp->host, port); !st) {
        return tl::unexpected(st.error());
      }
    }
    steer(bound.size(), port);
    bound.push_back({hp->host, port});
  }
  if (!config_.metrics_listen.empty()) {
    auto hp = runtime::parse_host_port(config_.metrics_listen);
    if (!hp) {
      return tl::unexpected(hp.error());
    }
    auto port = relay_workers_[0]->listen_metrics(hp->host, hp->port);
    if (!port) {
      return tl::unexpected(port.error());
    }
    metrics_port_ = *port;
  }
  workers_.start();
  for (size_t i = 0; i < config_.cluster.peers.size(); ++i) {
    size_t wi = i % workers_.size();
    RelayWorker* w = relay_workers_[wi].get();
    ClusterPeer peer = config_.cluster.peers[i];
    workers_.loop(wi).inject([w, peer] { w->add_cluster_link(peer); });
  }
  if (!config_.cluster.peers_file.empty()) {
    RelayWorker* w0 = relay_workers_[0].get();
    std::string file = config_.cluster.peers_file;
    size_t first = config_.cluster.peers.size() % workers_.size();
    workers_.loop(0).inject([w0, file, first] { w0->watch_peers_file(file, first); });
  }
  if (!config_.cluster.dns.empty()) {
    SelfAddresses self;
    for (const auto& b : bound) {
      self.bound.emplace_back(b.host, b.port);
    }
    runtime::DnsResolverOptions resolver{config_.cluster.dns_server};
    RelayWorker* w0 = relay_workers_[0].get();
    size_t first = config_.cluster.peers.size() % workers_.size();
    for (const auto& url : config_.cluster.dns) {
      auto parsed = parse_cluster_dns(url);
      if (!parsed) {
        return tl::unexpected(parsed.error());
      }
      workers_.loop(0).inject([w0, dns = *parsed, resolver, self, first] {
        w0->watch_cluster_dns(dns, resolver, self, first);
      });
    }
  }
  if (config_.status_page || !config_.metrics_listen.empty() || !config_.cluster.peers.empty() ||
      !config_.cluster.peers_file.empty() || !config_.cluster.dns.empty()) {
    for (size_t i = 0; i < workers_.size(); ++i) {
      RelayWorker* w = relay_workers_[i].get();
      workers_.loop(i).inject([w] { w->start_status(); });
    }
  }
  started_ = true;
  return bound;
}

void Relay::steer(size_t index, uint16_t port) {
  steered_.resize(index + 1, false);
  if (!config_.quic_steering || relay_workers_.size() < 2) {
    return;
  }
  std::vector<QuicEndpoint*> endpoints;
  for (auto& w : relay_workers_) {
    endpoints.push_back(w->quic_endpoint(index));
  }
  if (auto st = steer_by_connection_id(endpoints, config_.quic_steering_layout_for_tests); !st) {
    MOQD_LOG(kWarn, "quic: port %u: cannot steer datagrams by connection ID (%s); the kernel's "
             "hash picks a worker and the wrong one forwards", port, st.error().detail);
    return;
  }
  steered_[index] = true;
  MOQD_LOG(kInfo, "quic: port %u: datagrams steered to %zu workers by connection ID (checked)",
           port, endpoints.size());
}

void Relay::release_bridges_after(std::atomic<size_t>& arrivals) {
  if (arrivals.fetch_add(1, std::memory_order_acq_rel) + 1 != relay_workers_.size()) {
    return;
  }
  for (size_t i = 0; i < relay_workers_.size(); ++i) {
    Bridge* b = bridges_[i];
    workers_.post(i, [b] { b->release(); });
  }
}

void Relay::goaways_sent() { release_bridges_after(goaway_arrivals_); }

void Relay::deadline_passed() { release_bridges_after(deadline_arrivals_); }

void Relay::drain_and_stop() {
  if (!started_) {
    return;
  }
  draining_.store(true, std::memory_order_relaxed);
  const Duration leave_by = config_.drain_timeout / 2;
  const Duration hard_stop = config_.drain_timeout * 3 / 4;
  for (size_t i = 0; i < workers_.size(); ++i) {
    RelayWorker* w = relay_workers_[i].get();
    std::string url = config_.goaway_url;
    workers_.loop(i).inject([w, url, leave_by, hard_stop] { w->drain(url, leave_by, hard_stop); });
  }
  auto deadline = std::chrono::steady_clock::now() + config_.drain_timeout;
  for (;;) {
    int64_t open = 0;
    for (auto& w : relay_workers_) {
      open += w->connections.load(std::memory_order_relaxed);
    }
    if (open == 0 || std::chrono::steady_clock::now() >= deadline) {
      if (open != 0) {
        MOQD_LOG(kWarn, "drain timeout: %lld connections still open, closing them",
                 static_cast<long long>(open));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  workers_.stop_and_join();
  started_ = false;
}

void Relay::reload(const RelayConfig& fresh) {
  config_.drain_timeout = fresh.drain_timeout;  // both read by the main thread only
  config_.goaway_url = fresh.goaway_url;
  auto live = std::make_shared<const LiveLimits>(fresh.live());
  auto auth = fresh.auth ? fresh.auth : std::make_shared<const auth::AuthPolicy>();
  auto cert = fresh.certificate;
  for (size_t i = 0; i < workers_.size(); ++i) {
    RelayWorker* w = relay_workers_[i].get();
    workers_.loop(i).inject([w, live, auth, cert] {
      w->set_live(live);
      w->set_auth_policy(auth);
      if (cert) {
        w->set_certificate(cert);
      }
    });
  }
}

int64_t Relay::session_count() const {
  int64_t n = 0;
  for (auto& w : relay_workers_) {
    n += w->sessions.load(std::memory_order_relaxed);
  }
  return n;
}

int64_t Relay::connection_count() const {
  int64_t n = 0;
  for (auto& w : relay_workers_) {
    n += w->connections.load(std::memory_order_relaxed);
  }
  return n;
}

Relay::Admission Relay::admit_connection(std::string_view address, bool ops_allowed) {
  auto total = static_cast<size_t>(std::max<int64_t>(0, connection_count()));
  Admission verdict = Admission::kAdmit;
  if (total >= config_.max_connections) {
    verdict = ops_allowed && total < config_.max_connections + kOpsReserve ? Admission::kOpsOnly
                                                                            : Admission::kRefuseTotal;
  }
  if (verdict == Admission::kRefuseTotal) {
    return verdict;
  }
  return admit_address(address) ? verdict : Admission::kRefuseAddress;
}

bool Relay::admit_address(std::string_view address) {
  MutexLock lock(addresses_mu_);
  size_t& n = connections_by_address_[std::string(address)];
  if (n >= config_.max_connections_per_address) {
    if (n == 0) {
      connections_by_address_.erase(std::string(address));
    }
    return false;
  }
  ++n;
  return true;
}

size_t Relay::address_connections(std::string_view address) const {
  MutexLock lock(addresses_mu_);
  auto it = connections_by_address_.find(std::string(address));
  return it == connections_by_address_.end() ? 0 : it->second;
}

void Relay::release_connection(std::string_view address) {
  MutexLock lock(addresses_mu_);
  auto it = connections_by_address_.find(std::string(address));
  if (it != connections_by_address_.end() && --it->second == 0) {
    connections_by_address_.erase(it);
  }
}

std::string Relay::health_json() const {
  std::string per_worker;
  for (auto& w : relay_workers_) {
    if (!per_worker.empty()) {
      per_worker += ",";
    }
    per_worker += std::to_string(w->sessions.load(std::memory_order_relaxed));
  }
  std::string by_transport;
  for (size_t c = 0; c < kTransportClasses; ++c) {
    int64_t n = 0;
    for (auto& w : relay_workers_) {
      n += w->sessions_by_transport[c].load(std::memory_order_relaxed);
    }
    by_transport += std::string(c == 0 ? "" : ",") + "\"" +
                    transport_class_name(static_cast<TransportClass>(c)) + "\":" + std::to_string(n);
  }
  return "{\"status\":\"ok\",\"version\":\"" MOQD_VERSION_STRING "\",\"workers\":" +
         std::to_string(relay_workers_.size()) + ",\"sessions\":" + std::to_string(session_count()) +
         ",\"sessions_per_worker\":[" + per_worker + "],\"sessions_by_transport\":{" +
         by_transport + "}}\n";
}

namespace {

std::string field(const char* name, uint64_t v) {
  return std::string("\"") + name + "\":" + std::to_string(v);
}

// Skip-ahead counts of one worker or of all: events and groups, by subscriptions (viewers) and
// by bridge feeds (a worker that fell behind).
struct SkipTotals {
  uint64_t events = 0, groups = 0, bridge_events = 0, bridge_groups = 0;

  void add(const SkipTotals& o) {
    events += o.events;
    groups += o.groups;
    bridge_events += o.bridge_events;
    bridge_groups += o.bridge_groups;
  }
  void add(const RelayWorker& w) {
    events += w.viewer_skips().events.get();
    groups += w.viewer_skips().groups.get();
    bridge_events += w.bridge_skips().events.get();
    bridge_groups += w.bridge_skips().groups.get();
  }
  std::string json() const {
    return "\"skips\":{" + field("events", events) + "," + field("groups", groups) + "," +
           field("bridge_events", bridge_events) + "," + field("bridge_groups", bridge_groups) + "}";
  }
};

// A worker's loop: polls, busy time (us), turn work items, slices cut short.
struct LoopCounts {
  uint64_t polls = 0, busy_us = 0, turn_items = 0, slices_cut = 0;
  void add(const LoopCounts& o) {
    polls += o.polls;
    busy_us += o.busy_us;
    turn_items += o.turn_items;
    slices_cut += o.slices_cut;
  }
};

std::string udp_json(const runtime::UdpSocket::Stats& s, uint64_t dropped, const LoopCounts& loop,
                     uint64_t forwarded, const SkipTotals& skips) {
  return "{" + field("datagrams_in", s.datagrams_in) + "," + field("datagrams_out", s.datagrams_out) +
         "," + field("messages_out", s.messages_out) + "," + field("bytes_out", s.bytes_out) + "," + field("send_calls", s.sendmsg_calls) + "," +
         field("recv_calls", s.recv_calls) + "," + field("gso_batches", s.gso_batches) + "," +
         field("gro_batches", s.gro_batches) + "," + field("send_dropped", dropped) + "," +
         field("loop_polls", loop.polls) + "," + field("loop_busy_us", loop.busy_us) + "," +
         field("turn_items", loop.turn_items) + "," + field("turn_slices_cut", loop.slices_cut) + "," +
         field("quic_forwarded", forwarded) + "," + skips.json() +
         "}";
}

// The process's heap from glibc's allocator (all arenas; mallinfo2 walks them under their locks,
// so only when /stats is asked): in_use = bytes handed out (small and mmap'd chunks), held = bytes
// the allocator holds from the system for them. Relay memory per viewer is the slope of in_use.
// ngtcp2_in_use / ngtcp2_blocks: the part of in_use that ngtcp2 holds (usable bytes, without
// malloc's 8-byte header per block), counted by the allocator every connection hands it.
std::string heap_json() {
  struct mallinfo2 mi = mallinfo2();
  transport::quic::HeapCount ng = transport::quic::ngtcp2_heap();
  return "\"heap\":{" + field("in_use", mi.uordblks + mi.hblkhd) + "," +
         field("held", mi.arena + mi.hblkhd) + "," + field("ngtcp2_in_use", ng.bytes) + "," +
         field("ngtcp2_blocks", ng.blocks) + "}";
}

}  // namespace

std::string Relay::stats_json() const {
  runtime::UdpSocket::Stats sum{};
  uint64_t dropped = 0;
  LoopCounts loop;
  uint64_t forwarded = 0;
  SkipTotals skips;
  std::string per_worker;
  for (const auto& w : relay_workers_) {
    auto s = w->udp_stats();
    const uint64_t w_dropped = w->udp_dropped();
    const LoopCounts w_loop{w->loop_polls(), w->loop_busy_us(), w->loop_turn_items(),
                            w->loop_slices_cut()};
    const uint64_t w_forwarded = w->quic_forwarded();
    SkipTotals mine;
    mine.add(*w);
    per_worker += (per_worker.empty() ? "" : ",") +
                  udp_json(s, w_dropped, w_loop, w_forwarded, mine);
    sum += s;
    dropped += w_dropped;
    loop.add(w_loop);
    forwarded += w_forwarded;
    skips.add(mine);
  }
  std::string trim = "\"trim\":{}";
  if (!relay_workers_.empty()) {
    const RelayWorker::TrimStats& t = relay_workers_.front()->trim_stats();
    trim = "\"trim\":{" + field("calls", t.calls.get()) + "," + field("total_us", t.total_us.get()) +
           "," + field("max_us", t.max_us.get()) + "}";
  }
  return "{\"total\":" + udp_json(sum, dropped, loop, forwarded, skips) + ",\"per_worker\":[" +
         per_worker + "]," + heap_json() + "," + trim + "}\n";
}

}  // namespace moqd::relay
