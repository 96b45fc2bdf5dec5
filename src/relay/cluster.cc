#include "relay/cluster.h"

#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "base/log.h"
#include "client/quic_connection.h"
#include "relay/relay.h"
#include "relay/worker.h"

namespace moqd::relay {

Result<ClusterPeer> parse_cluster_peer(std::string_view url) {
  auto parsed = client::parse_url(url);
  if (!parsed) {
    return tl::unexpected(parsed.error());
  }
  ClusterPeer p;
  std::string base(url.substr(0, url.find('?')));
  std::string kept;
  std::string_view q = parsed->query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.starts_with("cost=")) {
      std::string_view v = pair.substr(5);
      auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), p.cost);
      if (ec != std::errc() || ptr != v.data() + v.size() || p.cost > 1'000'000) {
        return fail(ErrorCode::kProtocolViolation, "cluster URL: cost must be 0..1000000");
      }
      continue;
    }
    if (!pair.empty()) {
      kept += kept.empty() ? "" : "&";
      kept += pair;
    }
  }
  p.url = kept.empty() ? base : base + "?" + kept;
  return p;
}

std::vector<ClusterPeer> parse_peers_text(std::string_view text, std::vector<std::string>& errors) {
  std::vector<ClusterPeer> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) {
      line = line.substr(0, hash);
    }
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) {
      line.remove_suffix(1);
    }
    if (line.empty()) {
      continue;
    }
    auto p = parse_cluster_peer(line);
    if (!p) {
      errors.emplace_back(line);
      continue;
    }
    out.push_back(std::move(*p));
  }
  return out;
}

uint64_t hop_id_for_node(std::string_view node) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : node) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  // Below 2^52: moq-lite clients read hop ids (and exclude_hop) as JavaScript-safe integers (below
  // 2^53; @moq/lite 0.2.2 fails the whole announce stream on a larger one), and bit 52 marks a
  // warm copy (model::kWarmHop).
  h &= model::kWarmHop - 1;
  return h == 0 ? 1 : h;
}

ClusterLink::ClusterLink(RelayWorker& worker, ClusterPeer peer, std::string token, uint64_t hop_id)
    : worker_(worker),
      peer_(std::move(peer)),
      token_(std::move(token)),
      hop_id_(hop_id),
      rng_(static_cast<uint32_t>(hop_id ^ std::hash<std::string>{}(peer_.url))) {}

ClusterLink::~ClusterLink() {
  worker_.loop().cancel(retry_timer_);
  if (link_) {
    link_->on_closed = nullptr;
    link_->on_ready = nullptr;
    link_->on_goaway_fn = nullptr;
  }
  link_.reset();  // its session withdraws the peer's routes (through on_announce_fn)
}

void ClusterLink::start() {
  stopped_ = false;
  attempt();
}

void ClusterLink::stop() {
  stopped_ = true;
  worker_.loop().cancel(retry_timer_);
  retry_timer_ = 0;
  if (link_ && !link_->is_closed()) {
    link_->close();
  }
}

void ClusterLink::attempt() {
  retry_timer_ = 0;
  if (stopped_) {
    return;
  }
  std::string url = peer_.url;
  if (!token_.empty()) {
    url += (url.find('?') == std::string::npos ? "?" : "&") + std::string("jwt=") + token_;
  }
  auto parsed = client::parse_url(url);
  if (!parsed) {
    last_error_ = parsed.error().detail != nullptr ? parsed.error().detail : "bad URL";
    stopped_ = true;  // a URL does not get better with time
    MOQD_LOG(kWarn, "cluster: peer %s: %s; not dialling it", peer_.url.c_str(), last_error_.c_str());
    return;
  }
  client::ConnectionOptions o;
  o.url = std::move(*parsed);
  o.transport = client::TransportKind::kWebTransport;  // carries the path and ?jwt=
  o.versions = wire::VersionSet::none();
  o.versions.add(wire::Version::kLite04);
  o.discover_prefix = std::string();
  o.quic = worker_.relay().config().quic;
  o.quic.idle_timeout = kLinkIdleTimeout;
  o.quic.keep_alive = kLinkKeepAlive;
  o.hop_id = hop_id_;
  o.limits = worker_.live().limits;
  o.skips = &worker_.viewer_skips();
  o.traffic = &worker_.traffic();
  link_ = client::make_link(worker_.loop(), worker_.origin(), std::move(o));
  link_->on_announce_fn = [this](const std::string& path, bool active, const model::Hops& hops,
                                 model::BroadcastSource& source) {
    worker_.on_peer_announce(path, active, hops, peer_.cost, source);
  };
  link_->on_ready = [this] {
    up_ = true;
    ++connects_;
    failures_in_row_ = 0;
    MOQD_LOG(kInfo, "cluster: link to %s up (cost %llu)", peer_.url.c_str(),
             static_cast<unsigned long long>(peer_.cost));
  };
  link_->on_closed = [this](Error reason) { on_closed(std::move(reason)); };
  // The peer is draining: leave now (its routes move to other links) and dial it again later,
  // rather than hold its drain until it closes us.
  link_->on_goaway_fn = [this](const std::string&) {
    MOQD_LOG(kInfo, "cluster: peer %s is going away; closing the link", peer_.url.c_str());
    if (link_ && !link_->is_closed()) {
      link_->close();
    }
  };
  if (Status st = link_->connect(); !st) {
    on_closed(st.error());
  }
}

void ClusterLink::on_closed(Error reason) {
  if (link_) {
    // Called from inside the link's own callbacks (or connect()): destroyed from the loop.
    link_->on_closed = nullptr;
    link_->on_ready = nullptr;
    link_->on_goaway_fn = nullptr;
    std::shared_ptr<client::Link> dying(std::move(link_));
    worker_.loop().defer([dying] {});
  }
  ++failures_;
  last_error_ = std::string(error_code_name(reason.code)) +
                (reason.detail != nullptr && reason.detail[0] != 0 ? std::string(": ") + reason.detail
                                                                    : std::string());
  if (up_) {
    MOQD_LOG(kInfo, "cluster: link to %s lost: %s", peer_.url.c_str(), last_error_.c_str());
  } else {
    MOQD_LOG(kDebug, "cluster: link to %s failed: %s", peer_.url.c_str(), last_error_.c_str());
  }
  up_ = false;
  schedule_retry();
}

void ClusterLink::schedule_retry() {
  if (stopped_ || retry_timer_ != 0) {
    return;
  }
  auto d = kBackoffMin * (int64_t{1} << std::min<uint32_t>(failures_in_row_, 16));
  d = std::min<Duration>(d, kBackoffMax);
  ++failures_in_row_;
  std::uniform_int_distribution<int64_t> pick(d.count() / 2, d.count());
  backoff_ = Duration(pick(rng_));
  retry_timer_ = worker_.loop().schedule(backoff_, [this] { attempt(); });
}

ClusterLinkStatus ClusterLink::status() const {
  ClusterLinkStatus s;
  s.url = peer_.url;
  s.cost = peer_.cost;
  s.state = stopped_ ? "stopped" : up_ ? "up" : retry_timer_ != 0 ? "backoff" : "connecting";
  s.connects = connects_;
  s.failures = failures_;
  s.last_error = last_error_;
  s.worker = worker_.index();
  s.backoff_ms = retry_timer_ != 0
                     ? static_cast<uint64_t>(
                           std::chrono::duration_cast<std::chrono::milliseconds>(backoff_).count())
                     : 0;
  return s;
}

bool ClusterLink::is_source(const model::BroadcastSource* source) const {
  return link_ && link_->session() != nullptr &&
         static_cast<const model::BroadcastSource*>(link_->session()) == source;
}

PeerLinks::PeerLinks(RelayWorker& home, std::string source, size_t first_worker)
    : home_(home), source_(std::move(source)), next_worker_(first_worker) {}

PeersFileWatcher::PeersFileWatcher(RelayWorker& home, std::string path, size_t first_worker)
    : home_(home), path_(path), links_(home, "peers file " + path, first_worker) {}

PeersFileWatcher::~PeersFileWatcher() { home_.loop().cancel(timer_); }

void PeersFileWatcher::start() { poll(); }

void PeersFileWatcher::poll() {
  timer_ = home_.loop().schedule(kPollInterval, [this] { poll(); });
  struct stat st {};
  if (::stat(path_.c_str(), &st) != 0) {
    if (!warned_) {
      MOQD_LOG(kWarn, "cluster: cannot read peers file %s; keeping its last peers", path_.c_str());
      warned_ = true;
    }
    return;
  }
  int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (seen_ && mtime_ns == mtime_ns_ && st.st_size == size_ && st.st_ino == inode_) {
    return;
  }
  std::string text;
  if (FILE* f = std::fopen(path_.c_str(), "rb"); f != nullptr) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1u << 20);) {
      text.append(buf, n);
    }
    std::fclose(f);
  } else {
    return;
  }
  seen_ = true;
  warned_ = false;
  mtime_ns_ = mtime_ns;
  size_ = st.st_size;
  inode_ = st.st_ino;
  std::vector<std::string> errors;
  auto peers = parse_peers_text(text, errors);
  for (const auto& e : errors) {
    MOQD_LOG(kWarn, "cluster: peers file %s: skipping '%s' (not a peer URL)", path_.c_str(),
             e.c_str());
  }
  links_.set(peers);
}

void PeerLinks::set(const std::vector<ClusterPeer>& peers) {
  std::map<std::pair<std::string, uint64_t>, ClusterPeer> wanted;
  for (const auto& p : peers) {
    wanted.emplace(std::make_pair(p.url, p.cost), p);
  }
  Relay& relay = home_.relay();
  const size_t n = relay.worker_count();
  size_t removed = 0;
  for (auto it = links_.begin(); it != links_.end();) {
    if (wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    ClusterPeer gone{it->first.first, it->first.second};
    RelayWorker* w = &relay.worker(it->second);
    if (w == &home_) {
      w->remove_cluster_link(gone);
    } else {
      home_.workers().post(it->second, [w, gone] { w->remove_cluster_link(gone); });
    }
    it = links_.erase(it);
    ++removed;
  }
  size_t added = 0;
  for (auto& [key, peer] : wanted) {
    if (links_.count(key) != 0) {
      continue;
    }
    size_t wi = next_worker_++ % n;
    links_[key] = wi;
    ++added;
    RelayWorker* w = &relay.worker(wi);
    if (w == &home_) {
      w->add_cluster_link(peer);
    } else {
      home_.workers().post(wi, [w, peer = peer] { w->add_cluster_link(peer); });
    }
  }
  if (added != 0 || removed != 0 || !logged_) {
    MOQD_LOG(kInfo, "cluster: %s: %zu peers (%zu new, %zu gone)", source_.c_str(), links_.size(),
             added, removed);
    logged_ = true;
  }
}

}  // namespace moqd::relay
