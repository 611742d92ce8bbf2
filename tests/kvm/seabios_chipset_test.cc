// kvm test: Debian's unmodified SeaBIOS (bios-256k.bin) runs its POST on tern's PC chipset, with no
// fw_cfg: it must recognise the i440FX ("Running on QEMU (i440fx)"), size RAM from the CMOS bytes,
// route PCI interrupts through PIIX3 and ELCR, find the PM timer through PIIX4 PM, skip SMM
// (DEVACTB.APMC_EN) and finish POST ("No bootable device."). Its debug log (port 0x402) is
// asserted.
// Skipped when /dev/kvm or /usr/share/seabios/bios-256k.bin is missing.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arch/x86/layout.h"
#include "bus/bus.h"
#include "devices/legacy/cmos_memory.h"
#include "devices/legacy/cmos_rtc.h"
#include "devices/pci/pc_chipset.h"
#include "kvm/kvm_system.h"
#include "memory/guest_memory.h"
#include "vcpu/vcpu_thread.h"

namespace tern::testing {
namespace {

constexpr uint64_t kRam = 64 * MiB;
constexpr uint64_t kBiosSize = 256 * 1024;
constexpr uint64_t kAliasSize = 128 * 1024;  // the last 128 KiB, also at 0xE0000

/// QEMU's debugcon at 0x402: reads 0xE9 (SeaBIOS checks it), collects the text and posts a stop
/// when `until` appears.
class DebugCon final : public BusDevice {
 public:
  DebugCon(StopLatch& stop, std::string until) : stop_(stop), until_(std::move(until)) {}
  std::string_view name() const override { return "debugcon"; }
  void read(uint64_t, std::span<uint8_t> data) override {
    std::fill(data.begin(), data.end(), 0xE9);
  }
  void write(uint64_t, std::span<const uint8_t> data) override {
    std::lock_guard lock(mu_);
    text_.append(reinterpret_cast<const char*>(data.data()), data.size());
    if (!posted_ && text_.find(until_) != std::string::npos) {
      posted_ = true;
      stop_.post(StopEvent{StopKind::kPowerOff, 0, 0, "marker"});
    }
  }
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  StopLatch& stop_;
  std::string until_;
  mutable std::mutex mu_;
  std::string text_;
  bool posted_ = false;
};

std::vector<uint8_t> read_file(const char* path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  return {std::istreambuf_iterator<char>(f), {}};
}

/// A firmware VM on the PC chipset: RAM from 0, `image` ending at 4 GiB (its last 128 KiB also at
/// 0xE0000, as the firmware boot path preloads it), CMOS memory bytes, the in-kernel irqchip and
/// PIT, one vCPU at the reset vector, QEMU's debugcon at 0x402.
struct FirmwareVm {
  bool create(std::span<const uint8_t> image, uint64_t ram, std::string until) {
    auto s = KvmSystem::open();
    if (!s) return false;
    sys.emplace(std::move(*s));
    auto v = sys->create_vm();
    EXPECT_TRUE(v) << v.error().message();
    vm.emplace(std::move(*v));
    EXPECT_TRUE(vm->set_tss_addr(x86::kTssAddr));
    EXPECT_TRUE(vm->create_irqchip());
    EXPECT_TRUE(vm->create_pit2());
    const RegionSpec spec[] = {{0, ram}, {x86::kHoleEnd - image.size(), image.size()}};
    auto m = GuestMemory::create(spec);
    EXPECT_TRUE(m) << m.error().message();
    mem.emplace(std::move(*m));
    for (uint32_t i = 0; i < 2; ++i) {
      const auto& r = mem->regions()[i];
      EXPECT_TRUE(vm->set_user_memory_region(i, r.gpa, r.size, r.host));
    }
    EXPECT_TRUE(mem->write(x86::kHoleEnd - image.size(), image));
    EXPECT_TRUE(mem->write(x86::kAcpiStart, image.last(kAliasSize)));
    PcChipsetHooks hooks;
    hooks.on_reset = [this] { ++resets; };
    auto c = attach_pc_chipset(root, pio, std::move(hooks));
    EXPECT_TRUE(c) << c.error().message();
    chipset = std::move(*c);
    EXPECT_TRUE(root.attach(pio, mmio));
    set_cmos_memory(*cmos, {.below_4g = ram, .above_4g = 0, .cpus = 1});
    EXPECT_TRUE(pio.insert(cmos, x86::kCmosPort, CmosRtc::kPortCount));
    con = std::make_shared<DebugCon>(stop, std::move(until));
    EXPECT_TRUE(pio.insert(con, 0x402, 1));
    auto vcpu = vm->create_vcpu(0);  // KVM's reset state: F000:FFF0, real mode
    EXPECT_TRUE(vcpu) << vcpu.error().message();
    // No KVM_SET_CPUID2: SeaBIOS then does not see KVM and times itself with the PM timer
    // (with KVM's CPUID it takes kvmclock and never reads PMTMR).
    VcpuThread::install_kick_handler();
    thread = std::make_unique<VcpuThread>(std::move(*vcpu), pio, mmio, stop);
    return true;
  }
  /// Runs until the marker (or `seconds` pass: a missing marker is the failure).
  StopEvent run(int seconds) {
    thread->start();
    std::thread watchdog([&] {
      for (int i = 0; i < seconds * 10 && !stop.posted(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      stop.post(StopEvent{StopKind::kStopped, 0, 0, "watchdog"});
    });
    StopEvent e = stop.wait();
    thread->stop();
    thread->join();
    watchdog.join();
    return e;
  }

  std::optional<KvmSystem> sys;
  std::optional<KvmVm> vm;
  std::optional<GuestMemory> mem;
  Bus pio{"pio"}, mmio{"mmio"};
  StopLatch stop;
  PciRoot root{x86::kPciMmioStart, x86::kPciMmioEnd - x86::kPciMmioStart};
  std::unique_ptr<PcChipset> chipset;
  std::shared_ptr<CmosRtc> cmos = std::make_shared<CmosRtc>();
  std::shared_ptr<DebugCon> con;
  std::unique_ptr<VcpuThread> thread;
  int resets = 0;
};

TEST(SeaBiosOnPcChipset, PostFindsTheChipset) {
  const auto bios = read_file("/usr/share/seabios/bios-256k.bin");
  if (bios.empty()) GTEST_SKIP() << "no /usr/share/seabios/bios-256k.bin (Debian package seabios)";
  ASSERT_EQ(bios.size(), kBiosSize);
  FirmwareVm fw;
  // The end of POST: every setup step done, the boot attempts (no disks here) failed.
  if (!fw.create(bios, kRam, "No bootable device.")) GTEST_SKIP() << "/dev/kvm not available";
  StopEvent e = fw.run(60);
  const std::string log = fw.con->text();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail << "\n" << log;
  EXPECT_NE(log.find("Running on QEMU (i440fx)"), std::string::npos) << log;
  EXPECT_NE(log.find("RamSize: 0x04000000 [cmos]"), std::string::npos) << log;
  EXPECT_NE(log.find("PIIX3/PIIX4 init: elcr=00 0c"), std::string::npos) << log;
  EXPECT_NE(log.find("Using pmtimer, ioport 0xb008"), std::string::npos) << log;
  EXPECT_EQ(log.find("Unable to unlock ram"), std::string::npos) << log;
  PcChipset& c = *fw.chipset;
  EXPECT_EQ(c.isa_bridge->pirq_irq(0), 10);
  EXPECT_EQ(c.isa_bridge->pirq_irq(3), 11);
  // make_bios_readonly() before int 19: the F segment reads from RAM, writes are off (stored;
  // tern does not enforce it).
  EXPECT_EQ(c.host_bridge->pam(0), 0x10);
  EXPECT_TRUE(c.pm->io_enabled());
  EXPECT_EQ(c.pm->pm_base(), x86::kPiix4PmBase);
  EXPECT_EQ(fw.resets, 0);
}

}  // namespace
}  // namespace tern::testing
