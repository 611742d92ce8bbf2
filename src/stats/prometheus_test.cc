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
  EXPECT_TRUE(has(t, R"(tern_queue_kicks_total{queue="virtio-blk0/q0"} 5)")) << t;
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

TEST(Prometheus, NamesAndLabelValuesAreSanitised) {
  EXPECT_EQ(prometheus_name("halt-poll.ns"), "halt_poll_ns");
  nlohmann::json s = testing::stats_snapshot(1, 1);
  s["queues"][0]["name"] = "q\"1\\\n";
  std::string t = prometheus_text(s);
  EXPECT_TRUE(has(t, R"(tern_queue_kicks_total{queue="q\"1\\\n"} 5)")) << t;
}

}  // namespace
}  // namespace tern
