#include "bus/unclaimed_table.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tern {
namespace {

TEST(UnclaimedTable, CountsPerAddressSortedByCount) {
  UnclaimedTable t;
  t.record_read(0x510);
  for (int i = 0; i < 3; ++i) t.record_write(0x520);
  t.record_read(0);
  auto s = t.snapshot();
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0].addr, 0x520u);
  EXPECT_EQ(s.rows[0].writes, 3u);
  EXPECT_EQ(s.rows[1].addr, 0u);  // ties by address
  EXPECT_EQ(s.rows[2].addr, 0x510u);
  EXPECT_EQ(s.rows[2].reads, 1u);
  EXPECT_EQ(s.other.reads + s.other.writes, 0u);
}

TEST(UnclaimedTable, SweepOfAllPortsIsBounded) {
  UnclaimedTable t;
  for (uint64_t port = 0; port < 0x10000; ++port) t.record_write(port);
  auto s = t.snapshot();
  EXPECT_EQ(s.rows.size(), UnclaimedTable::kSlots);
  uint64_t total = s.other.writes;
  for (const auto& r : s.rows) total += r.writes;
  EXPECT_EQ(total, 0x10000u);
  EXPECT_EQ(s.other.writes, 0x10000u - UnclaimedTable::kSlots);
}

TEST(UnclaimedTable, ConcurrentWritersLoseNothing) {
  UnclaimedTable t;
  std::vector<std::thread> threads;
  for (int n = 0; n < 4; ++n) {
    threads.emplace_back([&t] {
      for (int i = 0; i < 10000; ++i) t.record_read(static_cast<uint64_t>(i % 40));
    });
  }
  for (auto& th : threads) th.join();
  auto s = t.snapshot();
  uint64_t total = s.other.reads;
  for (const auto& r : s.rows) total += r.reads;
  EXPECT_EQ(total, 40000u);
  EXPECT_EQ(s.rows.size(), UnclaimedTable::kSlots);
  for (const auto& r : s.rows) EXPECT_EQ(r.reads, 1000u);  // each address: 4 threads x 250
}

}  // namespace
}  // namespace tern
