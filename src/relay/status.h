#pragma once
// What the live status page shows, as each worker last saw it: broadcasts, their tracks, viewers
// and byte counters. A worker rebuilds its snapshot every kStatusInterval on its own thread and
// publishes it under a mutex (control traffic: twice a second, never on the data path); the
// relay merges the workers' snapshots for GET /status.json.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/clock.h"

namespace moqd::relay {

inline constexpr Duration kStatusInterval = std::chrono::milliseconds(500);

struct TrackStatus {
  std::string broadcast;
  std::string track;
  uint64_t viewers = 0;    // subscriptions on this worker
  uint64_t bytes_in = 0;   // payload bytes into this worker's copy of the track
  uint64_t bytes_out = 0;  // payload bytes handed to this worker's viewers
};

// What /cluster shows of one link.
struct ClusterLinkStatus {
  std::string url;  // without the token
  uint64_t cost = 0;
  std::string state;  // "connecting", "up", "backoff", "stopped"
  uint64_t connects = 0;  // sessions that came up
  uint64_t failures = 0;  // attempts or sessions that ended
  std::string last_error;
  size_t worker = 0;
  uint64_t backoff_ms = 0;  // the current wait, in "backoff"
};

// What /cluster shows of one route to a broadcast, as one worker has it.
struct RouteStatus {
  std::string broadcast;
  std::string via;  // "local", the link's URL, or "inbound PEER" for a link a peer dialled
  std::vector<uint64_t> hops;
  uint64_t cost = 0;
};

struct WorkerStatus {
  std::vector<std::string> broadcasts;  // active, full paths
  std::vector<TrackStatus> tracks;
  std::vector<ClusterLinkStatus> links;  // this worker's cluster links
  std::vector<RouteStatus> routes;       // routes through this worker's sessions
};

}  // namespace moqd::relay
