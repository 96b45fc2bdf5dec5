// The protocol table: what moqd serves, under which names, in which preference order.
#include "wire/version.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace moqd::wire {
namespace {

using ::testing::ElementsAre;

VersionSet only(std::initializer_list<Version> versions) {
  VersionSet s;
  for (auto v : versions) {
    s.add(v);
  }
  return s;
}

TEST(ProtocolTableTest, EveryVersionHasOneRowWithItsConventionsNames) {
  struct Want {
    Version v;
    const char* name;
    const char* alpn;
    uint64_t wire;
  };
  const Want want[] = {
      {Version::kLite01, "moq-lite-01", "moql", 0xff0dad01},
      {Version::kLite02, "moq-lite-02", "moql", 0xff0dad02},
      {Version::kLite03, "moq-lite-03", "moq-lite-03", 0xff0dad03},
      {Version::kLite04, "moq-lite-04", "moq-lite-04", 0xff0dad04},
      {Version::kLite05, "moq-lite-05", "moq-lite-05", 0xff0dad05},
      {Version::kTransport14, "moq-transport-14", "moql", 0xff00000e},
      {Version::kTransport15, "moq-transport-15", "moqt-15", 0xff00000f},
      {Version::kTransport16, "moq-transport-16", "moqt-16", 0xff000010},
      {Version::kTransport17, "moq-transport-17", "moqt-17", 0xff000011},
      {Version::kTransport18, "moq-transport-18", "moqt-18", 0xff000012},
      {Version::kTransport19, "moq-transport-19", "moqt-19", 0xff000013},
      {Version::kTransport20, "moq-transport-20", "moqt-20", 0xff000014},
  };
  for (const auto& w : want) {
    const ProtocolInfo* row = protocol_info(w.v);
    ASSERT_NE(row, nullptr) << w.name;
    EXPECT_STREQ(row->name, w.name);
    EXPECT_STREQ(row->alpn, w.alpn);
    EXPECT_EQ(static_cast<uint64_t>(row->version), w.wire);
    EXPECT_EQ(version_from_name(w.name), w.v);
    EXPECT_EQ(version_from_wire(w.wire), w.v);
  }
}

// NET-0.3.md §1.1: over WebSocket @moq/net 0.3.4 offers moqt-18 and moqt-20 only as
// qmux-01.<alpn> and moqt-19 not at all. moqd serves all three (server role).
TEST(ProtocolTableTest, Drafts18To20QmuxFormsAsTheJsClientOffersThem) {
  EXPECT_EQ(protocol_info(Version::kTransport18)->qmux_drafts, 0b010);
  EXPECT_EQ(protocol_info(Version::kTransport19)->qmux_drafts, 0);
  EXPECT_EQ(protocol_info(Version::kTransport20)->qmux_drafts, 0b010);
  for (Version v : {Version::kTransport18, Version::kTransport19, Version::kTransport20}) {
    EXPECT_TRUE(protocol_info(v)->served) << version_name(v);
    EXPECT_EQ(protocol_for_alpn(protocol_info(v)->alpn)->version, v);
  }
}

TEST(ProtocolTableTest, AlpnLookupFindsOnlyProtocolsWithTheirOwnAlpn) {
  ASSERT_NE(protocol_for_alpn("moq-lite-04"), nullptr);
  EXPECT_EQ(protocol_for_alpn("moq-lite-04")->version, Version::kLite04);
  EXPECT_EQ(protocol_for_alpn("moql"), nullptr);  // SETUP picks the version
  EXPECT_EQ(protocol_for_alpn(""), nullptr);
  EXPECT_EQ(protocol_for_alpn("moq-lite-4"), nullptr);
  ASSERT_NE(protocol_for_alpn("moqt-16"), nullptr);
  EXPECT_TRUE(protocol_for_alpn("moqt-16")->served);
  ASSERT_NE(protocol_for_alpn("moqt-17"), nullptr);
  EXPECT_TRUE(protocol_for_alpn("moqt-17")->served);
}

TEST(ProtocolTableTest, ServedAlpnsLiteNewestFirstThenIetfThenMoql) {
  EXPECT_THAT(served_alpns(VersionSet::all()),
              ElementsAre("moq-lite-05", "moq-lite-04", "moq-lite-03", "moqt-20", "moqt-19",
                          "moqt-18", "moqt-17", "moqt-16", "moqt-15", "moql", "moq-00"));
}

TEST(ProtocolTableTest, RestrictionRemovesAlpns) {
  EXPECT_THAT(served_alpns(only({Version::kLite03})), ElementsAre("moq-lite-03"));
  EXPECT_THAT(served_alpns(only({Version::kLite01})), ElementsAre("moql"));
  EXPECT_THAT(served_alpns(only({Version::kLite04, Version::kLite02})),
              ElementsAre("moq-lite-04", "moql"));
  // Draft 14 is reached by SETUP ("moql", or its own "moq-00"), 15..20 by their own ALPN.
  EXPECT_THAT(served_alpns(only({Version::kTransport14, Version::kTransport16})),
              ElementsAre("moqt-16", "moql", "moq-00"));
  EXPECT_THAT(served_alpns(only({Version::kTransport14})), ElementsAre("moql", "moq-00"));
  // "moq-00" has no WebSocket form.
  EXPECT_THAT(websocket_subprotocols(only({Version::kTransport14})),
              ElementsAre("qmux-02.moql", "qmux-01.moql", "qmux-00.moql", "qmux-02", "qmux-01",
                          "qmux-00", "webtransport.moql", "webtransport"));
  EXPECT_THAT(served_alpns(only({Version::kTransport17})), ElementsAre("moqt-17"));
  EXPECT_THAT(websocket_subprotocols(only({Version::kTransport19})), ElementsAre());
  EXPECT_THAT(websocket_subprotocols(only({Version::kTransport20})), ElementsAre("qmux-01.moqt-20"));
}

TEST(ProtocolTableTest, WebSocketFormsByProtocolThenNewestDraftThenBareForms) {
  EXPECT_THAT(websocket_subprotocols(only({Version::kLite04, Version::kLite02})),
              ElementsAre("qmux-02.moq-lite-04", "qmux-01.moq-lite-04", "qmux-00.moq-lite-04",
                          "qmux-02.moql", "qmux-01.moql", "qmux-00.moql", "qmux-02", "qmux-01",
                          "qmux-00", "webtransport.moql", "webtransport"));
  EXPECT_THAT(websocket_subprotocols(only({Version::kLite05})),
              ElementsAre("qmux-02.moq-lite-05", "qmux-01.moq-lite-05", "qmux-00.moq-lite-05"));
  EXPECT_THAT(websocket_subprotocols(only({Version::kLite03})),
              ElementsAre("qmux-02.moq-lite-03", "qmux-01.moq-lite-03", "qmux-00.moq-lite-03"));
}

}  // namespace
}  // namespace moqd::wire
