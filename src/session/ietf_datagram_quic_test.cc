// OBJECT_DATAGRAM both ways over real QUIC (RFC 9221 DATAGRAM frames, real TLS) on a SimNetwork:
// a d16 client speaking the wire by hand PUBLISHes a track, SUBSCRIBEs to it through moqd, and
// sends its objects in QUIC datagrams; moqd (a server-role IetfSession on the pair's server
// connection) sends them back to the subscription as OBJECT_DATAGRAMs in QUIC datagrams.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/codec.h"
#include "model/origin.h"
#include "session/config.h"
#include "session/ietf_session.h"
#include "session/session.h"
#include "testing/quic_pair.h"
#include "testing/session_fixture.h"
#include "transport/quic/connection.h"

namespace moqd::session {
namespace datagram_quic_test {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;
using test::QuicPair;
using transport::quic::Connection;
using namespace std::chrono_literals;

// The hand-driven client: RawPeer's streams, and the datagrams that arrive (hex).
class DatagramPeer final : public transport::SessionVisitor {
 public:
  explicit DatagramPeer(transport::Session& t) : raw(t) {}
  void on_incoming_stream(transport::Stream& s) override { raw.on_incoming_stream(s); }
  void on_streams_available() override {}
  void on_closed(uint64_t code, std::string_view reason) override { raw.on_closed(code, reason); }
  void on_datagram(std::span<const uint8_t> p) override { datagrams.push_back(to_hex(p)); }
  RawPeer raw;
  std::vector<std::string> datagrams;
};

std::string canon(std::string_view h) { return to_hex(from_hex(h)); }
std::string hex_of(const std::string& s) {
  return to_hex(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

TEST(IetfDatagramQuic, Draft16DatagramsGoBothWaysOverQuic) {
  QuicPair pair(77);
  pair.server_alpns = {"moqt-16"};
  pair.client_alpns = {"moqt-16"};
  pair.flush_each_tick = true;
  model::Origin origin({}, pair.clock(), pair.clock());
  testing::RecordingHandler handler(origin);
  std::unique_ptr<DatagramPeer> peer;
  std::unique_ptr<MoqSession> relay;
  // Whatever way the test ends, the client connection forgets `peer` before it goes.
  struct Detach {
    QuicPair& p;
    ~Detach() {
      if (p.client.conn) {
        p.client.conn->set_visitor(nullptr);
      }
    }
  } detach{pair};
  pair.server.on_handshake = [&](Connection& c) {
    SessionConfig sc;
    sc.role = Role::kServer;
    relay = make_session(c, sc, origin, handler, pair.clock(), pair.clock());
    relay->start();
  };
  pair.client.on_handshake = [&](Connection& c) {
    peer = std::make_unique<DatagramPeer>(c);
    c.set_visitor(peer.get());
  };
  pair.start();
  ASSERT_TRUE(pair.run_until([&] { return relay != nullptr && peer != nullptr; }));
  Connection& client = *pair.client.conn;
  ASSERT_GT(client.max_datagram_size(), 0u);
  // CLIENT_SETUP, then PUBLISH alias 5 (ietf_publish_test.cc) on the control stream.
  RawStream* c = peer->raw.open_bidi(
      from_hex("20 00 13 02 02 80 00 a4 55 05 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73"));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(pair.run_until([&] { return relay->is_ready(); }));
  c->write(from_hex("1d 00 17 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 10 01"));
  ASSERT_TRUE(pair.run_until([&] { return origin.is_active("room/alice"); }));
  // SUBSCRIBE id 2 to the same track: forward 1, priority 7, LargestObject.
  c->data.clear();
  c->write(from_hex("03 00 1d 02 02 04 726f6f6d 05 616c696365 05 766964656f "
                    "04 10 01 10 07 01 01 02 01 02"));
  ASSERT_TRUE(pair.run_until([&] { return c->data.find('\x04') != std::string::npos; }));
  // Datagrams of alias 5: group 4 "abc" (0x06), group 5 with an extension block (0x07).
  ASSERT_TRUE(client.send_datagram(from_hex("06 05 04 80 616263")));
  ASSERT_TRUE(client.send_datagram(from_hex("07 05 05 80 02 10 05 7a")));
  ASSERT_TRUE(pair.run_until([&] { return peer->datagrams.size() >= 2; }));
  // Back on the subscription's alias 2 with its priority 7.
  EXPECT_EQ(peer->datagrams,
            (std::vector<std::string>{canon("06 02 04 07 616263"), canon("07 02 05 07 02 10 05 7a")}));
  auto* s = dynamic_cast<IetfSession*>(relay.get());
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->datagrams_sent().sent, 2u);
  EXPECT_EQ(s->datagrams_sent().stream_fallbacks, 0u);
  EXPECT_FALSE(peer->raw.closed_code.has_value());
}

}  // namespace datagram_quic_test
}  // namespace moqd::session
