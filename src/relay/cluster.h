#pragma once
// Relays subscribing to relays. A relay given --cluster-connect URLs keeps one client session
// (client::Link, WebTransport over QUIC, moq-lite-04 only) to each peer, presenting
// --cluster-token in the URL's ?jwt= (the peer checks it like any client's token; its claim
// `cluster: true` marks the session a relay link). Over the link both relays ask each other for
// every broadcast (ANNOUNCE_PLEASE ""), so a link works both ways whoever dialled it.
//
// Routing is the moq-lite-04 hop list: a relay appends its hop id (a hash of --cluster-node) to
// every broadcast it announces, drops an announcement that already holds its own id (a loop),
// and asks each peer not to send it routes through itself (exclude_hop). Each relay's Origin
// keeps every route to a broadcast and uses the best: fewest hops plus the link's ?cost=N, the
// smaller hop list on a tie (model/origin.h). Subscriptions follow the active route; the Track
// asks its source once, whatever the viewers (one upstream subscription per track per relay),
// and lets it go --upstream-linger after the last viewer leaves. When the active route dies, the
// Origin moves the broadcast's tracks to the next route of the same origin relay without ending
// them (Track::switch_source): viewers keep their subscription and get only newer groups.
//
// A link that fails or closes is dialled again after a jittered, capped exponential backoff;
// QUIC keep-alives and a short idle timeout notice a dead peer within kLinkIdleTimeout. A
// ClusterLink lives on one worker (peer i on worker i % workers), on that worker's thread.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "client/connection.h"
#include "relay/config.h"
#include "relay/status.h"

namespace moqd::relay {

class RelayWorker;

// Parses a --cluster-connect URL ("http://host:port/?cost=5"): cost defaults to 0.
Result<ClusterPeer> parse_cluster_peer(std::string_view url);

// The peers of a --cluster-peers-file: one URL per line (as --cluster-connect takes it), blank
// lines and '#' comments ignored. A line that does not parse is skipped and named in `errors`.
std::vector<ClusterPeer> parse_peers_text(std::string_view text, std::vector<std::string>& errors);

// The relay's moq-lite-04 hop id for --cluster-node `node`: FNV-1a 64 of the name, below 2^52
// (model::kWarmHop marks a warm copy), never 0 (0 means "not a relay").
uint64_t hop_id_for_node(std::string_view node);

class ClusterLink {
 public:
  // Backoff between attempts: kBackoffMin doubling up to kBackoffMax, each wait drawn uniformly
  // from [d/2, d] so peers that lost a relay together do not dial it in step.
  static constexpr Duration kBackoffMin = std::chrono::milliseconds(200);
  static constexpr Duration kBackoffMax = std::chrono::seconds(10);
  // A link's QUIC idle timeout and keep-alive: a peer that vanished is noticed within this.
  static constexpr Duration kLinkIdleTimeout = std::chrono::seconds(3);
  static constexpr Duration kLinkKeepAlive = std::chrono::milliseconds(500);

  ClusterLink(RelayWorker& worker, ClusterPeer peer, std::string token, uint64_t hop_id);
  ~ClusterLink();
  ClusterLink(const ClusterLink&) = delete;
  ClusterLink& operator=(const ClusterLink&) = delete;

  // Dials the peer (worker thread), and again whenever the link is lost, until stop().
  void start();
  // Closes the link and dials no more (drain).
  void stop();

  ClusterLinkStatus status() const;
  // True when `source` is this link's session (a route learned through it).
  bool is_source(const model::BroadcastSource* source) const;
  const ClusterPeer& peer() const { return peer_; }

 private:
  void attempt();
  void on_closed(Error reason);
  void schedule_retry();

  RelayWorker& worker_;
  ClusterPeer peer_;
  std::string token_;
  uint64_t hop_id_;
  client::LinkPtr link_;
  bool stopped_ = false;
  bool up_ = false;
  TimerId retry_timer_ = 0;
  uint32_t failures_in_row_ = 0;
  uint64_t connects_ = 0;
  uint64_t failures_ = 0;
  Duration backoff_{};
  std::string last_error_;
  std::minstd_rand rng_;
};

// A set of peers from one membership source (a peers file, a DNS name), kept by worker 0: set()
// compares the new set with the last one; peers added get a link on the next worker in turn, peers
// gone lose theirs (with the routes learned through them).
class PeerLinks {
 public:
  PeerLinks(RelayWorker& home, std::string source, size_t first_worker);
  // Makes the links match `peers` (by URL and cost; duplicates count once).
  void set(const std::vector<ClusterPeer>& peers);
  size_t size() const { return links_.size(); }

 private:
  RelayWorker& home_;
  std::string source_;  // for the log: "peers file F", "dns NAME"
  // Links this source asked for, by (URL, cost), and the worker each one lives on.
  std::map<std::pair<std::string, uint64_t>, size_t> links_;
  size_t next_worker_;
  bool logged_ = false;
};

// --cluster-peers-file, watched by worker 0: the file is read at start and again whenever its
// size, modification time or inode changes (polled every kPollInterval, so an editor's
// rename-into-place is seen too); peers added to it get a link on the next worker in turn,
// peers gone from it lose theirs. A file that cannot be read keeps the peers it last gave.
class PeersFileWatcher {
 public:
  static constexpr Duration kPollInterval = std::chrono::seconds(1);

  PeersFileWatcher(RelayWorker& home, std::string path, size_t first_worker);
  ~PeersFileWatcher();
  PeersFileWatcher(const PeersFileWatcher&) = delete;
  PeersFileWatcher& operator=(const PeersFileWatcher&) = delete;

  void start();

 private:
  void poll();

  RelayWorker& home_;
  std::string path_;
  TimerId timer_ = 0;
  bool seen_ = false;
  bool warned_ = false;
  int64_t mtime_ns_ = 0;
  int64_t size_ = -1;
  uint64_t inode_ = 0;
  PeerLinks links_;
};

}  // namespace moqd::relay
