// OBJECT_DATAGRAM forwarding (ietf_datagram.h, DownstreamSubscription::send_datagrams): a
// publisher session's datagrams (drafts 16 and 20) reach a subscriber session of the same draft
// on the same origin as OBJECT_DATAGRAMs when its transport has datagrams, else (no datagrams, or
// an object that does not fit) on a SUBGROUP stream. The subscriber's transport is a qmux
// MuxSession behind DatagramTap, which lends it datagrams of a chosen size and records them.
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/codec.h"
#include "session/ietf_session.h"
#include "session/session.h"
#include "testing/ietf_fixture.h"
#include "testing/mux_pair.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace datagram_forward_test {

using moqd::testing::RawPeer;
using moqd::testing::RawStream;

using testing::hex_of;
using testing::canon;
using testing::kD16Setup;

// A transport::Session that forwards to `inner` and has datagrams of at most `room` bytes
// (0: none), which it records instead of sending.
class DatagramTap final : public transport::Session {
 public:
  DatagramTap(transport::Session& inner, size_t room) : inner_(inner), room_(room) {}
  void set_visitor(transport::SessionVisitor* v) override { inner_.set_visitor(v); }
  transport::Stream* open_bidi() override { return inner_.open_bidi(); }
  transport::Stream* open_uni() override { return inner_.open_uni(); }
  void close(uint64_t code, std::string_view reason) override { inner_.close(code, reason); }
  std::string_view protocol() const override { return inner_.protocol(); }
  std::string_view path() const override { return inner_.path(); }
  std::string_view peer() const override { return inner_.peer(); }
  std::string_view kind() const override { return inner_.kind(); }
  uint64_t bytes_sent() const override { return inner_.bytes_sent(); }
  size_t unsent_bytes() const override { return inner_.unsent_bytes(); }
  size_t max_datagram_size() const override { return room_; }
  bool send_datagram(std::span<const uint8_t> p) override {
    if (p.size() > room_) {
      return false;
    }
    sent.push_back(to_hex(p));
    return true;
  }
  std::vector<std::string> sent;  // hex

 private:
  transport::Session& inner_;
  size_t room_;
};

// The publisher is the fixture's session; the subscriber a second server session of the same
// draft on the same origin and clock, reached by its own RawPeer.
class Forwarding {
 public:
  Forwarding(const char* alpn, size_t room) : pub(alpn), muxes(pub.clock_, alpn) {
    tap = std::make_unique<DatagramTap>(muxes.server(), room);
    peer = std::make_unique<RawPeer>(muxes.client());
    muxes.client().set_visitor(peer.get());
    SessionConfig sc;
    sc.role = Role::kServer;
    sc.traffic = &traffic;
    session = make_session(*tap, sc, pub.origin_, pub.handler_, pub.clock_, pub.clock_);
    session->start();
    pump();
  }
  ~Forwarding() { session.reset(); }  // then tap, then muxes, then peer
  void pump() {
    for (int i = 0; i < 1000; ++i) {
      pub.pump();
      if (muxes.channels().deliver() == 0 && pub.muxes_.channels().deliver() == 0) {
        return;
      }
    }
  }
  // One OBJECT_DATAGRAM (hex) from the publisher.
  void datagram(std::string_view h) {
    auto* s = dynamic_cast<IetfSession*>(pub.session_.get());
    ASSERT_NE(s, nullptr);
    const auto bytes = from_hex(h);
    s->on_datagram(std::span<const uint8_t>(bytes));
    pump();
  }
  const ietf_detail::DatagramSendStats& stats() const {
    return dynamic_cast<const IetfSession&>(*session).datagrams_sent();
  }

  TrafficCounters traffic;  // the relay's counters (metrics), of the subscriber session
  testing::IetfServerFixture pub;
  std::unique_ptr<RawPeer> peer;  // the client mux's visitor: outlives muxes
  testing::MuxPair muxes;
  std::unique_ptr<DatagramTap> tap;
  std::unique_ptr<MoqSession> session;
};

// --- draft 16: PUBLISH alias 5 in, SUBSCRIBE id 0 (alias 0, priority 7) out ---

// PUBLISH id 0 ["room","alice"] "video" alias 5 (ietf_publish_test.cc).
const char* kD16Publish = "1d 00 17 00 02 04 726f6f6d 05 616c696365 05 766964656f 05 01 10 01";
// SUBSCRIBE id 0 ["room","alice"] "video": forward 1, priority 7, LargestObject, group order 2.
const char* kD16Subscribe =
    "03 00 1d 00 02 04 726f6f6d 05 616c696365 05 766964656f 04 10 01 10 07 01 01 02 01 02";

void subscribe_d16(Forwarding& f) {
  RawStream& c = f.pub.open_control(kD16Setup);
  ASSERT_EQ(f.pub.exchange(c, kD16Publish), canon("1e 00 0a 00 03 10 01 10 4080 01 01 01"));
  RawStream* s = f.peer->open_bidi(from_hex(kD16Setup));
  ASSERT_NE(s, nullptr);
  f.pump();
  s->data.clear();
  s->write(from_hex(kD16Subscribe));
  f.pump();
  ASSERT_EQ(hex_of(s->data), canon("04 00 03 00 00 00"));  // SUBSCRIBE_OK id 0 alias 0
}

TEST(IetfDatagramForwarding, Draft16DatagramInIsDatagramOutByteExact) {
  Forwarding f("moqt-16", 1200);
  subscribe_d16(f);
  // 0x06 (END_OF_GROUP, ZERO_OBJECT_ID) alias 5 group 4 priority 0x80 "abc" -> alias 0, the
  // subscription's priority 7.
  f.datagram("06 05 04 80 616263");
  // Group 5: object 0 (0x0C: default priority), object 1 (0x08), then END_OF_GROUP as a status
  // datagram (0x28) at object 2: out as 0x04 / 0x00 with priority, and status 0x20.
  f.datagram("0c 05 05 6869");
  f.datagram("08 05 05 01 7a");
  f.datagram("28 05 05 02 03");
  // 0x07: EXTENSIONS (a timestamp 0x10 = 5) carried as they came.
  f.datagram("07 05 06 80 02 10 05 71");
  EXPECT_EQ(f.tap->sent,
            (std::vector<std::string>{canon("06 00 04 07 616263"), canon("04 00 05 07 6869"),
                                      canon("00 00 05 01 07 7a"), canon("20 00 05 02 07 03"),
                                      canon("07 00 06 07 02 10 05 71")}));
  EXPECT_TRUE(f.peer->incoming.empty());  // no SUBGROUP stream
  EXPECT_EQ(f.stats().sent, 5u);
  EXPECT_EQ(f.stats().stream_fallbacks, 0u);
  EXPECT_FALSE(f.peer->closed_code.has_value());
}

TEST(IetfDatagramForwarding, Draft16WithoutDatagramsGoesOnAStream) {
  Forwarding f("moqt-16", 0);  // qmux over WebSocket: no datagrams
  subscribe_d16(f);
  f.datagram("06 05 04 80 616263");
  EXPECT_TRUE(f.tap->sent.empty());
  ASSERT_EQ(f.peer->incoming.size(), 1u);
  // SUBGROUP 0x19 (extension blocks: a later datagram may bring one) alias 0 group 4 priority 7 |
  // id delta 0, no block, length 3, "abc" | FIN
  EXPECT_EQ(hex_of(f.peer->incoming[0]->data), canon("19 00 04 07 00 00 03 616263"));
  EXPECT_TRUE(f.peer->incoming[0]->fin);
  EXPECT_EQ(f.stats().sent, 0u);
  EXPECT_EQ(f.stats().stream_fallbacks, 1u);
}

TEST(IetfDatagramForwarding, Draft16ObjectTooBigForADatagramGoesOnAStream) {
  Forwarding f("moqt-16", 8);  // "06 00 04 07" + 4 bytes fits, 5 do not
  subscribe_d16(f);
  f.datagram("06 05 04 80 61626364");
  f.datagram("06 05 05 80 6162636465");
  EXPECT_EQ(f.tap->sent, (std::vector<std::string>{canon("06 00 04 07 61626364")}));
  ASSERT_EQ(f.peer->incoming.size(), 1u);
  EXPECT_EQ(hex_of(f.peer->incoming[0]->data), canon("19 00 05 07 00 00 05 6162636465"));
  EXPECT_TRUE(f.peer->incoming[0]->fin);
  EXPECT_EQ(f.stats().sent, 1u);
  EXPECT_EQ(f.stats().stream_fallbacks, 1u);
  // The same counts reach the relay's counters (moqd_ietf_datagram_objects_total).
  EXPECT_EQ(f.traffic.datagrams_forwarded.get(), 1u);
  EXPECT_EQ(f.traffic.datagram_stream_fallbacks.get(), 1u);
}

TEST(IetfDatagramForwarding, Draft16ABlockAfterAFirstObjectWithoutOneReachesTheStream) {
  // Object 0 of group 5 has no block, object 1 has one (a timestamp 0x10 = 5): the fallback
  // stream's header must declare blocks from its start, or object 1's would be lost.
  Forwarding f("moqt-16", 0);
  subscribe_d16(f);
  f.datagram("0c 05 05 6869");
  f.datagram("09 05 05 01 02 10 05 7a");
  ASSERT_EQ(f.peer->incoming.size(), 1u);
  // SUBGROUP 0x19 alias 0 group 5 priority 7 | delta 0, no block, length 2, "hi" | delta 0,
  // block 02 10 05, length 1, "z"
  EXPECT_EQ(hex_of(f.peer->incoming[0]->data), canon("19 00 05 07 00 00 02 6869 00 02 10 05 01 7a"));
  EXPECT_EQ(f.stats().stream_fallbacks, 2u);
}

TEST(IetfDatagramForwarding, Draft16StreamObjectsStayOnStreams) {
  // An object that came on a SUBGROUP stream is not sent as a datagram, even where it fits.
  Forwarding f("moqt-16", 1200);
  subscribe_d16(f);
  f.pub.peer_stream("18 05 04 00 00 03 616263");
  f.pump();
  EXPECT_TRUE(f.tap->sent.empty());
  ASSERT_EQ(f.peer->incoming.size(), 1u);
  EXPECT_EQ(hex_of(f.peer->incoming[0]->data), canon("18 00 04 07 00 03 616263"));
  EXPECT_EQ(f.stats().stream_fallbacks, 0u);
}

// --- draft 20: PUBLISH_NAMESPACE, moqd's upstream SUBSCRIBE answered with alias 9 ---

// @moq/net 0.3.4's SETUP on 17..20 (ietf_session_test.cc).
const char* kSetup =
    "af 00 00 1b 07 0b 6d 6f 71 2d 6c 69 74 65 2d 6a 73 c4 0b 4e 08 fe 0a 5a 2a db 5a 87 d4 05 01";

void subscribe_d20(Forwarding& f) {
  // Publisher: SETUP, PUBLISH_NAMESPACE id 0 ["room","alice"].
  transport::Stream* u = f.pub.muxes_.client().open_uni();
  ASSERT_NE(u, nullptr);
  u->write(Bytes::from(from_hex(kSetup)));
  f.pump();
  ASSERT_TRUE(f.pub.session_->is_ready());
  f.pub.raw_->open_bidi(testing::ietf_message(0x06, "00 02 04 726f6f6d 05 616c696365 00"));
  f.pump();
  ASSERT_TRUE(f.pub.origin_.is_active("room/alice"));
  // Subscriber: SETUP, SUBSCRIBE id 0 "video" on its own stream: forward 1, priority 7, group
  // order 2, filter relative 1.
  transport::Stream* v = f.muxes.client().open_uni();
  ASSERT_NE(v, nullptr);
  v->write(Bytes::from(from_hex(kSetup)));
  f.pump();
  ASSERT_TRUE(f.session->is_ready());
  RawStream* r = f.peer->open_bidi(testing::ietf_message(
      0x03, "00 02 04 726f6f6d 05 616c696365 05 766964656f 04 10 01 10 07 01 01 01 01 02"));
  ASSERT_NE(r, nullptr);
  f.pump();
  // moqd's SUBSCRIBE upstream (the publisher's incoming[0] is moqd's SETUP): SUBSCRIBE_OK alias 9.
  ASSERT_EQ(f.pub.raw_->incoming.size(), 2u);
  f.pub.raw_->incoming[1]->write(testing::ietf_message(0x04, "09 00"));
  f.pump();
  // The subscriber's SUBSCRIBE_OK: alias 0.
  ASSERT_GE(r->data.size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>(r->data[0]), 0x04);
  ASSERT_FALSE(f.peer->closed_code.has_value());
}

TEST(IetfDatagramForwarding, Draft20DatagramInIsDatagramOutByteExact) {
  Forwarding f("moqt-20", 1200);
  subscribe_d20(f);
  // 0x0F (PROPERTIES {Timestamp 0x10: 5}, END_OF_GROUP, ZERO_OBJECT_ID, DEFAULT_PRIORITY) alias
  // 9 group 101 "z" -> 0x07 with priority 7, alias 0, the properties as they came.
  f.datagram("0f 09 65 02 10 05 7a");
  EXPECT_EQ(f.tap->sent, (std::vector<std::string>{canon("07 00 65 07 02 10 05 7a")}));
  EXPECT_EQ(f.peer->incoming.size(), 1u);  // moqd's SETUP stream only
  EXPECT_EQ(f.stats().sent, 1u);
  EXPECT_EQ(f.stats().stream_fallbacks, 0u);
}

TEST(IetfDatagramForwarding, Draft20GroupOfDatagramsEndsWithAStatusDatagram) {
  Forwarding f("moqt-20", 1200);
  subscribe_d20(f);
  // Group 100: object 0 (0x0C), then the status datagram END_OF_GROUP at object 1 (0x20).
  f.datagram("0c 09 64 6869");
  f.datagram("20 09 64 01 80 03");
  // Out: 0x04 (ZERO_OBJECT_ID, priority 7) alias 0 group 100 "hi" (no TIMESCALE was declared for
  // this track, so no Timestamp is added), then 0x20 at object 1, priority 7, status 3.
  EXPECT_EQ(f.tap->sent,
            (std::vector<std::string>{canon("04 00 64 07 6869"), canon("20 00 64 01 07 03")}));
  EXPECT_EQ(f.peer->incoming.size(), 1u);
  EXPECT_EQ(f.stats().sent, 2u);
}

TEST(IetfDatagramForwarding, Draft20WithoutDatagramsGoesOnAStream) {
  Forwarding f("moqt-20", 0);
  subscribe_d20(f);
  f.datagram("0f 09 65 02 10 05 7a");
  EXPECT_TRUE(f.tap->sent.empty());
  ASSERT_EQ(f.peer->incoming.size(), 2u);
  // SUBGROUP 0x59 (extensions, FIRST_OBJECT) alias 0 group 101 priority 7 | id delta 0,
  // properties {10: 5}, length 1, "z" | FIN
  EXPECT_EQ(hex_of(f.peer->incoming[1]->data), canon("59 00 65 07 00 02 10 05 01 7a"));
  EXPECT_TRUE(f.peer->incoming[1]->fin);
  EXPECT_EQ(f.stats().stream_fallbacks, 1u);
}

TEST(IetfDatagramForwarding, Draft20ObjectTooBigForADatagramGoesOnAStream) {
  Forwarding f("moqt-20", 8);  // "07 00 65 07 02 10 05" + 1 byte fits, 2 do not
  subscribe_d20(f);
  f.datagram("0f 09 65 02 10 05 7a");
  f.datagram("0f 09 66 02 10 05 7a7b");
  EXPECT_EQ(f.tap->sent, (std::vector<std::string>{canon("07 00 65 07 02 10 05 7a")}));
  ASSERT_EQ(f.peer->incoming.size(), 2u);
  EXPECT_EQ(hex_of(f.peer->incoming[1]->data), canon("59 00 66 07 00 02 10 05 02 7a7b"));
  EXPECT_TRUE(f.peer->incoming[1]->fin);
  EXPECT_EQ(f.stats().sent, 1u);
  EXPECT_EQ(f.stats().stream_fallbacks, 1u);
}

}  // namespace datagram_forward_test
}  // namespace moqd::session
