// The path <-> namespace mapping (wire/ietf_namespace.h). Expected values follow @moq/net
// 0.3.4's ietf/namespace.js (toTuple / fromTuple), so both ends name a broadcast alike.
#include "wire/ietf_namespace.h"

#include <gtest/gtest.h>

namespace moqd::wire::ietf {
namespace {

TEST(IetfNamespacePath, FieldsJoinWithSlash) {
  EXPECT_EQ(to_path({"room", "alice"}), "room/alice");
  EXPECT_EQ(to_namespace("room/alice"), (TrackNamespace{"room", "alice"}));
  EXPECT_EQ(to_path({}), "");
  EXPECT_EQ(to_namespace(""), TrackNamespace{});
  EXPECT_EQ(to_path({"a"}), "a");
}

TEST(IetfNamespacePath, SlashAndBackslashInAFieldAreEscaped) {
  EXPECT_EQ(to_path({"a/b", "c"}), "a\\/b/c");
  EXPECT_EQ(to_namespace("a\\/b/c"), (TrackNamespace{"a/b", "c"}));
  EXPECT_EQ(to_path({"x\\y"}), "x\\\\y");
  EXPECT_EQ(to_namespace("x\\\\y"), TrackNamespace{"x\\y"});
  // A lone backslash stays literal, as @moq/net reads it.
  EXPECT_EQ(to_namespace("x\\y"), TrackNamespace{"x\\y"});
  // A field ending in a backslash: the separator after it is not escaped.
  EXPECT_EQ(to_path({"a\\", "b"}), "a\\\\/b");
  EXPECT_EQ(to_namespace("a\\\\/b"), (TrackNamespace{"a\\", "b"}));
}

TEST(IetfNamespacePath, TuplesWithoutAPathAreRefused) {
  EXPECT_EQ(to_path({"a", "", "b"}), std::nullopt);
  EXPECT_EQ(to_path({""}), std::nullopt);
  // "a\/" would lose its last '/' to path normalisation.
  EXPECT_EQ(to_path({"a/"}), std::nullopt);
}

TEST(IetfNamespacePath, RoundTrips) {
  const TrackNamespace cases[] = {{"room"}, {"a/b", "c\\d"}, {"/lead"}, {"x", "y", "z"}};
  for (const auto& ns : cases) {
    auto path = to_path(ns);
    ASSERT_TRUE(path.has_value());
    EXPECT_EQ(to_namespace(*path), ns) << *path;
  }
}

}  // namespace
}  // namespace moqd::wire::ietf
