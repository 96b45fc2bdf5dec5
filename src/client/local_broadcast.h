#pragma once
// Pieces for a program that publishes from its own process (the `moq` CLI, the load generator):
// a broadcast whose tracks the program fills itself, and a listener that keeps such a track alive
// while it is written. One thread.
#include "model/origin.h"
#include "model/track.h"

namespace moqd::client {

// The source of a locally published broadcast: the program writes into its tracks directly, so
// there is nothing to start or stop.
class LocalBroadcast final : public model::BroadcastSource, public model::TrackSource {
 public:
  model::TrackSource& track_source(const std::string&, const std::string&) override { return *this; }
  void start_track(model::Track&) override {}
  void stop_track(model::Track&) override {}
};

// Holds a local track open (a track with no listener is released after linger) and notes its end.
class TrackHolder final : public model::TrackListener {
 public:
  void on_track_data(model::Track&) override {}
  void on_track_ended(model::Track&, Error) override { ended = true; }
  bool ended = false;
};

}  // namespace moqd::client
