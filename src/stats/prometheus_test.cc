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

// In-kernel exits: tern_kernel_* families from "kernel_exits"; off: only the enabled gauge.
TEST(Prometheus, KernelExitSeries) {
  nlohmann::json s = testing::stats_snapshot(1, 1);
  s["kernel_exits"] = {{"enabled", false}, {"error", "in-kernel exit accounting: EPERM"}};
  std::string off = prometheus_text(s);
  EXPECT_TRUE(has(off, "# TYPE tern_kernel_exits_enabled gauge\ntern_kernel_exits_enabled 0"))
      << off;
  EXPECT_EQ(off.find("tern_kernel_exits_total"), std::string::npos) << off;

  s["kernel_exits"] = nlohmann::json::parse(R"({"enabled":true,"method":"ebpf","since_ns":5,
      "total":150,"kvm_exits":153,"kvm_exits_edge":3,"kvm_exits_start_edge":0,"difference":-3,
      "vcpus":2,"userspace_exits":12,
      "reasons":[{"isa":"svm","code":1024,"reason":"npf","count":100,"time_ns":5000}],
      "msrs":[{"msr":"0x80b","name":"X2APIC_EOI","access":"write","count":30}],
      "pio":[{"port":"0x40","dir":"out","count":50}],
      "pio_in_kernel":[{"port":"0x3f8-0x3ff","device":"serial0","dir":"out","kvm_pio":10,
                        "userspace":4,"in_kernel":6}],
      "npf":[{"kind":"ram-not-present","count":60},
             {"kind":"mmio-cached","gpa":"0xfebf1000","device":"virtio-blk0","count":30}],
      "injected_irqs":[{"vector":236,"count":9}],"dropped":1})");
  std::string t = prometheus_text(s);
  for (const char* want :
       {"tern_kernel_exits_enabled 1", "# TYPE tern_kernel_exits_total counter",
        R"(tern_kernel_exits_total{isa="svm",reason="npf",code="1024"} 100)",
        R"(tern_kernel_exit_time_ns_total{isa="svm",reason="npf",code="1024"} 5000)",
        "tern_kernel_exits_kvm_total 153",
        "# TYPE tern_kernel_exits_difference gauge\ntern_kernel_exits_difference -3",
        "tern_kernel_exits_edge 3", "tern_kernel_exits_vcpus 2",
        "tern_kernel_exits_userspace_total 12",
        R"(tern_kernel_msr_accesses_total{msr="0x80b",name="X2APIC_EOI",access="write"} 30)",
        R"(tern_kernel_pio_total{port="0x40",dir="out"} 50)",
        R"(tern_kernel_pio_in_kernel_total{port="0x3f8-0x3ff",dir="out",device="serial0"} 6)",
        R"(tern_kernel_npf_total{kind="ram-not-present"} 60)",
        R"(tern_kernel_npf_total{kind="mmio-cached",gpa="0xfebf1000",device="virtio-blk0"} 30)",
        R"(tern_kernel_injected_irqs_total{vector="236"} 9)", "tern_kernel_dropped_total 1"})
    EXPECT_TRUE(has(t, want)) << "want " << want << " in:\n" << t;
}

}  // namespace
}  // namespace tern
