#include "transport/webtransport/client.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "testing/quic_pair.h"
#include "testing/stream_recorder.h"
#include "transport/quic/connection.h"
#include "transport/webtransport/server.h"

namespace moqd::transport::webtransport {
namespace {

using namespace std::chrono_literals;
using quic::Connection;

constexpr uint64_t kH3NoError = 0x100;

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

using test::SessionRecorder;
using test::StreamRecorder;

struct ServerSide : ServerObserver {
  std::optional<Refusal> on_connect(const ConnectRequest& request) override {
    last = request;
    return refusal;
  }
  void on_refused(int status, const char*) override { refused.push_back(status); }
  void on_session(Session& s, const ConnectRequest&) override {
    session = &s;
    s.set_visitor(&wt);
  }

  std::optional<Refusal> refusal;
  std::optional<ConnectRequest> last;
  std::vector<int> refused;
  Session* session = nullptr;
  SessionRecorder wt;
};

struct ClientSide : ClientObserver {
  void on_session(Session& s) override {
    ++reports;
    session = &s;
    s.set_visitor(&wt);
  }
  void on_failed(int s, const char* r) override {
    ++reports;
    failed = true;
    status = s;
    reason = r;
  }

  int reports = 0;
  Session* session = nullptr;
  bool failed = false;
  int status = -1;
  std::string reason;
  SessionRecorder wt;
};

// The raw QUIC side of a server that is not our Server, for the client's failure paths.
struct RawServer : SessionVisitor {
  void on_incoming_stream(Stream& s) override {
    s.set_visitor(nullptr);
    ++incoming;
  }
  void on_streams_available() override {}
  void on_closed(uint64_t c, std::string_view) override {
    closed = true;
    code = c;
  }
  int incoming = 0;
  bool closed = false;
  uint64_t code = 0;
};

class WtClientTest : public ::testing::Test {
 protected:
  WtClientTest() {
    server_config_.protocols = {"moq-lite-04", "moq-lite-03", "moql"};
    client_config_.authority = "127.0.0.1:4443";
    client_config_.path = "/room?jwt=abc";
    client_config_.protocols = {"moq-lite-04", "moql"};
  }

  // Handshakes with ALPN h3; the server side is our Server unless `raw` is given.
  void start(RawServer* raw = nullptr, Connection::Config server_quic = {}) {
    pair_.server_alpns = pair_.client_alpns = {"h3"};
    pair_.server.on_handshake = [this, raw](Connection& c) {
      if (raw != nullptr) {
        c.set_visitor(raw);
      } else {
        server_ = std::make_unique<Server>(c, pair_.clock(), server_side_, server_config_);
      }
    };
    pair_.client.on_handshake = [this](Connection& c) {
      client_ = std::make_unique<Client>(c, pair_.clock(), client_side_, client_config_);
    };
    ASSERT_TRUE(pair_.handshake(server_quic));
    ASSERT_NE(client_, nullptr);
  }
  void establish(Connection::Config server_quic = {}) {
    start(nullptr, server_quic);
    ASSERT_TRUE(run_until([&] { return client_side_.reports > 0 && server_side_.session; }));
    ASSERT_NE(client_side_.session, nullptr);
  }
  bool run_until(const std::function<bool()>& done, Duration limit = 10s) {
    return pair_.run_until(done, limit);
  }
  // Writes `text` and a FIN on `s`.
  static void send(Stream* s, std::string_view text) {
    ASSERT_NE(s, nullptr);
    s->write(Bytes::from(bytes_of(text)));
    s->finish();
  }
  // A stream we opened, read through a recorder.
  StreamRecorder& watch(Stream* s) {
    opened_.push_back(std::make_unique<StreamRecorder>(s));
    s->set_visitor(opened_.back().get());
    return *opened_.back();
  }

  ServerSide server_side_;
  ClientSide client_side_;
  std::vector<std::unique_ptr<StreamRecorder>> opened_;
  ServerConfig server_config_;
  ClientConfig client_config_;
  RawServer raw_server_;  // a hand-driven server side for the tests that need one
  test::QuicPair pair_;  // after the recorders: its connections report to them when destroyed
  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
};

TEST_F(WtClientTest, SessionIsEstablishedWithTheServersProtocol) {
  establish();
  Session* s = client_side_.session;
  EXPECT_EQ(client_->session(), s);
  EXPECT_EQ(s->protocol(), "moq-lite-04");
  EXPECT_EQ(s->path(), "/room?jwt=abc");
  EXPECT_EQ(s->kind(), "webtransport");
  EXPECT_EQ(client_side_.reports, 1);
  EXPECT_TRUE(client_->peer_settings().webtransport);
  ASSERT_TRUE(server_side_.last);
  EXPECT_EQ(server_side_.last->path, "/room?jwt=abc");
  EXPECT_EQ(server_side_.last->authority, "127.0.0.1:4443");
  EXPECT_EQ(server_side_.last->available_protocols,
            (std::vector<std::string>{"moq-lite-04", "moql"}));
  EXPECT_TRUE(server_side_.last->draft02);
  EXPECT_EQ(server_side_.session->protocol(), "moq-lite-04");
  EXPECT_TRUE(server_->peer_settings().webtransport);
  EXPECT_TRUE(server_->peer_settings().h3_datagram);
}

TEST_F(WtClientTest, NoOfferedProtocolGivesAnEmptyProtocol) {
  client_config_.protocols.clear();
  establish();
  EXPECT_EQ(client_side_.session->protocol(), "");
  EXPECT_TRUE(server_side_.last->available_protocols.empty());
}

TEST_F(WtClientTest, StreamsEachWayAreByteExact) {
  establish();
  Session& client = *client_side_.session;
  Session& server = *server_side_.session;
  Stream* cb = client.open_bidi();
  StreamRecorder& cb_reply = watch(cb);
  send(cb, "client bidi");
  send(client.open_uni(), "client uni");
  Stream* sb = server.open_bidi();
  StreamRecorder& sb_reply = watch(sb);
  send(sb, "server bidi");
  send(server.open_uni(), "server uni");
  ASSERT_TRUE(run_until([&] {
    return server_side_.wt.incoming.size() == 2 && client_side_.wt.incoming.size() == 2 &&
           server_side_.wt.incoming[0]->fin && server_side_.wt.incoming[1]->fin &&
           client_side_.wt.incoming[0]->fin && client_side_.wt.incoming[1]->fin;
  }));
  EXPECT_EQ(server_side_.wt.incoming[0]->data, "client bidi");
  EXPECT_EQ(server_side_.wt.incoming[1]->data, "client uni");
  EXPECT_EQ(client_side_.wt.incoming[0]->data, "server bidi");
  EXPECT_EQ(client_side_.wt.incoming[1]->data, "server uni");
  EXPECT_TRUE(is_server_initiated(client_side_.wt.incoming[0]->stream->id()));
  // Answers on the bidi streams travel back.
  send(server_side_.wt.incoming[0]->stream, "reply to client");
  send(client_side_.wt.incoming[0]->stream, "reply to server");
  ASSERT_TRUE(run_until([&] { return cb_reply.fin && sb_reply.fin; }));
  EXPECT_EQ(cb_reply.data, "reply to client");
  EXPECT_EQ(sb_reply.data, "reply to server");
}

TEST_F(WtClientTest, ResetCodesTravelInTheWebTransportRange) {
  establish();
  Stream* s = client_side_.session->open_bidi();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::from(bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return server_side_.wt.incoming.size() == 1; }));
  s->reset(9);
  ASSERT_TRUE(run_until([&] { return server_side_.wt.incoming[0]->reset.has_value(); }));
  EXPECT_EQ(*server_side_.wt.incoming[0]->reset, 9u);
}

TEST_F(WtClientTest, ServerRefusalIsReportedWithItsStatus) {
  server_side_.refusal = Refusal{403, "unauthorized path"};
  start();
  ASSERT_TRUE(run_until([&] { return client_side_.failed; }));
  EXPECT_EQ(client_side_.status, 403);
  EXPECT_EQ(client_side_.reports, 1);
  EXPECT_EQ(client_->session(), nullptr);
  EXPECT_EQ(server_side_.refused, std::vector<int>{403});
  ASSERT_TRUE(run_until([&] { return pair_.client.done > 0 && pair_.server.done > 0; }));
  EXPECT_EQ(client_side_.reports, 1);
}

TEST_F(WtClientTest, ClientCloseReachesServerWithCodeAndReason) {
  establish();
  client_side_.session->close(7, "client bye");
  ASSERT_TRUE(run_until([&] { return server_side_.wt.closed > 0 && client_side_.wt.closed > 0; }));
  EXPECT_EQ(server_side_.wt.code, 7u);
  EXPECT_EQ(server_side_.wt.reason, "client bye");
  EXPECT_EQ(client_side_.wt.code, 7u);
  // The server finishes its CONNECT stream, then the connection closes well before the linger.
  ASSERT_TRUE(run_until([&] { return pair_.client.done > 0 && pair_.server.done > 0; }, 1s));
  EXPECT_EQ(server_side_.wt.closed, 1);
  EXPECT_EQ(client_side_.wt.closed, 1);
}

TEST_F(WtClientTest, ServerCloseReachesClientWithCodeAndReason) {
  establish();
  Stream* s = client_side_.session->open_bidi();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::from(bytes_of("x")));
  ASSERT_TRUE(run_until([&] { return server_side_.wt.incoming.size() == 1; }));
  server_side_.session->close(11, "server bye");
  ASSERT_TRUE(run_until([&] { return client_side_.wt.closed > 0; }));
  EXPECT_EQ(client_side_.wt.code, 11u);
  EXPECT_EQ(client_side_.wt.reason, "server bye");
  ASSERT_TRUE(run_until([&] { return pair_.client.done > 0 && pair_.server.done > 0; }, 1s));
  EXPECT_EQ(server_side_.wt.code, 11u);
  EXPECT_EQ(client_side_.wt.closed, 1);
}

TEST_F(WtClientTest, DatagramsBothWays) {
  establish();
  Session& client = *client_side_.session;
  Session& server = *server_side_.session;
  ASSERT_GT(client.max_datagram_size(), 0u);
  EXPECT_TRUE(client.send_datagram(bytes_of("ping")));
  EXPECT_TRUE(server.send_datagram(bytes_of("pong")));
  ASSERT_TRUE(run_until([&] {
    return !server_side_.wt.datagrams.empty() && !client_side_.wt.datagrams.empty();
  }));
  EXPECT_EQ(server_side_.wt.datagrams, std::vector<std::string>{"ping"});
  EXPECT_EQ(client_side_.wt.datagrams, std::vector<std::string>{"pong"});
  EXPECT_FALSE(client.send_datagram(std::vector<uint8_t>(client.max_datagram_size() + 1, 0)));
}

TEST_F(WtClientTest, ServerSettingsWithoutWebTransportFail) {
  RawServer& raw = raw_server_;
  start(&raw);
  Stream* control = pair_.server.conn->open_uni();
  ASSERT_NE(control, nullptr);
  control->write(Bytes::from(client_control_stream_preamble()));  // no ENABLE_CONNECT_PROTOCOL
  ASSERT_TRUE(run_until([&] { return client_side_.failed; }));
  EXPECT_EQ(client_side_.status, 0);
  EXPECT_EQ(client_side_.reason, "the server's SETTINGS do not enable WebTransport");
  EXPECT_EQ(client_->session(), nullptr);
  ASSERT_TRUE(run_until([&] { return raw.closed; }));
  EXPECT_EQ(raw.code, kH3NoError);
}

TEST_F(WtClientTest, ControlStreamWithoutSettingsFirstClosesWithMissingSettings) {
  RawServer& raw = raw_server_;
  start(&raw);
  Stream* control = pair_.server.conn->open_uni();
  ASSERT_NE(control, nullptr);
  std::vector<uint8_t> bytes;
  Writer w(bytes);
  w.varint(kStreamControl);
  std::vector<uint8_t> goaway{0x00};
  write_frame(w, kFrameGoaway, goaway);
  control->write(Bytes::from(bytes));
  ASSERT_TRUE(run_until([&] { return raw.closed; }));
  EXPECT_EQ(raw.code, static_cast<uint64_t>(H3Code::kMissingSettings));
  EXPECT_TRUE(client_side_.failed);
  EXPECT_EQ(client_side_.status, 0);
}

TEST_F(WtClientTest, ServerOpenedNonWebTransportBidiClosesWithStreamCreationError) {
  establish();
  Stream* s = pair_.server.conn->open_bidi();
  ASSERT_NE(s, nullptr);
  s->write(Bytes::from(std::vector<uint8_t>{0x01, 0x00}));  // a HEADERS frame
  ASSERT_TRUE(run_until([&] { return client_side_.wt.closed > 0; }));
  EXPECT_EQ(client_side_.wt.code, static_cast<uint64_t>(H3Code::kStreamCreationError));
}

// The MoQ session may be gone once on_closed() returns (transport.h): a server that raises its
// stream limit after the session ended must not reach it.
TEST_F(WtClientTest, NoStreamsAvailableAfterTheSessionClosed) {
  Connection::Config server_quic;
  server_quic.max_streams_uni = 3;  // the client's control stream and two WebTransport streams
  establish(server_quic);
  pair_.set_links({10ms});  // the server's new credit comes after the session's end
  Session& s = *client_side_.session;
  for (int i = 0; i < 2; ++i) {
    send(s.open_uni(), "z");
  }
  EXPECT_EQ(s.open_uni(), nullptr);
  s.close(5, "done");
  ASSERT_TRUE(run_until([&] { return client_side_.wt.closed == 1; }));
  const int before = client_side_.wt.streams_available;
  pair_.run_for(1s);  // the server reads both streams and raises its limit
  EXPECT_EQ(client_side_.wt.streams_available, before);
}

// Observer calls come from the loop, never from inside a call the owner made: a server that
// grants no unidirectional stream must not get on_failed() delivered inside the constructor.
TEST_F(WtClientTest, NoUniStreamCreditReportsNothingInsideTheConstructor) {
  RawServer& raw = raw_server_;
  int reports_in_constructor = -1;
  pair_.server_alpns = pair_.client_alpns = {"h3"};
  pair_.server.on_handshake = [&](Connection& c) { c.set_visitor(&raw); };
  pair_.client.on_handshake = [&](Connection& c) {
    client_ = std::make_unique<Client>(c, pair_.clock(), client_side_, client_config_);
    reports_in_constructor = client_side_.reports;
  };
  Connection::Config server_quic;
  server_quic.max_streams_uni = 0;
  pair_.start(server_quic);
  ASSERT_TRUE(pair_.run_until([&] { return client_ != nullptr; }));
  EXPECT_EQ(reports_in_constructor, 0);
  pair_.run_for(1s);
  EXPECT_LE(client_side_.reports, 1);
  pair_.server.conn->set_visitor(nullptr);  // `raw` goes before the pair
}

// RFC 9114 §7.2.8: the frame types HTTP/2 had and HTTP/3 reserved are a connection error on
// every stream, the control stream included.
TEST_F(WtClientTest, ReservedHttp2FrameOnTheControlStreamClosesWithFrameUnexpected) {
  RawServer& raw = raw_server_;
  start(&raw);
  Stream* control = pair_.server.conn->open_uni();
  ASSERT_NE(control, nullptr);
  std::vector<uint8_t> bytes = server_control_stream_preamble(1);
  Writer w(bytes);
  write_frame(w, 0x08, std::vector<uint8_t>{});  // HTTP/2 WINDOW_UPDATE
  control->write(Bytes::from(bytes));
  ASSERT_TRUE(run_until([&] { return raw.closed; }));
  EXPECT_EQ(raw.code, static_cast<uint64_t>(H3Code::kFrameUnexpected));
}

// RFC 9114 §5.2 from the client's side.
std::vector<uint8_t> goaway_frame(uint64_t id) {
  std::vector<uint8_t> payload;
  Writer(payload).varint(id);
  std::vector<uint8_t> out;
  Writer w(out);
  write_frame(w, kFrameGoaway, payload);
  return out;
}

TEST_F(WtClientTest, GoawayBeforeTheAnswerFailsTheConnect) {
  RawServer& raw = raw_server_;
  start(&raw);
  Stream* control = pair_.server.conn->open_uni();
  ASSERT_NE(control, nullptr);
  control->write(Bytes::from(server_control_stream_preamble(1)));
  ASSERT_TRUE(run_until([&] { return raw.incoming >= 2; }));  // control stream and our CONNECT
  control->write(Bytes::from(goaway_frame(0)));
  ASSERT_TRUE(run_until([&] { return client_side_.failed; }));
  EXPECT_EQ(client_side_.reason, "the server is going away");
  EXPECT_EQ(client_->session(), nullptr);
}

void send_server_control(test::QuicPair& pair, std::vector<uint64_t> goaway_ids) {
  Stream* control = pair.server.conn->open_uni();
  ASSERT_NE(control, nullptr);
  std::vector<uint8_t> bytes = server_control_stream_preamble(1);
  for (uint64_t id : goaway_ids) {
    auto g = goaway_frame(id);
    bytes.insert(bytes.end(), g.begin(), g.end());
  }
  control->write(Bytes::from(bytes));
}

TEST_F(WtClientTest, GoawayIdThatIsNotAClientBidiIdIsAnIdError) {
  RawServer& raw = raw_server_;
  start(&raw);
  send_server_control(pair_, {2});
  ASSERT_TRUE(run_until([&] { return raw.closed; }));
  EXPECT_EQ(raw.code, static_cast<uint64_t>(H3Code::kIdError));
}

TEST_F(WtClientTest, GoawayIdThatGoesUpIsAnIdError) {
  RawServer& raw = raw_server_;
  start(&raw);
  send_server_control(pair_, {8, 12});
  ASSERT_TRUE(run_until([&] { return raw.closed; }));
  EXPECT_EQ(raw.code, static_cast<uint64_t>(H3Code::kIdError));
}

TEST_F(WtClientTest, GoawayAfterTheAnswerLeavesTheSessionOpen) {
  establish();
  server_->drain();  // GOAWAY past our session, and a DRAIN capsule
  pair_.run_for(200ms);
  EXPECT_EQ(client_side_.wt.closed, 0);
  EXPECT_FALSE(client_side_.failed);
  ASSERT_NE(client_->session(), nullptr);
}

}  // namespace
}  // namespace moqd::transport::webtransport
