#include "transport/webtransport/server.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "base/codec.h"
#include "testing/chromium_webtransport.h"
#include "testing/quic_pair.h"
#include "testing/stream_recorder.h"
#include "transport/quic/connection.h"
#include "transport/webtransport/qpack.h"

namespace moqd::transport::webtransport {
namespace {

using namespace std::chrono_literals;
using quic::Connection;
namespace chromium = test::chromium;

constexpr uint64_t kSessionGone = static_cast<uint64_t>(H3Code::kWtSessionGone);
constexpr uint64_t kBufferedRejected = static_cast<uint64_t>(H3Code::kWtBufferedStreamRejected);

std::vector<uint8_t> cat(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }
std::span<const uint8_t> span_of(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}
std::vector<uint8_t> frame(uint64_t type, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  Writer w(out);
  write_frame(w, type, payload);
  return out;
}
std::vector<uint8_t> chromium_control_stream() {
  return cat(from_hex(chromium::kControlStreamStart), from_hex(chromium::kSettingsPayload));
}
std::vector<uint8_t> chromium_connect() {
  return cat(from_hex(chromium::kConnectFrameHeader), from_hex(chromium::kConnectFieldSection));
}
std::vector<uint8_t> headers_frame(const HeaderList& headers) {
  auto section = encode_field_section(headers);
  EXPECT_TRUE(section);
  return frame(kFrameHeaders, section ? *section : std::vector<uint8_t>{});
}
// A WebTransport CONNECT like Chromium's; `protocols` is the WT-Available-Protocols value.
HeaderList connect_headers(std::optional<std::string> protocols = std::nullopt) {
  HeaderList h{{":method", "CONNECT"},
               {":protocol", "webtransport"},
               {":scheme", "https"},
               {":authority", "127.0.0.1:4443"},
               {":path", "/room"},
               {"sec-webtransport-http3-draft02", "1"}};
  if (protocols) {
    h.push_back({"wt-available-protocols", *protocols});
  }
  return h;
}
void set_field(HeaderList& h, const std::string& name, std::optional<std::string> value) {
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it->name == name) {
      if (value) {
        it->value = *value;
      } else {
        h.erase(it);
      }
      return;
    }
  }
}
std::optional<std::string> field(const HeaderList& h, std::string_view name) {
  for (const auto& f : h) {
    if (f.name == name) {
      return f.value;
    }
  }
  return std::nullopt;
}

using test::SessionRecorder;
using test::StreamRecorder;

struct ObserverRecorder : ServerObserver {
  std::optional<Refusal> on_connect(const ConnectRequest& request) override {
    ++connects;
    last = request;
    return refusal;
  }
  void on_refused(int status, const char* reason) override { refused.emplace_back(status, reason); }
  void on_session(Session& s, const ConnectRequest&) override {
    ++sessions;
    session = &s;
    s.set_visitor(&wt);
  }

  std::optional<Refusal> refusal;
  int connects = 0;
  std::optional<ConnectRequest> last;
  std::vector<std::pair<int, std::string>> refused;
  int sessions = 0;
  Session* session = nullptr;
  SessionRecorder wt;
};

class WtServerTest : public ::testing::Test {
 protected:
  WtServerTest() { config_.protocols = {"moq-lite-04", "moq-lite-03", "moql"}; }

  void start(bool settings = true, Connection::Config client_config = {}) {
    pair_.server_alpns = pair_.client_alpns = {"h3"};
    pair_.server.on_handshake = [this](Connection& c) {
      server_ = std::make_unique<Server>(c, pair_.clock(), observer_, config_);
    };
    pair_.client.on_handshake = [this](Connection& c) { c.set_visitor(&client_); };
    ASSERT_TRUE(pair_.handshake({}, client_config));
    ASSERT_NE(server_, nullptr);
    if (settings) {
      control_ = open(true, chromium_control_stream());
    }
  }

  Connection& conn() { return *pair_.client.conn; }
  // The server closed the connection after the session's end with a transport CONNECTION_CLOSE
  // carrying NO_ERROR. Chromium reads an application close, even H3_NO_ERROR, as a failure, and
  // one that arrives before it reported the session's CLOSE_WEBTRANSPORT_SESSION turns the page's
  // clean close into "Connection lost." (its close is a task it posts after the capsule).
  void expect_closed_without_error() {
    EXPECT_EQ(client_.code, 0u);
    EXPECT_EQ(client_.reason, "WebTransport session closed");
    const ngtcp2_ccerr* received = ngtcp2_conn_get_ccerr(conn().native());
    EXPECT_EQ(received->type, NGTCP2_CCERR_TYPE_TRANSPORT);
    EXPECT_EQ(received->error_code, static_cast<uint64_t>(NGTCP2_NO_ERROR));
  }
  bool run_until(const std::function<bool()>& done, Duration limit = 10s) {
    return pair_.run_until(done, limit);
  }
  void run_for(Duration d) { pair_.clock().advance(d); }

  // A client stream carrying `bytes`, with a recorder for what the server sends on it.
  Stream* open(bool uni, const std::vector<uint8_t>& bytes, bool fin = false) {
    Stream* s = uni ? conn().open_uni() : conn().open_bidi();
    EXPECT_NE(s, nullptr);
    if (s == nullptr) {
      return nullptr;
    }
    opened_.push_back(std::make_unique<StreamRecorder>(s));
    s->set_visitor(opened_.back().get());
    if (!bytes.empty()) {
      s->write(Bytes::from(bytes));
    }
    if (fin) {
      s->finish();
    }
    return s;
  }
  StreamRecorder& rec(Stream* s) {
    for (auto& r : opened_) {
      if (r->stream == s) {
        return *r;
      }
    }
    ADD_FAILURE() << "no recorder";
    return *opened_.front();
  }

  // The response HEADERS on a request stream, once complete; `rest` gets the bytes after it.
  std::optional<HeaderList> response(Stream* s, std::vector<uint8_t>* rest = nullptr) {
    const std::string& data = rec(s).data;
    auto f = parse_frame(span_of(data), 1 << 16);
    if (!f || !*f || (*f)->value.type != kFrameHeaders) {
      return std::nullopt;
    }
    auto dec = QpackDecoder::create();
    auto h = (*dec)->decode((*f)->value.payload, 1 << 16);
    EXPECT_TRUE(h);
    if (rest != nullptr) {
      rest->assign(data.begin() + static_cast<ptrdiff_t>((*f)->consumed), data.end());
    }
    return h ? std::optional<HeaderList>(*h) : std::nullopt;
  }
  std::optional<HeaderList> await_response(Stream* s) {
    EXPECT_TRUE(run_until([&] { return response(s).has_value(); }));
    return response(s);
  }

  // Chromium's SETTINGS and CONNECT; runs until the session is accepted.
  Stream* establish() {
    start();
    if (HasFatalFailure()) {
      return nullptr;
    }
    Stream* c = open(false, chromium_connect());
    EXPECT_TRUE(run_until([&] { return observer_.sessions == 1 && response(c).has_value(); }));
    return c;
  }

  // Refused CONNECT: returns the response status and checks the refusal was reported once.
  std::string refused_status(const HeaderList& headers) {
    Stream* c = open(false, headers_frame(headers));
    auto r = await_response(c);
    EXPECT_TRUE(run_until([&] { return rec(c).fin; }));
    return r ? field(*r, ":status").value_or("none") : "none";
  }

  ObserverRecorder observer_;
  SessionRecorder client_;
  std::vector<std::unique_ptr<StreamRecorder>> opened_;
  ServerConfig config_;
  test::QuicPair pair_;  // after the recorders: its connections report to them when destroyed
  std::unique_ptr<Server> server_;
  Stream* control_ = nullptr;
};

// --- the handshake ---

TEST_F(WtServerTest, ChromiumConnectIsAccepted) {
  start();
  open(true, from_hex(chromium::kQpackEncoderStream));
  Stream* c = open(false, chromium_connect());
  auto r = await_response(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(field(*r, ":status"), "200");
  EXPECT_EQ(field(*r, "wt-protocol"), "\"moq-lite-04\"");
  EXPECT_EQ(field(*r, "sec-webtransport-http3-draft"), "draft02");
  EXPECT_FALSE(rec(c).fin);
  ASSERT_EQ(observer_.sessions, 1);
  Session* s = server_->session();
  ASSERT_EQ(s, observer_.session);
  EXPECT_EQ(s->protocol(), "moq-lite-04");
  EXPECT_EQ(s->path(), "/");
  EXPECT_EQ(s->kind(), "webtransport");
  ASSERT_TRUE(observer_.last);
  EXPECT_EQ(observer_.last->authority, "127.0.0.1:54303");
  EXPECT_EQ(observer_.last->origin, "http://localhost:34017");
  EXPECT_TRUE(observer_.refused.empty());
  EXPECT_TRUE(server_->peer_settings().webtransport);
  EXPECT_TRUE(server_->peer_settings().h3_datagram);
  EXPECT_EQ(server_->peer_settings().qpack_max_table_capacity, 65536u);
}

TEST_F(WtServerTest, ServerControlStreamCarriesWebTransportSettings) {
  start();
  ASSERT_TRUE(run_until([&] { return client_.find(3) && !client_.find(3)->data.empty(); }));
  const std::string& data = client_.find(3)->data;
  ASSERT_EQ(static_cast<uint8_t>(data[0]), kStreamControl);
  auto f = parse_frame(span_of(data).subspan(1), 1024);
  ASSERT_TRUE(f && *f);
  EXPECT_EQ((*f)->value.type, kFrameSettings);
  EXPECT_EQ(1 + (*f)->consumed, data.size());  // nothing but SETTINGS so far
  auto settings = parse_settings((*f)->value.payload);
  ASSERT_TRUE(settings);
  std::map<uint64_t, uint64_t> m;
  for (const auto& s : *settings) {
    m[s.id] = s.value;
  }
  EXPECT_EQ(m.at(kSettingEnableConnectProtocol), 1u);
  EXPECT_EQ(m.at(kSettingH3Datagram), 1u);
  EXPECT_EQ(m.at(kSettingEnableWebTransport), 1u);
  EXPECT_EQ(m.at(kSettingWtMaxSessions), 1u);
  EXPECT_EQ(m.at(kSettingQpackMaxTableCapacity), 0u);
  EXPECT_FALSE(client_.find(3)->fin);  // a critical stream stays open
}

// --- protocol selection ---

TEST_F(WtServerTest, OfferedMoqlSelectsMoql) {
  start();
  Stream* c = open(false, headers_frame(connect_headers("\"moql\"")));
  auto r = await_response(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(field(*r, ":status"), "200");
  EXPECT_EQ(field(*r, "wt-protocol"), "\"moql\"");
  ASSERT_NE(server_->session(), nullptr);
  EXPECT_EQ(server_->session()->protocol(), "moql");
  EXPECT_EQ(server_->session()->path(), "/room");
}

TEST_F(WtServerTest, NoOfferedProtocolIsAcceptedWithoutWtProtocol) {
  start();
  Stream* c = open(false, headers_frame(connect_headers()));
  auto r = await_response(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(field(*r, ":status"), "200");
  EXPECT_EQ(field(*r, "wt-protocol"), std::nullopt);
  ASSERT_NE(server_->session(), nullptr);
  EXPECT_EQ(server_->session()->protocol(), "");
}

TEST_F(WtServerTest, NoCommonProtocolIsRefused400) {
  start();
  EXPECT_EQ(refused_status(connect_headers("\"moqt-15\"")), "400");
  ASSERT_EQ(observer_.refused.size(), 1u);
  EXPECT_EQ(observer_.refused[0].first, 400);
  EXPECT_EQ(observer_.connects, 0);  // refused before the observer is asked
  EXPECT_EQ(observer_.sessions, 0);
  EXPECT_EQ(server_->session(), nullptr);
}

// --- refused CONNECTs ---

struct BadConnect {
  const char* name;
  const char* field;
  std::optional<std::string> value;  // nullopt: removed
  const char* status;
};

TEST_F(WtServerTest, MalformedConnectsAreRefusedWithTheirStatus) {
  start();
  const BadConnect cases[] = {
      {"missing :protocol", ":protocol", std::nullopt, "400"},
      {"websocket", ":protocol", "websocket", "400"},
      {"authority with space", ":authority", "a b", "400"},
      {"authority with userinfo", ":authority", "user@127.0.0.1:4443", "400"},
      {"GET", ":method", "GET", "405"},
  };
  size_t n = 0;
  for (const auto& bad : cases) {
    HeaderList h = connect_headers("\"moq-lite-04\"");
    set_field(h, bad.field, bad.value);
    EXPECT_EQ(refused_status(h), bad.status) << bad.name;
    ++n;
    ASSERT_EQ(observer_.refused.size(), n) << bad.name;
    EXPECT_EQ(std::to_string(observer_.refused.back().first), bad.status) << bad.name;
  }
  EXPECT_EQ(observer_.connects, 0);
  EXPECT_EQ(observer_.sessions, 0);
  EXPECT_EQ(server_->session(), nullptr);
  // The connection survives refusals: a good CONNECT still works.
  Stream* c = open(false, headers_frame(connect_headers("\"moq-lite-04\"")));
  auto r = await_response(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(field(*r, ":status"), "200");
}

TEST_F(WtServerTest, ObserverRefusalAnswersItsStatus) {
  start();
  observer_.refusal = Refusal{403, "unauthorized path"};
  EXPECT_EQ(refused_status(connect_headers("\"moq-lite-04\"")), "403");
  EXPECT_EQ(observer_.connects, 1);
  ASSERT_EQ(observer_.refused.size(), 1u);
  EXPECT_EQ(observer_.refused[0], std::make_pair(403, std::string("unauthorized path")));
  EXPECT_EQ(observer_.sessions, 0);
  EXPECT_EQ(server_->session(), nullptr);
}

TEST_F(WtServerTest, SecondConnectIsRefused429) {
  ASSERT_NE(establish(), nullptr);
  EXPECT_EQ(refused_status(connect_headers("\"moq-lite-04\"")), "429");
  ASSERT_EQ(observer_.refused.size(), 1u);
  EXPECT_EQ(observer_.refused[0].first, 429);
  EXPECT_EQ(observer_.sessions, 1);
  EXPECT_EQ(observer_.wt.closed, 0);  // the first session is untouched
}

// --- WebTransport streams ---

TEST_F(WtServerTest, ClientBidiStreamReachesSessionWithoutPreamble) {
  ASSERT_NE(establish(), nullptr);
  observer_.wt.consume_new = false;
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("hello")));
  ASSERT_TRUE(run_until([&] {
    return observer_.wt.incoming.size() == 1 && observer_.wt.incoming[0]->readable > 0;
  }));
  Stream* s = observer_.wt.incoming[0]->stream;
  EXPECT_EQ(s->id(), b->id());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s->peek().data()), s->peek().size()),
            "hello");
  s->consume(5);
  s->write(Bytes::copy(std::string_view("world")));
  s->finish();
  ASSERT_TRUE(run_until([&] { return rec(b).fin; }));
  EXPECT_EQ(rec(b).data, "world");
}

TEST_F(WtServerTest, ClientUniStreamPayloadArrivesWithFin) {
  ASSERT_NE(establish(), nullptr);
  Stream* u = open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("uni data")), true);
  ASSERT_TRUE(run_until([&] {
    return observer_.wt.incoming.size() == 1 && observer_.wt.incoming[0]->fin;
  }));
  EXPECT_EQ(observer_.wt.incoming[0]->data, "uni data");
  EXPECT_EQ(observer_.wt.incoming[0]->stream->id(), u->id());
}

TEST_F(WtServerTest, ServerOpenedStreamsStartWithTheirPreamble) {
  ASSERT_NE(establish(), nullptr);
  Session* s = server_->session();
  Stream* uni = s->open_uni();
  Stream* bidi = s->open_bidi();
  ASSERT_NE(uni, nullptr);
  ASSERT_NE(bidi, nullptr);
  uni->write(Bytes::copy(std::string_view("u")));
  uni->finish();
  bidi->write(Bytes::copy(std::string_view("b")));
  bidi->finish();
  ASSERT_TRUE(run_until([&] {
    auto* u = client_.find(uni->id());
    auto* b = client_.find(bidi->id());
    return u != nullptr && u->fin && b != nullptr && b->fin;
  }));
  // 0x54 and 0x41 do not fit a 1-byte varint: both signals take 2 bytes, then session id 0.
  EXPECT_EQ(to_hex(span_of(client_.find(uni->id())->data)), "40 54 00 75");
  EXPECT_EQ(to_hex(span_of(client_.find(bidi->id())->data)), "40 41 00 62");
  EXPECT_TRUE(is_uni(uni->id()));
  EXPECT_TRUE(is_server_initiated(uni->id()));
  EXPECT_FALSE(is_uni(bidi->id()));
}

// on_sent() of the raw QUIC stream reaches the WebTransport stream's visitor, once its queue
// (preamble, payload, FIN) has all been sent.
TEST_F(WtServerTest, OnSentReachesTheSessionsStreamVisitor) {
  ASSERT_NE(establish(), nullptr);
  Stream* uni = server_->session()->open_uni();
  ASSERT_NE(uni, nullptr);
  StreamRecorder r(uni);
  uni->set_visitor(&r);
  uni->write(Bytes::copy(std::string(50'000, 'x')));
  uni->finish();
  EXPECT_GT(uni->buffered(), 0u);
  EXPECT_EQ(r.sent, 0);
  ASSERT_TRUE(run_until([&] { return r.sent > 0; }));
  EXPECT_EQ(uni->buffered(), 0u);
  EXPECT_EQ(r.sent_buffered.back(), 0u);
  ASSERT_TRUE(run_until([&] {
    auto* u = client_.find(uni->id());
    return u != nullptr && u->fin;
  }));
  uni->set_visitor(nullptr);
}

TEST_F(WtServerTest, StreamLimitThenStreamsAvailableReachesTheSession) {
  Connection::Config client_config;
  client_config.max_streams_uni = 3;  // our control stream and two WebTransport streams
  start(true, client_config);
  Stream* c = open(false, chromium_connect());
  ASSERT_TRUE(run_until([&] { return observer_.sessions == 1 && response(c).has_value(); }));
  Session* s = server_->session();
  std::vector<Stream*> uni;
  for (int i = 0; i < 2; ++i) {
    uni.push_back(s->open_uni());
    ASSERT_NE(uni.back(), nullptr);
    uni.back()->write(Bytes::copy(std::string_view("z")));
    uni.back()->finish();
  }
  EXPECT_EQ(s->open_uni(), nullptr);
  ASSERT_TRUE(run_until([&] { return observer_.wt.streams_available > 0; }));
  Stream* next = s->open_uni();
  ASSERT_NE(next, nullptr);
  next->finish();
  ASSERT_TRUE(run_until([&] { return client_.find(next->id()) && client_.find(next->id())->fin; }));
  EXPECT_EQ(to_hex(span_of(client_.find(next->id())->data)), "40 54 00");
}

// --- error codes ---

TEST_F(WtServerTest, ServerResetIsMappedIntoTheH3Range) {
  ASSERT_NE(establish(), nullptr);
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 1; }));
  observer_.wt.incoming[0]->stream->reset(7);
  ASSERT_TRUE(run_until([&] { return rec(b).reset.has_value(); }));
  EXPECT_EQ(*rec(b).reset, wt_to_h3_code(7));
}

TEST_F(WtServerTest, ServerStopSendingIsMappedIntoTheH3Range) {
  ASSERT_NE(establish(), nullptr);
  Stream* u = open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 1; }));
  observer_.wt.incoming[0]->stream->stop_sending(11);
  ASSERT_TRUE(run_until([&] { return rec(u).stop.has_value(); }));
  EXPECT_EQ(*rec(u).stop, wt_to_h3_code(11));
}

TEST_F(WtServerTest, ClientResetIsMappedBack) {
  ASSERT_NE(establish(), nullptr);
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("1")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 1; }));
  b->reset(wt_to_h3_code(9));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming[0]->reset.has_value(); }));
  EXPECT_EQ(*observer_.wt.incoming[0]->reset, 9u);
}

// ngtcp2 1.11 reports a peer's STOP_SENDING only once the stream is closed both ways, so the
// client's side of each stream here is finished (a server uni stream, a bidi with FIN).
TEST_F(WtServerTest, ClientStopSendingIsMappedBack) {
  ASSERT_NE(establish(), nullptr);
  Stream* uni = server_->session()->open_uni();
  ASSERT_NE(uni, nullptr);
  StreamRecorder sender(uni);
  uni->set_visitor(&sender);
  uni->write(Bytes::copy(std::string_view("u")));
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("b")), true);
  ASSERT_TRUE(run_until([&] {
    return client_.find(uni->id()) != nullptr && observer_.wt.incoming.size() == 1 &&
           observer_.wt.incoming[0]->fin;
  }));
  client_.find(uni->id())->stream->stop_sending(wt_to_h3_code(0x12345));
  b->stop_sending(wt_to_h3_code(30));
  ASSERT_TRUE(run_until([&] {
    return sender.stop.has_value() && observer_.wt.incoming[0]->stop.has_value();
  }));
  EXPECT_EQ(*sender.stop, 0x12345u);
  EXPECT_EQ(*observer_.wt.incoming[0]->stop, 30u);
}

// --- held and refused streams ---

TEST_F(WtServerTest, StreamBeforeConnectIsHeldThenDelivered) {
  start();
  Stream* u = open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("early")), true);
  run_for(200ms);  // it has arrived, with no session to go to
  EXPECT_EQ(observer_.sessions, 0);
  EXPECT_FALSE(rec(u).stop.has_value());
  open(false, chromium_connect());
  ASSERT_TRUE(run_until([&] {
    return observer_.wt.incoming.size() == 1 && observer_.wt.incoming[0]->fin;
  }));
  EXPECT_EQ(observer_.wt.incoming[0]->data, "early");
  EXPECT_EQ(observer_.wt.incoming[0]->stream->id(), u->id());
}

TEST_F(WtServerTest, StreamsPastTheBufferLimitAreRejected) {
  config_.max_buffered_streams = 2;
  start();
  std::vector<Stream*> early;
  for (int i = 0; i < 3; ++i) {
    early.push_back(open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("e"))));
    run_for(50ms);  // in order
  }
  ASSERT_TRUE(run_until([&] { return rec(early[2]).stop.has_value(); }));
  EXPECT_EQ(*rec(early[2]).stop, kBufferedRejected);
  EXPECT_FALSE(rec(early[0]).stop.has_value());
  EXPECT_FALSE(rec(early[1]).stop.has_value());
  open(false, chromium_connect());
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 2; }));
  run_for(100ms);
  EXPECT_EQ(observer_.wt.incoming.size(), 2u);
  EXPECT_EQ(observer_.wt.incoming[0]->data, "e");
  EXPECT_EQ(observer_.wt.incoming[1]->data, "e");
}

TEST_F(WtServerTest, StreamForAnotherSessionIsRejected) {
  ASSERT_NE(establish(), nullptr);
  Stream* u = open(true, cat(from_hex("40 54 04"), bytes_of("other")));
  ASSERT_TRUE(run_until([&] { return rec(u).stop.has_value(); }));
  EXPECT_EQ(*rec(u).stop, kBufferedRejected);
  EXPECT_TRUE(observer_.wt.incoming.empty());
  EXPECT_EQ(client_.closed, 0);
}

// Streams the server drops are handed back to the transport, so a peer cannot pile them up.
TEST_F(WtServerTest, DroppedStreamsAreReleased) {
  ASSERT_NE(establish(), nullptr);
  run_for(100ms);
  const size_t baseline = pair_.server.conn->stream_count();
  for (int i = 0; i < 10; ++i) {
    open(true, from_hex("21 ff"), true);     // reserved stream type: ignored
    open(true, {}, true);                    // FIN before the stream type
    open(true, from_hex("40 54"), true);     // FIN before the session id
    open(false, from_hex("01 05 00"), true);  // a request cut short by FIN
  }
  run_for(500ms);
  EXPECT_EQ(pair_.server.conn->stream_count(), baseline);
  EXPECT_EQ(client_.closed, 0);
  EXPECT_TRUE(observer_.wt.incoming.empty());
}

TEST_F(WtServerTest, SessionIdThatIsNotAClientBidiIdClosesTheConnection) {
  ASSERT_NE(establish(), nullptr);
  open(true, cat(from_hex("40 54 02"), bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }));
  EXPECT_EQ(client_.code, static_cast<uint64_t>(H3Code::kIdError));
  EXPECT_EQ(observer_.wt.closed, 1);
}

// --- the session's end ---

TEST_F(WtServerTest, CloseCapsuleFromClientEndsSessionThenConnection) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  c->write(Bytes::from(close_session_data_frame(42, "bye")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed > 0; }));
  EXPECT_EQ(observer_.wt.code, 42u);
  EXPECT_EQ(observer_.wt.reason, "bye");
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }));
  expect_closed_without_error();
  EXPECT_TRUE(rec(c).fin);  // the server finished its side of the CONNECT stream
  ASSERT_TRUE(run_until([&] { return pair_.client.done > 0; }));
  EXPECT_EQ(observer_.wt.closed, 1);
}

TEST_F(WtServerTest, ServerCloseSendsCapsuleAndFin) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("x")));
  Stream* u = open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("y")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 2; }));
  bool in_call = true;
  observer_.wt.in_call = &in_call;
  server_->session()->close(5, "done");
  in_call = false;
  EXPECT_EQ(observer_.wt.closed, 0);  // from the loop, not inside close()
  ASSERT_TRUE(run_until([&] { return rec(c).fin; }));
  EXPECT_FALSE(observer_.wt.closed_in_call);
  EXPECT_EQ(observer_.wt.closed, 1);
  EXPECT_EQ(observer_.wt.code, 5u);
  std::vector<uint8_t> rest;
  ASSERT_TRUE(response(c, &rest));
  EXPECT_EQ(rest, close_session_data_frame(5, "done"));
  ASSERT_TRUE(run_until([&] {
    return rec(b).reset.has_value() && rec(b).stop.has_value() && rec(u).stop.has_value();
  }));
  EXPECT_EQ(*rec(b).reset, kSessionGone);
  EXPECT_EQ(*rec(b).stop, kSessionGone);
  EXPECT_EQ(*rec(u).stop, kSessionGone);
  EXPECT_EQ(client_.closed, 0);  // waits for our FIN on the CONNECT stream
  c->finish();
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }, 1s));
  expect_closed_without_error();
  EXPECT_EQ(observer_.wt.closed, 1);
}

TEST_F(WtServerTest, ServerCloseClosesConnectionAfterLingerWithoutClientFin) {
  config_.close_linger = 2s;
  ASSERT_NE(establish(), nullptr);
  server_->session()->close(5, "done");
  run_for(1500ms);
  EXPECT_EQ(client_.closed, 0);
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }, 1s));
  expect_closed_without_error();
  EXPECT_EQ(observer_.wt.closed, 1);
}

TEST_F(WtServerTest, ClientFinOnConnectStreamEndsSession) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  c->finish();
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed > 0; }));
  EXPECT_EQ(observer_.wt.code, 0u);
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }));
  expect_closed_without_error();
  EXPECT_EQ(observer_.wt.closed, 1);
}

TEST_F(WtServerTest, ClientResetOfConnectStreamEndsSessionWithItsCode) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  c->reset(wt_to_h3_code(77));
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed > 0; }));
  EXPECT_EQ(observer_.wt.code, 77u);
}

TEST_F(WtServerTest, DrainSendsGoawayAndDrainCapsuleAndKeepsTheSession) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  server_->drain();
  std::vector<uint8_t> rest;
  ASSERT_TRUE(run_until([&] {
    return response(c, &rest) && !rest.empty() && client_.find(3) != nullptr;
  }));
  EXPECT_EQ(rest, drain_session_data_frame());
  const std::string& control = client_.find(3)->data;
  auto settings = parse_frame(span_of(control).subspan(1), 1024);
  ASSERT_TRUE(settings && *settings);
  auto goaway = parse_frame(span_of(control).subspan(1 + (*settings)->consumed), 1024);
  ASSERT_TRUE(goaway && *goaway);
  EXPECT_EQ((*goaway)->value.type, kFrameGoaway);
  EXPECT_EQ(to_hex((*goaway)->value.payload), "04");  // the first request id not served
  EXPECT_EQ(refused_status(connect_headers("\"moq-lite-04\"")), "503");
  EXPECT_EQ(observer_.wt.closed, 0);
  EXPECT_EQ(client_.closed, 0);
}

TEST_F(WtServerTest, MalformedCloseCapsuleResetsConnectStream) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  // CLOSE_WEBTRANSPORT_SESSION with a 2-byte value: shorter than its 32-bit code.
  c->write(Bytes::from(from_hex("00 05 68 43 02 00 00")));
  ASSERT_TRUE(run_until([&] { return rec(c).reset.has_value(); }));
  EXPECT_EQ(*rec(c).reset, static_cast<uint64_t>(H3Code::kMessageError));
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }));
  expect_closed_without_error();
  EXPECT_EQ(observer_.wt.closed, 1);
}

TEST_F(WtServerTest, ConnectionLossEndsSessionOnce) {
  ASSERT_NE(establish(), nullptr);
  open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 1; }));
  conn().close(0x10c, "gone");
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed > 0; }));
  EXPECT_EQ(observer_.wt.code, 0x10cu);
  EXPECT_EQ(observer_.wt.incoming[0]->stream, nullptr);
  run_for(5s);
  EXPECT_EQ(observer_.wt.closed, 1);
}

TEST_F(WtServerTest, ReleasedStreamIsEndedWithWebTransportCodeZero) {
  ASSERT_NE(establish(), nullptr);
  run_for(100ms);
  const size_t baseline = pair_.server.conn->stream_count();
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 1; }));
  observer_.wt.incoming[0]->stream->release();
  observer_.wt.incoming[0]->stream = nullptr;
  ASSERT_TRUE(run_until([&] { return rec(b).reset.has_value() && rec(b).stop.has_value(); }));
  EXPECT_EQ(*rec(b).reset, wt_to_h3_code(0));
  EXPECT_EQ(*rec(b).stop, wt_to_h3_code(0));
  run_for(200ms);
  EXPECT_EQ(pair_.server.conn->stream_count(), baseline);
  EXPECT_EQ(observer_.wt.closed, 0);
}

TEST_F(WtServerTest, ServerDestroyedWithLiveSessionIsQuiet) {
  ASSERT_NE(establish(), nullptr);
  Stream* b = open(false, cat(from_hex(chromium::kBidiPreamble), bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return observer_.wt.incoming.size() == 1; }));
  server_.reset();
  b->write(Bytes::copy(std::string_view("more")));
  open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("y")), true);
  run_for(500ms);  // events for the gone server are dropped (ASan checks)
  EXPECT_EQ(observer_.wt.incoming.size(), 1u);
  EXPECT_EQ(observer_.wt.closed, 0);
}

TEST_F(WtServerTest, OversizedHeadersAreRefused431) {
  config_.max_field_section_size = 64;
  start();
  Stream* c = open(false, chromium_connect());
  auto r = await_response(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(field(*r, ":status"), "431");
  ASSERT_EQ(observer_.refused.size(), 1u);
  EXPECT_EQ(observer_.refused[0].first, 431);
  EXPECT_EQ(observer_.sessions, 0);
  EXPECT_EQ(client_.closed, 0);
}

TEST_F(WtServerTest, DataBeforeHeadersClosesWithFrameUnexpected) {
  start();
  open(false, frame(kFrameData, bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }));
  EXPECT_EQ(client_.code, static_cast<uint64_t>(H3Code::kFrameUnexpected));
}

// --- control stream errors ---

TEST_F(WtServerTest, CriticalStreamErrorsCloseTheConnection) {
  struct Case {
    const char* name;
    std::vector<uint8_t> control;  // what follows the stream type (from the name; else 0x00)
    bool fin;
    bool second_control;
    uint64_t code;
  };
  std::vector<uint8_t> settings = frame(kFrameSettings, from_hex(chromium::kSettingsPayload));
  const Case cases[] = {
      {"first frame not SETTINGS", from_hex("07 01 00"), false, false, 0x10a},
      {"second control stream", settings, false, true, 0x103},
      {"control stream FIN", settings, true, false, 0x104},
      {"DATA after SETTINGS", cat(settings, from_hex("00 01 ff")), false, false, 0x105},
      {"second SETTINGS", cat(settings, settings), false, false, 0x105},
      {"HTTP/2 PING after SETTINGS", cat(settings, from_hex("06 00")), false, false, 0x105},
      {"push stream", {}, false, false, 0x103},
      {"second QPACK encoder stream", {}, false, true, 0x103},
      {"second QPACK decoder stream", {}, false, true, 0x103},
      {"QPACK encoder stream FIN", {}, true, false, 0x104},
      {"QPACK encoder stream insert", from_hex("40 01 61"), false, false, 0x201},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    ObserverRecorder observer;
    SessionRecorder client;
    test::QuicPair pair;
    std::unique_ptr<Server> server;
    pair.server_alpns = pair.client_alpns = {"h3"};
    pair.server.on_handshake = [&](Connection& c) {
      server = std::make_unique<Server>(c, pair.clock(), observer, config_);
    };
    pair.client.on_handshake = [&](Connection& c) { c.set_visitor(&client); };
    ASSERT_TRUE(pair.handshake());
    std::string name = k.name;
    std::vector<uint8_t> type = from_hex(name.find("push") != std::string::npos      ? "01"
                                         : name.find("encoder") != std::string::npos ? "02"
                                         : name.find("decoder") != std::string::npos ? "03"
                                                                                     : "00");
    Stream* s = pair.client.conn->open_uni();
    s->write(Bytes::from(cat(type, k.control)));
    if (k.fin) {
      s->finish();
    }
    if (k.second_control) {
      pair.run_until([] { return false; }, 50ms);
      EXPECT_EQ(client.closed, 0);
      pair.client.conn->open_uni()->write(Bytes::from(cat(type, k.control)));
    }
    ASSERT_TRUE(pair.run_until([&] { return client.closed > 0; }));
    EXPECT_EQ(client.code, k.code);
    server.reset();
  }
}

TEST_F(WtServerTest, ConnectBeforeSettingsIsAnsweredOnceSettingsArrive) {
  start(false);
  Stream* c = open(false, chromium_connect());
  run_for(300ms);
  EXPECT_FALSE(response(c).has_value());
  EXPECT_EQ(observer_.sessions, 0);
  open(true, chromium_control_stream());
  auto r = await_response(c);
  ASSERT_TRUE(r);
  EXPECT_EQ(field(*r, ":status"), "200");
  EXPECT_EQ(observer_.sessions, 1);
}

TEST_F(WtServerTest, SettingsWithoutWebTransportRefusesConnect) {
  start(false);
  // QPACK_MAX_TABLE_CAPACITY 0 only.
  open(true, cat(from_hex("00"), frame(kFrameSettings, from_hex("01 00"))));
  EXPECT_EQ(refused_status(connect_headers("\"moq-lite-04\"")), "400");
  ASSERT_EQ(observer_.refused.size(), 1u);
  EXPECT_EQ(observer_.sessions, 0);
}

TEST_F(WtServerTest, DynamicTableReferenceClosesWithQpackError) {
  start();
  // Required Insert Count 1, then an indexed dynamic entry.
  open(false, frame(kFrameHeaders, from_hex("01 00 80")));
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }));
  EXPECT_EQ(client_.code, static_cast<uint64_t>(H3Code::kQpackDecompressionFailed));
  EXPECT_EQ(observer_.sessions, 0);
}

// --- datagrams ---

TEST_F(WtServerTest, DatagramsBothWays) {
  ASSERT_NE(establish(), nullptr);
  ASSERT_GT(conn().max_datagram_size(), 0u);
  EXPECT_TRUE(conn().send_datagram(from_hex(chromium::kDatagram)));
  ASSERT_TRUE(run_until([&] { return !observer_.wt.datagrams.empty(); }));
  EXPECT_EQ(observer_.wt.datagrams, std::vector<std::string>{"hi"});
  Session* s = server_->session();
  EXPECT_GT(s->max_datagram_size(), 0u);
  EXPECT_TRUE(s->send_datagram(bytes_of("yo")));
  ASSERT_TRUE(run_until([&] { return !client_.datagrams.empty(); }));
  ASSERT_EQ(client_.datagrams.size(), 1u);
  EXPECT_EQ(to_hex(span_of(client_.datagrams[0])), "00 79 6f");
  EXPECT_FALSE(s->send_datagram(std::vector<uint8_t>(s->max_datagram_size() + 1, 0)));
}

TEST_F(WtServerTest, DatagramForAnotherSessionIsDropped) {
  ASSERT_NE(establish(), nullptr);
  EXPECT_TRUE(conn().send_datagram(from_hex("01 68 69")));  // quarter id 1: session 4
  EXPECT_TRUE(conn().send_datagram(from_hex(chromium::kDatagram)));
  ASSERT_TRUE(run_until([&] { return !observer_.wt.datagrams.empty(); }));
  run_for(50ms);
  EXPECT_EQ(observer_.wt.datagrams, std::vector<std::string>{"hi"});
  EXPECT_EQ(client_.closed, 0);
}

}  // namespace
}  // namespace moqd::transport::webtransport

namespace moqd::transport::webtransport {
namespace {

TEST_F(WtServerTest, StreamsHeldForARefusedConnectAreRejected) {
  start();
  Stream* early = open(true, cat(from_hex(chromium::kUniPreamble), bytes_of("early")));
  run_for(50ms);
  EXPECT_FALSE(rec(early).stop.has_value());  // held, waiting for its CONNECT
  observer_.refusal = Refusal{403, "unauthorized path"};
  open(false, chromium_connect());
  ASSERT_TRUE(run_until([&] { return rec(early).stop.has_value(); }));
  EXPECT_EQ(*rec(early).stop, kBufferedRejected);
  EXPECT_EQ(observer_.sessions, 0);
}

TEST_F(WtServerTest, ConnectionWithoutASessionClosesAfterSessionTimeout) {
  config_.session_timeout = 1s;
  start();
  run_for(900ms);
  EXPECT_EQ(client_.closed, 0);
  ASSERT_TRUE(run_until([&] { return client_.closed > 0; }, 1s));
  EXPECT_EQ(client_.code, static_cast<uint64_t>(H3Code::kNoError));
}

TEST_F(WtServerTest, AcceptedSessionOutlivesSessionTimeout) {
  config_.session_timeout = 1s;
  ASSERT_NE(establish(), nullptr);
  run_for(2s);
  EXPECT_EQ(client_.closed, 0);
  EXPECT_EQ(observer_.wt.closed, 0);
}

}  // namespace
}  // namespace moqd::transport::webtransport

namespace moqd::transport::webtransport {
namespace {

// The MoQ session may be gone once on_closed() returns (transport.h): a peer that raises its
// stream limit after the session ended must not reach it.
TEST_F(WtServerTest, NoStreamsAvailableAfterTheSessionClosed) {
  Connection::Config client_config;
  client_config.max_streams_uni = 3;  // our control stream and two WebTransport streams
  start(true, client_config);
  Stream* c = open(false, chromium_connect());
  ASSERT_TRUE(run_until([&] { return observer_.sessions == 1 && response(c).has_value(); }));
  pair_.set_links({10ms});  // the client's new credit comes after the session's end
  Session* s = server_->session();
  for (int i = 0; i < 2; ++i) {
    Stream* u = s->open_uni();
    ASSERT_NE(u, nullptr);
    u->write(Bytes::copy(std::string_view("z")));
    u->finish();
  }
  EXPECT_EQ(s->open_uni(), nullptr);
  s->close(5, "done");
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed == 1; }));
  const int before = observer_.wt.streams_available;
  run_for(1s);  // the client reads both streams and raises its limit
  EXPECT_EQ(observer_.wt.streams_available, before);
}

// Request streams wait for the client's SETTINGS unread; one the client finished and then
// stopped is closed for QUIC (which credits the client a new one) and must be released.
TEST_F(WtServerTest, RequestStoppedBeforeSettingsIsReleased) {
  start(false);
  run_for(100ms);
  const size_t baseline = pair_.server.conn->stream_count();
  for (int i = 0; i < 10; ++i) {
    Stream* r = open(false, from_hex("01 05 00"), true);  // HEADERS cut short, then FIN
    r->stop_sending(0x10c);
  }
  run_for(500ms);
  EXPECT_EQ(pair_.server.conn->stream_count(), baseline);
  EXPECT_EQ(client_.closed, 0);
}

}  // namespace
}  // namespace moqd::transport::webtransport

namespace moqd::transport::webtransport {
namespace {

std::vector<uint8_t> data_frame(std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  Writer w(out);
  write_frame(w, kFrameData, payload);
  return out;
}

// An unknown capsule is skipped however long it is (RFC 9297 §3.2), without being buffered whole,
// and the CLOSE capsule after it still ends the session.
TEST_F(WtServerTest, LongUnknownCapsuleIsSkippedThenCloseIsRead) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  std::vector<uint8_t> capsules;
  Writer w(capsules);
  w.varint(0x1234567);    // an unknown capsule type
  w.varint(100 * 1024);   // 100 KiB long
  capsules.resize(capsules.size() + 100 * 1024, 0xab);
  std::vector<uint8_t> close = close_session_data_frame(7, "after a long capsule");
  // The unknown capsule in one 100 KiB DATA frame, then the CLOSE frame.
  c->write(Bytes::from(data_frame(capsules)));
  c->write(Bytes::from(close));
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed > 0; }));
  EXPECT_EQ(observer_.wt.code, 7u);
  EXPECT_EQ(observer_.wt.reason, "after a long capsule");
  EXPECT_EQ(client_.closed, 0);  // a session end, not a connection error
}

// Capsules may be cut anywhere by DATA frame boundaries.
TEST_F(WtServerTest, CloseCapsuleSplitAcrossDataFramesIsRead) {
  Stream* c = establish();
  ASSERT_NE(c, nullptr);
  std::vector<uint8_t> close = close_session_data_frame(9, "split");
  auto frame = parse_frame(close, 4096);
  ASSERT_TRUE(frame && *frame);
  auto capsule = (*frame)->value.payload;
  for (size_t i = 0; i < capsule.size(); ++i) {
    c->write(Bytes::from(data_frame(capsule.subspan(i, 1))));
  }
  ASSERT_TRUE(run_until([&] { return observer_.wt.closed > 0; }));
  EXPECT_EQ(observer_.wt.code, 9u);
  EXPECT_EQ(observer_.wt.reason, "split");
}

}  // namespace
}  // namespace moqd::transport::webtransport
