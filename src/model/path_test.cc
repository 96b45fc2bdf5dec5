#include "model/path.h"

#include <gtest/gtest.h>

namespace moqd::model {
namespace {

TEST(PathTest, NormalizeCollapsesSlashesAndStripsEnds) {
  EXPECT_EQ(normalize_path("/foo//bar/"), "foo/bar");
  EXPECT_EQ(normalize_path("/"), "");
  EXPECT_EQ(normalize_path(""), "");
  EXPECT_EQ(normalize_path("///a///"), "a");
  EXPECT_EQ(normalize_path("room/alice"), "room/alice");
}

TEST(PathTest, NormalizeKeepsDotsAndSpacesLiterally) {
  EXPECT_EQ(normalize_path("a/./b"), "a/./b");
  EXPECT_EQ(normalize_path("a/../b"), "a/../b");
  EXPECT_EQ(normalize_path(" a /B"), " a /B");
}

TEST(PathTest, HasPrefixMatchesWholeSegmentsOnly) {
  EXPECT_TRUE(has_prefix("", "anything"));
  EXPECT_TRUE(has_prefix("", ""));
  EXPECT_TRUE(has_prefix("foo", "foo"));
  EXPECT_TRUE(has_prefix("foo", "foo/bar"));
  EXPECT_FALSE(has_prefix("foo", "foobar"));
  EXPECT_FALSE(has_prefix("foo/bar", "foo"));
  EXPECT_FALSE(has_prefix("foo", ""));
}

TEST(PathTest, StripPrefixReturnsRemainder) {
  EXPECT_EQ(strip_prefix("foo", "foo/bar/baz"), "bar/baz");
  EXPECT_EQ(strip_prefix("foo", "foo"), "");
  EXPECT_EQ(strip_prefix("", "foo/bar"), "foo/bar");
  EXPECT_EQ(strip_prefix("foo", "foobar"), std::nullopt);
  EXPECT_EQ(strip_prefix("bar", "foo/bar"), std::nullopt);
}

TEST(PathTest, JoinUsesOneSlashAndSkipsEmptySides) {
  EXPECT_EQ(join_path("a", "b"), "a/b");
  EXPECT_EQ(join_path("", "b"), "b");
  EXPECT_EQ(join_path("a", ""), "a");
  EXPECT_EQ(join_path("", ""), "");
  EXPECT_EQ(join_path("room", "alice/cam"), "room/alice/cam");
}

}  // namespace
}  // namespace moqd::model
