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
#include <string>
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
constexpr uint64_t kBiosBase = x86::kHoleEnd - kBiosSize;
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

TEST(SeaBiosOnPcChipset, PostFindsTheChipset) {
  std::ifstream f("/usr/share/seabios/bios-256k.bin", std::ios::binary);
  if (!f) GTEST_SKIP() << "no /usr/share/seabios/bios-256k.bin (Debian package seabios)";
  std::vector<uint8_t> bios((std::istreambuf_iterator<char>(f)), {});
  ASSERT_EQ(bios.size(), kBiosSize);
  auto sys = KvmSystem::open();
  if (!sys) GTEST_SKIP() << "/dev/kvm not available";
  auto vm = sys->create_vm();
  ASSERT_TRUE(vm) << vm.error().message();
  ASSERT_TRUE(vm->set_tss_addr(x86::kTssAddr));
  ASSERT_TRUE(vm->create_irqchip());
  ASSERT_TRUE(vm->create_pit2());
  const RegionSpec spec[] = {{0, kRam}, {kBiosBase, kBiosSize}};
  auto mem = GuestMemory::create(spec);
  ASSERT_TRUE(mem) << mem.error().message();
  for (uint32_t i = 0; i < 2; ++i) {
    const auto& r = mem->regions()[i];
    ASSERT_TRUE(vm->set_user_memory_region(i, r.gpa, r.size, r.host));
  }
  // The firmware boot path's preload: the image at 4 GiB - 256 KiB, its last 128 KiB at 0xE0000.
  ASSERT_TRUE(mem->write(kBiosBase, bios));
  ASSERT_TRUE(mem->write(x86::kAcpiStart, std::span<const uint8_t>(bios).last(kAliasSize)));

  Bus pio{"pio"}, mmio{"mmio"};
  StopLatch stop;
  PciRoot root(x86::kPciMmioStart, x86::kPciMmioEnd - x86::kPciMmioStart);
  int resets = 0;
  PcChipsetHooks hooks;
  hooks.on_reset = [&] { ++resets; };
  auto chipset = attach_pc_chipset(root, pio, std::move(hooks));
  ASSERT_TRUE(chipset) << chipset.error().message();
  ASSERT_TRUE(root.attach(pio, mmio));
  auto cmos = std::make_shared<CmosRtc>();
  set_cmos_memory(*cmos, {.below_4g = kRam, .above_4g = 0, .cpus = 1});
  ASSERT_TRUE(pio.insert(cmos, x86::kCmosPort, CmosRtc::kPortCount));
  // The end of POST: every setup step done, the boot attempts (no disks here) failed.
  auto con = std::make_shared<DebugCon>(stop, "No bootable device.");
  ASSERT_TRUE(pio.insert(con, 0x402, 1));

  auto vcpu = vm->create_vcpu(0);  // KVM's reset state: F000:FFF0, real mode
  ASSERT_TRUE(vcpu) << vcpu.error().message();
  VcpuThread::install_kick_handler();
  VcpuThread thread(std::move(*vcpu), pio, mmio, stop);
  thread.start();
  std::thread watchdog([&] {
    // Generous: TCG-nested test hosts are slow. A missing marker is the failure.
    for (int i = 0; i < 600 && !stop.posted(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stop.post(StopEvent{StopKind::kStopped, 0, 0, "watchdog"});
  });
  StopEvent e = stop.wait();
  thread.stop();
  thread.join();
  watchdog.join();
  const std::string log = con->text();
  EXPECT_EQ(e.kind, StopKind::kPowerOff) << e.detail << "\n" << log;
  EXPECT_NE(log.find("Running on QEMU (i440fx)"), std::string::npos) << log;
  EXPECT_NE(log.find("RamSize: 0x04000000 [cmos]"), std::string::npos) << log;
  EXPECT_NE(log.find("PIIX3/PIIX4 init: elcr=00 0c"), std::string::npos) << log;
  EXPECT_NE(log.find("Using pmtimer, ioport 0xb008"), std::string::npos) << log;
  EXPECT_EQ(log.find("Unable to unlock ram"), std::string::npos) << log;
  EXPECT_EQ((*chipset)->isa_bridge->pirq_irq(0), 10);
  EXPECT_EQ((*chipset)->isa_bridge->pirq_irq(3), 11);
  // make_bios_readonly() before int 19: the F segment reads from RAM, writes are off (stored; tern
  // does not enforce it).
  EXPECT_EQ((*chipset)->host_bridge->pam(0), 0x10);
  EXPECT_TRUE((*chipset)->pm->io_enabled());
  EXPECT_EQ((*chipset)->pm->pm_base(), x86::kPiix4PmBase);
  EXPECT_EQ(resets, 0);
}

}  // namespace
}  // namespace tern::testing
