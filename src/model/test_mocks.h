#pragma once
// GMock doubles for the model's interfaces; used by the model's unit tests only.
#include <gmock/gmock.h>

#include <string>
#include <vector>

#include "model/origin.h"
#include "model/track.h"

namespace moqd::model {

class MockTrackListener : public TrackListener {
 public:
  MOCK_METHOD(void, on_track_data, (Track&), (override));
  MOCK_METHOD(void, on_track_ended, (Track&, Error), (override));
};

class MockTrackSource : public TrackSource {
 public:
  MOCK_METHOD(void, start_track, (Track&), (override));
  MOCK_METHOD(void, stop_track, (Track&), (override));
};

// Expectations name the hop count (on_announce_n); `seen` records the hop lists themselves.
class MockAnnounceListener : public AnnounceListener {
 public:
  struct Seen {
    std::string path;
    bool active;
    Hops hops;
  };
  void on_announce(const std::string& path, bool active, const Hops& hops) override {
    seen.push_back({path, active, hops});
    on_announce_n(path, active, hops.size());
  }
  MOCK_METHOD(void, on_announce_n, (const std::string&, bool, uint64_t));
  void on_carrying(const std::string& path, const Hops&, bool carrying) override {
    carrying_seen.emplace_back(path, carrying);
  }
  std::vector<Seen> seen;
  std::vector<std::pair<std::string, bool>> carrying_seen;
};

// `n` hop ids that no other call returns (so two routes never share an origin relay).
inline Hops distinct_hops(size_t n) {
  static uint64_t next = 1000;
  Hops h;
  for (size_t i = 0; i < n; ++i) {
    h.push_back(next++);
  }
  return h;
}

// A broadcast whose every track is fed by one mock source.
class FakeBroadcastSource : public BroadcastSource {
 public:
  TrackSource& track_source(const std::string&, const std::string&) override { return tracks; }
  testing::StrictMock<MockTrackSource> tracks;
};

}  // namespace moqd::model
