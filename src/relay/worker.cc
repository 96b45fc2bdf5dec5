#include "relay/worker.h"

#include <malloc.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/log.h"
#include "relay/cluster.h"
#include "relay/cluster_dns.h"
#include "relay/connection.h"
#include "relay/quic_endpoint.h"
#include "relay/relay.h"

namespace moqd::relay {

TransportClass transport_class(std::string_view kind) {
  if (kind == "quic") {
    return kQuic;
  }
  if (kind == "webtransport") {
    return kWebTransport;
  }
  return kWebSocket;
}

namespace {
model::OriginConfig origin_config(const RelayConfig& c, model::CacheBudget* budget) {
  model::OriginConfig oc = c.origin;
  oc.budget = budget;
  oc.hop_id = c.cluster.hop_id;
  return oc;
}
// A feed treats the receiving worker as a viewer: the same backlog bounds as a subscription.
BridgeLimits bridge_limits(const RelayConfig& c) {
  BridgeLimits bl;
  bl.max_backlog_bytes = c.limits.max_backlog_bytes;
  bl.max_backlog_age = c.limits.max_backlog_age;
  return bl;
}
}  // namespace

RelayWorker::RelayWorker(Relay& relay, size_t index, runtime::Workers& workers,
                         const std::vector<Bridge*>& bridges)
    : relay_(relay),
      index_(index),
      loop_(workers.loop(index)),
      workers_(workers),
      certificate_(relay.config().certificate),
      auth_policy_(relay.config().auth ? relay.config().auth
                                       : std::make_shared<const auth::AuthPolicy>()),
      live_(std::make_shared<const LiveLimits>(relay.config().live())),
      budget_(relay.config().cache_budget / std::max<size_t>(1, relay.config().workers)),
      origin_(origin_config(relay.config(), &budget_), loop_, loop_),
      bridge_(index, workers, origin_, bridges, bridge_limits(relay.config())) {
  make_session_configs();
}

void RelayWorker::set_live(std::shared_ptr<const LiveLimits> l) {
  live_ = std::move(l);
  make_session_configs();
}

void RelayWorker::make_session_configs() {
  auto c = std::make_shared<SessionConfigs>();
  session::SessionConfig& sc = c->client;
  sc.role = session::Role::kServer;
  sc.versions = relay_.config().versions;
  sc.limits = live_->limits;
  sc.decode = live_->decode;
  sc.discover_prefix = std::string();
  sc.hop_id = relay_.config().cluster.hop_id;
  sc.ietf_relay_hops = relay_.config().cluster.node_named ? sc.hop_id : 0;
  sc.skips = &viewer_skips_;
  sc.traffic = &traffic_;
  c->link = sc;
  // A relay link carries a whole cluster's announcements and is never idle by design: the
  // per-client budgets are not for it.
  c->link.limits.max_announce_rate = 0;
  c->link.limits.idle_timeout = Duration::zero();
  session_configs_ = std::move(c);
}

std::shared_ptr<const session::SessionConfig> RelayWorker::session_config(bool link) const {
  return {session_configs_, link ? &session_configs_->link : &session_configs_->client};
}

RelayWorker::~RelayWorker() {
  peers_file_.reset();
  dns_watchers_.clear();
  cluster_links_.clear();
  metrics_listener_.reset();
  connections_.clear();
  endpoints_.clear();
  listeners_.clear();
}

runtime::UdpSocket::Stats RelayWorker::udp_stats() const {
  runtime::UdpSocket::Stats sum{};
  for (const auto& ep : endpoints_) {
    sum += ep->socket().stats();
  }
  return sum;
}

uint64_t RelayWorker::quic_forwarded() const {
  uint64_t n = 0;
  for (const auto& ep : endpoints_) {
    n += ep->forwarded();
  }
  return n;
}

uint64_t RelayWorker::udp_dropped() const {
  uint64_t n = 0;
  for (const auto& ep : endpoints_) {
    n += ep->socket().datagrams_dropped();
  }
  return n;
}

QuicEndpoint* RelayWorker::quic_endpoint(size_t index) {
  return index < endpoints_.size() ? endpoints_[index].get() : nullptr;
}

Status RelayWorker::listen(const std::string& host, uint16_t port) {
  auto l = runtime::TcpListener::listen(loop_, host, port,
                                        [this](int fd, std::string peer) { accept(fd, std::move(peer)); });
  if (!l) {
    return tl::unexpected(l.error());
  }
  listeners_.push_back(std::move(*l));
  auto ep = QuicEndpoint::open(*this, endpoints_.size(), host, port);
  if (!ep) {
    return tl::unexpected(ep.error());
  }
  endpoints_.push_back(std::move(*ep));
  if (index_ == 0 && endpoints_.size() == 1 && relay_.config().renew_certificate) {
    loop_.schedule(kCertificateCheckInterval, [this] { check_certificate(); });
  }
  return {};
}

void RelayWorker::check_certificate() {
  loop_.schedule(kCertificateCheckInterval, [this] { check_certificate(); });
  if (certificate_ == nullptr || !certificate_->needs_renewal(std::chrono::system_clock::now())) {
    return;
  }
  auto fresh = transport::quic::Certificate::generate_self_signed();
  if (!fresh) {
    MOQD_LOG(kWarn, "quic: certificate renewal failed; keeping the old one");
    return;
  }
  std::shared_ptr<const transport::quic::Certificate> cert(std::move(*fresh));
  MOQD_LOG(kInfo, "quic: renewed the self-signed certificate sha256=%s",
           cert->sha256_hex().c_str());
  for (size_t i = 0; i < workers_.size(); ++i) {
    Relay* relay = &relay_;
    workers_.post(i, [relay, i, cert] { relay->worker(i).set_certificate(cert); });
  }
}

Result<uint16_t> RelayWorker::listen_metrics(const std::string& host, uint16_t port) {
  auto l = runtime::TcpListener::listen(
      loop_, host, port, [this](int fd, std::string peer) { accept_metrics(fd, std::move(peer)); });
  if (!l) {
    return tl::unexpected(l.error());
  }
  uint16_t bound = (*l)->port();
  metrics_listener_ = std::move(*l);
  return bound;
}

void RelayWorker::accept_metrics(int fd, std::string peer) {
  connections_.push_back(std::make_unique<ServerConnection>(
      *this, fd, std::move(peer), ServerConnection::Listener::kMetrics));
}

void RelayWorker::start_status() {
  refresh_status();
  if (index_ == 0) {
    loop_.schedule(kTrimInterval, [this] { trim_memory(); });
  }
}

// The sanitizers bring their own allocator: nothing for glibc's trim to do.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MOQD_NO_TRIM 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MOQD_NO_TRIM 1
#endif
#endif

#if defined(__GLIBC__) && !defined(MOQD_NO_TRIM)
namespace {
// Resident bytes of this process (/proc/self/statm), 0 when unknown.
uint64_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) {
    return 0;
  }
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}
}  // namespace
#endif

void RelayWorker::trim_memory() {
  loop_.schedule(kTrimInterval, [this] { trim_memory(); });
#if defined(__GLIBC__) && !defined(MOQD_NO_TRIM)
  // Resident memory the allocator does not use for live blocks is what a burst freed and glibc
  // kept (free bytes it already returned count in fordblks but not in RSS, so compare with RSS).
  // The gap between them also holds what is resident but not heap (code, stacks): the smallest
  // gap seen, or the one a trim left, is the floor, and a trim runs once the gap passes it by
  // kTrimThreshold (so memory a trim cannot return does not trigger one every second).
  SystemClock clock;
  // The busiest loop since the last check (busy_us is readable from any thread); 1 on the first
  // check, which has nothing to compare with.
  const Instant checked_at = clock.now();
  double busiest = trim_checked_at_ ? 0 : 1;
  const size_t n = relay_.worker_count();
  trim_busy_us_.resize(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t busy = relay_.worker(i).loop_busy_us();
    if (trim_checked_at_ && checked_at > *trim_checked_at_) {
      busiest = std::max(busiest, static_cast<double>(busy - trim_busy_us_[i]) /
                                      static_cast<double>((checked_at - *trim_checked_at_).count()));
    }
    trim_busy_us_[i] = busy;
  }
  trim_checked_at_ = checked_at;
  struct mallinfo2 mi = mallinfo2();
  TrimPolicy::Sample before{mi.uordblks + mi.hblkhd, resident_bytes(), busiest};
  if (!trim_policy_.should_trim(before)) {
    return;
  }
  Instant start = clock.now();
  malloc_trim(0);
  const uint64_t us = static_cast<uint64_t>((clock.now() - start).count());
  trim_stats_.calls.add();
  trim_stats_.total_us.add(us);
  if (us > trim_stats_.max_us.get()) {
    trim_stats_.max_us.add(us - trim_stats_.max_us.get());
  }
  struct mallinfo2 mi_after = mallinfo2();
  TrimPolicy::Sample after{mi_after.uordblks + mi_after.hblkhd, resident_bytes(), busiest};
  trim_policy_.trimmed(after);
  // The trim's own time is not the loops' traffic: the next check measures from here.
  trim_checked_at_ = clock.now();
  for (size_t i = 0; i < n; ++i) {
    trim_busy_us_[i] = relay_.worker(i).loop_busy_us();
  }
  MOQD_LOG(kInfo, "memory: returned freed memory to the system: resident %llu MiB -> %llu MiB, "
           "allocated %llu MiB -> %llu MiB (malloc_trim, %llu us)",
           static_cast<unsigned long long>(before.resident >> 20),
           static_cast<unsigned long long>(after.resident >> 20),
           static_cast<unsigned long long>(before.in_use >> 20),
           static_cast<unsigned long long>(after.in_use >> 20),
           static_cast<unsigned long long>(us));
#else
  (void)trim_policy_;
  (void)trim_checked_at_;
  (void)trim_busy_us_;
#endif
}

void RelayWorker::add_cluster_link(ClusterPeer peer) {
  const ClusterConfig& c = relay_.config().cluster;
  cluster_links_.push_back(std::make_unique<ClusterLink>(*this, std::move(peer), c.token, c.hop_id));
  if (!draining_) {
    cluster_links_.back()->start();
  }
}

void RelayWorker::remove_cluster_link(const ClusterPeer& peer) {
  for (auto it = cluster_links_.begin(); it != cluster_links_.end(); ++it) {
    if ((*it)->peer().url == peer.url && (*it)->peer().cost == peer.cost) {
      MOQD_LOG(kInfo, "cluster: peer %s removed", peer.url.c_str());
      std::shared_ptr<ClusterLink> gone(std::move(*it));
      cluster_links_.erase(it);
      gone->stop();
      // Its link may be inside one of its own callbacks' callers: destroyed from the loop.
      loop_.defer([gone] {});
      return;
    }
  }
}

void RelayWorker::watch_cluster_dns(ClusterDnsName dns, runtime::DnsResolverOptions resolver,
                                    SelfAddresses self, size_t first_worker) {
  dns_watchers_.push_back(std::make_unique<DnsPeersWatcher>(*this, std::move(dns),
                                                            std::move(resolver), std::move(self),
                                                            first_worker));
  dns_watchers_.back()->start();
}

void RelayWorker::watch_peers_file(const std::string& path, size_t first_worker) {
  peers_file_ = std::make_unique<PeersFileWatcher>(*this, path, first_worker);
  peers_file_->start();
}

std::string RelayWorker::route_via(const model::BroadcastSource* source) const {
  for (const auto& l : cluster_links_) {
    if (l->is_source(source)) {
      return l->peer().url;
    }
  }
  if (const auto* s = dynamic_cast<const session::MoqSession*>(source); s != nullptr) {
    return "inbound " + std::string(const_cast<session::MoqSession*>(s)->transport().peer());
  }
  return "local";
}

void RelayWorker::refresh_status() {
  WorkerStatus st;
  st.broadcasts = origin_.active_paths("");
  origin_.for_each_track([&st](const std::string& path, const model::Track& t) {
    st.tracks.push_back({path, t.name(), t.viewer_count(), t.bytes_in(), t.bytes_out()});
  });
  for (const auto& l : cluster_links_) {
    st.links.push_back(l->status());
  }
  for (const auto& path : st.broadcasts) {
    for (const auto& r : origin_.routes(path)) {
      if (bridge_.is_remote(r.source)) {
        continue;  // another worker's route; that worker lists it
      }
      st.routes.push_back({path, r.hops.empty() ? "local" : route_via(r.source), r.hops, r.cost});
    }
  }
  {
    MutexLock lock(status_mu_);
    status_ = std::move(st);
  }
  loop_.schedule(kStatusInterval, [this] { refresh_status(); });
}

WorkerStatus RelayWorker::status() const {
  MutexLock lock(status_mu_);
  return status_;
}

void RelayWorker::accept(int fd, std::string peer) {
  if (draining_) {
    ::close(fd);
    return;
  }
  auto verdict = relay_.admit_connection(peer_address(peer), true);
  if (verdict == Relay::Admission::kRefuseAddress || verdict == Relay::Admission::kRefuseTotal) {
    static constexpr std::string_view kBusy =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    (void)::send(fd, kBusy.data(), kBusy.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    ::close(fd);
    note_refused(peer, verdict == Relay::Admission::kRefuseAddress ? "max-connections-per-address"
                                                                   : "max-connections");
    return;
  }
  connections_.push_back(std::make_unique<ServerConnection>(
      *this, fd, std::move(peer), ServerConnection::Listener::kPublic, true,
      verdict == Relay::Admission::kOpsOnly));
}

void RelayWorker::note_refused(std::string_view peer, const char* reason) {
  metrics_.connections_refused.add();
  size_t k = std::string_view(reason) == "max-connections" ? 1 : 0;
  ++refused_since_log_[k];
  Instant now = loop_.now();
  if (refused_logged_at_[k] && now - *refused_logged_at_[k] < std::chrono::seconds(1)) {
    return;
  }
  MOQD_LOG(kWarn, "connection refused peer=%.*s reason=%s limit (%llu refused on worker %zu since the last line)",
           static_cast<int>(peer.size()), peer.data(), reason,
           static_cast<unsigned long long>(refused_since_log_[k]), index_);
  refused_since_log_[k] = 0;
  refused_logged_at_[k] = now;
}

void RelayWorker::remove_connection(ServerConnection* c) {
  connections_.remove_if([c](const auto& p) { return p.get() == c; });
}

void RelayWorker::drain(const std::string& goaway_url, Duration deadline, Duration hard_stop) {
  if (draining_) {
    return;
  }
  draining_ = true;
  // What this task closes (a lite-01/02 publisher, a cluster link) is withdrawn from the loop,
  // after this task; were that to reach a worker that has not run its own drain yet, that
  // worker's viewers would see the broadcast end before their GOAWAY, and `moq sub` ends there
  // instead of moving to `goaway_url`. So the bridge holds everything this worker sends from
  // before the first close until every worker has sent its GOAWAYs (Relay::goaways_sent
  // releases them all). Within this worker the order holds already: the GOAWAYs are written in
  // this task, the withdrawals follow from the loop.
  bridge_.hold();
  for (auto& l : cluster_links_) {
    l->stop();
  }
  listeners_.clear();
  for (auto& ep : endpoints_) {
    ep->drain(goaway_url);
  }
  for (auto& c : connections_) {
    if (!c->goaway(goaway_url)) {
      c->close(make_error(ErrorCode::kGoingAway, "relay shutting down"));
    }
  }
  relay_.goaways_sent();
  // After the barrier above, so that the other workers' bridges do not wait for this: joining the
  // lookup threads takes up to one lookup's timeout. draining_ keeps them from starting links.
  peers_file_.reset();
  dns_watchers_.clear();
  // Sessions told to go away have until `deadline` to leave; then they are closed too, and the
  // bridge holds again, for the same reason, until every worker has closed its sessions
  // (Relay::deadline_passed releases them all).
  loop_.schedule(deadline, [this] {
    bridge_.hold();
    for (auto& ep : endpoints_) {
      ep->close_all();
    }
    for (auto& c : connections_) {
      c->close(make_error(ErrorCode::kGoingAway, "relay shutting down"));
    }
    relay_.deadline_passed();
  });
  // A peer that stopped reading never completes the close handshake: at `hard_stop`, drop what
  // is left so moqd exits within --drain-timeout.
  loop_.schedule(hard_stop, [this] {
    for (auto& c : connections_) {
      c->abort();
    }
    for (auto& ep : endpoints_) {
      ep->abort();
    }
  });
}

void RelayWorker::on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                                   uint64_t cost, model::BroadcastSource& source) {
  if (!active) {
    origin_.unannounce(path, &source);
    bridge_.publish_local(path, false, hops, cost);
    return;
  }
  // A relay peer's update of a route it announced (its hop list changed) is no new publisher.
  auto routes = origin_.routes(path);
  bool update = std::any_of(routes.begin(), routes.end(),
                            [&](const auto& r) { return r.source == &source; });
  origin_.announce(path, &source, hops, cost);
  if (update) {
    bridge_.refresh_local(path);
  } else {
    bridge_.publish_local(path, true, hops, cost);
  }
}

}  // namespace moqd::relay
