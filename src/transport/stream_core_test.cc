#include "transport/stream_core.h"

#include <gtest/gtest.h>

#include <unordered_map>
#include <vector>

namespace moqd::transport {
namespace {

// ---------------------------------------------------------------------------------------------
// SendScheduler

struct FakeStream {
  StreamId id = 0;
  SendScheduler::Entry sched;
};

class SendSchedulerTest : public ::testing::Test {
 protected:
  FakeStream& add(StreamId id, uint64_t order = 0) {
    FakeStream& s = streams_[id];
    s.id = id;
    s.sched.order = order;
    return s;
  }
  void push(StreamId id) { scheduler_.push_back(id, streams_[id].sched); }
  FakeStream* pop() {
    return scheduler_.pop(
        [this](StreamId id) {
          auto it = streams_.find(id);
          return it == streams_.end() ? nullptr : &it->second;
        },
        &FakeStream::sched);
  }
  // Pops everything, in order.
  std::vector<StreamId> drain() {
    std::vector<StreamId> ids;
    while (FakeStream* s = pop()) {
      ids.push_back(s->id);
    }
    return ids;
  }

  std::unordered_map<StreamId, FakeStream> streams_;
  SendScheduler scheduler_;
};

TEST_F(SendSchedulerTest, EmptyPopsNothing) {
  EXPECT_TRUE(scheduler_.empty());
  EXPECT_EQ(pop(), nullptr);
}

TEST_F(SendSchedulerTest, HigherOrderGoesFirst) {
  add(1, 5);
  add(2, 9);
  add(3, 0);
  push(1);
  push(2);
  push(3);
  EXPECT_EQ(drain(), (std::vector<StreamId>{2, 1, 3}));
  EXPECT_TRUE(scheduler_.empty());
}

TEST_F(SendSchedulerTest, EqualOrdersShareRoundRobin) {
  add(1, 3);
  add(2, 3);
  add(3, 3);
  push(1);
  push(2);
  push(3);
  std::vector<StreamId> turns;
  for (int i = 0; i < 6; ++i) {
    FakeStream* s = pop();
    ASSERT_NE(s, nullptr);
    turns.push_back(s->id);
    push(s->id);  // still has data: back of its order
  }
  EXPECT_EQ(turns, (std::vector<StreamId>{1, 2, 3, 1, 2, 3}));
}

TEST_F(SendSchedulerTest, PopMarksEntryUnlisted) {
  add(1);
  push(1);
  EXPECT_TRUE(streams_[1].sched.queued);
  ASSERT_NE(pop(), nullptr);
  EXPECT_FALSE(streams_[1].sched.queued);
}

TEST_F(SendSchedulerTest, PushWhileListedIsNoop) {
  add(1);
  add(2);
  push(1);
  push(2);
  push(1);
  EXPECT_EQ(drain(), (std::vector<StreamId>{1, 2}));
}

TEST_F(SendSchedulerTest, RemoveUnlistsAndIsIdempotent) {
  add(1);
  add(2);
  push(1);
  push(2);
  scheduler_.remove(1, streams_[1].sched);
  scheduler_.remove(1, streams_[1].sched);
  EXPECT_FALSE(streams_[1].sched.queued);
  EXPECT_EQ(drain(), (std::vector<StreamId>{2}));
}

TEST_F(SendSchedulerTest, RemovingFromTheMiddleKeepsTheOthersInTurn) {
  add(1);
  add(2);
  add(3);
  push(1);
  push(2);
  push(3);
  scheduler_.remove(2, streams_[2].sched);
  EXPECT_EQ(drain(), (std::vector<StreamId>{1, 3}));
}

TEST_F(SendSchedulerTest, RemovingTheLastOfAnOrderLeavesTheOthers) {
  add(1, 7);
  add(2, 1);
  push(1);
  push(2);
  scheduler_.remove(1, streams_[1].sched);
  EXPECT_FALSE(scheduler_.empty());
  EXPECT_EQ(drain(), (std::vector<StreamId>{2}));
}

TEST_F(SendSchedulerTest, SetOrderMovesListedStreamToBackOfNewOrder) {
  add(1, 1);
  add(2, 2);
  add(3, 2);
  push(1);
  push(2);
  push(3);
  scheduler_.set_order(1, streams_[1].sched, 2);
  EXPECT_EQ(streams_[1].sched.order, 2u);
  EXPECT_EQ(drain(), (std::vector<StreamId>{2, 3, 1}));
}

TEST_F(SendSchedulerTest, SetOrderOfUnlistedStreamOnlyRecordsIt) {
  add(1, 1);
  scheduler_.set_order(1, streams_[1].sched, 4);
  EXPECT_FALSE(streams_[1].sched.queued);
  EXPECT_TRUE(scheduler_.empty());
  add(2, 3);
  push(2);
  push(1);
  EXPECT_EQ(drain(), (std::vector<StreamId>{1, 2}));
}

TEST_F(SendSchedulerTest, PushFrontKeepsTheTurn) {
  add(1);
  add(2);
  push(1);
  push(2);
  FakeStream* s = pop();
  ASSERT_EQ(s->id, 1u);
  scheduler_.push_front(1, s->sched);
  EXPECT_EQ(drain(), (std::vector<StreamId>{1, 2}));
}

TEST_F(SendSchedulerTest, PushFrontIntoAnEmptiedOrder) {
  add(1, 6);
  add(2, 1);
  push(1);
  push(2);
  FakeStream* s = pop();
  ASSERT_EQ(s->id, 1u);
  scheduler_.push_front(1, s->sched);
  EXPECT_EQ(drain(), (std::vector<StreamId>{1, 2}));
}

TEST_F(SendSchedulerTest, PopSkipsStreamsThatAreGone) {
  add(1);
  add(2);
  add(3);
  push(1);
  push(2);
  push(3);
  streams_.erase(1);
  streams_.erase(2);
  EXPECT_EQ(drain(), (std::vector<StreamId>{3}));
  EXPECT_TRUE(scheduler_.empty());
}

// An order emptied by pop() is kept as a spare bucket; it must take the key of the next order.
TEST_F(SendSchedulerTest, ReusedBucketTakesTheNewOrder) {
  add(1, 10);
  push(1);
  ASSERT_NE(pop(), nullptr);
  add(2, 1);
  add(3, 20);
  push(2);
  push(3);
  add(4, 5);
  push(4);
  EXPECT_EQ(drain(), (std::vector<StreamId>{3, 4, 2}));
}

TEST_F(SendSchedulerTest, ClearEmptiesEverything) {
  add(1, 1);
  add(2, 2);
  push(1);
  push(2);
  scheduler_.clear();
  EXPECT_TRUE(scheduler_.empty());
  EXPECT_EQ(pop(), nullptr);
}

// ---------------------------------------------------------------------------------------------
// RecvBuffer

std::vector<uint8_t> pattern(size_t n, size_t from = 0) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<uint8_t>((from + i) * 7);
  }
  return v;
}

TEST(RecvBufferTest, AppendedBytesArePeekedInOrder) {
  RecvBuffer b;
  EXPECT_TRUE(b.peek().empty());
  auto first = pattern(5);
  auto second = pattern(3, 5);
  b.append(first);
  b.append(second);
  EXPECT_EQ(b.unread(), 8u);
  EXPECT_EQ(b.received(), 8u);
  EXPECT_EQ(b.consumed(), 0u);
  auto all = pattern(8);
  EXPECT_EQ(std::vector<uint8_t>(b.peek().begin(), b.peek().end()), all);
}

TEST(RecvBufferTest, ConsumeIsClampedToUnread) {
  RecvBuffer b;
  b.append(pattern(10));
  EXPECT_EQ(b.consume(4), 4u);
  EXPECT_EQ(b.peek().size(), 6u);
  EXPECT_EQ(b.peek()[0], pattern(10)[4]);
  EXPECT_EQ(b.consume(100), 6u);
  EXPECT_EQ(b.consume(1), 0u);
  EXPECT_EQ(b.unread(), 0u);
  EXPECT_EQ(b.consumed(), 10u);
  EXPECT_EQ(b.received(), 10u);
}

TEST(RecvBufferTest, ReadingInStepsKeepsTheUnreadBytes) {
  RecvBuffer b;
  auto data = pattern(200 * 1024);
  b.append(data);
  size_t read = 0;
  for (size_t step : {70 * 1024, 1, 60 * 1024, 3}) {
    ASSERT_EQ(b.consume(step), step);
    read += step;
    ASSERT_EQ(b.unread(), data.size() - read);
    EXPECT_TRUE(std::equal(b.peek().begin(), b.peek().end(), data.begin() + read));
  }
  auto more = pattern(10, data.size());
  b.append(more);
  EXPECT_EQ(b.peek().back(), more.back());
  EXPECT_EQ(b.consumed(), read);
}

TEST(RecvBufferTest, TakenBytesShareTheReceiveBufferWithoutACopy) {
  RecvBuffer b;
  auto data = pattern(3000);
  b.append(std::span(data).first(1200));
  b.append(std::span(data).subspan(1200));  // a second packet, before the reader ran
  const uint8_t* where = b.peek().data();
  int64_t buffers = Bytes::live_buffers();
  Bytes frame = b.take(2000);
  EXPECT_EQ(Bytes::live_buffers(), buffers);  // no new buffer: a view of the receive buffer
  EXPECT_EQ(frame.data(), where);
  EXPECT_EQ(frame.size(), 2000u);
  EXPECT_TRUE(std::equal(frame.span().begin(), frame.span().end(), data.begin()));
  EXPECT_EQ(b.consumed(), 2000u);
  EXPECT_EQ(b.take(5000).size(), 1000u);
  EXPECT_EQ(b.take(1).size(), 0u);
}

TEST(RecvBufferTest, SharedBytesAreNeverOverwrittenByLaterArrivals) {
  // Frames taken by the cache stay intact while the stream keeps receiving: later bytes go after
  // them, or into a new buffer (which starts with a copy of what is still unread).
  RecvBuffer b;
  std::vector<Bytes> taken;
  std::vector<uint8_t> expected;
  size_t offset = 0;
  for (int i = 0; i < 200; ++i) {
    auto packet = pattern(1200 + i % 7, offset);
    offset += packet.size();
    b.append(packet);
    if (i % 3 == 2) {
      Bytes t = b.take(b.unread() - 5);  // leaves a few unread bytes to carry over
      expected.insert(expected.end(), t.span().begin(), t.span().end());
      taken.push_back(std::move(t));
    }
  }
  std::vector<uint8_t> seen;
  for (const Bytes& t : taken) {
    seen.insert(seen.end(), t.span().begin(), t.span().end());
  }
  EXPECT_EQ(seen, pattern(seen.size()));
  EXPECT_EQ(seen, expected);
  EXPECT_TRUE(std::equal(b.peek().begin(), b.peek().end(), pattern(b.unread(), seen.size()).begin()));
}

TEST(RecvBufferTest, AnUnsharedBufferIsReusedInPlace) {
  RecvBuffer b;
  b.append(pattern(500));
  const uint8_t* first = b.peek().data();
  b.consume(500);
  int64_t buffers = Bytes::live_buffers();
  for (int i = 0; i < 10; ++i) {
    b.append(pattern(400, i));
    EXPECT_EQ(b.peek().data(), first);
    b.consume(400);
  }
  EXPECT_EQ(Bytes::live_buffers(), buffers);
}

TEST(RecvBufferTest, ASmallestBufferIsFreedOnceEverythingIsRead) {
  // A control stream's buffer is freed once its message is read, and the next message takes a new
  // smallest buffer (not a larger one): an idle QUIC viewer holds no receive memory.
  RecvBuffer control;
  int64_t before = Bytes::live_buffers();
  control.append(pattern(30));
  EXPECT_EQ(Bytes::live_buffers(), before + 1);
  control.consume(20);
  EXPECT_EQ(control.capacity(), RecvBuffer::kMinBuffer);  // 10 bytes still unread
  control.consume(10);
  EXPECT_EQ(control.capacity(), 0u);
  EXPECT_EQ(Bytes::live_buffers(), before);
  control.append(pattern(40, 1));
  EXPECT_EQ(control.capacity(), RecvBuffer::kMinBuffer);
  EXPECT_TRUE(std::equal(control.peek().begin(), control.peek().end(), pattern(40, 1).begin()));
  EXPECT_EQ(control.consume(40), 40u);
  EXPECT_EQ(control.capacity(), 0u);
  EXPECT_EQ(control.received(), 70u);
  EXPECT_EQ(control.consumed(), 70u);
  // Taken whole, the buffer is let go too: the taken Bytes alone keep its block.
  control.append(pattern(50, 2));
  Bytes kept = control.take(50);
  EXPECT_EQ(control.capacity(), 0u);
  EXPECT_EQ(Bytes::live_buffers(), before + 1);
  EXPECT_TRUE(std::equal(kept.span().begin(), kept.span().end(), pattern(50, 2).begin()));
  kept = Bytes();
  EXPECT_EQ(Bytes::live_buffers(), before);
  // A stream whose bytes keep being taken goes on to a larger buffer, which it keeps.
  control.append(pattern(60, 3));
  EXPECT_EQ(control.capacity(), 2 * RecvBuffer::kMinBuffer);
  Bytes next = control.take(60);
  EXPECT_EQ(control.capacity(), 2 * RecvBuffer::kMinBuffer);
  EXPECT_EQ(control.received(), 180u);
  EXPECT_EQ(control.consumed(), 180u);
}

TEST(RecvBufferTest, BuffersGrowFromTheSmallestToTheLargest) {
  // A control stream's message takes the smallest buffer; a stream that keeps sending while its
  // bytes are shared gets twice the last buffer each time one fills, up to the largest.
  RecvBuffer control;
  control.append(pattern(30));
  EXPECT_EQ(control.capacity(), RecvBuffer::kMinBuffer);
  RecvBuffer media;
  std::vector<Bytes> held;
  std::vector<size_t> capacities;
  for (int i = 0; i < 100; ++i) {
    media.append(pattern(1000));
    if (capacities.empty() || capacities.back() != media.capacity()) {
      capacities.push_back(media.capacity());
    }
    held.push_back(media.take(1000));
  }
  EXPECT_EQ(capacities, (std::vector<size_t>{1024, 2048, 4096, 8192, 16384}));  // 1,000-byte writes
  EXPECT_EQ(RecvBuffer::kMaxBuffer, 16384u);
}

TEST(RecvBufferTest, DiscardCountsBytesAsReceivedAndConsumed) {
  RecvBuffer b;
  b.append(pattern(4));
  b.discard(10);
  EXPECT_EQ(b.received(), 14u);
  EXPECT_EQ(b.consumed(), 10u);
  EXPECT_EQ(b.unread(), 4u);
}

TEST(RecvBufferTest, DropReturnsTheUnreadCount) {
  RecvBuffer b;
  b.append(pattern(9));
  b.consume(2);
  EXPECT_EQ(b.drop(), 7u);
  EXPECT_EQ(b.unread(), 0u);
  EXPECT_EQ(b.consumed(), 9u);
  EXPECT_EQ(b.drop(), 0u);
}

// ---------------------------------------------------------------------------------------------
// CreditWindow

TEST(CreditWindowTest, ExtendsOnlyOnceHalfTheWindowIsConsumed) {
  CreditWindow w(100);
  EXPECT_FALSE(w.extend(49, 100));
  EXPECT_EQ(w.limit(), 100u);
  EXPECT_TRUE(w.extend(50, 100));
  EXPECT_EQ(w.limit(), 150u);
  EXPECT_FALSE(w.extend(99, 100));
  EXPECT_TRUE(w.extend(100, 100));
  EXPECT_EQ(w.limit(), 200u);
}

TEST(CreditWindowTest, LargeStepJumpsStraightToConsumedPlusWindow) {
  CreditWindow w(100);
  EXPECT_TRUE(w.extend(1000, 100));
  EXPECT_EQ(w.limit(), 1100u);
}

// ---------------------------------------------------------------------------------------------
// SendBudget

constexpr size_t kTarget = 100;
constexpr size_t kBuffer = 1000;

TEST(SendBudgetTest, CapacityIsTheSmallerRoom) {
  SendBudget budget(kTarget, kBuffer);
  SendBudget::Entry e;
  EXPECT_EQ(budget.capacity(1, 0, e), kTarget);
  EXPECT_EQ(budget.capacity(1, 30, e), 70u);
  EXPECT_EQ(budget.capacity(1, 130, e), 0u);
  SendBudget::Entry other;
  budget.on_queued(950, 950, other);
  EXPECT_EQ(budget.unsent(), 950u);
  EXPECT_EQ(budget.capacity(1, 0, e), 50u);
  EXPECT_FALSE(e.blocked_on_session);
}

TEST(SendBudgetTest, FullStreamIsOwedWritableBelowHalfItsTarget) {
  SendBudget budget(kTarget, kBuffer);
  SendBudget::Entry e;
  budget.on_queued(60, 60, e);
  EXPECT_FALSE(e.exhausted);
  budget.on_queued(40, 100, e);
  EXPECT_TRUE(e.exhausted);
  budget.on_sent(50);
  EXPECT_FALSE(budget.take_stream_writable(50, e));
  budget.on_sent(1);
  EXPECT_TRUE(budget.take_stream_writable(49, e));
  EXPECT_FALSE(e.exhausted);
  EXPECT_FALSE(budget.take_stream_writable(0, e));
  EXPECT_EQ(budget.unsent(), 49u);
}

TEST(SendBudgetTest, StreamsRefusedForTheSessionAreOwedOnceItDrains) {
  SendBudget budget(kBuffer, kTarget);  // a session buffer smaller than a stream's target
  SendBudget::Entry a;
  SendBudget::Entry b;
  budget.on_queued(100, 100, a);
  EXPECT_EQ(budget.capacity(1, 100, a), 0u);
  EXPECT_EQ(budget.capacity(1, 100, a), 0u);  // listed once
  EXPECT_EQ(budget.capacity(2, 0, b), 0u);
  EXPECT_TRUE(a.blocked_on_session);
  EXPECT_TRUE(b.blocked_on_session);
  std::vector<StreamId> owed;
  auto owe = [&](StreamId id) { owed.push_back(id); };
  budget.on_sent(49);
  budget.take_session_writable(owe);
  EXPECT_TRUE(owed.empty());
  budget.on_sent(1);
  budget.take_session_writable(owe);
  EXPECT_EQ(owed, (std::vector<StreamId>{1, 2}));
  owed.clear();
  budget.take_session_writable(owe);
  EXPECT_TRUE(owed.empty());
}

TEST(SendBudgetTest, DroppedBytesCancelWhatTheStreamWasOwed) {
  SendBudget budget(kTarget, kBuffer);
  SendBudget::Entry e;
  budget.on_queued(150, 150, e);
  budget.on_dropped(150, e);
  EXPECT_FALSE(e.exhausted);
  EXPECT_EQ(budget.unsent(), 0u);
  EXPECT_FALSE(budget.take_stream_writable(0, e));
}

TEST(SendBudgetTest, ClearForgetsBlockedStreams) {
  SendBudget budget(kBuffer, kTarget);
  SendBudget::Entry e;
  budget.on_queued(100, 100, e);
  EXPECT_EQ(budget.capacity(1, 100, e), 0u);
  budget.clear();
  EXPECT_EQ(budget.unsent(), 0u);
  bool called = false;
  budget.take_session_writable([&](StreamId) { called = true; });
  EXPECT_FALSE(called);
}

// ---------------------------------------------------------------------------------------------
// StreamTable

struct TableStream {
  bool done = false;
  int* freed = nullptr;
  ~TableStream() {
    if (freed != nullptr) {
      ++*freed;
    }
  }
};

class StreamTableTest : public ::testing::Test {
 protected:
  TableStream& add(StreamId id) {
    TableStream& s = table_.add(id, std::make_unique<TableStream>());
    s.freed = &freed_;
    return s;
  }
  void reap() {
    table_.reap([](const TableStream& s) { return s.done; },
                [this](TableStream&) { ++before_free_; });
  }

  StreamTable<TableStream> table_;
  int freed_ = 0;
  int before_free_ = 0;
};

TEST_F(StreamTableTest, FindsWhatWasAdded) {
  TableStream& s = add(4);
  EXPECT_EQ(table_.find(4), &s);
  EXPECT_EQ(table_.find(8), nullptr);
  EXPECT_EQ(table_.size(), 1u);
}

TEST_F(StreamTableTest, DoomedStreamIsFreedOnlyByReap) {
  add(4).done = true;
  table_.doom(4);
  EXPECT_NE(table_.find(4), nullptr);
  EXPECT_EQ(freed_, 0);
  reap();
  EXPECT_EQ(table_.find(4), nullptr);
  EXPECT_EQ(freed_, 1);
  EXPECT_EQ(before_free_, 1);
}

TEST_F(StreamTableTest, ReapKeepsAStreamNoLongerDone) {
  add(4);
  table_.doom(4);
  reap();
  EXPECT_NE(table_.find(4), nullptr);
  EXPECT_EQ(before_free_, 0);
  table_.find(4)->done = true;
  reap();  // not doomed again: kept
  EXPECT_NE(table_.find(4), nullptr);
}

TEST_F(StreamTableTest, ReapSkipsStreamsAlreadyGone) {
  add(4).done = true;
  table_.doom(4);
  table_.doom(4);
  table_.doom(12);
  reap();
  EXPECT_EQ(freed_, 1);
  EXPECT_EQ(before_free_, 1);
  EXPECT_EQ(table_.size(), 0u);
}

TEST_F(StreamTableTest, ClearDoomedForgetsPendingFrees) {
  add(4).done = true;
  table_.doom(4);
  table_.clear_doomed();
  reap();
  EXPECT_NE(table_.find(4), nullptr);
  table_.clear();
  EXPECT_EQ(freed_, 1);
}

}  // namespace
}  // namespace moqd::transport
