// FrameReader: whole frames (or only their first bytes, with their whole size) in group order,
// including when the track keeps only its newest group, as the load generator's viewers do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "client/connection.h"
#include "model/test_mocks.h"

namespace moqd::client::frame_reader_test {

using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::NiceMock;

struct Seen {
  uint64_t group;
  uint64_t index;
  std::string bytes;
  uint64_t size;
  bool operator==(const Seen&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  return os << "{g" << s.group << " #" << s.index << " '" << s.bytes << "' size " << s.size << "}";
}

std::string pattern(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(static_cast<char>('a' + i % 26));
  }
  return s;
}

class FrameReaderTest : public ::testing::Test {
 protected:
  void make(model::CacheLimits limits, size_t keep) {
    track_ = std::make_unique<model::Track>("room/alice", "video", limits, seconds(5), clock_, clock_);
    track_->set_source(&source_);
    reader_ = std::make_unique<FrameReader>(
        *track_, clock_, clock_, Duration::zero(),
        [this](uint64_t g, uint64_t i, std::span<const uint8_t> b, uint64_t size) {
          seen_.push_back(Seen{g, i, std::string(b.begin(), b.end()), size});
        },
        nullptr, keep);
  }
  // One loop turn's end: the track tells its listeners what arrived.
  void turn() { clock_.advance(Duration::zero()); }
  void chunk(model::Group& g, std::string_view bytes) { track_->append_chunk(g, Bytes::copy(bytes)); }
  ~FrameReaderTest() override {
    reader_.reset();
    track_.reset();
  }

  ManualClock clock_;
  NiceMock<model::MockTrackSource> source_;
  std::unique_ptr<model::Track> track_;
  std::unique_ptr<FrameReader> reader_;
  std::vector<Seen> seen_;
};

TEST_F(FrameReaderTest, WholeFramesAcrossChunks) {
  make(model::CacheLimits{}, FrameReader::kWholeFrame);
  model::Group* g = track_->begin_group(0);
  track_->begin_object(*g, 10);
  chunk(*g, "0123");
  turn();
  EXPECT_TRUE(seen_.empty());  // not complete yet
  chunk(*g, "456789");
  track_->begin_object(*g, 0);
  track_->begin_object(*g, 3);
  chunk(*g, "xyz");
  turn();
  EXPECT_THAT(seen_, ElementsAre(Seen{0, 0, "0123456789", 10}, Seen{0, 1, "", 0}, Seen{0, 2, "xyz", 3}));
}

TEST_F(FrameReaderTest, KeepsOnlyTheFirstBytesAndReportsTheWholeSize) {
  make(model::CacheLimits{}, 16);
  const std::string big = pattern(100);
  model::Group* g = track_->begin_group(0);
  track_->begin_object(*g, big.size());
  chunk(*g, big.substr(0, 7));
  turn();
  chunk(*g, big.substr(7, 30));
  turn();
  EXPECT_TRUE(seen_.empty());  // 37 of 100 bytes: more than it keeps, but not the whole frame
  chunk(*g, big.substr(37));
  track_->begin_object(*g, 5);  // shorter than it keeps
  chunk(*g, "short");
  track_->begin_object(*g, 0);
  turn();
  EXPECT_THAT(seen_, ElementsAre(Seen{0, 0, big.substr(0, 16), 100}, Seen{0, 1, "short", 5},
                                 Seen{0, 2, "", 0}));
}

TEST_F(FrameReaderTest, AFrameCutShortIsNotEmitted) {
  make(model::CacheLimits{}, 16);
  model::Group* g = track_->begin_group(0);
  track_->begin_object(*g, 4);
  chunk(*g, "done");
  track_->begin_object(*g, 100);
  chunk(*g, pattern(50));  // past what it keeps, short of the frame
  turn();
  track_->abort_group(*g);
  turn();
  model::Group* h = track_->begin_group(1);
  track_->begin_object(*h, 2);
  chunk(*h, "ok");
  turn();
  EXPECT_THAT(seen_, ElementsAre(Seen{0, 0, "done", 4}, Seen{1, 0, "ok", 2}));
}

// The generator's viewers keep one group: a group evicted (by the next one's start) while its
// frames still arrive is still read to its end, before the next group's frames.
TEST_F(FrameReaderTest, ACacheOfOneGroupLosesNoFrame) {
  model::CacheLimits one;
  one.max_groups = 1;
  make(one, 16);
  const std::string first = pattern(20);
  model::GroupRef g0(track_->begin_group(0));  // held as a session's receiver holds it
  track_->begin_object(*g0, first.size());
  chunk(*g0, first.substr(0, 10));
  turn();
  model::GroupRef g1(track_->begin_group(1));
  ASSERT_EQ(track_->groups_from(0).size(), 1u);  // group 0 left the cache
  track_->begin_object(*g1, 3);
  chunk(*g1, "new");
  track_->finish_group(*g1);
  turn();
  EXPECT_TRUE(seen_.empty());  // group 1 waits for group 0
  chunk(*g0, first.substr(10));
  track_->begin_object(*g0, 3);
  chunk(*g0, "old");
  track_->finish_group(*g0);
  turn();
  EXPECT_THAT(seen_, ElementsAre(Seen{0, 0, first.substr(0, 16), 20}, Seen{0, 1, "old", 3},
                                 Seen{1, 0, "new", 3}));
}

}  // namespace moqd::client::frame_reader_test
