// kvm test: with --cpu-affinity vcpu0=<cpu>, the vCPU thread running a tiny guest is pinned
// there: a port write handled on that thread sees its own Cpus_allowed_list and CPU; the thread's
// /proc stat (field 39) says where it last ran.
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "base/cpu_affinity.h"
#include "stats/thread_cpu.h"
#include "tests/kvm/tiny_vm.h"

namespace tern::testing {
namespace {

// 64-bit guest code: mov dx,0x500; out dx,al (where am I?); inc dx; out dx,al (done); jmp $
const uint8_t kCode[] = {0x66, 0xBA, 0x00, 0x05, 0xEE, 0x66, 0xFF, 0xC2, 0xEE, 0xEB, 0xFE};

// Records, on the thread that handles the guest's write (the vCPU thread), where it may run and
// where it runs; offset 1 stops the VM.
class WhereDevice : public BusDevice {
 public:
  explicit WhereDevice(StopLatch& stop) : stop_(stop) {}
  std::string_view name() const override { return "where"; }
  void read(uint64_t, std::span<uint8_t> data) override { std::fill(data.begin(), data.end(), 0); }
  void write(uint64_t offset, std::span<const uint8_t>) override {
    if (offset == 1) {
      stop_.post(StopEvent{StopKind::kPowerOff, 0, 0, "done"});
      return;
    }
    std::ifstream f("/proc/thread-self/status");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    allowed = parse_cpus_allowed_list(text);
    cpu = sched_getcpu();
  }
  std::string allowed;
  int cpu = -1;

 private:
  StopLatch& stop_;
};

TEST(CpuAffinityKvm, VcpuThreadRunsWhereAsked) {
  auto allowed = process_allowed_cpus();
  ASSERT_TRUE(allowed && !allowed->empty());
  const unsigned target = allowed->back();
  auto plan = parse_cpu_affinity("vcpu0=" + std::to_string(target), "--cpu-affinity");
  ASSERT_TRUE(plan);
  set_cpu_affinity_plan(*plan);
  auto vm = TinyVm::create(kCode);
  if (!vm) {
    set_cpu_affinity_plan({});
    GTEST_SKIP() << "/dev/kvm not available";
  }
  auto dev = std::make_shared<WhereDevice>(vm->stop);
  ASSERT_TRUE(vm->pio.insert(dev, 0x500, 2));
  StopEvent e = vm->run();
  set_cpu_affinity_plan({});
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail;
  EXPECT_EQ(dev->allowed, std::to_string(target));
  EXPECT_EQ(dev->cpu, static_cast<int>(target));
}

}  // namespace
}  // namespace tern::testing
