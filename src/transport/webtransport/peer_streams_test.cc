#include "transport/webtransport/peer_streams.h"

#include <gtest/gtest.h>

namespace moqd::transport::webtransport {
namespace {

TEST(PeerStreamsTest, EachCriticalStreamMayBeOpenedOnce) {
  PeerStreams peer;
  EXPECT_EQ(peer.classify(kStreamControl), UniStream::kControl);
  EXPECT_EQ(peer.classify(kStreamQpackEncoder), UniStream::kQpackEncoder);
  EXPECT_EQ(peer.classify(kStreamQpackDecoder), UniStream::kQpackDecoder);
  for (uint64_t type : {kStreamControl, kStreamQpackEncoder, kStreamQpackDecoder}) {
    auto again = peer.classify(type);
    ASSERT_FALSE(again) << type;
    EXPECT_EQ(again.error().code, H3Code::kStreamCreationError);
  }
  // Not critical: any number of them.
  EXPECT_EQ(peer.classify(kStreamWebTransportUni), UniStream::kWebTransport);
  EXPECT_EQ(peer.classify(kStreamWebTransportUni), UniStream::kWebTransport);
  EXPECT_EQ(peer.classify(kStreamPush), UniStream::kPush);
  EXPECT_EQ(peer.classify(0x21), UniStream::kUnknown);  // reserved
}

TEST(PeerStreamsTest, ControlStreamFrameRules) {
  EXPECT_TRUE(check_control_frame(kFrameSettings, true, false));
  EXPECT_EQ(check_control_frame(kFrameGoaway, true, false).error().code, H3Code::kMissingSettings);
  EXPECT_EQ(check_control_frame(kFrameSettings, false, false).error().code,
            H3Code::kFrameUnexpected);
  for (uint64_t type : {kFrameData, kFrameHeaders, kFramePushPromise, uint64_t{0x02},
                        uint64_t{0x06}, uint64_t{0x08}, uint64_t{0x09}}) {
    EXPECT_EQ(check_control_frame(type, false, false).error().code, H3Code::kFrameUnexpected)
        << type;
  }
  EXPECT_TRUE(check_control_frame(kFrameGoaway, false, true));
  EXPECT_TRUE(check_control_frame(0x21, false, true));  // reserved: skipped
  // MAX_PUSH_ID comes only from clients (RFC 9114 §7.2.7).
  EXPECT_TRUE(check_control_frame(kFrameMaxPushId, false, false));
  EXPECT_EQ(check_control_frame(kFrameMaxPushId, false, true).error().code,
            H3Code::kFrameUnexpected);
}

}  // namespace
}  // namespace moqd::transport::webtransport
