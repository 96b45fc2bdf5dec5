#pragma once
// GMock doubles for the model's interfaces; used by the model's unit tests only.
#include <gmock/gmock.h>

#include <string>

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

class MockAnnounceListener : public AnnounceListener {
 public:
  MOCK_METHOD(void, on_announce, (const std::string&, bool, uint64_t), (override));
};

// A broadcast whose every track is fed by one mock source.
class FakeBroadcastSource : public BroadcastSource {
 public:
  TrackSource& track_source(const std::string&, const std::string&) override { return tracks; }
  testing::StrictMock<MockTrackSource> tracks;
};

}  // namespace moqd::model
