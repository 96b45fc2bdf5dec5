// Stateful fuzzer for the WebTransport server (src/transport/webtransport/server.h, session.h):
// a webtransport::Server on an in-memory QUIC connection (wt_harness.h) whose client is the fuzz
// input, with a ManualClock for its timers, a ServerObserver that accepts or refuses the CONNECT,
// and an application on the accepted session that reads everything and acts from the input.
//
// Input: two config bytes, then records of an op byte (low nibble: the op; 0x10: a variant; 0x80:
// batch with the next op, as one packet would) and its arguments:
//   0-1 open a client stream (flags: uni, one of eight realistic preambles such as Chromium's
//       control stream and CONNECT, extra bytes, FIN)   2-4 bytes on client stream k
//   5 FIN   6 RESET_STREAM   7 STOP_SENDING on a stream we send on   8 a datagram
//   9 clock step   10-11 an application action (open+write, write, finish, reset, stop,
//   release, close with a code, datagram)   12 MAX_STREAMS   13 network drains the send queues
//   14 Server::drain()   15 CONNECTION_CLOSE from the client
// Checks, besides ASan/UBSan: the transport contract in wt_harness.h (no use of a released
// stream or of any stream after on_closed, no receive call on a send-only stream), at most one
// session per connection, the application's on_closed exactly once when the connection closed
// and never a callback after it or after release(), no callback re-entrantly inside a call the
// application made, datagrams within max_datagram_size() accepted, the connection closed once
// its session ended (or none came within session_timeout), and no timer left behind by a
// destroyed Server. A config bit makes the owner destroy the Server while the connection is still
// open; the connection's later events must then reach nothing of it. WT_FUZZ_TRACE=1 prints what
// an input reaches.
#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../tests/testing/chromium_webtransport.h"
#include "base/clock.h"
#include "base/codec.h"
#include "mux_harness.h"
#include "transport/webtransport/h3.h"
#include "transport/webtransport/qpack.h"
#include "transport/webtransport/server.h"
#include "wt_harness.h"

namespace moqd::transport::webtransport {
namespace {

using namespace std::chrono_literals;
using fuzz::FakeQuic;
using fuzz::FakeQuicStream;
using fuzz::InputCursor;
namespace chromium = test::chromium;

// WT_FUZZ_TRACE=1 prints what the server and the application saw, to check what a seed reaches.
__attribute__((format(printf, 1, 2))) void trace(const char* format, ...) {
  static const bool on = std::getenv("WT_FUZZ_TRACE") != nullptr;
  if (on) {
    va_list args;
    va_start(args, format);
    std::vfprintf(stderr, format, args);
    va_end(args);
  }
}

[[noreturn]] void bug(const char* what) {
  std::fprintf(stderr, "wt_server_fuzzer: %s\n", what);
  std::abort();
}

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<uint8_t> headers_frame(const HeaderList& headers) {
  auto section = encode_field_section(headers);
  std::vector<uint8_t> out;
  Writer w(out);
  write_frame(w, kFrameHeaders, section ? *section : std::vector<uint8_t>{});
  return out;
}

HeaderList plain_connect(bool protocols) {
  HeaderList h{{":method", "CONNECT"},
               {":protocol", "webtransport"},
               {":scheme", "https"},
               {":authority", "127.0.0.1:4443"},
               {":path", "/room?jwt=x"}};
  if (protocols) {
    h.push_back({"wt-available-protocols", "\"moq-lite-04\""});
  }
  return h;
}

// The first bytes a client stream may start with, so the fuzzer reaches deep states quickly.
struct Preambles {
  std::vector<uint8_t> uni[8];
  std::vector<uint8_t> bidi[8];

  Preambles() {
    auto chromium_connect =
        cat(from_hex(chromium::kConnectFrameHeader), from_hex(chromium::kConnectFieldSection));
    uni[1] = cat(from_hex(chromium::kControlStreamStart), from_hex(chromium::kSettingsPayload));
    uni[2] = from_hex(chromium::kQpackEncoderStream);
    uni[3] = from_hex("03");
    uni[4] = from_hex(chromium::kUniPreamble);
    uni[5] = from_hex("40 54 04");  // a session that is not ours
    uni[6] = client_control_stream_preamble();
    uni[7] = from_hex("21");  // a reserved stream type
    bidi[1] = chromium_connect;
    bidi[2] = from_hex(chromium::kBidiPreamble);
    bidi[3] = headers_frame(plain_connect(false));
    bidi[4] = from_hex("40 41 04");
    bidi[5] = headers_frame(plain_connect(true));
    bidi[6] = headers_frame(
        {{":method", "GET"}, {":scheme", "https"}, {":authority", "127.0.0.1"}, {":path", "/"}});
    bidi[7] = cat(chromium_connect, close_session_data_frame(42, "bye"));
  }
};

const Preambles& preambles() {
  static const Preambles p;
  return p;
}

// A code for RESET_STREAM or STOP_SENDING from the client: WebTransport-range, HTTP/3, or raw.
uint64_t peer_code(uint8_t c) {
  switch (c % 4) {
    case 0:
      return wt_to_h3_code(c >> 2);
    case 1:
      return 0x100 + (c >> 2) % 16;
    case 2:
      return static_cast<uint64_t>(H3Code::kWtSessionGone);
    default:
      return c >> 2;
  }
}

// The application on the accepted session: reads and consumes everything, echoes on client bidi
// streams when asked, and acts from the input. It keeps every stream entry until the run ends,
// so a callback after release() or on_closed() is seen rather than hidden.
class App final : public SessionVisitor {
 public:
  App(bool echo, bool release_in_callback)
      : echo_(echo), release_in_callback_(release_in_callback) {}

  void attach(Session& session) { session_ = &session; }
  bool attached() const { return session_ != nullptr; }
  int closed_count() const { return closed_count_; }
  // The session is gone (destroyed with its Server): forget it without calls.
  void forget() {
    session_ = nullptr;
    for (auto& [id, e] : streams_) {
      e->dead = true;
      graveyard_.push_back(std::move(e));
    }
    streams_.clear();
  }

  void on_incoming_stream(Stream& s) override {
    Guard g(*this, "on_incoming_stream");
    trace("app: incoming stream %llu\n", static_cast<unsigned long long>(s.id()));
    adopt(s);
  }
  void on_streams_available() override { Guard g(*this, "on_streams_available"); }
  void on_datagram(std::span<const uint8_t> payload) override {
    Guard g(*this, "on_datagram");
    trace("app: datagram of %zu bytes\n", payload.size());
    datagram_bytes_ += payload.size();
  }
  void on_closed(uint64_t code, std::string_view reason) override {
    Guard g(*this, "on_closed");
    trace("app: on_closed %llu %.*s\n", static_cast<unsigned long long>(code),
          static_cast<int>(reason.size()), reason.data());
    forget();
  }

  void act(InputCursor& in) {
    if (session_ == nullptr) {
      return;
    }
    Guard g(*this, "act");
    uint8_t a = in.u8();
    switch (a % 10) {
      case 0:
        return open(true, in);
      case 1:
        return open(false, in);
      case 2:
        return with_stream(in, [&](Entry& e) { write(e, in.u16() % 10000); });
      case 3:
        return with_stream(in, [&](Entry& e) { finish(e); });
      case 4:
        return with_stream(in, [&](Entry& e) { reset(e, in.u8()); });
      case 5:
        return with_stream(in, [&](Entry& e) { stop(e, in.u8()); });
      case 6:
        return with_stream(in, [&](Entry& e) { release(e); });
      case 7:
        return close(in);
      case 8:
        return datagram(in.u16() % 2048);
      default:
        (void)session_->unsent_bytes();
        return with_stream(in, [&](Entry& e) { query(e, in.u8()); });
    }
  }

 private:
  struct Entry final : StreamVisitor {
    App* app = nullptr;
    Stream* stream = nullptr;
    bool local = false;
    bool send_done = false;
    bool stopped = false;
    bool released = false;
    bool dead = false;  // on_closed() came, or the session was destroyed

    bool has_send() const { return !stream->is_uni() || local; }
    bool has_recv() const { return !stream->is_uni() || !local; }
    void check(const char* what) {
      if (released) {
        std::fprintf(stderr, "wt_server_fuzzer: %s\n", what);
        bug("stream callback after release()");
      }
      if (dead) {
        std::fprintf(stderr, "wt_server_fuzzer: %s\n", what);
        bug("stream callback after on_closed()");
      }
    }
    void on_readable() override {
      Guard g(*app, "on_readable");
      check("on_readable");
      app->drain(*this);
    }
    void on_writable() override {
      Guard g(*app, "on_writable");
      check("on_writable");
      app->write(*this, std::min<size_t>(stream->write_capacity(), 512));
    }
    void on_reset(uint64_t) override {
      Guard g(*app, "on_reset");
      check("on_reset");
    }
    void on_stop_sending(uint64_t) override {
      Guard g(*app, "on_stop_sending");
      check("on_stop_sending");
      send_done = true;
    }
  };

  // Marks the application busy; a callback that arrives while it is busy came re-entrantly.
  class Guard {
   public:
    // A MoQ session is gone once its on_closed() returns: no callback may follow.
    Guard(App& app, const char* what) : app_(app) {
      bool closing = std::string_view(what) == "on_closed";
      if (app_.closed_count_ > 0) {
        std::fprintf(stderr, "wt_server_fuzzer: %s\n", what);
        bug(closing ? "on_closed delivered twice" : "callback after on_closed()");
      }
      app_.closed_count_ += closing ? 1 : 0;
      if (app_.busy_) {
        std::fprintf(stderr, "wt_server_fuzzer: %s inside %s\n", what, app_.busy_what_);
        bug("callback re-entrantly inside a call the application made");
      }
      app_.busy_ = true;
      app_.busy_what_ = what;
    }
    ~Guard() { app_.busy_ = false; }

   private:
    App& app_;
  };

  template <class Fn>
  void with_stream(InputCursor& in, Fn fn) {
    uint8_t pick = in.u8();
    if (streams_.empty()) {
      return;
    }
    auto it = streams_.begin();
    std::advance(it, pick % streams_.size());
    fn(*it->second);
  }

  Entry& adopt(Stream& s) {
    auto e = std::make_unique<Entry>();
    e->app = this;
    e->stream = &s;
    e->local = is_server_initiated(s.id());
    s.set_visitor(e.get());
    Entry& ref = *e;
    streams_[s.id()] = std::move(e);
    return ref;
  }

  void open(bool uni, InputCursor& in) {
    uint8_t n = in.u8();
    Stream* s = uni ? session_->open_uni() : session_->open_bidi();
    if (s == nullptr) {
      return;
    }
    Entry& e = adopt(*s);
    write(e, n & 0x7f);
    if (n & 0x80) {
      finish(e);
    }
  }

  void drain(Entry& e) {
    if (!e.has_recv() || e.stopped) {
      return;
    }
    auto p = e.stream->peek();
    trace("app: stream %llu read %zu bytes\n", static_cast<unsigned long long>(e.stream->id()),
          p.size());
    if (echo_ && !e.local && !e.stream->is_uni() && !p.empty() && !e.send_done) {
      e.stream->write(Bytes::copy(p));
    }
    e.stream->consume(p.size());
    if (!e.stream->is_fin_received()) {
      return;
    }
    if (echo_ && e.has_send()) {
      finish(e);
    }
    if (release_in_callback_ && e.stream->is_uni()) {
      release(e);
    }
  }

  void write(Entry& e, size_t n) {
    if (!e.has_send() || e.send_done) {
      return;
    }
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
      v[i] = static_cast<uint8_t>(i);
    }
    e.stream->write(Bytes::from(v));
  }
  void query(Entry& e, uint8_t order) {
    e.stream->set_send_order(order);
    if (e.has_send()) {
      (void)e.stream->write_capacity();
      (void)e.stream->buffered();
    }
    if (e.has_recv()) {
      (void)e.stream->has_peer_fin();
    }
  }
  void finish(Entry& e) {
    if (e.has_send() && !e.send_done) {
      e.send_done = true;
      e.stream->finish();
    }
  }
  void reset(Entry& e, uint64_t code) {
    if (e.has_send() && !e.send_done) {
      e.send_done = true;
      e.stream->reset(code);
    }
  }
  void stop(Entry& e, uint64_t code) {
    if (e.has_recv() && !e.stopped) {
      e.stopped = true;
      e.stream->stop_sending(code);
    }
  }
  void release(Entry& e) {
    auto it = streams_.find(e.stream->id());
    e.stream->release();
    e.released = true;
    graveyard_.push_back(std::move(it->second));
    streams_.erase(it);
  }
  void close(InputCursor& in) {
    uint64_t high = in.u16();
    uint64_t code = (high << 16) | in.u16();
    std::string reason(in.u8() * size_t{5}, 'r');  // up to 1275: past kMaxCloseReason
    session_->close(code, reason);
  }
  void datagram(size_t n) {
    std::vector<uint8_t> d(n, 0xd);
    size_t max = session_->max_datagram_size();
    bool fits = max > 0 && n <= max;  // 0 means no datagrams at all, not room for empty ones
    if (!session_->send_datagram(d) && fits) {
      bug("a datagram within max_datagram_size() was refused");
    }
  }

  const bool echo_;
  const bool release_in_callback_;
  Session* session_ = nullptr;
  bool busy_ = false;
  const char* busy_what_ = "";
  int closed_count_ = 0;
  size_t datagram_bytes_ = 0;
  std::map<StreamId, std::unique_ptr<Entry>> streams_;
  std::vector<std::unique_ptr<Entry>> graveyard_;
};

class Observer final : public ServerObserver {
 public:
  Observer(App& app, bool refuse) : app_(app), refuse_(refuse) {}
  bool accepted() const { return accepted_; }

  std::optional<Refusal> on_connect(const ConnectRequest&) override {
    if (refuse_) {
      return Refusal{403, "fuzz refuses"};
    }
    return std::nullopt;
  }
  void on_refused(int status, const char* reason) override {
    trace("server: refused %d %s\n", status, reason);
  }
  void on_session(Session& session, const ConnectRequest&) override {
    if (accepted_) {
      bug("a second session on one connection");
    }
    accepted_ = true;
    trace("server: session accepted, protocol %s\n", std::string(session.protocol()).c_str());
    session.set_visitor(&app_);
    app_.attach(session);
  }

 private:
  App& app_;
  const bool refuse_;
  bool accepted_ = false;
};

// The loop: events, then timers due now, until quiet.
void run_loop(FakeQuic& quic, ManualClock& clock) {
  for (int i = 0; i < 64; ++i) {
    quic.deliver();
    clock.advance(0ms);
    if (!quic.has_events()) {
      return;
    }
  }
}

FakeQuicStream* pick(const std::vector<FakeQuicStream*>& streams, uint8_t k, bool need_send) {
  std::vector<FakeQuicStream*> fit;
  for (FakeQuicStream* s : streams) {
    if (!s->dead() && (!need_send || s->has_send())) {
      fit.push_back(s);
    }
  }
  return fit.empty() ? nullptr : fit[k % fit.size()];
}

void open_peer_stream(FakeQuic& quic, InputCursor& in) {
  uint8_t f = in.u8();
  bool uni = f & 1;
  std::vector<uint8_t> data = (uni ? preambles().uni : preambles().bidi)[(f >> 1) & 7];
  if (f & 0x20) {
    auto extra = in.bytes(in.u8());
    data.insert(data.end(), extra.begin(), extra.end());
  }
  quic.peer_open(uni, data, f & 0x10);
}

void step(uint8_t op, InputCursor& in, FakeQuic& quic, ManualClock& clock, App& app,
          Server& server) {
  switch (op & 0x0f) {
    case 0:
    case 1:
      return open_peer_stream(quic, in);
    case 2:
    case 3:
    case 4: {
      FakeQuicStream* s = pick(quic.peer_streams(), in.u8(), false);
      size_t len = (op & 0x10) ? in.u16() % 8192 : in.u8();
      auto data = in.bytes(len);
      if (s != nullptr) {
        quic.peer_data(*s, data);
      }
      return;
    }
    case 5:
      if (FakeQuicStream* s = pick(quic.peer_streams(), in.u8(), false)) {
        quic.peer_finish(*s);
      }
      return;
    case 6: {
      FakeQuicStream* s = pick(quic.peer_streams(), in.u8(), false);
      uint64_t code = peer_code(in.u8());
      if (s != nullptr) {
        quic.peer_reset(*s, code);
      }
      return;
    }
    case 7: {
      FakeQuicStream* s = pick(quic.all_streams(), in.u8(), true);
      uint64_t code = peer_code(in.u8());
      if (s != nullptr) {
        quic.peer_stop_sending(*s, code);
      }
      return;
    }
    case 8: {
      auto payload = in.bytes(in.u8());
      std::vector<uint8_t> d;
      if (op & 0x10) {
        d.push_back(0x00);  // quarter stream id 0: the CONNECT on stream 0
      }
      d.insert(d.end(), payload.begin(), payload.end());
      quic.peer_datagram(d);
      return;
    }
    case 9: {
      uint8_t v = in.u8();
      clock.advance(v < 128 ? std::chrono::milliseconds(v)
                            : std::chrono::milliseconds(250 * (v - 127)));
      return;
    }
    case 10:
    case 11:
      return app.act(in);
    case 12: {
      uint8_t n = in.u8();
      quic.peer_raise_limits(n & 0x0f, n >> 4);
      return;
    }
    case 13:
      return quic.flush();
    case 14:
      if (op & 0x10) {
        server.drain();
      }
      return;
    default:
      if (op & 0x10) {
        quic.peer_close(peer_code(in.u8()));
      }
      return;
  }
}

// The owner destroyed the Server while the connection was still open: the connection's later
// events must reach no visitor of the Server's.
void poke_after_destroy(FakeQuic& quic, ManualClock& clock) {
  const uint8_t one = 0x41;
  for (FakeQuicStream* s : quic.all_streams()) {
    quic.peer_data(*s, std::span<const uint8_t>(&one, 1));
    quic.peer_stop_sending(*s, 0x100);
  }
  quic.flush();
  quic.peer_raise_limits(1, 1);
  quic.peer_datagram(std::span<const uint8_t>(&one, 1));
  quic.deliver();
  quic.peer_close(0);
  quic.deliver();
  clock.advance(1h);
}

// The two config bytes (see the header comment): stream and datagram limits, server config, and
// the behaviour of the observer and the application.
struct Setup {
  FakeQuic::Limits limits;
  ServerConfig config;
  bool refuse = false;
  bool echo = false;
  bool release_in_callback = false;
  bool destroy_while_open = false;  // the owner destroys the Server before the connection ends

  Setup(uint8_t c0, uint8_t c1) {
    static constexpr uint64_t kStreamLimits[4] = {3, 1, 0, 100};
    static constexpr size_t kDatagramMax[4] = {1200, 0, 3, 65527};
    limits.local_uni = kStreamLimits[(c0 >> 1) & 3];
    limits.local_bidi = kStreamLimits[(c0 >> 3) & 3];
    limits.max_datagram = kDatagramMax[c1 & 3];
    config.protocols = (c1 & 4) ? std::vector<std::string>{"moqt-15"}
                                : std::vector<std::string>{"moq-lite-04", "moq-lite-03", "moql"};
    config.max_buffered_streams = (c1 & 0x10) ? 2 : 16;
    config.max_field_section_size = (c1 & 0x20) ? 64 : 16 << 10;
    refuse = c0 & 1;
    echo = c0 & 0x20;
    release_in_callback = c1 & 8;
    destroy_while_open = c0 & 0x80;
  }
};

void destroy(std::unique_ptr<Server>& server, App& app, ManualClock& clock) {
  app.forget();
  server.reset();
  if (clock.pending_timers() != 0) {
    bug("a destroyed Server left a timer behind");
  }
}

// The connection ends (the Server's own close, or the client's), then the owner destroys it.
void end_closed(const Setup& setup, FakeQuic& quic, ManualClock& clock, App& app,
                const Observer& observer) {
  // server.h: a connection without a session is closed after session_timeout, and one whose
  // session ended after close_linger at the latest.
  clock.advance(setup.config.session_timeout + setup.config.close_linger + 1s);
  run_loop(quic, clock);
  if ((!observer.accepted() || app.closed_count() > 0) && !quic.is_closing()) {
    bug("the connection outlived its session");
  }
  quic.peer_close(0x100);
  run_loop(quic, clock);
  clock.advance(1min);
  run_loop(quic, clock);
  for (const FakeQuicStream* s : quic.all_streams()) {
    trace("quic: stream %llu: we wrote %zu bytes\n", static_cast<unsigned long long>(s->raw_id()),
          s->written());
  }
  trace("quic: %zu datagrams sent\n", quic.datagrams_sent());
  if (observer.accepted() && app.closed_count() != 1) {
    bug("the connection closed but the session's on_closed did not come exactly once");
  }
}

void run(InputCursor& in) {
  uint8_t c0 = in.u8();
  Setup setup(c0, in.u8());
  ManualClock clock;
  FakeQuic quic(setup.limits);
  App app(setup.echo, setup.release_in_callback);
  Observer observer(app, setup.refuse);
  auto server = std::make_unique<Server>(quic, clock, observer, setup.config);
  run_loop(quic, clock);
  while (!in.empty() && !quic.closed_delivered()) {
    uint8_t op = in.u8();
    step(op, in, quic, clock, app, *server);
    if ((op & 0x80) == 0) {
      run_loop(quic, clock);
    }
    if ((server->session() != nullptr) != observer.accepted()) {
      bug("Server::session() disagrees with on_session");
    }
  }
  run_loop(quic, clock);
  if (setup.destroy_while_open && !quic.is_closing()) {
    destroy(server, app, clock);
    poke_after_destroy(quic, clock);
    return;
  }
  end_closed(setup, quic, clock, app, observer);
  destroy(server, app, clock);
}

}  // namespace
}  // namespace moqd::transport::webtransport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moqd::fuzz::InputCursor in(std::span<const uint8_t>(data, size));
  moqd::transport::webtransport::run(in);
  return 0;
}
