#pragma once
// What the live status page shows, as each worker last saw it: broadcasts, their tracks, viewers
// and byte counters. A worker rebuilds its snapshot every kStatusInterval on its own thread and
// publishes it under a mutex (control traffic: twice a second, never on the data path); the
// relay merges the workers' snapshots for GET /status.json.
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

struct WorkerStatus {
  std::vector<std::string> broadcasts;  // active, full paths
  std::vector<TrackStatus> tracks;
};

}  // namespace moqd::relay
