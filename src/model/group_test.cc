#include "model/group.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace moqd::model {
namespace {

// A step written as "S<id>", "C:<bytes>", "E", "A" (and "" for kNothing).
std::string drain_one(const GroupCursor::Step& s) {
  switch (s.kind) {
    case GroupCursor::Kind::kNothing:
      return "";
    case GroupCursor::Kind::kObjectStart:
      return "S" + std::to_string(s.object->id) + " ";
    case GroupCursor::Kind::kChunk:
      return "C:" + std::string(s.chunk.view()) + " ";
    case GroupCursor::Kind::kEnd:
      return "E ";
    case GroupCursor::Kind::kAborted:
      return "A ";
  }
  return "";
}

// Takes every step available now and writes it as drain_one() does.
std::string drain(GroupCursor& c, size_t max_bytes = SIZE_MAX) {
  std::string out;
  for (;;) {
    GroupCursor::Step s = c.peek(max_bytes);
    if (s.kind == GroupCursor::Kind::kNothing) {
      return out;
    }
    out += drain_one(s);
    c.advance(s);
  }
}

class GroupTest : public testing::Test {
 protected:
  GroupRef make_group(uint64_t sequence = 0) { return GroupRef(new Group(sequence, 0, Instant{})); }
  int64_t buffers_at_start_ = Bytes::live_buffers();
};

TEST_F(GroupTest, ObjectIdsMayLeaveGapsAndGapsAreMarkedForMoqLite) {
  GroupRef g = make_group();
  g->begin_object_with_id(0, 1, ObjectStatus::kNormal);
  g->append_chunk(Bytes::copy("a"));
  g->begin_object_with_id(1, 1, ObjectStatus::kNormal);
  g->append_chunk(Bytes::copy("b"));
  g->begin_object_with_id(5, 1, ObjectStatus::kNormal);
  g->append_chunk(Bytes::copy("c"));
  g->finish();
  EXPECT_FALSE(g->objects()[0].lite_refused);
  EXPECT_FALSE(g->objects()[1].lite_refused);
  EXPECT_TRUE(g->objects()[2].lite_refused);
  GroupCursor c(g);
  EXPECT_EQ(drain(c), "S0 C:a S1 C:b S5 C:c E ");
}

TEST_F(GroupTest, AnObjectIdThatDoesNotGoUpIsAProducerBug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  GroupRef g = make_group();
  g->begin_object_with_id(5, 0, ObjectStatus::kNormal);
  // begin_object takes the next index (1) as its id: below 5.
  EXPECT_DEBUG_DEATH(g->begin_object(0), "model bug");
}

TEST_F(GroupTest, CursorWalksChunkedObjectsThenEnd) {
  GroupRef g = make_group();
  g->begin_object(5);
  g->append_chunk(Bytes::copy("he"));
  g->append_chunk(Bytes::copy("llo"));
  g->begin_object(2);
  g->append_chunk(Bytes::copy("g2"));
  g->finish();

  GroupCursor c(g);
  EXPECT_EQ(drain(c), "S0 C:he C:llo S1 C:g2 E ");
  EXPECT_TRUE(c.is_done());
  EXPECT_EQ(drain(c), "");
}

TEST_F(GroupTest, CursorHandsOutWhatArrivedAndWaitsForMore) {
  GroupRef g = make_group();
  GroupCursor c(g);
  EXPECT_EQ(drain(c), "");
  g->begin_object(4);
  EXPECT_EQ(drain(c), "S0 ");
  g->append_chunk(Bytes::copy("ab"));
  EXPECT_EQ(drain(c), "C:ab ");
  g->append_chunk(Bytes::copy("cd"));
  EXPECT_EQ(drain(c), "C:cd ");
  EXPECT_EQ(drain(c), "");
  g->finish();
  EXPECT_EQ(drain(c), "E ");
}

TEST_F(GroupTest, CursorSlicesChunksToMaxBytesWithoutCopying) {
  GroupRef g = make_group();
  g->begin_object(5);
  g->append_chunk(Bytes::copy("hello"));
  GroupCursor c(g);
  c.advance(c.peek(2));  // object start
  GroupCursor::Step s = c.peek(2);
  ASSERT_EQ(s.kind, GroupCursor::Kind::kChunk);
  EXPECT_EQ(s.chunk.data(), g->objects()[0].chunks[0].data());
  c.advance(s);
  EXPECT_EQ(drain(c, 2), "C:ll C:o ");
}

TEST_F(GroupTest, ZeroSizeObjectYieldsOnlyItsStart) {
  GroupRef g = make_group();
  g->begin_object(0);
  g->begin_object(1);
  g->append_chunk(Bytes::copy("x"));
  g->begin_object(0);
  g->finish();
  GroupCursor c(g);
  EXPECT_EQ(drain(c), "S0 S1 C:x S2 E ");
}

TEST_F(GroupTest, LargeObjectIsReadableChunkByChunkBeforeComplete) {
  constexpr size_t kObject = 1 << 20;
  constexpr size_t kChunk = 64 << 10;
  GroupRef g = make_group();
  g->begin_object(kObject);
  GroupCursor c(g);
  ASSERT_EQ(c.peek(SIZE_MAX).kind, GroupCursor::Kind::kObjectStart);
  EXPECT_EQ(c.peek(SIZE_MAX).object->size, kObject);
  c.advance(c.peek(SIZE_MAX));
  std::vector<uint8_t> chunk(kChunk);
  for (size_t sent = 0; sent < kObject; sent += kChunk) {
    chunk.assign(kChunk, static_cast<uint8_t>(sent / kChunk));
    g->append_chunk(Bytes::from(chunk));
    EXPECT_EQ(c.backlog(), kChunk);
    GroupCursor::Step s = c.peek(SIZE_MAX);
    ASSERT_EQ(s.kind, GroupCursor::Kind::kChunk);
    ASSERT_EQ(s.chunk.size(), kChunk);
    EXPECT_EQ(s.chunk.data()[0], static_cast<uint8_t>(sent / kChunk));
    EXPECT_EQ(s.object->is_complete(), sent + kChunk == kObject);
    c.advance(s);
    EXPECT_EQ(c.backlog(), 0u);
    EXPECT_EQ(c.peek(SIZE_MAX).kind, GroupCursor::Kind::kNothing);
  }
}

TEST_F(GroupTest, BacklogIsUntakenPayloadBytes) {
  GroupRef g = make_group();
  g->begin_object(10);
  g->append_chunk(Bytes::copy("0123456789"));
  GroupCursor c(g);
  EXPECT_EQ(c.backlog(), 10u);
  c.advance(c.peek(3));
  c.advance(c.peek(3));
  EXPECT_EQ(c.backlog(), 7u);
  drain(c);
  EXPECT_EQ(c.backlog(), 0u);
}

TEST_F(GroupTest, AbortedGroupYieldsAbortedOnce) {
  GroupRef g = make_group();
  g->begin_object(3);
  g->append_chunk(Bytes::copy("ab"));
  GroupCursor c(g);
  EXPECT_EQ(drain(c), "S0 C:ab ");
  g->abort();
  EXPECT_EQ(drain(c), "A ");
  EXPECT_TRUE(c.is_done());
}

TEST_F(GroupTest, FinishInsideAnObjectYieldsAborted) {
  GroupRef g = make_group();
  g->begin_object(3);
  g->append_chunk(Bytes::copy("ab"));
  g->finish();
  GroupCursor c(g);
  EXPECT_EQ(drain(c), "S0 C:ab A ");
}

TEST_F(GroupTest, LastReferenceFreesGroupAndPayload) {
  {
    GroupRef g = make_group();
    g->begin_object(3);
    g->append_chunk(Bytes::copy("abc"));
    GroupCursor c(g);
    g = GroupRef();
    EXPECT_EQ(drain(c), "S0 C:abc ");
    EXPECT_EQ(Bytes::live_buffers(), buffers_at_start_ + 1);
  }
  EXPECT_EQ(Bytes::live_buffers(), buffers_at_start_);
}

// A long group (a chat track's) grows past the inline blocks into `more_`: every index finds its
// own object, an object taken early keeps its address, and a cursor reads all of them in order.
TEST_F(GroupTest, LongGroupKeepsEveryObjectInPlaceAndInOrder) {
  constexpr size_t kObjects = 5000;  // blocks 0..12: past the 8 inline ones
  GroupRef g = make_group();
  std::vector<const Object*> addresses;
  for (size_t i = 0; i < kObjects; ++i) {
    Object& o = g->begin_object(1);
    g->append_chunk(Bytes::copy(std::string(1, static_cast<char>('a' + i % 26))));
    addresses.push_back(&o);
  }
  g->finish();
  const ObjectList& objects = g->objects();
  ASSERT_EQ(objects.size(), kObjects);
  for (size_t i = 0; i < kObjects; ++i) {
    ASSERT_EQ(&objects[i], addresses[i]) << i;
    ASSERT_EQ(objects[i].id, i);
  }
  EXPECT_EQ(&objects.back(), addresses.back());
  size_t seen = 0;
  for (const Object& o : objects) {
    ASSERT_EQ(o.id, seen++);
  }
  EXPECT_EQ(seen, kObjects);
  GroupCursor c(g);
  std::string expected;
  for (size_t i = 0; i < kObjects; ++i) {
    expected += "S" + std::to_string(i) + " C:" + std::string(1, static_cast<char>('a' + i % 26)) + " ";
  }
  EXPECT_EQ(drain(c), expected + "E ");
  c = GroupCursor(GroupRef());
  g = GroupRef();
  EXPECT_EQ(Bytes::live_buffers(), buffers_at_start_);
}

// What next() hands out, written as drain() writes peek()'s steps, plus each step's
// completes_object flag. An object taken `whole` (a kObjectStart that completes a non-empty
// object) is written as the kObjectStart and kChunk that peek() gives for it ("01"); `wholes`
// counts them.
std::string drain_next(GroupCursor& c, size_t max_bytes, std::string* completes, bool whole = false,
                       int* wholes = nullptr) {
  std::string out;
  GroupCursor::Step s;
  for (;;) {
    GroupCursor::Kind k = c.next(max_bytes, s, whole);
    if (k == GroupCursor::Kind::kNothing) {
      return out;
    }
    out += drain_one(s);
    if (k == GroupCursor::Kind::kObjectStart && s.completes_object && s.object->size > 0) {
      EXPECT_TRUE(whole);
      EXPECT_EQ(s.object->chunks.size(), 1u);
      EXPECT_EQ(s.object->chunks[0].size(), s.object->size);
      out += "C:" + std::string(s.object->chunks[0].view()) + " ";
      *completes += "01";
      ++*wholes;
      continue;
    }
    *completes += s.completes_object ? '1' : '0';
  }
}

// The same, through peek() and advance().
std::string drain_peek(GroupCursor& c, size_t max_bytes, std::string* completes) {
  std::string out;
  for (;;) {
    GroupCursor::Step s = c.peek(max_bytes);
    if (s.kind == GroupCursor::Kind::kNothing) {
      return out;
    }
    *completes += s.completes_object ? '1' : '0';
    out += drain_one(s);
    c.advance(s);
  }
}

TEST_F(GroupTest, NextHandsOutExactlyWhatPeekAndAdvanceDo) {
  // Random groups fed piece by piece (empty objects, split chunks, finish or abort), read after
  // every piece by two cursors with the same random byte limits: one by next(), one by
  // peek()+advance(). Both see the same steps, flags, backlog and end.
  uint32_t x = 12345;
  auto rnd = [&](uint32_t n) {
    x = x * 1103515245u + 12345u;
    return (x >> 8) % n;
  };
  int wholes = 0;
  for (int round = 0; round < 300; ++round) {
    GroupRef g = make_group(round);
    GroupCursor a(g), b(g), w(g);
    std::string seen_a, seen_b, flags_a, flags_b, seen_w, flags_w;
    int objects = static_cast<int>(rnd(5));
    for (int o = 0; o < objects; ++o) {
      size_t size = rnd(4) == 0 ? 0 : 1 + rnd(20);
      g->begin_object(size);
      for (size_t left = size; left > 0;) {
        size_t n = 1 + rnd(static_cast<uint32_t>(left));
        g->append_chunk(Bytes::copy(std::string(n, static_cast<char>('a' + rnd(26)))));
        left -= n;
        size_t limit = 1 + rnd(8);
        seen_a += drain_next(a, limit, &flags_a);
        seen_b += drain_peek(b, limit, &flags_b);
        seen_w += drain_next(w, limit, &flags_w, /*whole=*/true, &wholes);
        ASSERT_EQ(seen_a, seen_b);
        ASSERT_EQ(a.backlog(), b.backlog());
        // Taken whole or not, the same bytes in the same order, once every piece arrived.
        ASSERT_EQ(seen_w, seen_b);
        ASSERT_EQ(w.backlog(), b.backlog());
        if (o + 1 == objects && left > 0 && rnd(4) == 0) {
          break;  // the last object stays short: finishing now truncates it
        }
      }
    }
    if (rnd(5) == 0) {
      g->abort();
    } else {
      g->finish();
    }
    seen_a += drain_next(a, SIZE_MAX, &flags_a);
    seen_b += drain_peek(b, SIZE_MAX, &flags_b);
    seen_w += drain_next(w, SIZE_MAX, &flags_w, /*whole=*/true, &wholes);
    ASSERT_EQ(seen_a, seen_b) << "round " << round;
    ASSERT_EQ(flags_a, flags_b) << "round " << round;
    ASSERT_EQ(seen_w, seen_b) << "round " << round;
    ASSERT_EQ(flags_w, flags_b) << "round " << round;
    EXPECT_EQ(w.is_done(), b.is_done());
    EXPECT_TRUE(a.is_done());
    EXPECT_EQ(a.is_done(), b.is_done());
  }
  EXPECT_GT(wholes, 20);  // the random groups do exercise the whole-object step (42 of them)
}

TEST_F(GroupTest, WholeStepTakesOnlyACompleteOneChunkObjectThatFits) {
  GroupRef g = make_group();
  GroupCursor c(g);
  GroupCursor::Step s;
  g->begin_object(3);
  g->append_chunk(Bytes::copy("abc"));
  // Complete, one chunk, fits: one step with the payload; then caught up.
  ASSERT_EQ(c.next(3, s, /*whole=*/true), GroupCursor::Kind::kObjectStart);
  EXPECT_TRUE(s.completes_object);
  EXPECT_EQ(s.object->chunks[0].view(), "abc");
  EXPECT_TRUE(s.chunk.empty());  // not written: no reference taken per step
  EXPECT_EQ(c.backlog(), 0u);
  EXPECT_EQ(c.next(3, s, true), GroupCursor::Kind::kNothing);
  // Larger than max_bytes: a plain start, then slices.
  g->begin_object(3);
  g->append_chunk(Bytes::copy("def"));
  ASSERT_EQ(c.next(2, s, true), GroupCursor::Kind::kObjectStart);
  EXPECT_FALSE(s.completes_object);
  ASSERT_EQ(c.next(2, s, true), GroupCursor::Kind::kChunk);
  EXPECT_EQ(s.chunk.view(), "de");
  ASSERT_EQ(c.next(2, s, true), GroupCursor::Kind::kChunk);
  EXPECT_EQ(s.chunk.view(), "f");
  EXPECT_TRUE(s.completes_object);
  // Two chunks, or still arriving: a plain start.
  g->begin_object(4);
  g->append_chunk(Bytes::copy("gh"));
  ASSERT_EQ(c.next(8, s, true), GroupCursor::Kind::kObjectStart);
  EXPECT_FALSE(s.completes_object);
  ASSERT_EQ(c.next(8, s, true), GroupCursor::Kind::kChunk);
  g->append_chunk(Bytes::copy("ij"));
  ASSERT_EQ(c.next(8, s, true), GroupCursor::Kind::kChunk);
  EXPECT_EQ(s.chunk.view(), "ij");
  EXPECT_TRUE(s.completes_object);
  // Zero-size: a start that completes it, carrying nothing.
  g->begin_object(0);
  s.chunk = Bytes();
  ASSERT_EQ(c.next(8, s, true), GroupCursor::Kind::kObjectStart);
  EXPECT_TRUE(s.completes_object);
  EXPECT_TRUE(s.chunk.empty());
  g->finish();
  EXPECT_EQ(c.next(8, s, true), GroupCursor::Kind::kEnd);
  EXPECT_EQ(c.backlog(), 0u);
  s = GroupCursor::Step();
  c = GroupCursor(GroupRef());
  g = GroupRef();
  EXPECT_EQ(Bytes::live_buffers(), buffers_at_start_);
}

// next()'s whole step (the fan-out's common case, taken inline) around a group's end: a finished
// group's complete objects still come whole before kEnd; an aborted group's do not come at all.
TEST_F(GroupTest, WholeStepStopsAtAnAbortButNotAtAFinish) {
  GroupRef g = make_group();
  GroupCursor c(g);
  GroupCursor::Step s;
  for (const char* p : {"ab", "cd", "ef"}) {
    g->begin_object(2);
    g->append_chunk(Bytes::copy(p));
  }
  ASSERT_EQ(c.next(8, s, /*whole=*/true), GroupCursor::Kind::kObjectStart);
  EXPECT_EQ(s.object->chunks[0].view(), "ab");
  g->finish();
  ASSERT_EQ(c.next(8, s, true), GroupCursor::Kind::kObjectStart);
  EXPECT_TRUE(s.completes_object);
  EXPECT_EQ(s.object->id, 1u);
  EXPECT_EQ(s.object->chunks[0].view(), "cd");

  GroupRef h = make_group(1);
  GroupCursor d(h);
  for (const char* p : {"gh", "ij"}) {
    h->begin_object(2);
    h->append_chunk(Bytes::copy(p));
  }
  ASSERT_EQ(d.next(8, s, true), GroupCursor::Kind::kObjectStart);
  EXPECT_EQ(s.object->chunks[0].view(), "gh");
  h->abort();
  EXPECT_EQ(d.next(8, s, true), GroupCursor::Kind::kAborted);
  EXPECT_EQ(s.object, nullptr);
  EXPECT_TRUE(d.is_done());
  EXPECT_EQ(d.next(8, s, true), GroupCursor::Kind::kNothing);

  ASSERT_EQ(c.next(8, s, true), GroupCursor::Kind::kObjectStart);
  EXPECT_EQ(s.object->chunks[0].view(), "ef");
  EXPECT_EQ(c.next(8, s, true), GroupCursor::Kind::kEnd);
  EXPECT_EQ(c.backlog(), 0u);
}

TEST_F(GroupTest, BeginObjectBeforePreviousCompleteIsAProducerBug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  GroupRef g = make_group();
  g->begin_object(3);
  g->append_chunk(Bytes::copy("a"));
  EXPECT_DEBUG_DEATH(g->begin_object(1), "model bug");
}

}  // namespace
}  // namespace moqd::model
