// Stateful fuzzer for the IETF MoQ Transport session (src/session/ietf_session.h), drafts 14 to 20
// in the server role (17+: SETUP on a uni stream, each request, FETCH and TRACK_STATUS included, on
// its own bidi stream): an IetfSession on the in-memory QUIC connection of wt_harness.h
// (FakeQuic, shared with wt_server_fuzzer) whose client is the fuzz input, so the session's
// handlers, not only the decoders (ietf_fuzzer), see hostile control and SUBGROUP streams. A
// ManualClock drives its timers, a local broadcast serves the peer's SUBSCRIBEs and a local viewer
// subscribes to what the peer publishes (so SUBGROUP streams meet a live upstream subscription).
//
// Input: one config byte (bits 0-1 and 5: the draft, a row of kDrafts: 14 15 16 17 18 19 20, then
// 14 again; bit 2: a valid CLIENT_SETUP of that draft opens the control stream first, or from 17 a
// valid SETUP its uni SETUP stream; bit 3: the local
// broadcast "room/alice" is announced; bit 4: tight SessionLimits), then records of an op byte (low nibble: the op; 0x10: a variant; 0x80:
// batch with the next op, as one packet would) and its arguments (len: one byte):
//   0 len bytes on the control stream (opens it)   1 open a uni stream with len bytes (0x10: FIN)
//   2 len bytes on peer stream k   3 FIN on peer stream k   4 RESET on peer stream k
//   5 STOP_SENDING on our stream k   6 clock step of n*10 ms   7 the network drains the queues
//   8 the viewer subscribes to track k of a broadcast the peer announced (0x10: unsubscribes)
//   9 the local broadcast writes a group of n frames (0x10: left open)   10 open another bidi
//   stream with len bytes   11 MAX_STREAMS   12 a datagram   13 GOAWAY (0x10: close(kCancel))
//   14 CONNECTION_CLOSE from the peer   15 the local broadcast ends (unannounced)
// Checks, besides ASan/UBSan and the transport contract of wt_harness.h: the session never
// closes the connection with INTERNAL_ERROR (hostile input is the peer's fault: a protocol error),
// the handler's on_session_closed comes exactly once, after the connection closed, and never
// before; once closed, none of the peer's announcements is left active in the origin.
// IETF_FUZZ_TRACE=1 prints the session's log, the close code and reason each input reaches, and
// the objects the viewer got.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/codec.h"
#include "base/log.h"
#include "model/group.h"
#include "model/origin.h"
#include "model/track.h"
#include "mux_harness.h"
#include "session/ietf_session.h"
#include "wire/ietf.h"
#include "wt_harness.h"

namespace moqd::session {
namespace {

using fuzz::FakeQuic;
using fuzz::FakeQuicStream;
using fuzz::InputCursor;

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "ietf_session_fuzzer: %s\n", what);
  std::abort();
}

// One row per draft the fuzzer drives: its version and the peer's first bytes on the control
// stream, @moq/lite 0.2.2's CLIENT_SETUP (protocol/README.md §2.4-2.5; the d14 one offers lite-02,
// lite-01 and draft 14), as src/session/ietf_session_test.cc sends them; from 17 the SETUP on the
// peer's first uni stream (18 and 20: @moq/net 0.3.4's, which names itself "moq-lite-js" and so
// makes the session read its forms; 17 and 19: no options, the draft text's forms). A draft
// IetfSession gains is one more row (config bits 0-1 and 5 pick the row, modulo the table's size).
struct DraftRow {
  wire::Version version;
  const char* client_setup;
  bool uni_setup = false;
};
constexpr const char* kNetSetup =
    "af 00 00 1b 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73 c4 0b 4e 08 fe 0a 5a 2a db 5a 87 d4 05 01";
const DraftRow kDrafts[] = {
    {wire::Version::kTransport14,
     "20 00 2c 03 c0 00 00 00 ff 0d ad 02 c0 00 00 00 ff 0d ad 01 c0 00 00 00 ff 00 00 0e "
     "02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"},
    {wire::Version::kTransport15,
     "20 00 13 02 02 80 00 a4 55 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"},
    {wire::Version::kTransport16,
     "20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"},
    {wire::Version::kTransport17, "af 00 00 00", true},
    {wire::Version::kTransport18, kNetSetup, true},
    {wire::Version::kTransport19, "af 00 00 00", true},
    {wire::Version::kTransport20, kNetSetup, true},
};
const char* const kTrackNames[] = {"video", "audio", "catalog.json", ""};

// The relay's side of the session: puts the peer's announcements into the origin (as the relay
// does) and remembers which paths the peer announced, for the viewer.
class Handler final : public SessionHandler {
 public:
  Handler(model::Origin& origin, const FakeQuic& conn) : origin_(origin), conn_(conn) {}
  bool authorize(Action, std::string_view, std::string_view) override { return true; }
  void on_session_ready(wire::Version) override {}
  void on_peer_announce(const std::string& path, bool active, const model::Hops& hops,
                        model::BroadcastSource& source) override {
    if (active) {
      origin_.announce(path, &source, hops);
      announced.push_back(path);
    } else {
      origin_.unannounce(path, &source);
    }
  }
  void on_session_closed(Error) override {
    if (closed_count++ > 0) {
      bug("on_session_closed twice");
    }
    if (!conn_.is_closing()) {
      bug("on_session_closed before the connection closed");
    }
  }

  std::vector<std::string> announced;
  int closed_count = 0;

 private:
  model::Origin& origin_;
  const FakeQuic& conn_;
};

// A local publisher of "room/alice": the peer's SUBSCRIBEs for it are served from these tracks.
class LocalBroadcast final : public model::BroadcastSource {
 public:
  class Feed final : public model::TrackSource {
   public:
    void start_track(model::Track& track) override { track_ = &track; }
    void stop_track(model::Track&) override { track_ = nullptr; }
    model::Track* track_ = nullptr;
  };

  LocalBroadcast(model::Origin& origin, std::string path) : origin_(origin), path_(std::move(path)) {
    origin_.announce(path_, this);
  }
  ~LocalBroadcast() override { unannounce(); }
  LocalBroadcast(const LocalBroadcast&) = delete;
  LocalBroadcast& operator=(const LocalBroadcast&) = delete;

  model::TrackSource& track_source(const std::string&, const std::string& name) override {
    return feeds_[name];
  }
  bool is_announced() const { return announced_; }
  void unannounce() {
    if (announced_) {
      announced_ = false;
      origin_.unannounce(path_, this);
    }
  }
  // Group `sequence` of every started track, with `frames` frames of a few bytes each.
  void write_group(uint64_t sequence, size_t frames, bool finish) {
    for (auto& [name, feed] : feeds_) {
      model::Track* t = feed.track_;
      if (t == nullptr) {
        continue;
      }
      model::GroupRef g(t->begin_group(sequence));
      if (!g) {
        continue;
      }
      for (size_t i = 0; i < frames; ++i) {
        const std::vector<uint8_t> frame(i % 5, static_cast<uint8_t>('a' + i));
        t->begin_object(*g, frame.size());
        if (!frame.empty()) {
          t->append_chunk(*g, Bytes::copy(std::span<const uint8_t>(frame)));
        }
      }
      if (finish) {
        t->finish_group(*g);
      }
    }
  }

 private:
  model::Origin& origin_;
  std::string path_;
  bool announced_ = true;
  std::map<std::string, Feed> feeds_;
};

// A local subscriber to a track the peer publishes: reads every group to its end.
class Viewer final : public model::TrackListener {
 public:
  ~Viewer() override { unsubscribe(); }
  void subscribe(model::Origin& origin, const std::string& path, const std::string& name) {
    unsubscribe();
    track_ = origin.track(path, name);
    if (track_ != nullptr) {
      next_arrival_ = 0;
      track_->add_listener(this);
      drain();
    }
  }
  void unsubscribe() {
    if (track_ != nullptr) {
      track_->remove_listener(this);
      track_ = nullptr;
    }
    cursors_.clear();
  }
  void on_track_data(model::Track&) override { drain(); }
  void on_track_ended(model::Track&, Error) override {
    drain();
    track_ = nullptr;
  }

 private:
  void drain() {
    if (track_ != nullptr) {
      for (model::GroupRef& g : track_->groups_from(next_arrival_)) {
        next_arrival_ = g->arrival() + 1;
        cursors_.emplace_back(std::move(g));
      }
    }
    for (model::GroupCursor& c : cursors_) {
      for (auto step = c.peek(SIZE_MAX); step.kind != model::GroupCursor::Kind::kNothing;
           step = c.peek(SIZE_MAX)) {
        objects += step.kind == model::GroupCursor::Kind::kObjectStart ? 1 : 0;
        c.advance(step);
      }
    }
    std::erase_if(cursors_, [](const model::GroupCursor& c) { return c.is_done(); });
  }

  model::Track* track_ = nullptr;
  uint64_t next_arrival_ = 0;
  std::vector<model::GroupCursor> cursors_;

 public:
  size_t objects = 0;  // objects the peer published that reached the viewer
};

FakeQuicStream* pick(const std::vector<FakeQuicStream*>& streams, uint8_t k) {
  return streams.empty() ? nullptr : streams[k % streams.size()];
}

std::vector<FakeQuicStream*> local_streams(const FakeQuic& conn) {
  std::vector<FakeQuicStream*> out;
  for (FakeQuicStream* s : conn.all_streams()) {
    if (s->local() && !s->dead()) {
      out.push_back(s);
    }
  }
  return out;
}

// One input: the world above, driven by the records.
class Run {
 public:
  explicit Run(uint8_t config)
      : row_(kDrafts[((config & 3u) | ((config >> 3) & 4u)) % std::size(kDrafts)]),
        conn_(FakeQuic::Limits{100, 100, 1200}),
        origin_(model::OriginConfig{}, clock_, clock_),
        handler_(origin_, conn_) {
    if ((config & 8u) != 0) {
      local_ = std::make_unique<LocalBroadcast>(origin_, "room/alice");
    }
    SessionConfig sc;
    sc.role = Role::kServer;
    if ((config & 0x10u) != 0) {
      // Not max_publisher_rate: going over it closes with INTERNAL_ERROR by design (a relay
      // policy, ietf_session.cc's admit_ingress), which the INTERNAL_ERROR check would flag; at
      // its default of 256 MiB/s no input of this size reaches it.
      sc.limits.max_subscriptions = 2;
      sc.limits.max_announced_paths = 2;
      sc.limits.max_frame_size = 64;
    }
    session_ = std::make_unique<IetfSession>(conn_, sc, origin_, handler_, clock_, clock_,
                                             row_.version);
    session_->start();
    if ((config & 4u) != 0) {
      if (row_.uni_setup) {
        conn_.peer_open(true, from_hex(row_.client_setup), false);
      } else {
        control_ = conn_.peer_open(false, from_hex(row_.client_setup), false);
      }
    }
    settle();
  }
  ~Run() {
    if (!conn_.is_closing()) {
      conn_.peer_close(0);
    }
    settle();
    if (handler_.closed_count != 1) {
      bug("the connection closed but on_session_closed did not come");
    }
    // The closed session left none of its announcements active (the local broadcast may hold
    // room/alice itself).
    for (const std::string& path : handler_.announced) {
      const bool local = local_ != nullptr && local_->is_announced() && path == "room/alice";
      if (origin_.is_active(path) && !local) {
        bug("a closed session's announcement is still active");
      }
    }
    if (std::getenv("IETF_FUZZ_TRACE") != nullptr) {
      std::fprintf(stderr, "ietf_session_fuzzer: %zu peer announcements, %zu objects viewed, %zu of our streams\n",
                   handler_.announced.size(), viewer_.objects,
                   static_cast<size_t>(std::count_if(conn_.all_streams().begin(), conn_.all_streams().end(),
                                                     [](const FakeQuicStream* s) { return s->local(); })));
    }
    viewer_.unsubscribe();
    session_.reset();
    local_.reset();
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  void step(InputCursor& in) {
    const uint8_t op = in.u8();
    apply(op, in);
    if ((op & 0x80u) == 0) {
      settle();
    }
  }

 private:
  void apply(uint8_t op, InputCursor& in) {
    const bool variant = (op & 0x10u) != 0;
    switch (op & 0x0fu) {
      case 0: {
        auto bytes = in.bytes(in.u8());
        if (control_ == nullptr) {
          control_ = conn_.peer_open(false, bytes, false);
        } else {
          conn_.peer_data(*control_, bytes);
        }
        return;
      }
      case 1:
        conn_.peer_open(true, in.bytes(in.u8()), variant);
        return;
      case 2: {
        FakeQuicStream* s = pick(conn_.peer_streams(), in.u8());
        auto bytes = in.bytes(in.u8());
        if (s != nullptr) {
          conn_.peer_data(*s, bytes);
        }
        return;
      }
      case 3:
        if (FakeQuicStream* s = pick(conn_.peer_streams(), in.u8())) {
          conn_.peer_finish(*s);
        }
        return;
      case 4:
        if (FakeQuicStream* s = pick(conn_.peer_streams(), in.u8())) {
          conn_.peer_reset(*s, in.u8());
        }
        return;
      case 5:
        if (FakeQuicStream* s = pick(local_streams(conn_), in.u8())) {
          conn_.peer_stop_sending(*s, in.u8());
        }
        return;
      case 6:
        clock_.advance(std::chrono::milliseconds(10) * (in.u8() + 1));
        return;
      case 7:
        conn_.flush();
        return;
      case 8:
        subscribe(variant, in.u8());
        return;
      case 9:
        if (local_ != nullptr) {
          local_->write_group(next_group_++, in.u8() % 8, !variant);
        }
        return;
      case 10:
        conn_.peer_open(false, in.bytes(in.u8()), false);
        return;
      case 11:
        conn_.peer_raise_limits(in.u8() % 4, in.u8() % 8);
        return;
      case 12:
        conn_.peer_datagram(in.bytes(in.u8()));
        return;
      case 13:
        if (variant) {
          session_->close(make_error(ErrorCode::kCancel, "fuzz close"));
        } else {
          session_->send_goaway("");
        }
        return;
      case 14:
        conn_.peer_close(in.u8());
        return;
      case 15:
        if (local_ != nullptr) {
          local_->unannounce();
        }
        return;
      default:
        return;
    }
  }

  void subscribe(bool unsubscribe, uint8_t k) {
    if (unsubscribe || handler_.announced.empty()) {
      viewer_.unsubscribe();
      return;
    }
    const std::string& path = handler_.announced[k % handler_.announced.size()];
    viewer_.subscribe(origin_, path, kTrackNames[(k >> 4) % std::size(kTrackNames)]);
  }

  // Delivers every event and runs what the loop's turn would (timers due now, turn-end work).
  void settle() {
    for (int i = 0; i < 64 && (conn_.has_events() || i == 0); ++i) {
      conn_.deliver();
      clock_.advance(Duration::zero());
    }
    check_close_code();
  }

  void check_close_code() {
    if (!conn_.is_closing() || checked_close_) {
      return;
    }
    checked_close_ = true;
    const char* trace = std::getenv("IETF_FUZZ_TRACE");
    if (trace != nullptr) {
      std::fprintf(stderr, "ietf_session_fuzzer: closed with 0x%llx (%s)\n",
                   static_cast<unsigned long long>(conn_.close_code()), conn_.close_reason().c_str());
    }
    if (conn_.closed_by_us() &&
        conn_.close_code() == static_cast<uint64_t>(wire::ietf::TerminationCode::kInternalError)) {
      std::fprintf(stderr, "ietf_session_fuzzer: INTERNAL_ERROR: %s\n",
                   conn_.close_reason().c_str());
      bug("the session closed with INTERNAL_ERROR on peer input");
    }
  }

  const DraftRow& row_;
  ManualClock clock_;
  FakeQuic conn_;
  model::Origin origin_;
  Handler handler_;
  std::unique_ptr<LocalBroadcast> local_;
  Viewer viewer_;
  std::unique_ptr<IetfSession> session_;
  FakeQuicStream* control_ = nullptr;
  uint64_t next_group_ = 0;
  bool checked_close_ = false;
};

}  // namespace
}  // namespace moqd::session

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  moqd::log::set_level(std::getenv("IETF_FUZZ_TRACE") != nullptr ? moqd::log::Level::kDebug
                                                                 : moqd::log::Level::kError);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  moqd::fuzz::InputCursor in(std::span<const uint8_t>(data, size));
  moqd::session::Run run(in.u8());
  for (int ops = 0; !in.empty() && ops < 512; ++ops) {
    run.step(in);
  }
  return 0;
}
