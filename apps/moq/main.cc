// moq: a command-line MoQ client over QUIC, WebTransport or WebSocket, sharing moqd's session code.
//   moq pub URL PATH --track NAME      frames from stdin (a line each, or --length-prefixed)
//   moq sub URL PATH --track NAME      frames to stdout (a line each, or --length-prefixed)
//   moq announced URL PREFIX           "active PATH" / "ended PATH" lines
//   moq clock pub|sub URL PATH         a group per minute, a frame per second
// Transport: ws:// and wss:// URLs use WebSocket; http:// and https:// URLs use kHttpTransport
// unless --transport ws|quic|webtransport (alias wt) says otherwise. Over QUIC and WebTransport,
// https:// verifies the certificate (system store, --tls-ca, --tls-fingerprint, or
// --tls-insecure) and http:// pins the hash the relay serves at /certificate.sha256, as the JS
// client does.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cstdio>
#include <ctime>
#include <thread>

#include "base/log.h"
#include "bench_churn.h"
#include "bench_fanout.h"
#include "bench_limits.h"
#include "bench_msgs.h"
#include "client/connection.h"
#include "client/local_broadcast.h"
#include "client/quic_connection.h"
#include "model/path.h"
#include "token.h"
#include "runtime/event_loop.h"

namespace {

using namespace moqd;

struct Common {
  std::string url;
  std::string path;
  std::string track = "";
  std::string framing;  // "", "qmux-00", "qmux-01", "qmux-02" or "webtransport"
  bool length_prefixed = false;
  uint64_t group_every = 1;
  uint64_t max_frames = 0;
  std::string timeout = "0";
  std::string transport;  // "", "ws", "quic", "webtransport" or "wt"
  std::string versions;   // --versions: comma-separated names; empty means all
  client::TlsOptions tls;
  // sub: more relays carrying the same broadcast (--fallback), tried in turn when one is lost.
  std::vector<std::string> fallback;
};

// With --fallback, a relay that vanished must be noticed soon: QUIC pings after this long
// without sending and gives up after kFailoverIdle of silence (the default idle timeout is 30 s).
constexpr Duration kFailoverKeepAlive = std::chrono::milliseconds(500);
constexpr Duration kFailoverIdle = std::chrono::seconds(3);
// Connect attempts in a row that reach no relay (over all URLs) before `moq sub` gives up.
constexpr int kFailoverRounds = 5;

// The transport for http:// and https:// URLs when --transport is not given.
constexpr client::TransportKind kHttpTransport = client::TransportKind::kQuic;

// "moq-lite-02,moq-lite-04" as a set; nullopt when a name is unknown.
std::optional<wire::VersionSet> parse_versions(const std::string& list) {
  wire::VersionSet set = wire::VersionSet::none();
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = std::min(list.find(',', start), list.size());
    auto v = wire::version_from_name(std::string_view(list).substr(start, comma - start));
    if (!v) {
      return std::nullopt;
    }
    set.add(*v);
    start = comma + 1;
  }
  return set;
}

client::TransportKind transport_for(const client::Url& url, const std::string& flag) {
  if (flag == "ws") {
    return client::TransportKind::kWebSocket;
  }
  if (flag == "quic") {
    return client::TransportKind::kQuic;
  }
  if (flag == "webtransport" || flag == "wt") {
    return client::TransportKind::kWebTransport;
  }
  if (url.scheme == "ws" || url.scheme == "wss") {
    return client::TransportKind::kWebSocket;
  }
  return kHttpTransport;
}

int die(const char* what, const Error& e) {
  fprintf(stderr, "moq: %s: %s (%s)\n", what, e.detail, error_code_name(e.code));
  return 1;
}

client::ConnectionOptions options_for(const Common& c, std::optional<std::string> discover) {
  client::ConnectionOptions o;
  auto url = client::parse_url(c.url);
  if (url) {
    o.url = *url;
    o.transport = transport_for(*url, c.transport);
  }
  o.tls = c.tls;
  if (!c.versions.empty()) {
    o.versions = parse_versions(c.versions).value_or(wire::VersionSet::all());
  }
  if (!c.framing.empty()) {
    o.framing = c.framing;
  }
  o.discover_prefix = std::move(discover);
  if (!c.fallback.empty()) {
    o.quic.keep_alive = kFailoverKeepAlive;
    o.quic.idle_timeout = kFailoverIdle;
  }
  return o;
}

bool write_all(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, data, n);
    if (w <= 0) {
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

void write_frame(const Common& c, std::span<const uint8_t> frame) {
  if (c.length_prefixed) {
    uint8_t len[4] = {uint8_t(frame.size() >> 24), uint8_t(frame.size() >> 16),
                      uint8_t(frame.size() >> 8), uint8_t(frame.size())};
    write_all(1, len, 4);
    write_all(1, frame.data(), frame.size());
  } else {
    std::vector<uint8_t> line(frame.begin(), frame.end());
    line.push_back('\n');
    write_all(1, line.data(), line.size());
  }
}

// Reads stdin on a thread of its own (stdin may be a file, which epoll cannot watch) and hands
// each frame to the loop.
void read_stdin_frames(runtime::EventLoop& loop, bool length_prefixed,
                       std::function<void(std::vector<uint8_t>)> on_frame, std::function<void()> on_eof) {
  std::thread([&loop, length_prefixed, on_frame, on_eof] {
    std::vector<uint8_t> buf;
    uint8_t chunk[65536];
    for (;;) {
      ssize_t n = ::read(0, chunk, sizeof chunk);
      if (n <= 0) {
        break;
      }
      buf.insert(buf.end(), chunk, chunk + n);
      size_t off = 0;
      for (;;) {
        if (length_prefixed) {
          if (buf.size() - off < 4) {
            break;
          }
          size_t len = (size_t(buf[off]) << 24) | (size_t(buf[off + 1]) << 16) |
                       (size_t(buf[off + 2]) << 8) | buf[off + 3];
          if (buf.size() - off - 4 < len) {
            break;
          }
          std::vector<uint8_t> f(buf.begin() + off + 4, buf.begin() + off + 4 + len);
          off += 4 + len;
          loop.inject([on_frame, f = std::move(f)]() mutable { on_frame(std::move(f)); });
        } else {
          auto nl = std::find(buf.begin() + off, buf.end(), '\n');
          if (nl == buf.end()) {
            break;
          }
          std::vector<uint8_t> f(buf.begin() + off, nl);
          off = (nl - buf.begin()) + 1;
          loop.inject([on_frame, f = std::move(f)]() mutable { on_frame(std::move(f)); });
        }
      }
      buf.erase(buf.begin(), buf.begin() + off);
    }
    if (!length_prefixed && !buf.empty()) {
      loop.inject([on_frame, f = buf]() mutable { on_frame(std::move(f)); });
    }
    loop.inject(on_eof);
  }).detach();
}

// Publishes frames into a local track that the relay subscribes to through the session.
class Publisher {
 public:
  Publisher(model::Origin& origin, const Common& c, const std::string& prefix)
      : origin_(origin), c_(c) {
    path_ = model::join_path(prefix, model::normalize_path(c.path));
    origin.announce(path_, &broadcast_);
    track_ = origin.track(path_, c.track);
    track_->add_listener(&holder_);
  }
  ~Publisher() {
    if (track_ != nullptr && !holder_.ended) {
      track_->remove_listener(&holder_);
    }
    origin_.unannounce(path_, &broadcast_);
  }
  void frame(std::span<const uint8_t> data) {
    if (group_ == nullptr) {
      group_ = track_->begin_group(next_group_++);
      in_group_ = 0;
    }
    track_->begin_object(*group_, data.size());
    if (!data.empty()) {
      track_->append_chunk(*group_, Bytes::copy(data));
    }
    if (++in_group_ >= c_.group_every) {
      end_group();
    }
  }
  void end_group() {
    if (group_ != nullptr) {
      track_->finish_group(*group_);
      group_ = nullptr;
    }
  }
  // Ends the track: subscribers get every group, then the end.
  void finish() {
    end_group();
    if (!holder_.ended) {
      track_->end(make_error(ErrorCode::kClosed, "publisher done"));
    }
  }
  uint64_t groups() const { return next_group_; }

 private:
  model::Origin& origin_;
  const Common& c_;
  std::string path_;
  client::LocalBroadcast broadcast_;
  client::TrackHolder holder_;
  model::Track* track_ = nullptr;
  model::Group* group_ = nullptr;
  uint64_t next_group_ = 0;
  uint64_t in_group_ = 0;
};

Duration parse_seconds(const std::string& s) {
  return Duration(static_cast<int64_t>(std::stod(s) * 1e6));
}

// --timeout ran out before the session was set up (for QUIC: no handshake answer yet).
const Error kNeverReady{ErrorCode::kTimeout, "no session with the relay before the timeout"};

// How long close_link() waits for the transport to finish closing.
constexpr Duration kCloseWait = std::chrono::seconds(2);

// Closes the link and runs the loop until the relay has seen a clean close (the WebSocket close
// handshake, QUIC's CONNECTION_CLOSE on the wire) or kCloseWait passes: exiting earlier shows the
// relay an abnormal end (WebSocket 1006).
void close_link(runtime::EventLoop& loop, client::Link& conn) {
  conn.close();
  loop.run_until([&] { return conn.is_closed() && conn.is_transport_closed(); }, kCloseWait);
}

// Runs the loop until `done` or the connection closes; false on a failed connection.
int run_until_done(runtime::EventLoop& loop, client::Link& conn, const std::function<bool()>& done) {
  while (!done() && !conn.is_closed()) {
    loop.run_once(std::chrono::milliseconds(100));
  }
  return 0;
}

int cmd_pub(const Common& c, bool clock) {
  // The stdin reader thread (read_stdin_frames) is detached and may still be blocked in read(),
  // or about to inject, when this returns after a failed session: the loop it injects into must
  // live until the process exits, so it is never destroyed (TSan saw ~Waker close the eventfd
  // while the reader wrote it). A global holds it, so LeakSanitizer sees it reachable.
  static runtime::EventLoop* const pub_loop = new runtime::EventLoop();
  runtime::EventLoop& loop = *pub_loop;
  model::Origin origin(model::OriginConfig{}, loop, loop);
  // --fallback: the relays in turn, starting with the URL. The broadcast lives in this process's
  // origin, so a new link to the next relay announces it again and serves its track from the
  // same Track: group sequences continue, the newest group comes from the cache.
  std::vector<std::string> urls{c.url};
  urls.insert(urls.end(), c.fallback.begin(), c.fallback.end());
  size_t url_index = 0;
  auto link_to = [&](const std::string& url) {
    Common at = c;
    at.url = url;
    return client::make_link(loop, origin, options_for(at, std::nullopt));
  };
  client::LinkPtr link = link_to(c.url);
  if (auto st = link->connect(); !st) {
    return die("connect", st.error());
  }
  Publisher pub(origin, c, link->path_prefix());
  bool eof = false;
  std::function<void()> tick;  // outlives the loop below, which runs its timers
  if (clock) {
    tick = [&] {
      time_t now = time(nullptr);
      struct tm tm;
      gmtime_r(&now, &tm);
      char text[64];
      strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &tm);
      if (tm.tm_sec == 0) {
        pub.end_group();  // a group per minute
      }
      pub.frame(std::span<const uint8_t>(reinterpret_cast<uint8_t*>(text), strlen(text)));
      loop.schedule(std::chrono::seconds(1), tick);
    };
    loop.schedule(Duration::zero(), tick);
  } else {
    read_stdin_frames(loop, c.length_prefixed,
                      [&](std::vector<uint8_t> f) { pub.frame(f); },
                      [&] { eof = true; pub.finish(); });
  }
  // After EOF, wait until every subscription has been served (or the linger runs out).
  Instant eof_at{};
  bool linger_started = false;
  bool was_ready = false;
  int failed_attempts = 0;
  Duration linger = parse_seconds(c.timeout == "0" ? "5" : c.timeout);
  auto done = [&] {
    was_ready = was_ready || link->is_ready();
    if (!eof) {
      return false;
    }
    if (!linger_started) {
      linger_started = true;
      eof_at = loop.now();
    }
    // Served: the session came up, no subscription is left, and what it was sent has arrived
    // (over QUIC: acknowledged, so no retransmission is owed).
    session::MoqSession* s = link->session();
    bool served = link->is_ready() && s != nullptr && s->subscription_count() == 0 &&
                  link->is_flushed();
    return served || loop.now() - eof_at > linger;
  };
  bool connect_failed = false;
  for (;;) {
    bool lost = true;
    if (!connect_failed) {
      run_until_done(loop, *link, done);
      lost = link->is_closed();
    }
    connect_failed = false;
    if (!lost || eof || urls.size() < 2) {
      break;
    }
    // The relay is lost while frames still come: continue at the next one.
    if (was_ready) {
      failed_attempts = 0;
      was_ready = false;
    }
    if (failed_attempts >= kFailoverRounds * static_cast<int>(urls.size())) {
      break;
    }
    ++failed_attempts;
    url_index = (url_index + 1) % urls.size();
    fprintf(stderr, "moq: lost the relay; failing over to %s\n", urls[url_index].c_str());
    close_link(loop, *link);
    link.reset();
    loop.run_until([] { return false; }, std::chrono::milliseconds(200));  // a pause between tries
    link = link_to(urls[url_index]);
    if (auto st = link->connect(); !st) {
      fprintf(stderr, "moq: connect to %s: %s\n", urls[url_index].c_str(), st.error().detail);
      connect_failed = true;
    }
  }
  client::Link& conn = *link;
  bool failed = conn.is_closed() && (!eof || !conn.is_ready());
  bool never_ready = !conn.is_ready() && !conn.is_closed();
  close_link(loop, conn);
  if (never_ready) {
    return die("connection", kNeverReady);
  }
  return failed ? die("connection", conn.close_reason()) : 0;
}

// Connects for watching c.path (discovery under it); returns the link, or null after printing
// why, and the full path to watch.
std::pair<client::LinkPtr, std::string> connect_under(runtime::EventLoop& loop, model::Origin& origin,
                                                      const Common& c) {
  client::ConnectionOptions options = options_for(c, std::nullopt);
  std::string path = model::join_path(client::path_prefix_for(options), model::normalize_path(c.path));
  options.discover_prefix = path;
  client::LinkPtr link = client::make_link(loop, origin, std::move(options));
  if (auto st = link->connect(); !st) {
    die("connect", st.error());
    return {nullptr, path};
  }
  return {std::move(link), path};
}

// One connection of `moq sub`: its own origin, link and reader. A GOAWAY from the relay starts a
// second leg to the URL it names; the first is closed once the second delivers.
struct SubLeg {
  explicit SubLeg(runtime::EventLoop& loop) : origin(model::OriginConfig{}, loop, loop) {}
  struct Watch final : model::AnnounceListener {
    std::function<void(const std::string&, bool)> fn;
    void on_announce(const std::string& p, bool active, const model::Hops&) override { fn(p, active); }
  };
  model::Origin origin;
  client::LinkPtr link;
  std::string path;
  std::unique_ptr<client::FrameReader> reader;
  Watch watch;
  bool ended = false;
  bool delivered = false;
  Error end_reason{ErrorCode::kClosed, ""};
  ~SubLeg() {
    origin.remove_listener(&watch);
    reader.reset();
  }
};

int cmd_sub(const Common& c) {
  runtime::EventLoop loop;
  uint64_t frames = 0;
  // Where output stands: a leg that joins after a GOAWAY skips what was already written.
  std::optional<std::pair<uint64_t, uint64_t>> last;
  std::unique_ptr<SubLeg> leg, next;
  std::function<std::unique_ptr<SubLeg>(const std::string&)> start_leg;
  start_leg = [&](const std::string& url) -> std::unique_ptr<SubLeg> {
    Common lc = c;
    lc.url = url;
    auto l = std::make_unique<SubLeg>(loop);
    auto connected = connect_under(loop, l->origin, lc);
    if (!connected.first) {
      return nullptr;
    }
    l->link = std::move(connected.first);
    l->path = connected.second;
    SubLeg* raw = l.get();
    l->link->on_goaway_fn = [&, raw, url](const std::string& uri) {
      if (next || raw != leg.get()) {
        return;
      }
      std::string target = uri.empty() ? url : uri;
      fprintf(stderr, "moq: relay sent GOAWAY; moving to %s\n", target.c_str());
      loop.defer([&, target] { next = start_leg(target); });
    };
    l->watch.fn = [&, raw](const std::string& p, bool active) {
      if (p != raw->path || !active || raw->reader) {
        return;
      }
      loop.defer([&, raw] {
        model::Track* t = raw->origin.track(raw->path, c.track);
        if (t == nullptr || raw->reader) {
          return;
        }
        raw->reader = std::make_unique<client::FrameReader>(
            *t, loop, loop, std::chrono::milliseconds(500),
            [&, raw](uint64_t group, uint64_t index, std::span<const uint8_t> f, uint64_t) {
              raw->delivered = true;
              if (last && (group < last->first || (group == last->first && index <= last->second))) {
                return;  // already written through the previous relay
              }
              last = std::make_pair(group, index);
              write_frame(c, f);
              ++frames;
            },
            [raw](Error e) {
              raw->ended = true;
              raw->end_reason = e;
            });
      });
    };
    l->origin.add_listener(l->path, &l->watch);
    return l;
  };
  leg = start_leg(c.url);
  if (!leg) {
    return 1;
  }
  Duration timeout = parse_seconds(c.timeout);
  Instant start = loop.now();
  auto done = [&] {
    return (c.max_frames > 0 && frames >= c.max_frames) ||
           (timeout > Duration::zero() && loop.now() - start > timeout);
  };
  // --fallback: the relays in turn, starting with the URL; each leg has its own session, origin
  // and reader, and the loop sleeps in the event loop between checks (nothing spins).
  std::vector<std::string> urls{c.url};
  urls.insert(urls.end(), c.fallback.begin(), c.fallback.end());
  size_t url_index = 0;
  int failed_attempts = 0;
  Instant retry_at{};
  for (;;) {
    if (!next && urls.size() > 1 && leg->link->is_closed() && !done()) {
      if (leg->delivered) {
        failed_attempts = 0;
        leg->delivered = false;  // counted once
      }
      if (failed_attempts >= kFailoverRounds * static_cast<int>(urls.size())) {
        break;
      }
      if (loop.now() >= retry_at) {
        url_index = (url_index + 1) % urls.size();
        fprintf(stderr, "moq: lost the relay; failing over to %s\n", urls[url_index].c_str());
        ++failed_attempts;
        next = start_leg(urls[url_index]);
        retry_at = loop.now() + std::chrono::milliseconds(200);
      }
      if (!next) {
        loop.run_once(std::chrono::milliseconds(100));
        continue;
      }
    }
    if (next && (next->delivered || leg->link->is_closed())) {
      // The new relay delivers (or the old one is gone): retire the old leg.
      std::unique_ptr<SubLeg> old = std::move(leg);
      leg = std::move(next);
      old->origin.remove_listener(&old->watch);
      old->reader.reset();
      close_link(loop, *old->link);
    }
    if (done() || (!next && (leg->ended || leg->link->is_closed()))) {
      break;
    }
    loop.run_once(std::chrono::milliseconds(100));
  }
  client::Link& conn = *leg->link;
  bool reached = c.max_frames > 0 && frames >= c.max_frames;
  // The relay closing the session with an error (say, unauthorized when the token expires) is a
  // failure even though it also ended the track.
  bool relay_error = conn.is_closed() && conn.close_reason().code != ErrorCode::kCancel;
  bool failed = conn.is_closed() && !reached && (!leg->ended || relay_error);
  bool never_ready = !conn.is_ready() && !conn.is_closed();
  if (next) {
    close_link(loop, *next->link);
  }
  leg->origin.remove_listener(&leg->watch);
  leg->reader.reset();
  close_link(loop, conn);
  if (never_ready) {
    return die("connection", kNeverReady);
  }
  if (failed) {
    return die("connection", conn.close_reason());
  }
  return 0;
}

int cmd_announced(const Common& c) {
  runtime::EventLoop loop;
  model::Origin origin(model::OriginConfig{}, loop, loop);
  auto connected = connect_under(loop, origin, c);
  if (!connected.first) {
    return 1;
  }
  client::LinkPtr link = std::move(connected.first);
  const std::string prefix = connected.second;
  client::Link& conn = *link;
  // Paths print relative to the URL's path whatever the transport.
  struct Print final : model::AnnounceListener {
    void on_announce(const std::string& p, bool active, const model::Hops&) override {
      auto rest = model::strip_prefix(url_prefix, p);
      std::string shown(rest ? *rest : std::string_view(p));
      printf("%s %s\n", active ? "active" : "ended", shown.c_str());
      fflush(stdout);
    }
    std::string url_prefix;
  } print;
  print.url_prefix = conn.path_prefix();
  origin.add_listener(prefix, &print);
  Duration timeout = parse_seconds(c.timeout);
  Instant start = loop.now();
  run_until_done(loop, conn, [&] { return timeout > Duration::zero() && loop.now() - start > timeout; });
  origin.remove_listener(&print);
  bool failed = conn.is_closed();
  bool never_ready = !conn.is_ready() && !failed;
  close_link(loop, conn);
  if (never_ready) {
    return die("connection", kNeverReady);
  }
  return failed ? die("connection", conn.close_reason()) : 0;
}

void add_tls_flags(CLI::App* cmd, client::TlsOptions& tls) {
  cmd->add_option("--tls-ca", tls.ca_file,
                  "QUIC and WebTransport: trust only the CAs in this PEM file")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-fingerprint", tls.fingerprint,
                  "QUIC and WebTransport: accept only the certificate with this SHA-256 (hex, as "
                  "/certificate.sha256)");
  cmd->add_flag("--tls-insecure", tls.insecure,
                "QUIC and WebTransport: accept any certificate (testing only)");
}

void add_transport_flags(CLI::App* cmd, Common& c) {
  cmd->add_option("--framing", c.framing,
                  "force the WebSocket framing: qmux-02, qmux-01, qmux-00 or webtransport");
  cmd->add_option("--transport", c.transport,
                  "quic, webtransport (alias wt: WebTransport over HTTP/3, the URL path in the "
                  "CONNECT) or ws (default: quic for http:// and https:// URLs, ws for ws:// and "
                  "wss://)")
      ->check(CLI::IsMember({"ws", "quic", "webtransport", "wt"}));
  cmd->add_option("--versions", c.versions,
                  "MoQ versions to offer, comma-separated (e.g. moq-lite-02,moq-lite-04; default all)")
      ->check([](const std::string& list) -> std::string {
        return parse_versions(list) ? "" : "unknown version name in --versions";
      });
  add_tls_flags(cmd, c.tls);
}

void add_common(CLI::App* cmd, Common& c, bool with_track) {
  cmd->add_option("URL", c.url, "relay URL, e.g. http://127.0.0.1:4443/room")->required();
  cmd->add_option("PATH", c.path, "broadcast path (relative to the URL's path)")->required();
  if (with_track) {
    cmd->add_option("--track", c.track, "track name")->required();
  }
  add_transport_flags(cmd, c);
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  log::set_level(log::Level::kWarn);
  CLI::App app{"moq: Media over QUIC client (moq-lite over QUIC, WebTransport or WebSocket)"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log protocol events to stderr");
  Common c;
  auto* pub = app.add_subcommand("pub", "publish frames read from stdin");
  add_common(pub, c, true);
  pub->add_flag("--length-prefixed", c.length_prefixed, "stdin frames are 4-byte big-endian length + bytes");
  pub->add_option("--group-every", c.group_every, "frames per group (default 1)");
  pub->add_option("--linger", c.timeout, "seconds to keep serving subscribers after stdin ends (default 5)");
  pub->add_option("--fallback", c.fallback,
                  "another relay URL (repeatable): when the relay is lost, publish there, the "
                  "group sequence continuing (gives up after 5 rounds of failed connects)");
  auto* sub = app.add_subcommand("sub", "subscribe and write frames to stdout");
  add_common(sub, c, true);
  sub->add_flag("--length-prefixed", c.length_prefixed, "write 4-byte big-endian length + bytes per frame");
  sub->add_option("--frames", c.max_frames, "exit after this many frames");
  sub->add_option("--timeout", c.timeout, "exit after this many seconds (default: never)");
  sub->add_option("--fallback", c.fallback,
                  "another relay URL with the same broadcast (repeatable): when the relay is lost, "
                  "continue there, without repeating frames already written");
  auto* announced = app.add_subcommand("announced", "print broadcasts announced under a prefix");
  announced->add_option("URL", c.url, "relay URL")->required();
  announced->add_option("PREFIX", c.path, "path prefix")->required();
  add_transport_flags(announced, c);
  announced->add_option("--timeout", c.timeout, "exit after this many seconds (default: never)");
  auto* clock = app.add_subcommand("clock", "publish or print a clock (a group a minute, a frame a second)");
  std::string mode;
  clock->add_option("MODE", mode, "pub or sub")->required()->check(CLI::IsMember({"pub", "sub"}));
  clock->add_option("URL", c.url, "relay URL")->required();
  clock->add_option("PATH", c.path, "broadcast path")->required();
  clock->add_option("--track", c.track, "track name (default seconds)");
  clock->add_option("--timeout", c.timeout, "sub: exit after this many seconds");
  add_transport_flags(clock, c);
  auto* bench_cmd = app.add_subcommand(
      "bench", "measure a relay: limits (this machine's crypto + UDP), fanout (one track to N viewers), msgs, churn");
  bench_cmd->require_subcommand(1);
  int bench_rc = 0;
  bench::add_limits_command(*bench_cmd, &bench_rc);
  bench::add_fanout_command(*bench_cmd, &bench_rc);
  bench::add_msgs_command(*bench_cmd, &bench_rc);
  bench::add_churn_command(*bench_cmd, &bench_rc);
  int token_rc = 0;
  cli::add_token_command(app, &token_rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (verbose) {
    log::set_level(log::Level::kDebug);
  }
  if (bench_cmd->parsed()) {
    log::flush();
    return bench_rc;  // its subcommand ran in its callback
  }
  if (app.got_subcommand("token")) {
    return token_rc;  // ran in its callback
  }
  if (auto u = client::parse_url(c.url); !u) {
    return die("URL", u.error());
  }
  int rc = 0;
  if (pub->parsed()) {
    rc = cmd_pub(c, false);
  } else if (sub->parsed()) {
    rc = cmd_sub(c);
  } else if (announced->parsed()) {
    rc = cmd_announced(c);
  } else if (clock->parsed()) {
    if (c.track.empty()) {
      c.track = "seconds";
    }
    rc = mode == "pub" ? cmd_pub(c, true) : cmd_sub(c);
  }
  log::flush();
  return rc;
}
