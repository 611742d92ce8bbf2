#include "stats/prometheus.h"

#include <gtest/gtest.h>

#include "stats/stats_test_snapshot.h"

namespace tern {
namespace {

bool has(const std::string& text, const std::string& line) {
  return text.find(line + "\n") != std::string::npos;
}

TEST(Prometheus, ExitHistogramIsCumulativeWithSumAndCount) {
  std::string t = prometheus_text(testing::stats_snapshot(1'000'000'000, 1));
  EXPECT_TRUE(has(t, "# TYPE tern_vcpu_exit_handling_ns histogram")) << t;
  EXPECT_TRUE(
      has(t, R"(tern_vcpu_exit_handling_ns_bucket{vcpu="0",reason="KVM_EXIT_IO",le="512"} 0)"))
      << t;
  EXPECT_TRUE(
      has(t, R"(tern_vcpu_exit_handling_ns_bucket{vcpu="0",reason="KVM_EXIT_IO",le="1024"} 6)"))
      << t;
  EXPECT_TRUE(
      has(t, R"(tern_vcpu_exit_handling_ns_bucket{vcpu="0",reason="KVM_EXIT_IO",le="2048"} 6)"))
      << t;
  EXPECT_TRUE(
      has(t, R"(tern_vcpu_exit_handling_ns_bucket{vcpu="0",reason="KVM_EXIT_IO",le="4096"} 10)"))
      << t;
  EXPECT_TRUE(
      has(t, R"(tern_vcpu_exit_handling_ns_bucket{vcpu="0",reason="KVM_EXIT_IO",le="+Inf"} 10)"))
      << t;
  EXPECT_TRUE(has(t, R"(tern_vcpu_exit_handling_ns_sum{vcpu="0",reason="KVM_EXIT_IO"} 15000)"))
      << t;
  EXPECT_TRUE(has(t, R"(tern_vcpu_exit_handling_ns_count{vcpu="0",reason="KVM_EXIT_IO"} 10)")) << t;
}

TEST(Prometheus, DevicesUnclaimedQueuesKvmAndThreads) {
  std::string t = prometheus_text(testing::stats_snapshot(1'000'000'000, 1));
  EXPECT_TRUE(
      has(t, R"(tern_device_accesses_total{device="serial0",bus="pio",base="0x3f8",op="write"} 8)"))
      << t;
  EXPECT_TRUE(has(t, R"(tern_device_time_ns_total{device="serial0",bus="pio",base="0x3f8"} 1000)"))
      << t;
  EXPECT_TRUE(has(
      t, R"(tern_unclaimed_accesses_total{device="unclaimed",bus="pio",addr="0x510",op="read"} 1)"))
      << t;
  EXPECT_TRUE(has(
      t, R"(tern_device_queue_kicks_total{device="virtio-blk0",kind="virtio-blk",queue="0"} 5)"))
      << t;
  EXPECT_TRUE(has(t, R"(tern_kvm_vcpu_exits_total{vcpu="0"} 100)")) << t;
  EXPECT_TRUE(has(t, R"(tern_thread_cpu_ns_total{thread="vcpu0",tid="77",mode="guest"} 200000000)"))
      << t;
  // Each family's HELP/TYPE appears exactly once.
  size_t first = t.find("# TYPE tern_device_accesses_total counter");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(t.find("# TYPE tern_device_accesses_total counter", first + 1), std::string::npos);
  // The VM's stats are unavailable in this snapshot: no tern_kvm_vm_ series.
  EXPECT_EQ(t.find("tern_kvm_vm_"), std::string::npos);
}

TEST(Prometheus, DeviceQueueAndDeviceCounterSeries) {
  std::string t = prometheus_text(testing::stats_snapshot(1'000'000'000, 2));
  const std::string l = R"({device="virtio-blk0",kind="virtio-blk",queue="0"})";
  EXPECT_TRUE(has(t, "# TYPE tern_device_queue_kicks_total counter")) << t;
  EXPECT_TRUE(has(t, "tern_device_queue_kicks_total" + l + " 10")) << t;
  EXPECT_TRUE(has(t, "tern_device_queue_requests_total" + l + " 12")) << t;
  EXPECT_TRUE(has(t, "tern_device_queue_interrupts_total" + l + " 8")) << t;
  EXPECT_TRUE(has(t, "tern_device_queue_interrupts_suppressed_total" + l + " 4")) << t;
  EXPECT_TRUE(has(t, "tern_device_queue_bytes_total" + l + " 49152")) << t;
  EXPECT_TRUE(has(t, "tern_device_queue_errors_total" + l + " 0")) << t;
  EXPECT_TRUE(
      has(t, R"(tern_device_counter_reads_total{device="virtio-blk0",kind="virtio-blk"} 12)"))
      << t;
  EXPECT_TRUE(has(
      t, R"(tern_device_counter_protocol_errors_total{device="virtio-blk0",kind="virtio-blk"} 0)"))
      << t;
  // The old per-queue families are gone.
  EXPECT_EQ(t.find("tern_queue_"), std::string::npos) << t;
}

TEST(Prometheus, NamesAndLabelValuesAreSanitised) {
  EXPECT_EQ(prometheus_name("halt-poll.ns"), "halt_poll_ns");
  nlohmann::json s = testing::stats_snapshot(1, 1);
  s["device_counters"][0]["name"] = "q\"1\\\n";
  s["device_counters"][0]["counters"]["odd-name.x"] = 3;
  std::string t = prometheus_text(s);
  EXPECT_TRUE(
      has(t, R"(tern_device_counter_odd_name_x_total{device="q\"1\\\n",kind="virtio-blk"} 3)"))
      << t;
  EXPECT_TRUE(
      has(t, R"(tern_device_queue_kicks_total{device="q\"1\\\n",kind="virtio-blk",queue="0"} 5)"))
      << t;
}

}  // namespace
}  // namespace tern
