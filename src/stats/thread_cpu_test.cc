#include "stats/thread_cpu.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace tern {
namespace {

TEST(ThreadCpu, ParsesUtimeStimeGuestTimeWithOddComm) {
  // Fields from proc(5): 14 utime=250, 15 stime=40, 43 guest_time=200. comm holds ") (" and spaces.
  std::string line =
      "4242 (vcpu 0) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 40 0 0 20 0 3 0 12345 1000000 "
      "100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 200 0 0 0 0 0 0 0 0 0\n";
  auto t = parse_task_stat(line, 10'000'000);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->tid, 4242);
  EXPECT_EQ(t->name, "vcpu 0) (x)");
  EXPECT_EQ(t->user_ns, 2'500'000'000u);
  EXPECT_EQ(t->system_ns, 400'000'000u);
  EXPECT_EQ(t->guest_ns, 2'000'000'000u);
  EXPECT_EQ(t->last_cpu, 1);  // field 39, processor
}

TEST(ThreadCpu, ParsesCpusAllowedList) {
  EXPECT_EQ(parse_cpus_allowed_list("Name:\tvcpu0\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1,4\n"
                                    "Mems_allowed:\t1\n"),
            "0-1,4");
  EXPECT_EQ(parse_cpus_allowed_list("Name:\tx\n"), "");
}

TEST(ThreadCpu, RejectsTruncatedLines) {
  EXPECT_FALSE(parse_task_stat("12 (x) S 1 2 3", 1));
  EXPECT_FALSE(parse_task_stat("garbage", 1));
  EXPECT_FALSE(parse_task_stat("x (y) S 1 2 3 4 5 6 7 8 9 10 11 12", 1));
}

TEST(ThreadCpu, ReadsThisProcess) {
  auto threads = read_thread_cpu();
  ASSERT_TRUE(threads) << threads.error().message();
  bool found = false;
  for (const auto& t : *threads) {
    if (t.tid != ::gettid()) continue;
    found = true;
    EXPECT_GE(t.last_cpu, 0);
    EXPECT_FALSE(t.cpus_allowed.empty());
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tern
