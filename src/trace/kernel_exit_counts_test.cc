// KernelExitCounts: total() and the order of a reading (sort_kernel_exit_counts).
#include "trace/kernel_exit_counts.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

TEST(KernelExitCounts, TotalIsTheSumOverReasons) {
  KernelExitCounts c;
  EXPECT_EQ(c.total(), 0u);
  c.reasons = {{ExitIsa::kSvm, 0x400, 7, 100}, {ExitIsa::kSvm, 0x7c, 5, 50}};
  c.msrs = {{0x80b, true, 99}};  // breakdown rows are not exits of their own
  EXPECT_EQ(c.total(), 12u);
}

TEST(KernelExitCounts, SortedByCountDescendingTiesByKey) {
  KernelExitCounts c;
  c.reasons = {
      {ExitIsa::kSvm, 0x7b, 3, 0}, {ExitIsa::kSvm, 0x400, 9, 0}, {ExitIsa::kSvm, 0x78, 3, 0}};
  c.msrs = {{0x830, true, 1}, {0x80b, true, 4}, {0x80b, false, 4}};
  c.pio = {{0x40, false, 2}, {0x3f8, false, 20}};
  c.npf = {{NpfKind::kMmioOther, 0xfebf1, 1},
           {NpfKind::kRamNotPresent, 0, 50},
           {NpfKind::kMmioCached, 0xfebf0, 1}};
  c.irqs = {{236, 1}, {34, 8}};
  sort_kernel_exit_counts(c);
  ASSERT_EQ(c.reasons.size(), 3u);
  EXPECT_EQ(c.reasons[0].code, 0x400u);
  EXPECT_EQ(c.reasons[1].code, 0x78u);  // ties: lower code first
  EXPECT_EQ(c.reasons[2].code, 0x7bu);
  EXPECT_EQ(c.msrs[0].msr, 0x80bu);
  EXPECT_FALSE(c.msrs[0].write);  // read before write on a tie
  EXPECT_TRUE(c.msrs[1].write);
  EXPECT_EQ(c.msrs[2].msr, 0x830u);
  EXPECT_EQ(c.pio[0].port, 0x3f8);
  EXPECT_EQ(c.npf[0].kind, NpfKind::kRamNotPresent);
  EXPECT_EQ(c.npf[1].kind, NpfKind::kMmioCached);
  EXPECT_EQ(c.npf[2].kind, NpfKind::kMmioOther);
  EXPECT_EQ(c.irqs[0].vector, 34u);
}

}  // namespace
}  // namespace tern
