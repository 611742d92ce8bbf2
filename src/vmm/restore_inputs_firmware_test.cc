// Unit tests: prepare_restore() of a firmware-booted snapshot — the firmware file the snapshot
// names is read again and must be the saved one (missing or changed: refused naming it), the
// firmware sections must be there (and only for a firmware boot), --on-reboot is kept or
// overridden, and restart is refused for a direct kernel boot. No KVM: nothing is built.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "arch/x86/layout.h"
#include "base/testing/temp_dir.h"
#include "firmware/firmware_image.h"
#include "kvm/vcpu_state.h"
#include "kvm/vm_kvm_state.h"
#include "memory/guest_memory.h"
#include "snapshot/sections.h"
#include "snapshot/snapshot_pair.h"
#include "vmm/restore_inputs.h"

namespace tern {
namespace {

constexpr uint64_t kRam = 32ull << 20;

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

/// A 256 KiB image with SeaBIOS's far jump at the reset vector.
std::vector<uint8_t> bios() {
  std::vector<uint8_t> b(256 << 10, 0x11);
  b[b.size() - 16] = 0xEA;
  return b;
}

snap::StateSection section(uint32_t id, uint32_t version, const snap::ByteWriter& w) {
  return snap::StateSection{id, version, w.data()};
}

class FirmwareRestore : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    write_file(fw, bios());
    machine.memory_bytes = kRam;
    machine.vcpus = 1;
    machine.on_reboot = OnReboot::kRestart;
    snap::SavedFirmware f;
    f.path = fw;
    f.size = bios().size();
    f.crc32 = firmware::image_crc32(bios());
    machine.firmware = f;
  }

  /// Writes a snapshot pair of `m` with the sections in `ids` past the common ones.
  void save(const snap::MachineState& m, std::vector<uint32_t> ids) {
    snap::StateFile f;
    f.tern_version = "test";
    snap::ByteWriter w;
    snap::encode_machine_state(w, m);
    f.sections.push_back(section(snap::kMachineSection, snap::kMachineSectionVersion, w));
    VmKvmState k;
    k.pic_slave.chip_id = KVM_IRQCHIP_PIC_SLAVE;
    k.ioapic.chip_id = KVM_IRQCHIP_IOAPIC;
    snap::ByteWriter kw;
    encode_vm_kvm_state(kw, k);
    f.sections.push_back(section(snap::kVmKvmSection, snap::kVmKvmSectionVersion, kw));
    VcpuState v;
    v.tsc_khz = 1'000'000;
    v.xsave.resize(4096);
    v.xcrs.nr_xcrs = 1;
    snap::ByteWriter vw;
    encode_vcpu_state(vw, v);
    f.sections.push_back(section(snap::kVcpuBase, snap::kVcpuSectionVersion, vw));
    snap::ByteWriter empty;
    f.sections.push_back(section(snap::kLegacySection, snap::kLegacySectionVersion, empty));
    f.sections.push_back(section(snap::kPciSection, snap::kPciSectionVersion, empty));
    for (uint32_t id : ids) f.sections.push_back(section(id, 1, empty));
    auto mem = GuestMemory::create(x86::ram_regions(kRam));
    ASSERT_TRUE(mem) << mem.error().message();
    auto r = snap::save_snapshot_pair(*mem, std::move(f), state, memf, {});
    ASSERT_TRUE(r) << r.error().message();
  }

  std::string restore_error(SnapshotLoadSpec spec = {}) {
    spec.snapshot_path = state;
    spec.mem_file_path = memf;
    auto in = prepare_restore(spec, "file:" + dir.path() + "/console");
    return in ? std::string("accepted") : in.error().message();
  }

  testing::TempDir dir{"tern-fwrestore"};
  std::string fw = dir.path() + "/bios.bin";
  std::string state = dir.path() + "/vm.state";
  std::string memf = dir.path() + "/vm.mem";
  snap::MachineState machine;
  const std::vector<uint32_t> kFirmwareIds = {snap::kChipsetSection, snap::kIntxRouterSection,
                                              snap::kFwCfgSection};
};

TEST_F(FirmwareRestore, ReadsTheFirmwareAgainAndKeepsOnReboot) {
  save(machine, kFirmwareIds);
  SnapshotLoadSpec spec;
  spec.snapshot_path = state;
  spec.mem_file_path = memf;
  auto in = prepare_restore(spec, "file:" + dir.path() + "/console");
  ASSERT_TRUE(in) << in.error().message();
  ASSERT_TRUE(in->firmware_boot);
  EXPECT_EQ(in->firmware_boot->firmware.size(), bios().size());
  EXPECT_EQ(in->firmware_boot->config.firmware_path, fw);
  EXPECT_EQ(in->firmware_boot->config.memory_bytes, kRam);
  EXPECT_EQ(in->on_reboot, OnReboot::kRestart);  // as saved
  spec.on_reboot = OnReboot::kExit;
  auto exit_in = prepare_restore(spec, "file:" + dir.path() + "/console");
  ASSERT_TRUE(exit_in) << exit_in.error().message();
  EXPECT_EQ(exit_in->on_reboot, OnReboot::kExit);  // --on-reboot exit wins
}

TEST_F(FirmwareRestore, RefusesAMissingFirmwareFileNamingIt) {
  save(machine, kFirmwareIds);
  ASSERT_EQ(::unlink(fw.c_str()), 0);
  const std::string e = restore_error();
  EXPECT_NE(e.find("the firmware of the saved VM"), std::string::npos) << e;
  EXPECT_NE(e.find(fw), std::string::npos) << e;
}

TEST_F(FirmwareRestore, RefusesAChangedFirmwareFileNamingIt) {
  save(machine, kFirmwareIds);
  auto other = bios();
  other[100] ^= 1;  // same size, other content
  write_file(fw, other);
  const std::string e = restore_error();
  EXPECT_NE(e.find("the firmware file " + fw + " changed since the save"), std::string::npos) << e;
}

TEST_F(FirmwareRestore, RefusesMissingOrStrayFirmwareSections) {
  save(machine, {snap::kChipsetSection, snap::kFwCfgSection});
  std::string e = restore_error();
  EXPECT_NE(e.find("no INTx router section"), std::string::npos) << e;
  // A pflash section without a variable store.
  save(machine, {snap::kChipsetSection, snap::kIntxRouterSection, snap::kFwCfgSection,
                 snap::kPflashSection});
  e = restore_error();
  EXPECT_NE(e.find("pflash section"), std::string::npos) << e;
  // A chipset section in a direct kernel boot's snapshot.
  snap::MachineState direct = machine;
  direct.firmware.reset();
  direct.on_reboot = OnReboot::kExit;
  save(direct, {snap::kChipsetSection});
  e = restore_error();
  EXPECT_NE(e.find("booted without --firmware"), std::string::npos) << e;
}

TEST_F(FirmwareRestore, RestartIsRefusedForADirectBoot) {
  snap::MachineState direct = machine;
  direct.firmware.reset();
  direct.kernel_path = "/k";
  save(direct, {});
  SnapshotLoadSpec spec;
  spec.on_reboot = OnReboot::kRestart;
  const std::string e = restore_error(spec);
  EXPECT_NE(e.find("on_reboot: restart needs a firmware-booted snapshot"), std::string::npos) << e;
  // Saved with restart (tern run --on-reboot restart): restored, it exits.
  SnapshotLoadSpec plain;
  plain.snapshot_path = state;
  plain.mem_file_path = memf;
  auto in = prepare_restore(plain, "file:" + dir.path() + "/console");
  ASSERT_TRUE(in) << in.error().message();
  EXPECT_EQ(in->on_reboot, OnReboot::kExit);
  EXPECT_FALSE(in->firmware_boot);
}

}  // namespace
}  // namespace tern
