// The WebSocket subprotocol moqd picks from the offer lists real clients send (protocol/NET-0.3.md
// §1.1), and from lists that mix what moqd serves with what it does not: the relay's acceptable
// list (websocket_subprotocols) fed to the transport's select_subprotocol.
#include "session/protocols.h"

#include <gtest/gtest.h>

#include "transport/websocket/handshake.h"

namespace moqd::session {
namespace {

namespace ws = transport::websocket;

// @moq/lite 0.2.2 (@moq/qmux 0.0.6).
constexpr const char* kLite022 = "qmux-00, webtransport";
// @moq/net 0.1.9 under @moq/publish 0.2.17 (@moq/qmux 0.1.3).
constexpr const char* kNet019 = "qmux-01, qmux-00, webtransport";
// @moq/net 0.2.8 under @moq/watch 0.4.6 (@moq/qmux 0.3.3).
constexpr const char* kNet028 =
    "qmux-02.moq-lite-05, qmux-01.moq-lite-05, qmux-00.moq-lite-05, "
    "qmux-02.moq-lite-04, qmux-01.moq-lite-04, qmux-00.moq-lite-04, "
    "qmux-02.moq-lite-03, qmux-01.moq-lite-03, qmux-00.moq-lite-03, "
    "qmux-02.moql, qmux-01.moql, qmux-00.moql, "
    "qmux-01.moqt-18, "
    "qmux-02.moqt-17, qmux-01.moqt-17, qmux-00.moqt-17, "
    "qmux-02.moqt-16, qmux-01.moqt-16, qmux-00.moqt-16, "
    "qmux-02.moqt-15, qmux-01.moqt-15, qmux-00.moqt-15, "
    "qmux-02, qmux-01, qmux-00, webtransport";
// @moq/net 0.3.4: 0.2.8's list with qmux-01.moqt-20 before qmux-01.moqt-18.
constexpr const char* kNet034 =
    "qmux-02.moq-lite-05, qmux-01.moq-lite-05, qmux-00.moq-lite-05, "
    "qmux-02.moq-lite-04, qmux-01.moq-lite-04, qmux-00.moq-lite-04, "
    "qmux-02.moq-lite-03, qmux-01.moq-lite-03, qmux-00.moq-lite-03, "
    "qmux-02.moql, qmux-01.moql, qmux-00.moql, "
    "qmux-01.moqt-20, "
    "qmux-01.moqt-18, "
    "qmux-02.moqt-17, qmux-01.moqt-17, qmux-00.moqt-17, "
    "qmux-02.moqt-16, qmux-01.moqt-16, qmux-00.moqt-16, "
    "qmux-02.moqt-15, qmux-01.moqt-15, qmux-00.moqt-15, "
    "qmux-02, qmux-01, qmux-00, webtransport";

wire::VersionSet only(std::initializer_list<wire::Version> versions) {
  wire::VersionSet s;
  for (auto v : versions) {
    s.add(v);
  }
  return s;
}

// The token moqd answers for `offers` (possibly over several header lines), or "400".
std::string choose(std::initializer_list<const char*> offers,
                   const wire::VersionSet& versions = wire::VersionSet::all()) {
  ws::HttpRequest request;
  request.method = "GET";
  request.path = "/";
  for (const char* line : offers) {
    request.headers.push_back({"Sec-WebSocket-Protocol", line});
  }
  auto acceptable = session::websocket_subprotocols(versions);
  auto chosen = ws::select_subprotocol(request, acceptable);
  return chosen ? chosen->token : "400";
}

TEST(WebSocketSubprotocolTest, RealClientsGetTheNewestProtocolMoqdServes) {
  EXPECT_EQ(choose({kLite022}), "qmux-00");
  EXPECT_EQ(choose({kNet019}), "qmux-01");
  EXPECT_EQ(choose({kNet028}), "qmux-02.moq-lite-05");
  EXPECT_EQ(choose({kNet034}), "qmux-02.moq-lite-05");
}

TEST(WebSocketSubprotocolTest, MixedListsPickOnlyWhatIsServed) {
  // The reproduction: the newest protocol served wins.
  EXPECT_EQ(choose({"qmux-00.moq-lite-05, qmux-00.moq-lite-04, qmux-00"}), "qmux-00.moq-lite-05");
  EXPECT_EQ(choose({"qmux-00.moq-lite-04, qmux-00.moq-lite-05"}), "qmux-00.moq-lite-05");
  // Server preference, whatever the client's order.
  EXPECT_EQ(choose({"qmux-00, qmux-00.moq-lite-03, qmux-00.moq-lite-04"}), "qmux-00.moq-lite-04");
  EXPECT_EQ(choose({"webtransport, qmux-00"}), "qmux-00");
  // Offers on several header lines count as one list.
  EXPECT_EQ(choose({"qmux-00.moqt-16", "qmux-00.moq-lite-03"}), "qmux-00.moq-lite-03");
  // IETF drafts 15..20 are served, the newest first; unknown framings and lite-06-wip are not.
  EXPECT_EQ(choose({"qmux-00.moqt-17, qmux-00.moqt-16, qmux-00.moq-lite-06-wip"}), "qmux-00.moqt-17");
  EXPECT_EQ(choose({"qmux-00.moqt-16, qmux-00.moq-lite-06-wip"}), "qmux-00.moqt-16");
  EXPECT_EQ(choose({"qmux-00.moq-lite-06-wip"}), "400");
  // moqt-18/20 only as qmux-01 (NET-0.3.md §1.1), moqt-19 not over WebSocket at all.
  EXPECT_EQ(choose({"qmux-00.moqt-20, qmux-00.moqt-18"}), "400");
  EXPECT_EQ(choose({"qmux-01.moqt-19, qmux-01.moqt-18"}), "qmux-01.moqt-18");
  EXPECT_EQ(choose({"chat, qmux-07.moq-lite-04, qmux-00.moq-lite-4"}), "400");
  EXPECT_EQ(choose({}), "400");
}

TEST(WebSocketSubprotocolTest, VersionsRestrictionChangesTheChoice) {
  const auto lite03 = only({wire::Version::kLite03});
  const auto lite02 = only({wire::Version::kLite02});
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kLite04})), "qmux-02.moq-lite-04");
  EXPECT_EQ(choose({kNet034}, lite03), "qmux-02.moq-lite-03");
  EXPECT_EQ(choose({kNet034}, lite02), "qmux-02.moql");
  EXPECT_EQ(choose({kNet019}, lite02), "qmux-01");
  EXPECT_EQ(choose({kLite022}, lite02), "qmux-00");
  // Only bare forms (SETUP) offered, and no SETUP version enabled.
  EXPECT_EQ(choose({kLite022}, lite03), "400");
  EXPECT_EQ(choose({kNet019}, lite03), "400");
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kTransport16})), "qmux-02.moqt-16");
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kTransport15})), "qmux-02.moqt-15");
  // Draft 14 is reached through SETUP on the bare forms.
  EXPECT_EQ(choose({kLite022}, only({wire::Version::kTransport14})), "qmux-00");
  // Drafts 17..20 by their own forms; 19 is not reached over WebSocket.
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kTransport17})), "qmux-02.moqt-17");
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kTransport18})), "qmux-01.moqt-18");
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kTransport19})), "400");
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kTransport20})), "qmux-01.moqt-20");
  // Both families offered: moq-lite's own protocols stay preferred; the SETUP forms (moql, bare)
  // come after every IETF draft, as for 15/16.
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kLite04, wire::Version::kTransport20})),
            "qmux-02.moq-lite-04");
  EXPECT_EQ(choose({kNet034}, only({wire::Version::kLite02, wire::Version::kTransport20})),
            "qmux-01.moqt-20");
}

}  // namespace
}  // namespace moqd::session
