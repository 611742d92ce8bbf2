#include "api/event_stream_queue.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(EventStreamQueue, WakesOnlyWhenItWasEmpty) {
  EventStreamQueue q(100, "dropped\n");
  EXPECT_EQ(q.push("a\n"), EventStreamQueue::Push::kWake);
  EXPECT_EQ(q.push("b\n"), EventStreamQueue::Push::kQueued);
  EXPECT_EQ(q.take(), "a\nb\n");
  EXPECT_EQ(q.take(), "");
  EXPECT_EQ(q.push("c\n"), EventStreamQueue::Push::kWake);
  EXPECT_EQ(q.pending_bytes(), 6u);  // taken lines count until written
  q.written(4);
  EXPECT_EQ(q.pending_bytes(), 2u);
  EXPECT_FALSE(q.overflowed());
}

TEST(EventStreamQueue, OverflowKeepsWhatItHasAppendsTheDropLineAndIgnoresTheRest) {
  EventStreamQueue q(10, "dropped\n");
  EXPECT_EQ(q.push("12345\n"), EventStreamQueue::Push::kWake);
  EXPECT_EQ(q.take(), "12345\n");                                    // in flight: still counted
  EXPECT_EQ(q.push("abcd\n"), EventStreamQueue::Push::kOverflowed);  // 6 + 5 > 10
  EXPECT_TRUE(q.overflowed());
  EXPECT_EQ(q.push("x\n"), EventStreamQueue::Push::kIgnored);
  EXPECT_EQ(q.take(), "dropped\n");
  EXPECT_EQ(q.pending_bytes(), 6u + 8u);
}

TEST(EventStreamQueue, ALineAsLargeAsTheLimitFits) {
  EventStreamQueue q(4, "d\n");
  EXPECT_EQ(q.push("abc\n"), EventStreamQueue::Push::kWake);
  EXPECT_EQ(q.push("\n"), EventStreamQueue::Push::kOverflowed);
  EXPECT_EQ(q.take(), "abc\nd\n");
}

}  // namespace
}  // namespace tern
