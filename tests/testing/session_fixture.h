#pragma once
// Test doubles and a fixture for the moq-lite session layer: a server-role and a client-role
// session::Session back to back over a FakeChannelPair, a MuxSession on each side, each with its
// own model::Origin and RecordingHandler, all on one ManualClock. Nothing moves until the test
// calls pump() or advance(). With raw_server the server side has no Session: a RawPeer records
// its streams so a test can speak the wire by hand. Single-threaded; test only.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "base/error.h"
#include "model/group.h"
#include "model/origin.h"
#include "model/track.h"
#include "session/config.h"
#include "session/session.h"
#include "testing/fake_channel.h"
#include "testing/mux_pair.h"
#include "transport/websocket/mux_frames.h"
#include "transport/websocket/mux_session.h"

namespace moqd::testing {

// A SessionHandler double: records every call, forwards peer announces into its origin (as the
// relay does) and refuses the actions it is told to deny.
class RecordingHandler final : public session::SessionHandler {
 public:
  struct AuthCall {
    session::Action action;
    std::string path;
  };
  struct PeerAnnounce {
    std::string path;
    bool active;
    model::Hops hops;
  };

  explicit RecordingHandler(model::Origin& origin) : origin_(origin) {}

  bool authorize(session::Action action, std::string_view path, std::string_view query) override;
  void on_session_ready(wire::Version version) override { ready_version = version; }
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override;
  void on_peer_route(const std::string& path, const model::Hops& hops, uint64_t cost,
                     model::BroadcastSource& source) override;
  void on_session_closed(Error reason) override;
  void on_goaway(const std::string& uri) override { goaways.push_back(uri); }
  bool is_admission_pending() override { return admission_pending; }
  bool is_relay_link() const override { return relay_link; }

  // How many authorize() calls asked about `action` on `path`.
  size_t auth_count(session::Action action, std::string_view path) const;
  bool is_closed() const { return closed_reason.has_value(); }

  bool deny_connect = false;
  bool deny_publish = false;
  bool deny_subscribe = false;
  bool admission_pending = false;  // is_admission_pending() answers this
  bool relay_link = false;         // is_relay_link() answers this
  std::vector<std::string> goaways;
  std::vector<AuthCall> auth_calls;
  std::optional<wire::Version> ready_version;
  std::vector<PeerAnnounce> announces;
  std::optional<Error> closed_reason;
  int closed_count = 0;

 private:
  model::Origin& origin_;
};

// A local publisher of one broadcast: announced into an origin at construction, withdrawn at
// destruction (or unannounce()). Its tracks are fed by the test through feed(name).track().
class TestBroadcast final : public model::BroadcastSource {
 public:
  // Records start/stop and holds the track while it is being fed.
  class Feed final : public model::TrackSource {
   public:
    void start_track(model::Track& track) override;
    void stop_track(model::Track& track) override;
    model::Track* track() const { return track_; }
    int starts = 0;
    int stops = 0;

   private:
    model::Track* track_ = nullptr;
  };

  TestBroadcast(model::Origin& origin, std::string path);
  ~TestBroadcast() override;
  TestBroadcast(const TestBroadcast&) = delete;
  TestBroadcast& operator=(const TestBroadcast&) = delete;

  model::TrackSource& track_source(const std::string& path, const std::string& name) override;
  void unannounce();
  const std::string& path() const { return path_; }
  Feed& feed(const std::string& name) { return feeds_[name]; }

  // Writes group `sequence` of track `name` (which must be started) with `frames`, each frame
  // appended in chunks of at most `chunk` bytes; finished unless `finish` is false. Returns the
  // group (null when the track refused it).
  model::GroupRef write_group(const std::string& name, uint64_t sequence,
                              const std::vector<std::string>& frames, bool finish = true,
                              size_t chunk = 64 * 1024);

 private:
  model::Origin& origin_;
  std::string path_;
  bool announced_ = true;
  std::map<std::string, Feed> feeds_;
};

// A subscriber on an origin's track: reads every group it learns about with a GroupCursor and
// keeps the frames. Starts with everything in the track's cache.
class FrameCollector final : public model::TrackListener {
 public:
  struct Received {
    uint64_t sequence = 0;
    std::vector<std::string> frames;
    bool finished = false;
    bool aborted = false;
  };

  FrameCollector() = default;
  ~FrameCollector() override { unsubscribe(); }
  FrameCollector(const FrameCollector&) = delete;
  FrameCollector& operator=(const FrameCollector&) = delete;

  // origin.track(path, name) + add_listener; false when the broadcast is not active.
  bool subscribe(model::Origin& origin, const std::string& path, const std::string& name);
  void unsubscribe();

  void on_track_data(model::Track& track) override;
  void on_track_ended(model::Track& track, Error reason) override;

  bool is_subscribed() const { return track_ != nullptr; }
  model::Track* track() const { return track_; }
  // The received group with `sequence`, or null.
  const Received* group(uint64_t sequence) const;
  // Sequences of the groups received, in arrival order.
  std::vector<uint64_t> sequences() const;
  // Sequences of the groups that finished (FIN) / aborted (reset).
  std::vector<uint64_t> finished_sequences() const;
  std::vector<uint64_t> aborted_sequences() const;
  uint64_t total_bytes() const;

  std::vector<Received> groups;
  bool ended = false;
  std::optional<Error> end_reason;

 private:
  void drain();

  model::Track* track_ = nullptr;
  uint64_t next_arrival_ = 0;
  std::vector<std::pair<size_t, model::GroupCursor>> cursors_;
};

// A stream of a RawPeer: everything it receives, and the resets and stop-sendings.
class RawStream final : public transport::StreamVisitor {
 public:
  RawStream(transport::Stream& s, int* fin_clock);
  void on_readable() override;
  void on_writable() override {}
  void on_reset(uint64_t code) override { reset_code = code; }
  void on_stop_sending(uint64_t code) override { stop_code = code; }
  void write(std::vector<uint8_t> bytes);

  transport::Stream* stream;
  std::string data;
  bool fin = false;
  // Order in which this stream's FIN arrived among all RawPeer streams (0 = first), or -1.
  int fin_index = -1;
  std::optional<uint64_t> reset_code;
  std::optional<uint64_t> stop_code;

 private:
  int* fin_clock_;
};

// A transport::SessionVisitor that records the streams the peer opens, and opens its own.
class RawPeer final : public transport::SessionVisitor {
 public:
  explicit RawPeer(transport::Session& transport) : transport_(transport) {}
  void on_incoming_stream(transport::Stream& stream) override;
  void on_streams_available() override {}
  void on_closed(uint64_t code, std::string_view reason) override;

  // Opens a bidi stream and writes `bytes`; null when no stream can be opened.
  RawStream* open_bidi(std::vector<uint8_t> bytes);
  std::vector<std::unique_ptr<RawStream>> incoming;
  std::vector<std::unique_ptr<RawStream>> opened;
  std::optional<uint64_t> closed_code;

 private:
  transport::Session& transport_;
  int fin_clock_ = 0;
};

struct SessionPairOptions {
  transport::websocket::Framing framing = transport::websocket::Framing::kQmux00;
  // The transport protocol both sides see: "" (SETUP picks lite-01/02), "moq-lite-03", ...
  std::string protocol;
  session::SessionConfig server;  // role is forced to kServer
  session::SessionConfig client;  // role is forced to kClient
  model::OriginConfig server_origin;
  model::OriginConfig client_origin;
  transport::websocket::MuxConfig server_mux;
  transport::websocket::MuxConfig client_mux;
  // No server Session: the server's MuxSession is driven by a RawPeer.
  bool raw_server = false;
};

class SessionPair {
 public:
  explicit SessionPair(SessionPairOptions options = {});
  ~SessionPair();
  SessionPair(const SessionPair&) = delete;
  SessionPair& operator=(const SessionPair&) = delete;

  // Starts both sessions (server first) and pumps.
  void start();
  // Runs due timers and delivers messages until nothing moves; false if still busy after
  // `max_rounds`. While the wire is held, only timers run.
  bool pump(size_t max_rounds = 100'000);
  // Moves the clock by `d` in 10 ms steps, pumping after each (timers fire at their deadlines).
  void advance(Duration d);
  // Delivers at most `max` messages (then runs due timers), even while the wire is held.
  size_t deliver_some(size_t max);
  // While held, pump() delivers nothing: each side's transport stops reading the channel, so the
  // senders' channels fill up and their multiplexers stop pulling from streams.
  void hold_wire(bool held) { wire_held_ = held; }

  ManualClock& clock() { return clock_; }
  FakeChannelPair& channels() { return muxes_.channels(); }
  // Channel ends: a() is the server's, b() the client's.
  FakeChannel& server_channel() { return muxes_.channels().a(); }
  FakeChannel& client_channel() { return muxes_.channels().b(); }
  transport::websocket::MuxSession& server_mux() { return muxes_.server(); }
  transport::websocket::MuxSession& client_mux() { return muxes_.client(); }
  session::Session& server() { return *server_; }
  session::Session& client() { return *client_; }
  bool has_server() const { return server_ != nullptr; }
  RawPeer& raw() { return *raw_; }
  model::Origin& server_origin() { return *server_origin_; }
  model::Origin& client_origin() { return *client_origin_; }
  RecordingHandler& server_handler() { return *server_handler_; }
  RecordingHandler& client_handler() { return *client_handler_; }
  const SessionPairOptions& options() const { return options_; }

  // Frames of kind `kind` that one side has sent so far (decoded from its channel's record).
  std::vector<transport::websocket::MuxFrame> sent_frames(const FakeChannel& from,
                                                          transport::websocket::FrameKind kind) const;

 private:
  SessionPairOptions options_;
  ManualClock clock_;
  std::unique_ptr<model::Origin> server_origin_;
  std::unique_ptr<model::Origin> client_origin_;
  std::unique_ptr<RecordingHandler> server_handler_;
  std::unique_ptr<RecordingHandler> client_handler_;
  std::unique_ptr<RawPeer> raw_;  // with raw_server, the server mux's visitor: outlives muxes_
  MuxPair muxes_;
  std::unique_ptr<session::Session> server_;
  std::unique_ptr<session::Session> client_;
  bool wire_held_ = false;
};

// One moq-lite draft and how a client reaches it.
struct VersionCase {
  const char* name;      // for test names: "Lite01"
  std::string protocol;  // transport protocol ("" = SETUP)
  wire::Version version;  // what both sides must settle on
};
// lite-01 (SETUP with the server restricted to it), lite-02 (SETUP), lite-03, lite-04, lite-05.
std::vector<VersionCase> all_version_cases();
void PrintTo(const VersionCase& c, std::ostream* os);
// Options that reach `c`, otherwise default.
SessionPairOptions options_for(const VersionCase& c);

// A string of `n` bytes of a pattern seeded by `seed` (for frames whose bytes must match).
std::string pattern_bytes(size_t n, uint8_t seed = 0);

}  // namespace moqd::testing
