// moqd: the relay. Flags and TOML config keys share names (see `moqd --help`); parsing here is the
// only place that may use exceptions (CLI11, toml++).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <toml++/toml.h>

#include "auth/key.h"
#include "base/log.h"
#include "notify.h"
#include "relay/auth_service.h"
#include "relay/cluster.h"
#include "relay/cluster_dns.h"
#include "relay/relay.h"
#include "runtime/tcp.h"
#include "wire/version.h"

namespace {

using moqd::Duration;

// "10s", "250ms", "2m", "1.5s" or a bare number of seconds.
bool parse_duration(const std::string& text, Duration& out) {
  if (text.empty()) {
    return false;
  }
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(pos);
  double us;
  if (unit.empty() || unit == "s") {
    us = value * 1e6;
  } else if (unit == "ms") {
    us = value * 1e3;
  } else if (unit == "us") {
    us = value;
  } else if (unit == "m") {
    us = value * 60e6;
  } else {
    return false;
  }
  if (value < 0) {
    return false;
  }
  out = Duration(static_cast<int64_t>(us));
  return true;
}

// "16MiB", "64KiB", "1GiB", "1000" (bytes).
bool parse_size(const std::string& text, uint64_t& out) {
  size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(pos);
  uint64_t mult = 1;
  if (unit == "KiB" || unit == "K" || unit == "k") {
    mult = 1ull << 10;
  } else if (unit == "MiB" || unit == "M") {
    mult = 1ull << 20;
  } else if (unit == "GiB" || unit == "G") {
    mult = 1ull << 30;
  } else if (!unit.empty() && unit != "B") {
    return false;
  }
  out = value * mult;
  return true;
}

struct Options {
  std::vector<std::string> listen;
  size_t workers = std::max(1u, std::thread::hardware_concurrency());
  std::string config_file;
  std::string versions;
  std::string tls_cert;
  std::string tls_key;
  uint32_t max_handshakes_per_second = 1000;
  size_t max_pending_handshakes = 256;
  std::string handshake_timeout = "4s";
  size_t max_connections = 10000;
  size_t max_connections_per_address = 256;
  std::string idle_timeout = "60s";
  std::string drain_timeout = "10s";
  std::string stall_timeout = "30s";
  std::string upstream_linger = "5s";
  std::vector<std::string> cluster_connect;
  std::string cluster_node;
  std::string cluster_token;
  std::string cluster_peers_file;
  std::vector<std::string> cluster_dns;
  std::string cluster_dns_server;
  std::string setup_timeout = "10s";
  std::string upgrade_timeout = "10s";
  std::string max_frame_size = "16MiB";
  std::string max_message_size = "64KiB";
  std::string max_ws_message_size = "1MiB";
  size_t max_subscriptions = 1024;
  size_t max_announce_streams = 64;
  size_t max_announced_paths = 4096;
  uint64_t max_announce_rate = 1000;
  std::string max_announce_buffer = "1MiB";
  std::string max_backlog_bytes = "8MiB";
  std::string max_backlog_age = "10s";
  size_t cache_groups = 8;
  std::string cache_bytes = "64MiB";
  std::string cache_age = "30s";
  std::string cache_budget = "1GiB";
  std::string max_publisher_cache = "256MiB";
  std::string max_publisher_rate = "256MiB";
  size_t max_streams = 1000;
  std::string max_session_buffer = "16MiB";
  size_t max_path_length = 1024;
  std::string log_level = "info";
  bool udp_gso = true;
  bool udp_gro = true;
  bool quic_steering = true;
  std::string debug_spin_per_delivery = "0";
  std::vector<std::string> auth_key;
  std::string auth_key_dir;
  std::vector<std::string> auth_public;
  std::string auth_url;
  std::string metrics_listen;
  bool status_page = true;
  std::string goaway_url;
};

void add_flags(CLI::App& app, Options& o) {
  app.add_option("--listen", o.listen,
                 "ADDR:PORT to serve (repeatable). TCP (HTTP, WebSocket) and UDP on the same port; "
                 "port 0 picks one free on both. Default [::]:4443");
  app.add_option("--workers", o.workers, "event loops, one per core (default: number of cores)");
  app.add_option("--config", o.config_file, "TOML file; every flag is a key of the same name");
  app.add_option("--versions", o.versions,
                 "comma-separated protocol versions to allow (default: all), e.g. moq-lite-02,moq-lite-01");
  app.add_option("--tls-cert", o.tls_cert,
                 "PEM certificate chain for QUIC (default: a self-signed ECDSA certificate made at "
                 "startup, valid 13 days, renewed in place; its hash is at GET /certificate.sha256)");
  app.add_option("--tls-key", o.tls_key, "PEM private key of --tls-cert");
  app.add_option("--max-handshakes-per-second", o.max_handshakes_per_second,
                 "QUIC handshakes accepted per second per worker; above it Initials without a "
                 "token get a Retry (default 1000)");
  app.add_option("--max-pending-handshakes", o.max_pending_handshakes,
                 "QUIC handshakes from unproven addresses in progress at once per worker; past it "
                 "every Initial without a token gets a Retry (default 256)");
  app.add_option("--handshake-timeout", o.handshake_timeout,
                 "QUIC handshakes not complete within this are dropped (default 4s)");
  app.add_option("--max-connections", o.max_connections,
                 "connections (TCP and QUIC) over the whole relay; past it a new TCP connection "
                 "is only answered plain HTTP (/health) and others are refused; lowered at start "
                 "to fit the open-file limit (default 10000)");
  app.add_option("--max-connections-per-address", o.max_connections_per_address,
                 "connections from one source address, TCP and QUIC together, over the whole relay; past "
                 "it refused (QUIC: counted once the address is proven; default 256)");
  app.add_option("--idle-timeout", o.idle_timeout,
                 "close a session with no announcement, subscription, discovery request or "
                 "traffic for this long; 0 for never (default 60s)");
  app.add_option("--drain-timeout", o.drain_timeout,
                 "on SIGTERM/SIGINT, time allowed for sessions to close (default 10s)");
  app.add_option("--stall-timeout", o.stall_timeout,
                 "close a session whose reader makes no progress this long with data queued (default 30s)");
  app.add_option("--upstream-linger", o.upstream_linger,
                 "keep an upstream subscription this long after its last subscriber leaves (default 5s)");
  app.add_option("--setup-timeout", o.setup_timeout, "time allowed for the MoQ SETUP (default 10s)");
  app.add_option("--upgrade-timeout", o.upgrade_timeout,
                 "time allowed for the HTTP request / WebSocket upgrade (default 10s)");
  app.add_option("--max-frame-size", o.max_frame_size, "largest frame accepted from a publisher (default 16MiB)");
  app.add_option("--max-message-size", o.max_message_size, "largest control message (default 64KiB)");
  app.add_option("--max-ws-message-size", o.max_ws_message_size,
                 "largest WebSocket message (default 1MiB)");
  app.add_option("--max-subscriptions", o.max_subscriptions, "subscriptions per session (default 1024)");
  app.add_option("--max-announce-streams", o.max_announce_streams,
                 "announce streams per session (default 64)");
  app.add_option("--max-announced-paths", o.max_announced_paths,
                 "broadcasts one session may publish (default 4096)");
  app.add_option("--max-announce-rate", o.max_announce_rate,
                 "announcement changes (active or ended) per second one publishing session may "
                 "make, with a burst of one second plus --max-announced-paths; past it the session "
                 "is closed with bounds_exceeded; 0 for no limit (default 1000)");
  app.add_option("--max-announce-buffer", o.max_announce_buffer,
                 "announcement bytes queued unsent to one discovery listener; past it that "
                 "announce stream is reset with bounds_exceeded (default 1MiB)");
  app.add_option("--max-backlog-bytes", o.max_backlog_bytes,
                 "per subscription: past this backlog the oldest groups are dropped (default 8MiB)");
  app.add_option("--max-backlog-age", o.max_backlog_age,
                 "per subscription: groups older than this are dropped when newer exist (default 10s)");
  app.add_option("--cache-groups", o.cache_groups, "groups cached per track (default 8)");
  app.add_option("--cache-bytes", o.cache_bytes, "bytes cached per track (default 64MiB)");
  app.add_option("--cache-age", o.cache_age, "age of cached groups (default 30s)");
  app.add_option("--cache-budget", o.cache_budget,
                 "cached bytes over all tracks; oldest groups of the least recently served tracks "
                 "are evicted past it; split evenly between workers (default 1GiB)");
  app.add_option("--max-publisher-cache", o.max_publisher_cache,
                 "cached bytes of one publisher's tracks (default 256MiB)");
  app.add_option("--max-publisher-rate", o.max_publisher_rate,
                 "payload bytes per second one publisher may send, 0 for no limit; past it the "
                 "session is closed with bounds_exceeded (default 256MiB)");
  app.add_option("--max-streams", o.max_streams,
                 "streams of each direction a peer may have open per session (default 1000)");
  app.add_option("--max-session-buffer", o.max_session_buffer,
                 "bytes a peer may send that moqd has not yet consumed, per session (default 16MiB)");
  app.add_option("--max-path-length", o.max_path_length,
                 "bytes in a broadcast path or track name (default 1024)");
  app.add_option("--udp-gso", o.udp_gso, "UDP segmentation offload when sending QUIC (default true)");
  app.add_option("--udp-gro", o.udp_gro, "UDP receive offload for QUIC (default true)");
  app.add_option("--quic-steering", o.quic_steering,
                 "steer QUIC datagrams to the worker owning their connection ID with a BPF program "
                 "on the shared port (default true; false: the kernel's hash, then forwarding)");
  app.add_option("--log-level", o.log_level, "debug, info, warn or error (default info)");
  app.add_option("--auth-key", o.auth_key,
                 "key file that verifies client JWTs (?jwt=): a JWK as `moq-token generate` writes "
                 "it (JSON or base64url), a JWK set, or PEM; repeatable. Without any key or public "
                 "prefix, moqd is open to everyone");
  app.add_option("--auth-key-dir", o.auth_key_dir,
                 "directory of key files (*.jwk, *.json, *.pem), chosen by the token's kid "
                 "(the file name without extension when the key names no kid); re-read on SIGHUP");
  app.add_option("--auth-public", o.auth_public,
                 "path prefix anyone may publish and subscribe under without a token (repeatable)");
  app.add_option("--auth-url", o.auth_url,
                 "http://HOST:PORT/PATH of an auth service asked once per session (moq-auth's "
                 "contract: POST of the session's path and query, 2xx with a grant of publish and "
                 "subscribe patterns and an expiry); no answer, an error or a refusal refuses the "
                 "session. Replaces --auth-key and --auth-public");
  app.add_option("--metrics-listen", o.metrics_listen,
                 "ADDR:PORT serving /metrics (Prometheus), /health, /ready and the status page "
                 "(default: off)");
  app.add_option("--status-page", o.status_page,
                 "live status page at / (on --metrics-listen when set, else the public port; "
                 "default true)");
  app.add_option("--goaway-url", o.goaway_url,
                 "on SIGTERM, the URL GOAWAY sends clients to (default: none, clients reconnect "
                 "to the same URL)");
  app.add_option("--cluster-connect", o.cluster_connect,
                 "URL of a peer relay to link to (repeatable; ?cost=N prices the link, default 0): "
                 "broadcasts either relay knows become reachable through the other");
  app.add_option("--cluster-node", o.cluster_node,
                 "this relay's stable name in the cluster; its hash is the moq-lite-04 hop id "
                 "(default: the host name; give relays on one host different names)");
  app.add_option("--cluster-token", o.cluster_token,
                 "JWT this relay presents to its --cluster-connect peers (`moq token --cluster`); "
                 "they check it like any client's token");
  app.add_option("--cluster-peers-file", o.cluster_peers_file,
                 "FILE of more peer URLs, one per line ('#' comments, ?cost=N), re-read when it "
                 "changes: peers added get a link, peers removed lose theirs (default: none)");
  app.add_option("--cluster-dns", o.cluster_dns,
                 "URL whose host is a DNS name, e.g. http://moqd-peers:4443/ (repeatable; "
                 "?cost=N): every A/AAAA address it resolves to is a peer at that URL, looked up "
                 "again when the answer's TTL runs out (1 s to 300 s); this relay's own addresses "
                 "are left out (default: none)");
  app.add_option("--cluster-dns-server", o.cluster_dns_server,
                 "IPv4:PORT of the nameserver --cluster-dns asks (default: /etc/resolv.conf's)");
  app.add_option("--debug-spin-per-delivery", o.debug_spin_per_delivery,
                 "benchmark falsification: busy-wait this long (e.g. 2us) per chunk handed to a "
                 "subscriber (default 0: off)");
}

bool load_config_file(const std::string& file, CLI::App& app) {
  toml::table table;
  try {
    table = toml::parse_file(file);
  } catch (const toml::parse_error& e) {
    fprintf(stderr, "moqd: %s: %s\n", file.c_str(), std::string(e.description()).c_str());
    return false;
  }
  for (auto& [key, node] : table) {
    std::string name = "--" + std::string(key.str());
    CLI::Option* opt = nullptr;
    try {
      opt = app.get_option(name);
    } catch (...) {
      fprintf(stderr, "moqd: %s: unknown key '%s'\n", file.c_str(), std::string(key.str()).c_str());
      return false;
    }
    if (opt->count() > 0) {
      continue;  // flags win over the file
    }
    std::vector<std::string> values;
    if (auto* arr = node.as_array()) {
      for (auto& v : *arr) {
        if (v.is_string()) {
          values.push_back(*v.value<std::string>());
        } else if (v.is_integer()) {
          values.push_back(std::to_string(*v.value<int64_t>()));
        }
      }
    } else if (node.is_string()) {
      values.push_back(*node.value<std::string>());
    } else if (node.is_integer()) {
      values.push_back(std::to_string(*node.value<int64_t>()));
    } else if (node.is_floating_point()) {
      values.push_back(std::to_string(*node.value<double>()));
    } else if (node.is_boolean()) {
      values.push_back(*node.value<bool>() ? "true" : "false");
    }
    try {
      for (auto& v : values) {
        opt->add_result(v);
      }
      opt->run_callback();
    } catch (const CLI::Error& e) {
      fprintf(stderr, "moqd: %s: key '%s': %s\n", file.c_str(), std::string(key.str()).c_str(), e.what());
      return false;
    }
  }
  return true;
}

// --tls-cert/--tls-key load the certificate; without both, one is generated for the whole relay
// (shared read-only by the workers) and renewed before it expires.
bool load_certificate(const Options& o, moqd::relay::RelayConfig& c) {
  using moqd::transport::quic::Certificate;
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    fprintf(stderr, "moqd: --tls-cert and --tls-key go together\n");
    return false;
  }
  auto cert = o.tls_cert.empty() ? Certificate::generate_self_signed()
                                 : Certificate::load(o.tls_cert, o.tls_key);
  if (!cert) {
    fprintf(stderr, "moqd: TLS certificate: %s\n", cert.error().detail);
    return false;
  }
  c.renew_certificate = o.tls_cert.empty();
  c.certificate = std::move(*cert);
  MOQD_LOG(kInfo, "tls certificate sha256=%s (%s)", c.certificate->sha256_hex().c_str(),
           c.renew_certificate ? "generated" : "loaded");
  return true;
}

// --auth-key files, --auth-key-dir and --auth-public into the policy the workers share.
bool load_auth(const Options& o, moqd::relay::RelayConfig& c) {
  auto policy = std::make_shared<moqd::auth::AuthPolicy>();
  for (const auto& file : o.auth_key) {
    std::string why;
    auto keys = moqd::auth::load_key_file(file, &why);
    if (!keys) {
      fprintf(stderr, "moqd: --auth-key: %s\n", why.c_str());
      return false;
    }
    for (auto& k : *keys) policy->keys.keys.push_back(std::move(k));
  }
  if (!o.auth_key_dir.empty()) {
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(o.auth_key_dir, ec)) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    if (ec) {
      fprintf(stderr, "moqd: --auth-key-dir %s: %s\n", o.auth_key_dir.c_str(), ec.message().c_str());
      return false;
    }
    std::sort(files.begin(), files.end());
    for (const auto& path : files) {
      std::string why;
      auto keys = moqd::auth::load_key_file(path.string(), &why);
      if (!keys) {
        fprintf(stderr, "moqd: --auth-key-dir: %s\n", why.c_str());
        return false;
      }
      for (auto& k : *keys) {
        if (k.kid.empty()) k.kid = path.stem().string();  // moq-relay's {dir}/{kid}.jwk
        policy->keys.keys.push_back(std::move(k));
      }
    }
  }
  policy->public_prefixes = o.auth_public;
  if (!o.auth_url.empty()) {
    if (auto u = moqd::relay::parse_auth_url(o.auth_url); !u) {
      fprintf(stderr, "moqd: --auth-url %s: %s\n", o.auth_url.c_str(), u.error().detail);
      return false;
    }
    if (!policy->keys.empty() || !policy->public_prefixes.empty()) {
      fprintf(stderr, "moqd: --auth-url replaces --auth-key, --auth-key-dir and --auth-public; "
              "give one or the other\n");
      return false;
    }
    policy->service_url = o.auth_url;
  }
  c.auth = std::move(policy);
  return true;
}

bool build_config(const Options& o, moqd::relay::RelayConfig& c) {
  auto bad = [](const char* flag, const std::string& v) {
    fprintf(stderr, "moqd: invalid value for %s: '%s'\n", flag, v.c_str());
    return false;
  };
  c.listen = o.listen.empty() ? std::vector<std::string>{"[::]:4443"} : o.listen;
  c.workers = o.workers == 0 ? 1 : o.workers;
  if (!o.versions.empty()) {
    c.versions = moqd::wire::VersionSet::none();
    size_t start = 0;
    while (start <= o.versions.size()) {
      size_t comma = o.versions.find(',', start);
      std::string name = o.versions.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      auto v = moqd::wire::version_from_name(name);
      if (!v) {
        return bad("--versions", name);
      }
      c.versions.add(*v);
      if (comma == std::string::npos) {
        break;
      }
      start = comma + 1;
    }
  }
  if (!load_certificate(o, c) || !load_auth(o, c)) {
    return false;
  }
  c.metrics_listen = o.metrics_listen;
  c.status_page = o.status_page;
  c.goaway_url = o.goaway_url;
  for (const auto& url : o.cluster_connect) {
    auto peer = moqd::relay::parse_cluster_peer(url);
    if (!peer) return bad("--cluster-connect", url);
    c.cluster.peers.push_back(std::move(*peer));
  }
  c.cluster.node = o.cluster_node;
  if (c.cluster.node.empty()) {
    char host[256] = {};
    c.cluster.node = gethostname(host, sizeof host - 1) == 0 && host[0] != 0 ? host : "moqd";
  }
  c.cluster.hop_id = moqd::relay::hop_id_for_node(c.cluster.node);
  c.cluster.token = o.cluster_token;
  c.cluster.peers_file = o.cluster_peers_file;
  for (const auto& url : o.cluster_dns) {
    if (!moqd::relay::parse_cluster_dns(url)) return bad("--cluster-dns", url);
  }
  c.cluster.dns = o.cluster_dns;
  if (!o.cluster_dns_server.empty()) {
    auto hp = moqd::runtime::parse_host_port(o.cluster_dns_server);
    if (!hp || hp->host.find(':') != std::string::npos) {
      return bad("--cluster-dns-server", o.cluster_dns_server);
    }
  }
  c.cluster.dns_server = o.cluster_dns_server;
  c.cluster.node_named = !o.cluster_node.empty() || !c.cluster.peers.empty() ||
                         !c.cluster.peers_file.empty() || !c.cluster.dns.empty();
  if (o.max_handshakes_per_second == 0) return bad("--max-handshakes-per-second", "0");
  c.max_handshakes_per_second = o.max_handshakes_per_second;
  if (o.max_pending_handshakes == 0) return bad("--max-pending-handshakes", "0");
  c.max_pending_handshakes = o.max_pending_handshakes;
  if (!parse_duration(o.handshake_timeout, c.quic.handshake_timeout) ||
      c.quic.handshake_timeout <= moqd::Duration::zero()) {
    return bad("--handshake-timeout", o.handshake_timeout);
  }
  if (o.max_connections == 0) return bad("--max-connections", "0");
  c.max_connections = o.max_connections;
  if (o.max_connections_per_address == 0) return bad("--max-connections-per-address", "0");
  c.max_connections_per_address = o.max_connections_per_address;
  if (!parse_duration(o.idle_timeout, c.limits.idle_timeout)) return bad("--idle-timeout", o.idle_timeout);
  uint64_t size = 0;
  if (!parse_duration(o.drain_timeout, c.drain_timeout)) return bad("--drain-timeout", o.drain_timeout);
  if (!parse_duration(o.stall_timeout, c.limits.stall_timeout)) return bad("--stall-timeout", o.stall_timeout);
  if (!parse_duration(o.upstream_linger, c.origin.upstream_linger)) return bad("--upstream-linger", o.upstream_linger);
  if (!parse_duration(o.setup_timeout, c.limits.setup_timeout)) return bad("--setup-timeout", o.setup_timeout);
  if (!parse_duration(o.upgrade_timeout, c.websocket.upgrade_timeout)) return bad("--upgrade-timeout", o.upgrade_timeout);
  if (!parse_duration(o.debug_spin_per_delivery, c.limits.debug_spin_per_delivery)) {
    return bad("--debug-spin-per-delivery", o.debug_spin_per_delivery);
  }
  if (c.limits.debug_spin_per_delivery > Duration::zero()) {
    fprintf(stderr, "moqd: --debug-spin-per-delivery %s: every delivery is slowed on purpose\n",
            o.debug_spin_per_delivery.c_str());
  }
  if (!parse_duration(o.max_backlog_age, c.limits.max_backlog_age)) return bad("--max-backlog-age", o.max_backlog_age);
  if (!parse_duration(o.cache_age, c.origin.cache.max_age)) return bad("--cache-age", o.cache_age);
  if (!parse_size(o.max_frame_size, c.limits.max_frame_size)) return bad("--max-frame-size", o.max_frame_size);
  if (!parse_size(o.max_backlog_bytes, c.limits.max_backlog_bytes)) return bad("--max-backlog-bytes", o.max_backlog_bytes);
  if (!parse_size(o.cache_bytes, c.origin.cache.max_bytes)) return bad("--cache-bytes", o.cache_bytes);
  if (!parse_size(o.max_message_size, size)) return bad("--max-message-size", o.max_message_size);
  c.decode.max_message_size = size;
  if (!parse_size(o.max_ws_message_size, size)) return bad("--max-ws-message-size", o.max_ws_message_size);
  c.websocket.max_message_size = size + 4096;
  if (!parse_size(o.cache_budget, c.cache_budget)) return bad("--cache-budget", o.cache_budget);
  if (!parse_size(o.max_publisher_cache, c.limits.max_publisher_cache)) {
    return bad("--max-publisher-cache", o.max_publisher_cache);
  }
  if (!parse_size(o.max_publisher_rate, c.limits.max_publisher_rate)) {
    return bad("--max-publisher-rate", o.max_publisher_rate);
  }
  if (!parse_size(o.max_session_buffer, c.mux.max_data) || c.mux.max_data < 65536) {
    return bad("--max-session-buffer (at least 64KiB)", o.max_session_buffer);
  }
  c.mux.max_stream_data = std::min<uint64_t>(c.mux.max_stream_data, c.mux.max_data);
  if (o.max_streams == 0) return bad("--max-streams", "0");
  c.mux.max_streams_bidi = o.max_streams;
  c.mux.max_streams_uni = o.max_streams;
  if (o.max_path_length == 0) return bad("--max-path-length", "0");
  c.decode.max_path_size = o.max_path_length;
  c.decode.max_track_name_size = o.max_path_length;
  c.udp_gso = o.udp_gso;
  c.udp_gro = o.udp_gro;
  c.quic_steering = o.quic_steering;
  c.limits.max_subscriptions = o.max_subscriptions;
  c.limits.max_announce_streams = o.max_announce_streams;
  c.limits.max_announced_paths = o.max_announced_paths;
  c.limits.max_announce_rate = o.max_announce_rate;
  if (!parse_size(o.max_announce_buffer, c.limits.max_announce_buffer) || c.limits.max_announce_buffer == 0) {
    return bad("--max-announce-buffer", o.max_announce_buffer);
  }
  c.origin.cache.max_groups = o.cache_groups == 0 ? 1 : o.cache_groups;
  if (o.log_level == "debug") {
    moqd::log::set_level(moqd::log::Level::kDebug);
  } else if (o.log_level == "info") {
    moqd::log::set_level(moqd::log::Level::kInfo);
  } else if (o.log_level == "warn") {
    moqd::log::set_level(moqd::log::Level::kWarn);
  } else if (o.log_level == "error") {
    moqd::log::set_level(moqd::log::Level::kError);
  } else {
    return bad("--log-level", o.log_level);
  }
  return true;
}

// Every option's environment variable: MOQD_ and its name in upper case with '_' for '-'
// (--max-frame-size: MOQD_MAX_FRAME_SIZE). Flags win over the environment, which wins over the
// config file.
void add_env_names(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help") {
      continue;
    }
    std::string env = "MOQD_" + opt->get_lnames()[0];
    for (char& ch : env) {
      ch = ch == '-' ? '_' : static_cast<char>(toupper(static_cast<unsigned char>(ch)));
    }
    opt->envname(env);
  }
}

// The effective settings as TOML (what --check-config prints).
std::string effective_settings(CLI::App& app) {
  std::string out;
  for (CLI::Option* opt : app.get_options()) {
    const auto& names = opt->get_lnames();
    if (names.empty() || names[0] == "help" || names[0] == "check-config" ||
        names[0] == "config") {
      continue;
    }
    std::vector<std::string> values = opt->count() > 0 ? opt->results() : std::vector<std::string>{};
    if (opt->count() == 0 && !opt->get_default_str().empty()) {
      values.push_back(opt->get_default_str());
    }
    if (names[0] == "cluster-token" && !values.empty() && !values.back().empty()) {
      values = {"(secret)"};  // a credential is never printed
    }
    auto quote = [](const std::string& v) {
      std::string q = "\"";
      for (char ch : v) {
        if (ch == '"' || ch == '\\') q += '\\';
        q += ch;
      }
      return q + "\"";
    };
    out += names[0] + " = ";
    if (opt->get_expected_max() > 1) {
      out += "[";
      for (size_t i = 0; i < values.size(); ++i) out += (i ? ", " : "") + quote(values[i]);
      out += "]\n";
    } else {
      out += (values.empty() ? quote("") : quote(values.back())) + "\n";
    }
  }
  return out;
}

// Flags, environment and config file into a RelayConfig, as at start and on SIGHUP. `settings`
// gets the effective settings. Returns the exit status for a parse that ends the program
// (--help), 2 for a bad setting, or -1 to go on.
struct Loaded {
  moqd::relay::RelayConfig config;
  std::string settings;
  std::string config_file;
};

int load(int argc, char** argv, Loaded& out, std::string* check_config) {
  CLI::App app{"moqd: a Media over QUIC relay (moq-lite over WebSocket, QUIC and WebTransport)"};
  app.option_defaults()->always_capture_default();
  Options o;
  add_flags(app, o);
  std::string check;
  if (check_config != nullptr) {
    app.add_option("--check-config", check,
                   "validate this TOML file (with the flags and MOQD_* variables given), print the "
                   "effective settings and exit: 0 when valid, 2 when not");
  }
  add_env_names(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!check.empty()) {
    o.config_file = check;
    *check_config = check;
  }
  if (!o.config_file.empty() && !load_config_file(o.config_file, app)) {
    return 2;
  }
  if (!build_config(o, out.config)) {
    return 2;
  }
  out.settings = effective_settings(app);
  out.config_file = o.config_file;
  return -1;
}

// Settings that only a restart applies: SIGHUP logs a change to them and keeps the old value.
constexpr const char* kRestartOnly[] = {
    "listen", "workers", "versions", "metrics-listen", "status-page", "cache-budget",
    "cache-groups", "cache-bytes", "cache-age", "upstream-linger", "udp-gso", "udp-gro",
    "quic-steering", "max-handshakes-per-second", "debug-spin-per-delivery", "cluster-connect",
    "cluster-node", "cluster-peers-file", "cluster-dns", "cluster-dns-server",
    "max-pending-handshakes", "handshake-timeout", "max-connections",
    "max-connections-per-address"};

std::map<std::string, std::string> settings_map(const std::string& settings) {
  std::map<std::string, std::string> m;
  size_t start = 0;
  while (start < settings.size()) {
    size_t nl = settings.find('\n', start);
    std::string line = settings.substr(start, nl - start);
    size_t eq = line.find(" = ");
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 3);
    start = nl == std::string::npos ? settings.size() : nl + 1;
  }
  return m;
}

// SIGHUP: re-read everything; apply what can change live; keep the old config on any error.
void reload(int argc, char** argv, moqd::relay::Relay& relay, std::string& settings) {
  notify_systemd("RELOADING=1");
  Loaded fresh;
  int rc = load(argc, argv, fresh, nullptr);
  if (rc != -1) {
    MOQD_LOG(kWarn, "reload: the configuration is invalid (see the line above on stderr); "
             "keeping the running one");
    notify_systemd("READY=1");
    return;
  }
  auto before = settings_map(settings), after = settings_map(fresh.settings);
  for (const char* key : kRestartOnly) {
    if (before[key] != after[key]) {
      MOQD_LOG(kWarn, "reload: %s changed (%s -> %s) but needs a restart; keeping %s", key,
               before[key].c_str(), after[key].c_str(), before[key].c_str());
    }
  }
  if (fresh.config.renew_certificate && relay.config().renew_certificate) {
    fresh.config.certificate = nullptr;  // still no --tls-cert: keep the generated certificate
  }
  relay.reload(fresh.config);
  settings = fresh.settings;
  MOQD_LOG(kInfo, "reload: applied (certificate sha256=%s, %zu auth keys, %zu public prefixes)",
           fresh.config.certificate ? fresh.config.certificate->sha256_hex().c_str() : "unchanged",
           fresh.config.auth ? fresh.config.auth->keys.keys.size() : size_t{0},
           fresh.config.auth ? fresh.config.auth->public_prefixes.size() : size_t{0});
  notify_systemd("READY=1");
}

// Raises the soft open-file limit to the hard one, and lowers --max-connections so that every
// admitted connection (one fd each over TCP), the relay's own fds and a reserve for plain-HTTP
// answers (/health) and the metrics listener fit under it: accept() then never fails for lack of
// fds while a listener still needs one.
void fit_fd_limit(moqd::relay::RelayConfig& c) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) {
    return;
  }
  rlim_t before = r.rlim_cur;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0) {
      r.rlim_cur = before;
    }
  }
  // Per worker: epoll, eventfds, timers and a TCP and a UDP socket per listen address.
  const uint64_t own = 32 + c.workers * (8 + 2 * c.listen.size()) + 2 * c.workers * c.workers;
  const uint64_t reserve = moqd::relay::Relay::kOpsReserve + 16;  // plain HTTP, metrics, logs
  uint64_t fit = r.rlim_cur > own + reserve + 1 ? r.rlim_cur - own - reserve : 1;
  MOQD_LOG(kInfo, "open-file limit %llu (soft was %llu, hard %llu)",
           static_cast<unsigned long long>(r.rlim_cur), static_cast<unsigned long long>(before),
           static_cast<unsigned long long>(r.rlim_max));
  if (c.max_connections > fit) {
    MOQD_LOG(kWarn, "--max-connections %zu does not fit the open-file limit %llu: using %llu",
             c.max_connections, static_cast<unsigned long long>(r.rlim_cur),
             static_cast<unsigned long long>(fit));
    c.max_connections = static_cast<size_t>(fit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken by this thread alone (sigwait). Blocked before anything starts a thread (the
  // log thread starts with the first log line), so every thread inherits the mask: a SIGHUP or
  // SIGTERM that arrives while this thread is busy waits for sigwait instead of killing moqd.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Loaded loaded;
  std::string check_config;
  if (int rc = load(argc, argv, loaded, &check_config); rc != -1) {
    if (!check_config.empty()) {
      fprintf(stderr, "moqd: %s: invalid\n", check_config.c_str());
    }
    return rc;
  }
  if (!check_config.empty()) {
    printf("# %s: valid; effective settings (flags > MOQD_* environment > file > defaults)\n%s",
           check_config.c_str(), loaded.settings.c_str());
    return 0;
  }
  moqd::relay::RelayConfig& config = loaded.config;
  fit_fd_limit(config);

  moqd::relay::Relay relay(config);
  auto bound = relay.start();
  if (!bound) {
    fprintf(stderr, "moqd: cannot listen: %s (%s)\n", bound.error().detail,
            moqd::error_code_name(bound.error().code));
    return 1;
  }
  printf("moqd ready url=%s\n", (*bound)[0].url().c_str());
  if (relay.metrics_port() != 0) {
    auto mhp = moqd::runtime::parse_host_port(config.metrics_listen);
    moqd::relay::BoundAddress metrics{mhp ? mhp->host : "127.0.0.1", relay.metrics_port()};
    printf("moqd metrics url=%s\n", metrics.url().c_str());  // after the ready line, always
  }
  fflush(stdout);
  MOQD_LOG(kInfo, "moqd %s listening on %s with %zu workers", "0.1.0", (*bound)[0].url().c_str(),
           config.workers);
  if (relay.metrics_port() != 0) {
    MOQD_LOG(kInfo, "metrics on %s port %u (/metrics, /health, /ready%s)",
             config.metrics_listen.c_str(), relay.metrics_port(),
             config.status_page ? ", status page at /" : "");
  }
  if (!config.auth || config.auth->is_open()) {
    MOQD_LOG(kWarn, "auth: no --auth-key, --auth-key-dir or --auth-public: anyone may publish "
             "and subscribe to anything");
  } else if (!config.auth->service_url.empty()) {
    MOQD_LOG(kInfo, "auth: asking %s for every session", config.auth->service_url.c_str());
  } else {
    MOQD_LOG(kInfo, "auth: %zu keys, %zu public prefixes", config.auth->keys.keys.size(),
             config.auth->public_prefixes.size());
  }
  notify_systemd("READY=1");

  std::string settings = loaded.settings;
  int sig = 0;
  for (;;) {
    sigwait(&sigs, &sig);
    if (sig != SIGHUP) {
      break;
    }
    MOQD_LOG(kInfo, "signal %d: reloading the configuration", sig);
    reload(argc, argv, relay, settings);
  }
  notify_systemd("STOPPING=1");
  MOQD_LOG(kInfo, "signal %d: draining (timeout %lld ms%s%s)", sig,
           static_cast<long long>(relay.config().drain_timeout.count() / 1000),
           relay.config().goaway_url.empty() ? "" : ", goaway to ",
           relay.config().goaway_url.c_str());
  relay.drain_and_stop();
  MOQD_LOG(kInfo, "stopped");
  moqd::log::flush();
  return 0;
}
