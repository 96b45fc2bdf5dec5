// The ALPNs a QUIC client (`moq`, a relay's cluster links) offers: at most GnuTLS's 8, the newest
// IETF drafts left out first, moq-lite's ALPNs and moql always kept.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/quic_connection.h"

namespace moqd::client {
namespace {

using ::testing::ElementsAre;

wire::VersionSet only(std::initializer_list<wire::Version> vs) {
  wire::VersionSet s = wire::VersionSet::none();
  for (auto v : vs) {
    s.add(v);
  }
  return s;
}

TEST(QuicAlpnsTest, TheDefaultSetFitsGnutlsLimitAndKeepsMoqLiteAndSetup) {
  EXPECT_THAT(quic_alpns(wire::VersionSet::all()),
              ElementsAre("moq-lite-05", "moq-lite-04", "moq-lite-03", "moqt-18", "moqt-17",
                          "moqt-16", "moqt-15", "moql"));
}

TEST(QuicAlpnsTest, NamedNewDraftsAreOffered) {
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport20})), ElementsAre("moqt-20"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport19, wire::Version::kTransport16})),
              ElementsAre("moqt-19", "moqt-16"));
  EXPECT_THAT(quic_alpns(only({wire::Version::kTransport17, wire::Version::kTransport18,
                               wire::Version::kTransport19, wire::Version::kTransport20,
                               wire::Version::kLite04})),
              ElementsAre("moq-lite-04", "moqt-20", "moqt-19", "moqt-18", "moqt-17"));
}

}  // namespace
}  // namespace moqd::client
