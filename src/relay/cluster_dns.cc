#include "relay/cluster_dns.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>

#include "base/log.h"
#include "client/connection.h"
#include "relay/worker.h"

namespace moqd::relay {

Result<ClusterDnsName> parse_cluster_dns(std::string_view url) {
  auto peer = parse_cluster_peer(url);  // takes ?cost=N off
  if (!peer) {
    return tl::unexpected(peer.error());
  }
  auto parsed = client::parse_url(peer->url);
  if (!parsed) {
    return tl::unexpected(parsed.error());
  }
  if (parsed->host.empty()) {
    return fail(ErrorCode::kProtocolViolation, "cluster DNS URL: no name");
  }
  ClusterDnsName d;
  d.name = parsed->host;
  d.scheme = parsed->scheme;
  d.port = parsed->port;
  d.target = parsed->target();
  d.cost = peer->cost;
  return d;
}

ClusterPeer ClusterDnsName::peer_at(const std::string& address) const {
  bool v6 = address.find(':') != std::string::npos;
  ClusterPeer p;
  p.url =
      scheme + "://" + (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port) + target;
  p.cost = cost;
  return p;
}

bool SelfAddresses::is_self(const std::string& address, uint16_t port) const {
  for (const auto& [host, bound_port] : bound) {
    if (bound_port != port) {
      continue;
    }
    if (host == address) {
      return true;
    }
    bool wildcard = host == "::" || host == "0.0.0.0" || host.empty();
    if (wildcard && std::find(interfaces.begin(), interfaces.end(), address) != interfaces.end()) {
      return true;
    }
  }
  return false;
}

namespace {

std::vector<std::string> interface_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return out;
  }
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) {
      continue;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                sizeof text);
    } else {
      continue;
    }
    out.emplace_back(text);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

DnsPeersWatcher::DnsPeersWatcher(RelayWorker& home, ClusterDnsName dns,
                                 runtime::DnsResolverOptions resolver, SelfAddresses self,
                                 size_t first_worker)
    : home_(home),
      dns_(std::move(dns)),
      resolver_(std::move(resolver)),
      self_(std::move(self)),
      links_(home, "dns " + dns_.name, first_worker) {}

DnsPeersWatcher::~DnsPeersWatcher() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) {
    thread_.join();
  }
  home_.loop().cancel(timer_);
}

void DnsPeersWatcher::start() {
  thread_ = std::thread([this] { run(); });
  timer_ = home_.loop().schedule(kPollInterval, [this] { poll(); });
}

void DnsPeersWatcher::run() {
  std::unique_lock<Mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    runtime::DnsLookup r = runtime::resolve_addresses(dns_.name, resolver_);
    Duration wait = kRetry;
    if (r.kind == runtime::DnsLookup::Kind::kAddresses) {
      wait = std::clamp<Duration>(std::chrono::seconds(r.ttl_s), kMinTtl, kMaxTtl);
    }
    lock.lock();
    last_ = std::move(r);
    wake_.wait_for(lock, wait, [this] { return stopping_; });
  }
}

void DnsPeersWatcher::poll() {
  timer_ = home_.loop().schedule(kPollInterval, [this] { poll(); });
  std::optional<runtime::DnsLookup> r;
  {
    MutexLock lock(mu_);
    r.swap(last_);
  }
  if (r) {
    apply(*r);
  }
}

void DnsPeersWatcher::apply(const runtime::DnsLookup& lookup) {
  if (lookup.kind == runtime::DnsLookup::Kind::kFailed) {
    if (lookup.error != last_error_) {
      MOQD_LOG(kWarn, "cluster: dns %s: lookup failed (%s); keeping its %zu peers",
               dns_.name.c_str(), lookup.error.c_str(), links_.size());
      last_error_ = lookup.error;
    }
    return;
  }
  last_error_.clear();
  SelfAddresses self = self_;
  self.interfaces = interface_addresses();
  std::vector<ClusterPeer> peers;
  for (const auto& address : lookup.addresses) {
    if (self.is_self(address, dns_.port)) {
      continue;
    }
    peers.push_back(dns_.peer_at(address));
  }
  links_.set(peers);
}

}  // namespace moqd::relay
