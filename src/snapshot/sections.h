// The sections of a tern state file (state_file.h) and their versions. A reader refuses a section
// version it does not know; a new field means a new section version.
#pragma once

#include <cstdint>

namespace tern::snap {

/// Section ids. vCPU i is kVcpuBase + i.
enum SectionId : uint32_t {
  kMachineSection = 1,  ///< MachineState (src/vmm): RAM, vCPUs, command line, kernel, devices.
  kVmKvmSection = 2,    ///< VmKvmState: PIC, IOAPIC, PIT, kvmclock.
  kLegacySection = 3,   ///< LegacyDevices: 8250, i8042, RTC, ACPI PM.
  kPciSection = 4,      ///< PciDevices: PCI config spaces, MSI-X, virtio-pci transports, queues.
  kPairingSection = 5,  ///< Format 1.1: the 16-byte pairing token of this save's memory file.
  // Firmware boots only (--firmware); a direct kernel boot has none of these.
  kChipsetSection = 6,     ///< PcChipset: i440FX, PIIX3, PIIX4 PM config spaces, ELCR, RC, PM.
  kIntxRouterSection = 7,  ///< IntxRouter: every PCI function's INTx level per IRQ.
  kFwCfgSection = 8,       ///< FwCfgDevice: selector, data offset, DMA address latch.
  kPflashSection = 9,      ///< PflashDevice (--firmware-vars): CFI command state and contents.
  kVcpuBase = 0x100,       ///< VcpuState of vCPU (id - kVcpuBase).
};

/// 7: the VM's on_reboot and its firmware (path, size, crc32, vars path) at the end.
/// 6: a disk's spec (virtio-blk and NVMe) ends with its image format and backing_files flag
/// (block/disk_config.h: an explicit format=raw stays raw after a restore; before 6: probed,
/// backing files off). 5: a virtio-blk disk's spec ends with its notification tuning
/// (kick_suppress, coalesce_us, poll_us). 4: a disk's spec (virtio-blk and NVMe) ends with its
/// locking flag. 3: a disk's spec ends with its vhost-user socket. 3, 2 (before vhost-user) and 1
/// (disks only) are still read (their disks restore with locking on).
inline constexpr uint32_t kMachineSectionVersion = 7;
inline constexpr uint32_t kChipsetSectionVersion = 1;
inline constexpr uint32_t kIntxRouterSectionVersion = 1;
inline constexpr uint32_t kFwCfgSectionVersion = 1;
inline constexpr uint32_t kPflashSectionVersion = 1;
inline constexpr uint32_t kVmKvmSectionVersion = 1;
inline constexpr uint32_t kLegacySectionVersion = 1;
inline constexpr uint32_t kPciSectionVersion = 2;  ///< 2: functions keyed by kind.
inline constexpr uint32_t kPairingSectionVersion = 1;
inline constexpr uint32_t kVcpuSectionVersion = 1;

}  // namespace tern::snap
