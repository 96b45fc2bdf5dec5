// GET /status.json: the workers' status snapshots merged (relay/status.h).
#include <algorithm>
#include <map>

#include "relay/relay.h"
#include "relay/worker.h"

namespace moqd::relay {
namespace {

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

struct Merged {
  uint64_t viewers = 0, bytes_in = 0, bytes_out = 0;
};

}  // namespace

std::string Relay::status_json() const {
  // A broadcast is known on every worker; a track exists on each worker that serves it. The
  // publisher's bytes arrive once per worker copy, so bytes_in is the largest copy's; viewers and
  // bytes_out add up.
  std::map<std::string, std::map<std::string, Merged>> broadcasts;
  std::string workers;
  for (const auto& w : relay_workers_) {
    WorkerStatus st = w->status();
    for (const auto& b : st.broadcasts) {
      broadcasts[b];
    }
    for (const auto& t : st.tracks) {
      Merged& m = broadcasts[t.broadcast][t.track];
      m.viewers += t.viewers;
      m.bytes_in = std::max(m.bytes_in, t.bytes_in);
      m.bytes_out += t.bytes_out;
    }
    if (!workers.empty()) {
      workers += ",";
    }
    workers += "{\"index\":" + std::to_string(w->index()) +
               ",\"sessions\":" + std::to_string(w->sessions.load(std::memory_order_relaxed)) +
               ",\"connections\":" + std::to_string(w->connections.load(std::memory_order_relaxed)) +
               ",\"busy_us\":" + std::to_string(w->loop_busy_us()) + "}";
  }
  std::string out = "{\"version\":\"" MOQD_VERSION_STRING "\",\"draining\":";
  out += is_draining() ? "true" : "false";
  out += ",\"sessions\":" + std::to_string(session_count());
  out += ",\"time_ms\":" +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count());
  out += ",\"workers\":[" + workers + "],\"broadcasts\":[";
  bool first = true;
  for (const auto& [path, tracks] : broadcasts) {
    out += first ? "" : ",";
    first = false;
    out += "{\"path\":" + json_string(path) + ",\"tracks\":[";
    bool first_track = true;
    for (const auto& [name, m] : tracks) {
      out += first_track ? "" : ",";
      first_track = false;
      out += "{\"name\":" + json_string(name) + ",\"viewers\":" + std::to_string(m.viewers) +
             ",\"bytes_in\":" + std::to_string(m.bytes_in) +
             ",\"bytes_out\":" + std::to_string(m.bytes_out) + "}";
    }
    out += "]}";
  }
  return out + "]}\n";
}

std::string Relay::cluster_json() const {
  const ClusterConfig& c = config_.cluster;
  std::string links;
  std::map<std::string, std::vector<RouteStatus>> routes;
  for (const auto& w : relay_workers_) {
    WorkerStatus st = w->status();
    for (const auto& l : st.links) {
      links += links.empty() ? "" : ",";
      links += "{\"url\":" + json_string(l.url) + ",\"state\":" + json_string(l.state) +
               ",\"cost\":" + std::to_string(l.cost) + ",\"connects\":" +
               std::to_string(l.connects) + ",\"failures\":" + std::to_string(l.failures) +
               ",\"backoff_ms\":" + std::to_string(l.backoff_ms) + ",\"worker\":" +
               std::to_string(l.worker) + ",\"last_error\":" + json_string(l.last_error) + "}";
    }
    for (auto& r : st.routes) {
      routes[r.broadcast].push_back(std::move(r));
    }
  }
  uint64_t updates_sent = 0, updates_received = 0;
  for (const auto& w : relay_workers_) {
    updates_sent += w->traffic().announce_updates_sent.get();
    updates_received += w->traffic().announce_updates_received.get();
  }
  std::string out = "{\"node\":" + json_string(c.node) + ",\"hop_id\":" + std::to_string(c.hop_id) +
                    ",\"announce_updates\":{\"sent\":" + std::to_string(updates_sent) +
                    ",\"received\":" + std::to_string(updates_received) + "}" +
                    ",\"links\":[" + links + "],\"broadcasts\":[";
  bool first = true;
  for (auto& entry : routes) {
    const std::string& path = entry.first;  // named, not a structured binding: lambdas capture it
    std::vector<RouteStatus>& rs = entry.second;
    // The order every worker's Origin uses (model/origin.h): distance (from the nearest warm
    // copy) plus cost, then the smaller hop list. (Local publishers tie on 0; the newest of them
    // is the one in use.)
    auto score = [&](const RouteStatus& r) {
      return model::route_distance(path, r.hops, c.hop_id) + r.cost;
    };
    std::stable_sort(rs.begin(), rs.end(), [&](const RouteStatus& a, const RouteStatus& b) {
      uint64_t sa = score(a), sb = score(b);
      return sa != sb ? sa < sb : a.hops < b.hops;
    });
    out += first ? "" : ",";
    first = false;
    out += "{\"path\":" + json_string(path) + ",\"routes\":[";
    for (size_t i = 0; i < rs.size(); ++i) {
      std::string hops;
      for (uint64_t h : rs[i].hops) {
        hops += (hops.empty() ? "" : ",") + std::to_string(h);
      }
      out += (i ? "," : "") + std::string("{\"via\":") + json_string(rs[i].via) + ",\"hops\":[" +
             hops + "],\"cost\":" + std::to_string(rs[i].cost) + ",\"distance\":" +
             std::to_string(model::route_distance(path, rs[i].hops, c.hop_id)) + ",\"active\":" +
             (i == 0 ? "true" : "false") + "}";
    }
    out += "]}";
  }
  return out + "]}";
}

}  // namespace moqd::relay
