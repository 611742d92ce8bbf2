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

// GET /tern/stats "lifecycle" (the control loop's count of guest resets restarted in place) is
// a row of `tern stat` and of the summary once there was one.
TEST(StatsTable, GuestResetsAreShownOnceThereWasOne) {
  auto a = testing::stats_snapshot(1'000'000'000, 1);
  auto b = testing::stats_snapshot(3'000'000'000, 3);
  a["lifecycle"] = {{"resets", 0}};
  b["lifecycle"] = {{"resets", 2}, {"last_reset_reason", "reboot"}};
  auto r = compute_rates(a, b);
  EXPECT_EQ(r["rates"]["lifecycle"]["guest resets"]["total"], 2u);
  std::string t = render_rates_table(r, 10);
  EXPECT_NE(t.find("VM lifecycle"), std::string::npos) << t;
  EXPECT_NE(t.find("guest resets"), std::string::npos) << t;
  EXPECT_NE(render_summary(b).find("guest resets"), std::string::npos);
  EXPECT_EQ(render_summary(a).find("VM lifecycle"), std::string::npos);
}

TEST(StatsTable, SummaryHasTotalsAndLatency) {
  std::string s = render_summary(testing::stats_snapshot(1, 2));
  EXPECT_NE(s.find("KVM_EXIT_IO"), std::string::npos) << s;
  EXPECT_NE(s.find("serial0"), std::string::npos) << s;
  // 20 IO exits, mean 30000/20 = 1500 ns, max 3000 ns.
  EXPECT_NE(s.find("20         1500         3000"), std::string::npos) << s;
}

TEST(StatsTable, DeviceQueuesFlattenWithEveryField) {
  auto c = flatten_stats(testing::stats_snapshot(1, 2));
  EXPECT_EQ(c["queues"]["virtio-blk0/q0 kicks"], 10u);
  EXPECT_EQ(c["queues"]["virtio-blk0/q0 requests"], 12u);
  EXPECT_EQ(c["queues"]["virtio-blk0/q0 interrupts"], 8u);
  EXPECT_EQ(c["queues"]["virtio-blk0/q0 interrupts_suppressed"], 4u);
  EXPECT_EQ(c["queues"]["virtio-blk0/q0 bytes"], 49152u);
  EXPECT_EQ(c["queues"]["virtio-blk0/q0 errors"], 0u);
  EXPECT_EQ(c["device_counters"]["virtio-blk0 reads"], 12u);
  EXPECT_EQ(c["device_counters"]["virtio-blk0 protocol_errors"], 0u);
}

TEST(StatsTable, QueueBlockHasRatesAndTotalsInColumns) {
  auto r = compute_rates(testing::stats_snapshot(1'000'000'000, 1),
                         testing::stats_snapshot(3'000'000'000, 3));
  std::string t = render_rates_table(r, 10);
  // Header, then per queue a rates line and a totals line, one column per counter:
  // kicks 15 (5/s), requests 18 (6/s), interrupts 12 (4/s), suppressed 6 (2/s),
  // bytes 73728 (24576/s), errors 0.
  EXPECT_NE(t.find("device queues                       kicks   requests interrupts suppressed"
                   "      bytes     errors    cpu/req\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  virtio-blk0/q0 per s                  5          6          4          2"
                   "      24.6k          0          -\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("  virtio-blk0/q0 total                 15         18         12          6"
                   "      73.7k          0\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("device counters"), std::string::npos) << t;
  EXPECT_NE(t.find("virtio-blk0 reads"), std::string::npos) << t;
}

// Notification tuning's counters (coalesce_us=, poll_us=) get columns once a queue has one.
TEST(StatsTable, TuningCountersAreColumnsOnlyWhenUsed) {
  auto a = testing::stats_snapshot(1'000'000'000, 1);
  auto b = testing::stats_snapshot(3'000'000'000, 3);
  std::string untuned = render_rates_table(compute_rates(a, b), 10);
  EXPECT_EQ(untuned.find("coalesced"), std::string::npos) << untuned;
  for (auto* s : {&a, &b}) {
    auto& q = (*s)["device_counters"][0]["queues"][0];
    const uint64_t k = s == &a ? 1 : 3;
    q["interrupts_coalesced"] = 3 * k;
    q["poll_hits"] = 0;
    q["poll_ns"] = 1000 * k;
  }
  std::string t = render_rates_table(compute_rates(a, b), 10);
  EXPECT_NE(t.find("errors  coalesced  poll_hits    poll_ns    cpu/req\n"), std::string::npos) << t;
  // coalesced 9 (3/s), poll_hits 0, poll_ns 3000 (1000 ns/s).
  EXPECT_NE(t.find("          0          3          0       1000          -\n"), std::string::npos)
      << t;
  EXPECT_NE(t.find("          0          9          0       3000\n"), std::string::npos) << t;
  std::string summary = render_summary(b);
  EXPECT_NE(summary.find("     errors  coalesced  poll_hits    poll_ns\n"), std::string::npos)
      << summary;
}

TEST(StatsTable, QueueCpuPerRequestComesFromTheQueueThread) {
  auto a = testing::stats_snapshot(1'000'000'000, 1);
  auto b = testing::stats_snapshot(3'000'000'000, 3);
  // The worker of virtio-blk0's queue 0 is named "virtio-blk0/q0": 12 µs of CPU in 2 s
  // (6 µs/s) for 6 requests/s = 1 µs per request; guest time is not added (part of user).
  a["threads"].push_back({{"tid", 90}, {"name", "virtio-blk0/q0"}, {"user_ns", 1000},
                          {"system_ns", 1000}, {"guest_ns", 0}});
  b["threads"].push_back({{"tid", 90}, {"name", "virtio-blk0/q0"}, {"user_ns", 7000},
                          {"system_ns", 7000}, {"guest_ns", 5000}});
  std::string t = render_rates_table(compute_rates(a, b), 10);
  EXPECT_NE(t.find("      24.6k          0      1.0us\n"), std::string::npos) << t;
}

// Each thread's allowed CPUs and last CPU (GET /tern/stats threads[]) are shown as of the later
// snapshot; a reply without them (an older tern) shows no block.
TEST(StatsTable, WhereThreadsRun) {
  auto a = testing::stats_snapshot(1'000'000'000, 1);
  auto b = testing::stats_snapshot(3'000'000'000, 3);
  EXPECT_EQ(render_rates_table(compute_rates(a, b), 0).find("where threads run"), std::string::npos);
  b["threads"][0]["cpus_allowed"] = "0-1";
  b["threads"][0]["last_cpu"] = 1;
  auto r = compute_rates(a, b);
  ASSERT_EQ(r["threads"].size(), 1u);
  EXPECT_EQ(r["threads"][0]["thread"], "vcpu0/77");
  std::string t = render_rates_table(r, 0);
  EXPECT_NE(t.find("where threads run (--cpu-affinity)                allowed     last CPU\n"
                   "  vcpu0/77                                            0-1            1\n"),
            std::string::npos)
      << t;
}

TEST(StatsTable, QueuesWithoutCountsAreLeftOut) {
  auto s = testing::stats_snapshot(1, 0);  // every counter 0
  std::string t = render_rates_table(compute_rates(s, s), 0);
  EXPECT_EQ(t.find("device queues"), std::string::npos) << t;
  EXPECT_EQ(render_summary(s).find("device queues"), std::string::npos);
}

TEST(StatsTable, SummaryHasQueueTotals) {
  std::string s = render_summary(testing::stats_snapshot(1, 2));
  EXPECT_NE(s.find("    virtio-blk0/q0                       10         12          8          4"
                   "      49152          0\n"),
            std::string::npos)
      << s;
}

// A PCI function's BAR accesses (PciDevices' "mmio_reads"/"mmio_writes" counters) per request of
// its queues: an NVMe controller without shadow doorbells writes a CQ head doorbell per batch.
TEST(StatsTable, MmioExitsPerRequest) {
  auto with_nvme = [](uint64_t t, uint64_t k) {
    auto s = testing::stats_snapshot(t, k);
    s["device_counters"].push_back(
        {{"name", "nvme0"}, {"kind", "nvme"},
         {"counters", {{"reads", 3 * k}, {"mmio_reads", 1 * k}, {"mmio_writes", 3 * k}}},
         {"queues", {{{"index", 1}, {"kicks", 2 * k}, {"requests", 2 * k}, {"interrupts", k},
                      {"interrupts_suppressed", 0}, {"bytes", 0}, {"errors", 0}},
                     {{"index", 2}, {"kicks", 0}, {"requests", 2 * k}, {"interrupts", 0},
                      {"interrupts_suppressed", 0}, {"bytes", 0}, {"errors", 0}}}}});
    return s;
  };
  // Totals: 12 accesses / 12 requests; over the interval 8 / 8 in 2 s.
  std::string t = render_rates_table(
      compute_rates(with_nvme(1'000'000'000, 1), with_nvme(3'000'000'000, 3)), 10);
  EXPECT_NE(t.find("MMIO exits per request"), std::string::npos) << t;
  EXPECT_NE(t.find("  nvme0                                              1.00         1.00\n"),
            std::string::npos)
      << t;
  // virtio-blk0 has no mmio counters in this snapshot: no row.
  EXPECT_EQ(t.find("  virtio-blk0                 "), std::string::npos) << t;
  // No requests in the interval: "-".
  std::string idle = render_rates_table(compute_rates(with_nvme(1, 2), with_nvme(2, 2)), 10);
  EXPECT_NE(idle.find("1.00            -\n"), std::string::npos) << idle;
  std::string summary = render_summary(with_nvme(1, 4));
  EXPECT_NE(summary.find("    nvme0                                              1.00\n"),
            std::string::npos)
      << summary;
}

}  // namespace
}  // namespace tern
