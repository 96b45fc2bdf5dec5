// The session's part of running in production: GOAWAY (lite-04) from a draining relay to its
// client, and admission decided later (an auth service) with the peer's streams held unread.
#include <gtest/gtest.h>

#include "session/session.h"
#include "testing/session_fixture.h"

namespace moqd::session {
namespace {

using moqd::testing::SessionPair;
using moqd::testing::TestBroadcast;
using moqd::testing::VersionCase;
using namespace std::chrono_literals;

class ProductionTest : public ::testing::TestWithParam<VersionCase> {
 protected:
  std::unique_ptr<SessionPair> make() {
    return std::make_unique<SessionPair>(moqd::testing::options_for(GetParam()));
  }
};

INSTANTIATE_TEST_SUITE_P(Versions, ProductionTest,
                         ::testing::ValuesIn(moqd::testing::all_version_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST_P(ProductionTest, GoawayReachesTheClientWhereTheVersionHasIt) {
  auto p = make();
  p->start();
  bool lite04 = wire::is_lite04_plus(GetParam().version);  // lite-04 and -05 have GOAWAY
  EXPECT_EQ(p->server().send_goaway("https://relay2.example/room"), lite04);
  p->pump();
  if (lite04) {
    ASSERT_EQ(p->client_handler().goaways.size(), 1u);
    EXPECT_EQ(p->client_handler().goaways[0], "https://relay2.example/room");
  } else {
    EXPECT_TRUE(p->client_handler().goaways.empty());
  }
  // GOAWAY is advice: both sessions stay up until someone closes.
  EXPECT_FALSE(p->server_handler().is_closed());
  EXPECT_FALSE(p->client_handler().is_closed());
}

TEST_P(ProductionTest, PendingAdmissionHoldsThePeerUntilAdmitted) {
  auto p = make();
  p->server_handler().admission_pending = true;
  p->start();
  TestBroadcast alice(p->client_origin(), "alice");
  p->advance(1s);
  EXPECT_FALSE(p->server_handler().ready_version.has_value());
  EXPECT_TRUE(p->server().is_admission_pending());
  EXPECT_FALSE(p->server_origin().is_active("alice"));
  EXPECT_EQ(p->server_handler().auth_count(Action::kConnect, ""), 0u);

  p->server_handler().admission_pending = false;
  p->server().admit();
  p->pump();
  ASSERT_TRUE(p->server_handler().ready_version.has_value());
  EXPECT_EQ(*p->server_handler().ready_version, GetParam().version);
  EXPECT_TRUE(p->server_origin().is_active("alice"));  // what the client sent meanwhile was read
  EXPECT_FALSE(p->server_handler().is_closed());
}

TEST_P(ProductionTest, PendingAdmissionRefusedClosesWithUnauthorized) {
  auto p = make();
  p->server_handler().admission_pending = true;
  p->start();
  p->pump();
  p->server_handler().admission_pending = false;
  p->server_handler().deny_connect = true;
  p->server().admit();
  p->pump();
  ASSERT_TRUE(p->server_handler().closed_reason.has_value());
  EXPECT_EQ(p->server_handler().closed_reason->code, ErrorCode::kUnauthorized);
  EXPECT_FALSE(p->server_handler().ready_version.has_value());
}

}  // namespace
}  // namespace moqd::session
