#include "stats/stats_table.h"

#include <gtest/gtest.h>

#include "stats/stats_test_snapshot.h"

namespace tern {
namespace {

TEST(StatsTable, RatesAreDeltasOverElapsedTime) {
  auto a = testing::stats_snapshot(1'000'000'000, 1);
  auto b = testing::stats_snapshot(3'000'000'000, 3);  // 2 s later, counters tripled
  auto r = compute_rates(a, b);
  EXPECT_DOUBLE_EQ(r["interval_s"].get<double>(), 2.0);
  EXPECT_EQ(r["rates"]["exits"]["KVM_EXIT_IO"]["total"], 30u);
  EXPECT_DOUBLE_EQ(r["rates"]["exits"]["KVM_EXIT_IO"]["per_s"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(r["rates"]["devices"]["serial0"]["per_s"].get<double>(), 10.0);  // (30-10)/2
  EXPECT_DOUBLE_EQ(r["rates"]["unclaimed"]["pio 0x510"]["per_s"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(r["rates"]["queues"]["virtio-blk0/q0 kicks"]["per_s"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(r["rates"]["kvm_vcpu"]["exits"]["per_s"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(r["rates"]["cpu_ns"]["vcpu0/77 user"]["per_s"].get<double>(), 300'000'000.0);
  ASSERT_EQ(r["errors"].size(), 1u);
  EXPECT_EQ(r["errors"][0],
            "VM: kvm in-kernel stats unavailable: KVM_GET_STATS_FD: Invalid argument");
}

TEST(StatsTable, SignedIntegersOfAnInProcessSnapshotCount) {
  auto s = testing::stats_snapshot(1, 1);
  s["threads"][0]["tid"] = 77;  // pid_t: a signed JSON integer until it goes through text
  s["process"] = {{"pid", 70}, {"user_ns", 5}, {"system_ns", 6}, {"guest_ns", 7}};
  auto c = flatten_stats(s);
  EXPECT_EQ(c["cpu_ns"]["vcpu0/77 user"], 300'000'000u);
  EXPECT_EQ(c["cpu_ns"]["process (all threads) guest"], 7u);
}

TEST(StatsTable, CounterGoingBackwardsCountsFromZero) {
  auto r = compute_rates(testing::stats_snapshot(1'000'000'000, 5),
                         testing::stats_snapshot(2'000'000'000, 1));
  EXPECT_DOUBLE_EQ(r["rates"]["exits"]["KVM_EXIT_IO"]["per_s"].get<double>(), 10.0);
}

TEST(StatsTable, TableShowsSectionsAndCpuPercent) {
  auto r = compute_rates(testing::stats_snapshot(1'000'000'000, 1),
                         testing::stats_snapshot(3'000'000'000, 3));
  std::string t = render_rates_table(r, 10);
  EXPECT_NE(t.find("exits by reason"), std::string::npos) << t;
  EXPECT_NE(t.find("KVM_EXIT_IO"), std::string::npos) << t;
  EXPECT_NE(t.find("serial0"), std::string::npos) << t;
  EXPECT_NE(t.find("pio 0x510"), std::string::npos) << t;
  EXPECT_NE(t.find("KVM in-kernel, all vCPUs"), std::string::npos) << t;
  // 300 ms of user time per second = 30.0% of one CPU.
  EXPECT_NE(t.find("30.0%"), std::string::npos) << t;
  EXPECT_NE(t.find("note: VM: kvm in-kernel stats unavailable"), std::string::npos) << t;
}

TEST(StatsTable, SummaryHasTotalsAndLatency) {
  std::string s = render_summary(testing::stats_snapshot(1, 2));
  EXPECT_NE(s.find("KVM_EXIT_IO"), std::string::npos) << s;
  EXPECT_NE(s.find("serial0"), std::string::npos) << s;
  // 20 IO exits, mean 30000/20 = 1500 ns, max 3000 ns.
  EXPECT_NE(s.find("20         1500         3000"), std::string::npos) << s;
}

}  // namespace
}  // namespace tern
