// The QUIC ALPNs and WebTransport protocols the relay offers come from the wire table, within
// --versions, and pick what the real browser clients offer (protocol/NET-0.3.md §5).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "relay/quic_endpoint.h"
#include "transport/quic/tls.h"
#include "transport/webtransport/h3.h"

namespace moqd::relay {
namespace {

using ::testing::ElementsAre;

wire::VersionSet only(std::initializer_list<wire::Version> versions) {
  wire::VersionSet s;
  for (auto v : versions) {
    s.add(v);
  }
  return s;
}

TEST(RelayProtocolsTest, QuicAlpnsFollowTheTableAndVersions) {
  EXPECT_THAT(quic_alpns(wire::VersionSet::all()),
              ElementsAre("moq-lite-05", "moq-lite-04", "moq-lite-03", "moqt-20", "moqt-19",
                          "moqt-18", "moqt-17", "moqt-16", "moqt-15", "moql", "moq-00", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport14})), ElementsAre("moql", "moq-00", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport15, wire::Version::kTransport17,
                               wire::Version::kTransport18})),
              ElementsAre("moqt-18", "moqt-17", "moqt-15", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kLite05})), ElementsAre("moq-lite-05", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kLite02})), ElementsAre("moql", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kLite03})), ElementsAre("moq-lite-03", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport16})), ElementsAre("moqt-16", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport17})), ElementsAre("moqt-17", "h3"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport19})), ElementsAre("moqt-19", "h3"));
}

TEST(RelayProtocolsTest, WebTransportChoiceForTheRealClients) {
  namespace wt = transport::webtransport;
  const std::vector<std::string> net034 = {"moq-lite-05", "moq-lite-04", "moq-lite-03", "moql",
                                           "moqt-20",     "moqt-19",     "moqt-18",     "moqt-17",
                                           "moqt-16",     "moqt-15"};
  const std::vector<std::string> net019 = {"moq-lite-04", "moq-lite-03", "moql",    "moqt-19",
                                           "moqt-18",     "moqt-17",     "moqt-16", "moqt-15"};
  const std::vector<std::string> lite022 = {"moq-lite-04", "moq-lite-03", "moql",
                                            "moqt-17",     "moqt-16",     "moqt-15"};
  auto all = moq_protocols(wire::VersionSet::all());
  EXPECT_EQ(wt::select_protocol(net034, all), "moq-lite-05");
  EXPECT_EQ(wt::select_protocol(net019, all), "moq-lite-04");
  EXPECT_EQ(wt::select_protocol(lite022, all), "moq-lite-04");
  auto lite04 = moq_protocols(only({wire::Version::kLite04}));
  EXPECT_EQ(wt::select_protocol(net034, lite04), "moq-lite-04");
  auto lite02 = moq_protocols(only({wire::Version::kLite02, wire::Version::kLite01}));
  EXPECT_EQ(wt::select_protocol(net034, lite02), "moql");
  // Drafts 15..20 by their own protocol, the newest first; one moqd does not know is refused.
  EXPECT_EQ(wt::select_protocol({"moqt-17", "moqt-16"}, all), "moqt-17");
  EXPECT_EQ(wt::select_protocol({"moqt-19"}, all), "moqt-19");
  EXPECT_EQ(wt::select_protocol({"moqt-21"}, all), std::nullopt);
  // "moq-00" (draft 14's own) only when offered and nothing moqd prefers is.
  EXPECT_EQ(wt::select_protocol({"moq-00"}, all), "moq-00");
  EXPECT_EQ(wt::select_protocol({"moq-00", "moql"}, all), "moql");
  EXPECT_EQ(wt::select_protocol({"moq-00"}, moq_protocols(only({wire::Version::kTransport16}))),
            std::nullopt);
}

}  // namespace
}  // namespace moqd::relay
