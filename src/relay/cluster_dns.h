#pragma once
// --cluster-dns URL: peers from a DNS name, so that a Kubernetes headless service (or any
// registry that publishes DNS) is the membership source. The URL's host is the name; every
// address it resolves to (A and AAAA) is a peer, at the same URL with the address as its host
// (same scheme, port, path and ?cost=N). The name is looked up again when the answer's smallest
// TTL runs out (clamped to [kMinTtl, kMaxTtl]); peers that appear get a link, peers that
// disappear lose theirs (PeerLinks, as for --cluster-peers-file). An answer that the name has no
// address removes every peer; a failed lookup (timeout, SERVFAIL) keeps the last peers and is
// retried after kRetry. This relay's own addresses (a --listen ADDR:PORT, or any local interface
// address on a wildcard --listen's port) are left out, so every member of a StatefulSet can be
// given the same name.
//
// Lookups block (runtime::resolve_addresses), so each name has a thread of its own that only
// resolves; worker 0 polls its result every kPollInterval and applies it on its own thread.
#include <condition_variable>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/mutex.h"
#include "relay/cluster.h"
#include "runtime/dns.h"

namespace moqd::relay {

// A --cluster-dns URL taken apart: the URL with "{}" where the host goes, the name, the cost.
struct ClusterDnsName {
  std::string name;
  std::string scheme;
  uint16_t port = 0;
  std::string target;  // path and query (without cost)
  uint64_t cost = 0;
  // The peer at `address` (IPv6 addresses bracketed).
  ClusterPeer peer_at(const std::string& address) const;
};
Result<ClusterDnsName> parse_cluster_dns(std::string_view url);

// The addresses this relay listens on, to leave its own address out of a DNS answer.
struct SelfAddresses {
  std::vector<std::pair<std::string, uint16_t>> bound;  // host (no brackets) and port
  std::vector<std::string> interfaces;                  // local interface addresses (getifaddrs)
  bool is_self(const std::string& address, uint16_t port) const;
};

class DnsPeersWatcher {
 public:
  static constexpr Duration kMinTtl = std::chrono::seconds(1);
  static constexpr Duration kMaxTtl = std::chrono::seconds(300);
  static constexpr Duration kRetry = std::chrono::seconds(5);
  static constexpr Duration kPollInterval = std::chrono::milliseconds(200);

  DnsPeersWatcher(RelayWorker& home, ClusterDnsName dns, runtime::DnsResolverOptions resolver,
                  SelfAddresses self, size_t first_worker);
  // Stops the lookup thread and waits for it (at most one lookup's timeout).
  ~DnsPeersWatcher();
  DnsPeersWatcher(const DnsPeersWatcher&) = delete;
  DnsPeersWatcher& operator=(const DnsPeersWatcher&) = delete;

  void start();

 private:
  void run();   // the lookup thread
  void poll();  // worker 0
  void apply(const runtime::DnsLookup& lookup);

  RelayWorker& home_;
  ClusterDnsName dns_;
  runtime::DnsResolverOptions resolver_;
  SelfAddresses self_;
  PeerLinks links_;
  TimerId timer_ = 0;
  std::thread thread_;

  Mutex mu_;
  std::condition_variable_any wake_;
  bool stopping_ = false;                   // guarded by mu_
  std::optional<runtime::DnsLookup> last_;  // guarded by mu_: a result not yet applied
  std::string last_error_;                  // worker 0: the failure last logged
};

}  // namespace moqd::relay
