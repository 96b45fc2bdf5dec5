#include "transport/websocket/ws_connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/codec.h"
#include "testing/memory_pipe.h"

namespace moqd::transport::websocket {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;
using namespace std::string_view_literals;

std::span<const uint8_t> ws_span(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Records what a channel reports.
class RecordingHandler : public MessageHandler {
 public:
  void on_message(std::span<const uint8_t> m) override { messages.emplace_back(m.begin(), m.end()); }
  void on_channel_writable() override { ++writable; }
  void on_channel_closed(uint16_t code, std::string_view reason) override {
    closed.push_back(code);
    close_reason = std::string(reason);
  }

  std::vector<std::string> messages;
  int writable = 0;
  std::vector<uint16_t> closed;
  std::string close_reason;
};

// What a server accepts, most preferred first (the relay builds its list from the wire table).
const std::vector<std::string> kAcceptable = {"qmux-00.moq-lite-04", "qmux-00", "webtransport.moql",
                                              "webtransport"};

RequestDecision decide(const HttpRequest& req) { return decide_upgrade(req, kAcceptable); }

std::string upgrade_request(std::string_view extra_headers,
                            std::string_view protocols = "qmux-00, webtransport") {
  std::string req =
      "GET /room?jwt=abc HTTP/1.1\r\n"
      "Host: localhost\r\n"
      "Upgrade: websocket\r\n"
      "Connection: Upgrade\r\n"
      "Sec-WebSocket-Version: 13\r\n";
  if (!protocols.empty()) {
    req += "Sec-WebSocket-Protocol: " + std::string(protocols) + "\r\n";
  }
  return req + std::string(extra_headers) + "\r\n";
}

constexpr std::string_view kKeyHeader = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
const MaskKey kKey{0x37, 0xfa, 0x21, 0x3d};

Bytes client_frame(Opcode op, std::string_view payload, bool fin = true) {
  return encode_frame(op, ws_span(payload), fin, &kKey);
}

struct ServerFrame {
  FrameHeader header;
  std::string payload;
};

// Splits what the server sent after its HTTP head into frames.
std::vector<ServerFrame> frames_after_head(const std::vector<uint8_t>& wire) {
  std::string_view text(reinterpret_cast<const char*>(wire.data()), wire.size());
  size_t pos = text.find("\r\n\r\n");
  std::vector<ServerFrame> out;
  if (pos == std::string_view::npos) {
    return out;
  }
  auto rest = std::span(wire).subspan(pos + 4);
  while (!rest.empty()) {
    auto h = decode_frame_header(rest);
    if (!h || !*h || rest.size() < (*h)->consumed + (*h)->value.payload_size) {
      ADD_FAILURE() << "truncated server frame";
      break;
    }
    auto payload = rest.subspan((*h)->consumed, (*h)->value.payload_size);
    out.push_back({(*h)->value, std::string(payload.begin(), payload.end())});
    rest = rest.subspan((*h)->consumed + payload.size());
  }
  return out;
}

class WsServerConnectionTest : public ::testing::Test {
 protected:
  WsServerConnectionTest() { make_server(WsConfig{}); }

  void make_server(WsConfig config) {
    server_.reset();
    server_ = std::make_unique<WsServerConnection>(
        pipes_.a(), clock_, clock_, config, [this](const HttpRequest& req) -> RequestDecision {
          ++requests_;
          if (req.path == "/health") {
            PlainResponse r;
            r.content_type = "application/json";
            r.body = R"({"status":"ok"})";
            return r;
          }
          return decide(req);
        });
    server_->set_message_handler(&handler_);
    pipes_.a().set_handler(server_.get());
    pipes_.b().set_handler(&peer_);
  }

  void client_send(std::string_view s) {
    pipes_.b().send(Bytes::copy(s));
    pipes_.pump();
  }
  void client_send(const Bytes& b) {
    pipes_.b().send(b);
    pipes_.pump();
  }
  void upgrade() {
    client_send(upgrade_request(kKeyHeader));
    ASSERT_THAT(peer_.received_string(), HasSubstr("HTTP/1.1 101 "));
    ASSERT_TRUE(server_->is_open());
  }
  std::vector<ServerFrame> server_frames() { return frames_after_head(peer_.received()); }
  std::string response() { return peer_.received_string(); }

  ManualClock clock_;
  test::MemoryPipePair pipes_;
  test::PipeRecorder peer_;
  RecordingHandler handler_;
  std::unique_ptr<WsServerConnection> server_;
  int requests_ = 0;
};

TEST_F(WsServerConnectionTest, AnswersUpgradeWithRfcAcceptKey) {
  upgrade();
  EXPECT_THAT(response(), HasSubstr("\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
  EXPECT_THAT(response(), HasSubstr("\r\nUpgrade: websocket\r\n"));
  EXPECT_THAT(response(), HasSubstr("\r\nSec-WebSocket-Protocol: qmux-00\r\n"));
  EXPECT_EQ(server_->target(), "/room?jwt=abc");
  EXPECT_EQ(server_->request().path, "/room");
  EXPECT_EQ(server_->subprotocol().framing, Framing::kQmux00);
  EXPECT_FALSE(pipes_.a().is_closed());
  EXPECT_EQ(clock_.pending_timers(), 0u);  // the upgrade timer is gone
}

TEST_F(WsServerConnectionTest, PrefersQmuxOverWebTransportWhateverTheOrder) {
  client_send(upgrade_request(kKeyHeader, "webtransport, qmux-00"));
  EXPECT_THAT(response(), HasSubstr("\r\nSec-WebSocket-Protocol: qmux-00\r\n"));
}

TEST_F(WsServerConnectionTest, SelectsWebTransportWhenOnlyItIsOffered) {
  client_send(upgrade_request(kKeyHeader, "chat, webtransport"));
  EXPECT_THAT(response(), HasSubstr("\r\nSec-WebSocket-Protocol: webtransport\r\n"));
  EXPECT_EQ(server_->subprotocol().framing, Framing::kWebTransport);
}

TEST_F(WsServerConnectionTest, ReportsAppProtocolOfPrefixedOffer) {
  client_send(upgrade_request(kKeyHeader, "webtransport.moql, qmux-00.moq-lite-04"));
  EXPECT_THAT(response(), HasSubstr("\r\nSec-WebSocket-Protocol: qmux-00.moq-lite-04\r\n"));
  EXPECT_EQ(server_->subprotocol().app_protocol, "moq-lite-04");
}

TEST_F(WsServerConnectionTest, NoKnownSubprotocolGets400) {
  client_send(upgrade_request(kKeyHeader, "chat"));
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_TRUE(pipes_.a().is_closed());
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, NoSubprotocolHeaderGets400) {
  client_send(upgrade_request(kKeyHeader, ""));
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, MissingKeyGets400) {
  client_send(upgrade_request(""));
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_THAT(response(), Not(HasSubstr("101")));
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, KeyOfWrongLengthGets400) {
  client_send(upgrade_request("Sec-WebSocket-Key: Zm9v\r\n"));
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
}

TEST_F(WsServerConnectionTest, WrongVersionGets426) {
  std::string req = upgrade_request(kKeyHeader);
  req.replace(req.find("Version: 13"), 11, "Version: 8");
  client_send(req);
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 426 "));
  EXPECT_THAT(response(), HasSubstr("Sec-WebSocket-Version: 13"));
}

TEST_F(WsServerConnectionTest, GarbageRequestGets400AndCloses) {
  client_send("\x16\x03\x01\x00\x05hello\r\n\r\n"sv);
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_TRUE(peer_.is_closed());
  EXPECT_EQ(requests_, 0);
  EXPECT_EQ(handler_.closed.size(), 1u);
}

TEST_F(WsServerConnectionTest, LfOnlyRequestGets400AtOnce) {
  client_send("GET /health HTTP/1.1\nHost: x\n\n"sv);
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_TRUE(peer_.is_closed());
  EXPECT_EQ(requests_, 0);
}

TEST_F(WsServerConnectionTest, ConflictingContentLengthGets400) {
  client_send("GET /health HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"sv);
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_EQ(requests_, 0);
}

TEST_F(WsServerConnectionTest, ChunkedWithContentLengthGets400) {
  client_send(
      "GET /health HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n"sv);
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 400 "));
  EXPECT_EQ(requests_, 0);
}

TEST_F(WsServerConnectionTest, OversizedHeadGets431AndCloses) {
  client_send("GET / HTTP/1.1\r\nX: " + std::string(kMaxHttpHeadBytes, 'a'));
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 431 "));
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, PlainResponseCarriesCorsAndCloses) {
  client_send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(response(), HasSubstr("\r\nAccess-Control-Allow-Origin: *\r\n"));
  EXPECT_THAT(response(), HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_THAT(response(), HasSubstr("\r\nContent-Type: application/json\r\n"));
  EXPECT_THAT(response(), HasSubstr("\r\n\r\n{\"status\":\"ok\"}"));
  EXPECT_TRUE(peer_.is_closed());
  EXPECT_EQ(clock_.pending_timers(), 0u);
}

TEST_F(WsServerConnectionTest, ParsesRequestSplitAtEveryByte) {
  pipes_.set_chunk_size(1);
  upgrade();
  client_send(client_frame(Opcode::kBinary, "abc"));
  EXPECT_EQ(handler_.messages, std::vector<std::string>{"abc"});
}

TEST_F(WsServerConnectionTest, ReadsFramesThatFollowTheRequestInOneRead) {
  std::string both = upgrade_request(kKeyHeader);
  Bytes frame = client_frame(Opcode::kBinary, "early");
  both.append(frame.view());
  client_send(both);
  EXPECT_EQ(handler_.messages, std::vector<std::string>{"early"});
}

TEST_F(WsServerConnectionTest, OpenCallbackRunsBeforeFirstMessage) {
  RecordingHandler late;
  server_->set_message_handler(nullptr);
  server_->set_open_callback([&] { server_->set_message_handler(&late); });
  std::string both = upgrade_request(kKeyHeader);
  both.append(client_frame(Opcode::kBinary, "x").view());
  client_send(both);
  EXPECT_EQ(late.messages, std::vector<std::string>{"x"});
}

TEST_F(WsServerConnectionTest, SlowlorisIsClosedAfterUpgradeTimeout) {
  std::string req = upgrade_request(kKeyHeader);
  for (size_t i = 0; i < 9; ++i) {
    client_send(req.substr(i, 1));
    clock_.advance(1s);
  }
  EXPECT_FALSE(peer_.is_closed());
  clock_.advance(1s);
  pipes_.pump();
  EXPECT_THAT(response(), HasSubstr("HTTP/1.1 408 "));
  EXPECT_TRUE(peer_.is_closed());
  EXPECT_EQ(handler_.closed.size(), 1u);
  EXPECT_EQ(requests_, 0);
}

TEST_F(WsServerConnectionTest, DeliversBinaryMessage) {
  upgrade();
  client_send(client_frame(Opcode::kBinary, "Hello"));
  EXPECT_EQ(handler_.messages, std::vector<std::string>{"Hello"});
}

TEST_F(WsServerConnectionTest, JoinsContinuationFramesAroundAPing) {
  upgrade();
  client_send(client_frame(Opcode::kBinary, "Hel", false));
  client_send(client_frame(Opcode::kPing, "p"));
  client_send(client_frame(Opcode::kContinuation, "", false));
  client_send(client_frame(Opcode::kContinuation, "lo"));
  EXPECT_EQ(handler_.messages, std::vector<std::string>{"Hello"});
  EXPECT_TRUE(server_->is_open());
}

TEST_F(WsServerConnectionTest, DeliversEmptyMessage) {
  upgrade();
  client_send(client_frame(Opcode::kBinary, ""));
  EXPECT_EQ(handler_.messages, std::vector<std::string>{""});
}

TEST_F(WsServerConnectionTest, IgnoresTextMessages) {
  upgrade();
  client_send(client_frame(Opcode::kText, "hi"));
  client_send(client_frame(Opcode::kBinary, "bin"));
  EXPECT_EQ(handler_.messages, std::vector<std::string>{"bin"});
  EXPECT_TRUE(server_->is_open());
}

TEST_F(WsServerConnectionTest, InvalidUtf8TextClosesWith1007) {
  upgrade();
  client_send(client_frame(Opcode::kText, "\xc0\xaf"));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseInvalidPayload});
}

TEST_F(WsServerConnectionTest, AnswersPingWithPong) {
  upgrade();
  client_send(client_frame(Opcode::kPing, "ping!"));
  auto frames = server_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.opcode, Opcode::kPong);
  EXPECT_FALSE(frames[0].header.masked);
  EXPECT_EQ(frames[0].payload, "ping!");
}

TEST_F(WsServerConnectionTest, UnmaskedClientFrameClosesWith1002) {
  upgrade();
  client_send(encode_frame(Opcode::kBinary, ws_span("x")));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
  auto frames = server_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.opcode, Opcode::kClose);
  EXPECT_EQ(decode_close_payload(ws_span(frames[0].payload))->code, kCloseProtocolError);
  EXPECT_TRUE(peer_.is_closed());
  EXPECT_TRUE(handler_.messages.empty());
}

TEST_F(WsServerConnectionTest, InvalidFrameHeaderClosesWith1002) {
  upgrade();
  client_send(Bytes::copy(from_hex("c2 80 00 00 00 00")));  // RSV1 set
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
}

TEST_F(WsServerConnectionTest, UnexpectedContinuationClosesWith1002) {
  upgrade();
  client_send(client_frame(Opcode::kContinuation, "x"));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
}

TEST_F(WsServerConnectionTest, OversizeMessageClosesWith1009) {
  make_server(WsConfig{.max_message_size = 8});
  upgrade();
  client_send(client_frame(Opcode::kBinary, "12345678"));
  EXPECT_EQ(handler_.messages.size(), 1u);
  client_send(client_frame(Opcode::kBinary, "12345", false));
  client_send(client_frame(Opcode::kContinuation, "6789"));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseTooBig});
  EXPECT_EQ(handler_.messages.size(), 1u);
  auto frames = server_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(decode_close_payload(ws_span(frames[0].payload))->code, kCloseTooBig);
}

TEST_F(WsServerConnectionTest, HugeDeclaredLengthClosesWith1009BeforeBuffering) {
  upgrade();
  FrameHeader h;
  h.masked = true;
  h.payload_size = uint64_t{1} << 40;
  client_send(encode_frame_header(h));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseTooBig});
}

TEST_F(WsServerConnectionTest, PeerCloseIsEchoedThenPipeCloses) {
  upgrade();
  client_send(client_frame(Opcode::kClose, encode_close_payload(1000, "bye")));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseNormal});
  EXPECT_EQ(handler_.close_reason, "bye");
  auto frames = server_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].header.opcode, Opcode::kClose);
  EXPECT_EQ(decode_close_payload(ws_span(frames[0].payload))->code, kCloseNormal);
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, LocalCloseWaitsForTheEcho) {
  upgrade();
  server_->close(4000, "done");
  pipes_.pump();
  EXPECT_TRUE(handler_.closed.empty());
  EXPECT_FALSE(peer_.is_closed());
  auto frames = server_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(decode_close_payload(ws_span(frames[0].payload))->code, 4000);
  server_->send_message(std::vector<Bytes>{Bytes::copy("late")});  // dropped: closing
  client_send(client_frame(Opcode::kBinary, "ignored"));  // peer data after our close
  client_send(client_frame(Opcode::kClose, encode_close_payload(4000, "")));
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{4000});
  EXPECT_TRUE(handler_.messages.empty());
  EXPECT_EQ(server_frames().size(), 1u);  // no echo of the echo
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, LocalCloseGivesUpAfterCloseTimeout) {
  upgrade();
  server_->close(1001, "going away");
  clock_.advance(5s);
  pipes_.pump();
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseGoingAway});
  EXPECT_TRUE(peer_.is_closed());
}

TEST_F(WsServerConnectionTest, PipeLossIsReportedOnceAsAbnormal) {
  upgrade();
  pipes_.b().abort();
  pipes_.pump();
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseAbnormal});
  server_->close(1000, "");
  clock_.advance(10s);
  EXPECT_EQ(handler_.closed.size(), 1u);
}

TEST_F(WsServerConnectionTest, SendMessageIsOneFrameWithoutCopyingParts) {
  upgrade();
  Bytes a = Bytes::copy("head-");
  Bytes b = Bytes::copy(std::string(300, 'x'));
  server_->send_message(std::vector<Bytes>{a, b});
  EXPECT_EQ(b.use_count(), 2u);  // queued by reference in the pipe
  pipes_.pump();
  auto frames = server_frames();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].header.fin);
  EXPECT_EQ(frames[0].header.opcode, Opcode::kBinary);
  EXPECT_FALSE(frames[0].header.masked);
  EXPECT_EQ(frames[0].payload, "head-" + std::string(300, 'x'));
}

TEST_F(WsServerConnectionTest, WritableFollowsPipeLowWater) {
  pipes_.a().set_low_water(1000);
  upgrade();
  server_->send_message(std::vector<Bytes>{Bytes::copy(std::string(2000, 'x'))});
  EXPECT_GE(server_->buffered(), 2000u);
  EXPECT_EQ(handler_.writable, 0);
  pipes_.pump();
  EXPECT_EQ(server_->buffered(), 0u);
  EXPECT_EQ(handler_.writable, 1);
}

TEST_F(WsServerConnectionTest, CloseBeforeUpgradeIsReportedFromTheLoop) {
  server_->close(1000, "shutdown");
  EXPECT_TRUE(handler_.closed.empty());
  clock_.advance(0s);
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseNormal});
  pipes_.pump();
  EXPECT_TRUE(peer_.is_closed());
}

// --- client against server ---

class WsClientServerTest : public ::testing::Test {
 protected:
  WsClientServerTest()
      : server_(pipes_.a(), clock_, clock_, WsConfig{}, decide),
        client_(pipes_.b(), clock_, clock_,
                WsClientConfig{.host = "localhost:4443", .target = "/room?jwt=x"}) {
    pipes_.a().set_handler(&server_);
    pipes_.b().set_handler(&client_);
    server_.set_message_handler(&server_handler_);
    client_.set_message_handler(&client_handler_);
    client_.set_open_callback([this](std::string_view p) { client_protocol_ = std::string(p); });
  }

  ManualClock clock_;
  test::MemoryPipePair pipes_;
  WsServerConnection server_;
  WsClientConnection client_;
  RecordingHandler server_handler_;
  RecordingHandler client_handler_;
  std::string client_protocol_;
};

TEST_F(WsClientServerTest, ExchangeMessagesBothWays) {
  client_.start();
  pipes_.pump();
  ASSERT_TRUE(client_.is_open());
  ASSERT_TRUE(server_.is_open());
  EXPECT_EQ(client_protocol_, "qmux-00");
  EXPECT_EQ(client_.subprotocol(), "qmux-00");
  EXPECT_EQ(server_.target(), "/room?jwt=x");
  EXPECT_EQ(server_.request().header("Host"), "localhost:4443");

  client_.send_message(std::vector<Bytes>{Bytes::copy("to "), Bytes::copy("server")});
  server_.send_message(std::vector<Bytes>{Bytes::copy("to client")});
  std::string big(70000, 'b');  // 64-bit length
  client_.send_message(std::vector<Bytes>{Bytes::copy(big)});
  server_.send_message(std::vector<Bytes>{Bytes::copy(big)});
  pipes_.pump();
  EXPECT_EQ(server_handler_.messages, (std::vector<std::string>{"to server", big}));
  EXPECT_EQ(client_handler_.messages, (std::vector<std::string>{"to client", big}));

  client_.close(1000, "bye");
  pipes_.pump();
  EXPECT_EQ(server_handler_.closed, std::vector<uint16_t>{1000});
  EXPECT_EQ(client_handler_.closed, std::vector<uint16_t>{1000});
  EXPECT_EQ(server_handler_.close_reason, "bye");
  EXPECT_TRUE(pipes_.a().is_closed());
  EXPECT_TRUE(pipes_.b().is_closed());
}

TEST_F(WsClientServerTest, WorksWithOneByteReads) {
  pipes_.set_chunk_size(1);
  client_.start();
  pipes_.pump();
  client_.send_message(std::vector<Bytes>{Bytes::copy("ping")});
  server_.send_message(std::vector<Bytes>{Bytes::copy("pong")});
  pipes_.pump();
  EXPECT_EQ(server_handler_.messages, std::vector<std::string>{"ping"});
  EXPECT_EQ(client_handler_.messages, std::vector<std::string>{"pong"});
}

TEST_F(WsClientServerTest, ClientFramesAreMasked) {
  client_.start();
  pipes_.pump();
  client_.send_message(std::vector<Bytes>{Bytes::copy("m")});
  const auto& sent = pipes_.b().sent();
  std::string_view text(reinterpret_cast<const char*>(sent.data()), sent.size());
  auto frame = std::span(sent).subspan(text.find("\r\n\r\n") + 4);
  auto h = decode_frame_header(frame);
  ASSERT_TRUE(h && *h);
  EXPECT_TRUE((*h)->value.masked);
}

TEST_F(WsClientServerTest, ServerClosesAndClientEchoes) {
  client_.start();
  pipes_.pump();
  server_.close(4001, "kick");
  pipes_.pump();
  EXPECT_EQ(client_handler_.closed, std::vector<uint16_t>{4001});
  EXPECT_EQ(client_handler_.close_reason, "kick");
  EXPECT_EQ(server_handler_.closed, std::vector<uint16_t>{4001});
}

// The client against a hand-written server.
class WsClientConnectionTest : public ::testing::Test {
 protected:
  WsClientConnectionTest() : client_(pipes_.a(), clock_, clock_, WsClientConfig{.host = "h"}) {
    pipes_.a().set_handler(&client_);
    pipes_.b().set_handler(&server_);
    client_.set_message_handler(&handler_);
  }

  // The 101 a correct server would send for the client's request, with `protocol_line` for the
  // subprotocol.
  std::string answer(std::string_view protocol_line) {
    auto req = parse_http_request(server_.received());
    EXPECT_TRUE(req && *req);
    std::string accept = websocket_accept((*req)->value.header("Sec-WebSocket-Key").value_or(""));
    return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Accept: " +
           accept + "\r\n" + std::string(protocol_line) + "\r\n";
  }

  ManualClock clock_;
  test::MemoryPipePair pipes_;
  test::PipeRecorder server_;
  WsClientConnection client_;
  RecordingHandler handler_;
};

TEST_F(WsClientConnectionTest, OffersQmuxAndWebTransport) {
  client_.start();
  pipes_.pump();
  EXPECT_THAT(server_.received_string(), HasSubstr("GET / HTTP/1.1\r\n"));
  EXPECT_THAT(server_.received_string(),
              HasSubstr("\r\nSec-WebSocket-Protocol: qmux-00, webtransport\r\n"));
}

TEST_F(WsClientConnectionTest, AcceptsWebTransportSelection) {
  client_.start();
  pipes_.pump();
  pipes_.b().send(Bytes::copy(answer("Sec-WebSocket-Protocol: webtransport\r\n")));
  pipes_.pump();
  EXPECT_TRUE(client_.is_open());
  EXPECT_EQ(client_.subprotocol(), "webtransport");
}

TEST_F(WsClientConnectionTest, RejectsMissingSubprotocol) {
  client_.start();
  pipes_.pump();
  pipes_.b().send(Bytes::copy(answer("")));
  pipes_.pump();
  EXPECT_FALSE(client_.is_open());
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
  EXPECT_TRUE(server_.is_closed());
}

TEST_F(WsClientConnectionTest, RejectsWrongAcceptKey) {
  client_.start();
  pipes_.pump();
  std::string bad = answer("Sec-WebSocket-Protocol: qmux-00\r\n");
  bad.replace(bad.find("Accept: ") + 8, 4, "AAAA");
  pipes_.b().send(Bytes::copy(bad));
  pipes_.pump();
  EXPECT_FALSE(client_.is_open());
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
}

TEST_F(WsClientConnectionTest, RejectsNon101) {
  client_.start();
  pipes_.pump();
  pipes_.b().send(Bytes::copy("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"));
  pipes_.pump();
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
}

TEST_F(WsClientConnectionTest, MaskedServerFrameClosesWith1002) {
  client_.start();
  pipes_.pump();
  std::string both = answer("Sec-WebSocket-Protocol: qmux-00\r\n");
  both.append(client_frame(Opcode::kBinary, "masked").view());
  pipes_.b().send(Bytes::copy(both));
  pipes_.pump();
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseProtocolError});
}

TEST_F(WsClientConnectionTest, TimesOutWithoutAnswer) {
  client_.start();
  pipes_.pump();
  clock_.advance(10s);
  EXPECT_EQ(handler_.closed, std::vector<uint16_t>{kCloseAbnormal});
  pipes_.pump();
  EXPECT_TRUE(server_.is_closed());
}

}  // namespace
}  // namespace moqd::transport::websocket
