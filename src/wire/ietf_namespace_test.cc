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
  // So would a field ending in '/' before a separator: "a\//b" normalises to "a\/b", the path of
  // ("a/b"), another tuple.
  EXPECT_EQ(to_path({"a/", "b"}), std::nullopt);
  EXPECT_EQ(to_path({"/", "b"}), std::nullopt);
  EXPECT_EQ(to_path({"x", "a/", "b"}), std::nullopt);
}

// The session normalises a tuple's path (collapsing runs of '/', stripping it at either end:
// model/path.h) before naming the broadcast, so a path must already be normalised, or two tuples
// would name one broadcast.
TEST(IetfNamespacePath, EveryPathIsAlreadyNormalised) {
  const TrackNamespace cases[] = {{"room"},     {"a/b", "c\\d"}, {"/lead"},   {"x", "y", "z"},
                                  {"a", "/b"},  {"a\\", "b"},    {"/", "/"},  {"a", "b/", "c"},
                                  {"a/b/", "c"}, {"\\/", "x"}};
  int with_path = 0;
  for (const auto& ns : cases) {
    auto path = to_path(ns);
    if (!path) {
      continue;
    }
    ++with_path;
    EXPECT_EQ(path->find("//"), std::string::npos) << *path;
    EXPECT_NE(path->front(), '/') << *path;
    EXPECT_NE(path->back(), '/') << *path;
    EXPECT_EQ(to_namespace(*path), ns) << *path;
  }
  EXPECT_EQ(with_path, 6);
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
