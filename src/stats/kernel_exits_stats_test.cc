// Unit tests: KernelExitsStats with a fake trace and fake KVM counters — the "kernel_exits" JSON
// shape, the baselines, the reconciliation readings (KVM, maps, KVM), userspace exits, in-kernel
// PIO against tern's PIO bus, NPF MMIO pages attributed to devices, enable/disable and failures.
#include "stats/kernel_exits_stats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <limits>
#include <thread>

namespace tern {
namespace {

using Json = nlohmann::json;

class NullDevice : public BusDevice {
 public:
  explicit NullDevice(std::string name) : name_(std::move(name)) {}
  std::string_view name() const override { return name_; }
  void read(uint64_t, std::span<uint8_t> d) override { std::fill(d.begin(), d.end(), 0); }
  void write(uint64_t, std::span<const uint8_t>) override {}

 private:
  std::string name_;
};

// What the fake trace reports; shared with the test, which changes it between readings.
struct FakeKernel {
  std::mutex mu;
  KernelExitCounts counts;
  int starts = 0;
  std::string fail;  // non-empty: start() fails with this
};

class FakeSource : public KernelExitSource {
 public:
  explicit FakeSource(FakeKernel& k) : k_(k) {}
  Result<KernelExitCounts> read() const override {
    std::lock_guard l(k_.mu);
    return k_.counts;
  }

 private:
  FakeKernel& k_;
};

KernelExitStarter fake_starter(FakeKernel& k) {
  return [&k]() -> Result<std::unique_ptr<KernelExitSource>> {
    std::lock_guard l(k.mu);
    if (!k.fail.empty()) return fail("in-kernel exit accounting", k.fail);
    ++k.starts;
    return std::unique_ptr<KernelExitSource>(new FakeSource(k));
  };
}

// KVM's `exits` as successive readings (the last one repeats).
struct FakeKvm {
  std::mutex mu;
  std::deque<uint64_t> readings{0};
  Result<uint64_t> next() {
    std::lock_guard l(mu);
    uint64_t v = readings.front();
    if (readings.size() > 1) readings.pop_front();
    return v;
  }
};

class KernelExitsStatsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pio_.insert(std::make_shared<NullDevice>("serial0"), 0x3f8, 8));
    ASSERT_TRUE(mmio_.insert(std::make_shared<NullDevice>("virtio-blk0"), 0xfebf1800, 0x800));
  }
  KernelExitsInputs inputs() {
    KernelExitsInputs in;
    in.start = fake_starter(kernel_);
    in.kvm_exits = [this] { return kvm_.next(); };
    in.userspace_exits = [this] { return user_.load(); };
    in.vcpus = 2;
    in.pio = &pio_;
    in.mmio = &mmio_;
    return in;
  }
  void out(uint16_t port, int n) {
    uint8_t b = 0;
    for (int i = 0; i < n; ++i) pio_.write(port, std::span<const uint8_t>(&b, 1));
  }
  void in(uint16_t port, int n) {
    uint8_t b = 0;
    for (int i = 0; i < n; ++i) pio_.read(port, std::span<uint8_t>(&b, 1));
  }

  FakeKernel kernel_;
  FakeKvm kvm_;
  std::atomic<uint64_t> user_{0};
  Bus pio_{"pio"};
  Bus mmio_{"mmio"};
};

TEST_F(KernelExitsStatsTest, OffUntilEnabled) {
  KernelExitsStats k(inputs());
  EXPECT_FALSE(k.enabled());
  EXPECT_EQ(k.json(), Json({{"enabled", false}}));
  EXPECT_EQ(kernel_.starts, 0);
}

TEST_F(KernelExitsStatsTest, StartFailureIsReportedAndKept) {
  kernel_.fail =
      "bpf(BPF_PROG_LOAD): needs CAP_BPF and CAP_PERFMON (or root): Operation not "
      "permitted";
  KernelExitsStats k(inputs());
  auto on = k.enable();
  ASSERT_FALSE(on);
  const std::string reason =
      "in-kernel exit accounting: bpf(BPF_PROG_LOAD): needs CAP_BPF and CAP_PERFMON (or root): "
      "Operation not permitted";
  EXPECT_EQ(on.error().message(), reason);
  EXPECT_FALSE(k.enabled());
  EXPECT_EQ(k.json(), Json({{"enabled", false}, {"error", reason}}));
  // Turning it off clears the reason; a later successful start too.
  k.disable();
  EXPECT_EQ(k.json(), Json({{"enabled", false}}));
  ASSERT_FALSE(k.enable());
  kernel_.fail.clear();
  ASSERT_TRUE(k.enable());
  EXPECT_FALSE(k.json().contains("error"));
}

TEST_F(KernelExitsStatsTest, JsonShapeAndReconciliation) {
  kvm_.readings = {1000, 1000,   // enable(): before and after the attach (no exits between)
                   1150, 1153};  // json(): before and after the map reads
  user_ = 40;
  KernelExitsStats k(inputs());
  ASSERT_TRUE(k.enable());
  EXPECT_TRUE(k.enabled());
  EXPECT_TRUE(k.enable());  // already on: no second start
  EXPECT_EQ(kernel_.starts, 1);
  user_ = 52;
  kernel_.counts.reasons = {{ExitIsa::kSvm, 0x400, 100, 500000},  // npf
                            {ExitIsa::kSvm, 0x07c, 50, 40000}};   // msr
  kernel_.counts.msrs = {{0x80b, true, 30}, {0x6e0, true, 20}};
  kernel_.counts.irqs = {{236, 9}, {48, 11}};  // unsorted: rendered by count
  kernel_.counts.npf = {{NpfKind::kRamNotPresent, 0, 60},
                        {NpfKind::kMmioCached, 0xfebf1, 30},
                        {NpfKind::kMmioOther, 0xfec00, 6},
                        {NpfKind::kMmioOther, 0xd0000, 4}};
  kernel_.counts.dropped = 3;
  Json j = k.json();
  EXPECT_EQ(j["enabled"], true);
  EXPECT_EQ(j["method"], "ebpf");
  EXPECT_GT(j["since_ns"].get<uint64_t>(), 0u);
  EXPECT_EQ(j["total"], 150);
  EXPECT_EQ(j["kvm_exits"], 153);  // the second reading minus the baseline
  EXPECT_EQ(j["kvm_exits_edge"], 3);
  EXPECT_EQ(j["kvm_exits_start_edge"], 0);
  EXPECT_EQ(j["difference"], -3);
  EXPECT_EQ(j["vcpus"], 2);
  EXPECT_EQ(j["userspace_exits"], 12);
  EXPECT_EQ(j["dropped"], 3);
  ASSERT_EQ(j["reasons"].size(), 2u);
  // Names from the contract's table (the stub prints hex; A's gives "npf"): whatever it says.
  EXPECT_EQ(j["reasons"][0], Json({{"isa", "svm"},
                                   {"code", 0x400},
                                   {"reason", kernel_exit_reason_name(ExitIsa::kSvm, 0x400)},
                                   {"count", 100},
                                   {"time_ns", 500000}}));
  EXPECT_EQ(
      j["msrs"][0],
      Json({{"msr", "0x80b"}, {"name", msr_name(0x80b)}, {"access", "write"}, {"count", 30}}));
  EXPECT_EQ(j["injected_irqs"][0], Json({{"vector", 48}, {"count", 11}}));
  EXPECT_EQ(j["injected_irqs"][1], Json({{"vector", 236}, {"count", 9}}));
  EXPECT_EQ(j["npf"][0], Json({{"kind", "ram-not-present"}, {"count", 60}}));
  // An MMIO page is attributed to the device whose range has a byte in it.
  EXPECT_EQ(j["npf"][1], Json({{"kind", "mmio-cached"},
                               {"gpa", "0xfebf1000"},
                               {"device", "virtio-blk0"},
                               {"count", 30}}));
  EXPECT_EQ(j["npf"][2]["device"], "kvm-ioapic");
  EXPECT_EQ(j["npf"][3]["device"], "unclaimed");
  EXPECT_EQ(j["pio"], Json::array());
  EXPECT_EQ(j["pio_in_kernel"], Json::array());
}

// Exits between the two KVM readings of enable() are part of the bound.
TEST_F(KernelExitsStatsTest, StartEdge) {
  kvm_.readings = {500, 507, 520, 520};
  KernelExitsStats k(inputs());
  ASSERT_TRUE(k.enable());
  kernel_.counts.reasons = {{ExitIsa::kVmx, 48, 15, 0}};
  Json j = k.json();
  EXPECT_EQ(j["kvm_exits_start_edge"], 7);
  EXPECT_EQ(j["kvm_exits"], 13);
  EXPECT_EQ(j["kvm_exits_edge"], 0);
  EXPECT_EQ(j["difference"], 2);
  EXPECT_EQ(j["reasons"][0]["isa"], "vmx");
}

// Counts past 2^63 (only a broken or hostile source has them): the difference keeps its sign and
// saturates instead of overflowing in the int64_t casts.
TEST_F(KernelExitsStatsTest, DifferenceOfHugeCountsKeepsItsSign) {
  kvm_.readings = {0, 0, 10, 10};
  KernelExitsStats k(inputs());
  ASSERT_TRUE(k.enable());
  kernel_.counts.reasons = {{ExitIsa::kSvm, 0x400, (uint64_t{1} << 63) + 10, 0}};
  Json j = k.json();
  EXPECT_EQ(j["kvm_exits"], 10);
  EXPECT_EQ(j["difference"], std::numeric_limits<int64_t>::max()) << j["difference"].dump();
  kvm_.readings = {uint64_t{1} << 63, uint64_t{1} << 63};
  kernel_.counts.reasons = {{ExitIsa::kSvm, 0x400, 1, 0}};
  j = k.json();
  EXPECT_LT(j["difference"].get<int64_t>(), 0) << j["difference"].dump();
}

TEST_F(KernelExitsStatsTest, NoKvmCounterMeansNoReconciliationButCounts) {
  KernelExitsInputs in = inputs();
  in.kvm_exits = []() -> Result<uint64_t> {
    return fail("vCPU 0 KVM stats", "KVM_GET_STATS_FD: Invalid argument");
  };
  KernelExitsStats k(std::move(in));
  ASSERT_TRUE(k.enable());
  kernel_.counts.reasons = {{ExitIsa::kSvm, 0x78, 4, 0}};
  Json j = k.json();
  EXPECT_EQ(j["total"], 4);
  EXPECT_FALSE(j.contains("kvm_exits"));
  EXPECT_FALSE(j.contains("difference"));
  EXPECT_EQ(j["kvm_exits_error"],
            "no reconciliation: vCPU 0 KVM stats: KVM_GET_STATS_FD: Invalid argument");
}

TEST_F(KernelExitsStatsTest, ReadFailureIsShown) {
  class Broken : public KernelExitSource {
    Result<KernelExitCounts> read() const override {
      return fail("bpf_map_lookup_elem", "exits: No such file or directory");
    }
  };
  KernelExitsInputs in = inputs();
  in.start = []() -> Result<std::unique_ptr<KernelExitSource>> {
    return std::unique_ptr<KernelExitSource>(new Broken);
  };
  KernelExitsStats k(std::move(in));
  ASSERT_TRUE(k.enable());
  Json j = k.json();
  EXPECT_EQ(j["enabled"], true);
  EXPECT_EQ(j["error"], "bpf_map_lookup_elem: exits: No such file or directory");
}

// Counts restart from zero on each enable (new baselines); off in between.
TEST_F(KernelExitsStatsTest, ReenableTakesNewBaselines) {
  kvm_.readings = {0, 0, 10, 10, 10, 10, 25, 25};
  user_ = 3;
  KernelExitsStats k(inputs());
  ASSERT_TRUE(k.enable());
  EXPECT_EQ(k.json()["kvm_exits"], 10);
  k.disable();
  EXPECT_FALSE(k.enabled());
  EXPECT_EQ(k.json(), Json({{"enabled", false}}));
  user_ = 9;
  ASSERT_TRUE(k.enable());
  EXPECT_EQ(kernel_.starts, 2);
  Json j = k.json();
  EXPECT_EQ(j["kvm_exits"], 15);
  EXPECT_EQ(j["userspace_exits"], 0);
}

// kvm_pio minus the PIO exits that reached tern since the start: per tern device range and
// direction, or per port (unclaimed table) outside tern's devices.
TEST_F(KernelExitsStatsTest, InKernelPio) {
  out(0x3f8, 5);  // before the start: not part of the interval
  in(0x510, 2);
  KernelExitsStats k(inputs());
  ASSERT_TRUE(k.enable());
  out(0x3f8, 7);
  out(0x3f9, 3);
  in(0x3fd, 4);
  in(0x510, 6);
  kernel_.counts.pio = {{0x40, false, 50},  // PIT: all in the kernel
                        {0x3f8, false, 7},  // serial0: all reached tern
                        {0x3f9, false, 3},
                        {0x3fd, true, 4},
                        {0x510, true, 6}};  // unclaimed by tern: every one reached tern
  Json j = k.json();
  ASSERT_EQ(j["pio"].size(), 5u);
  EXPECT_EQ(j["pio"][0], Json({{"port", "0x40"}, {"dir", "out"}, {"count", 50}}));
  EXPECT_EQ(j["pio"][1],
            Json({{"port", "0x3f8"}, {"dir", "out"}, {"count", 7}, {"device", "serial0"}}));
  const Json& ik = j["pio_in_kernel"];
  ASSERT_EQ(ik.size(), 4u) << ik.dump();
  EXPECT_EQ(ik[0], Json({{"port", "0x40"},
                         {"dir", "out"},
                         {"kvm_pio", 50},
                         {"userspace", 0},
                         {"in_kernel", 50}}));
  for (size_t i = 1; i < ik.size(); ++i) EXPECT_EQ(ik[i]["in_kernel"], 0) << ik[i].dump();
  bool saw_serial_out = false, saw_unclaimed = false;
  for (const Json& row : ik) {
    if (row.value("device", "") == "serial0" && row["dir"] == "out") {
      saw_serial_out = true;
      EXPECT_EQ(row, Json({{"port", "0x3f8-0x3ff"},
                           {"device", "serial0"},
                           {"dir", "out"},
                           {"kvm_pio", 10},
                           {"userspace", 10},
                           {"in_kernel", 0}}));
    }
    if (row["port"] == "0x510") {
      saw_unclaimed = true;
      EXPECT_EQ(row["userspace"], 6);
    }
  }
  EXPECT_TRUE(saw_serial_out);
  EXPECT_TRUE(saw_unclaimed);
}

TEST(InKernelPio, KvmBelowTernClampsAtZero) {
  std::vector<Bus::RangeStats> base{{"serial0", 0x3f8, 8, 0, 0, 0}};
  std::vector<Bus::RangeStats> now{{"serial0", 0x3f8, 8, 0, 9, 0}};
  Json j = in_kernel_pio_json({{0x3f8, false, 5}}, base, now, {}, {});
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["in_kernel"], 0);
  EXPECT_EQ(j[0]["userspace"], 9);
}

// A device with an empty name: its range's accesses are still summed into one row (the empty
// name was the "group not started" mark, so each access restarted the group and only the last
// one's count was shown).
TEST(InKernelPio, DeviceWithAnEmptyNameSumsItsPorts) {
  std::vector<Bus::RangeStats> ranges{{"", 0x510, 4, 0, 0, 0}};
  Json j = in_kernel_pio_json({{0x510, false, 5}, {0x511, false, 7}}, ranges, ranges, {}, {});
  ASSERT_EQ(j.size(), 1u) << j.dump();
  EXPECT_EQ(j[0]["port"], "0x510-0x513");
  EXPECT_EQ(j[0]["kvm_pio"], 12);
  EXPECT_EQ(j[0]["in_kernel"], 12);
}

TEST(MmioPageDevice, RangesAndKvmDevices) {
  std::vector<Bus::RangeStats> r{{"nvme0", 0xfebf0000, 0x4000, 0, 0, 0},
                                 {"tail", 0xfeb00ffc, 8, 0, 0, 0}};
  EXPECT_EQ(mmio_page_device(r, 0xfebf0), "nvme0");
  EXPECT_EQ(mmio_page_device(r, 0xfebf3), "nvme0");
  EXPECT_EQ(mmio_page_device(r, 0xfebf4), "unclaimed");
  EXPECT_EQ(mmio_page_device(r, 0xfeb00), "tail");  // range starts inside the page
  EXPECT_EQ(mmio_page_device(r, 0xfeb01), "tail");  // and ends inside the next
  EXPECT_EQ(mmio_page_device(r, 0xfee00), "kvm-lapic");
  EXPECT_EQ(mmio_page_device(r, 0xfec00), "kvm-ioapic");
}

// enable()/disable()/json() from several threads at once: each json() is one of the two shapes.
TEST_F(KernelExitsStatsTest, ThreadSafe) {
  KernelExitsStats k(inputs());
  kernel_.counts.reasons = {{ExitIsa::kSvm, 0x400, 1, 0}};
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        if (t == 0) (void)k.enable();
        if (t == 1) k.disable();
        Json j = k.json();
        if (j["enabled"] == true ? j["total"] != 1 : j.size() != 1) bad = true;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad);
}

}  // namespace
}  // namespace tern
