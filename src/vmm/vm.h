// Vm: a Linux guest built from a VmConfig — KVM VM, guest RAM, legacy devices, vCPU threads — and
// run until it stops.
//
// Reset rule (reboot in place, --on-reboot restart; docs/lifecycle.md). A guest reset does not
// walk the devices with a reset() each (QEMU's way): the Vm is dropped whole and built again from
// the same BootInputs (VmMachine::reset()). tern already separates the two sides, so this is the
// one mechanism for everything, present and future:
//  - Guest side: everything Vm::build() makes — the KVM VM (irqchip, PIT, LAPICs, memslots, GSI
//    routes), the vCPUs with their registers and MSRs, guest RAM (fresh, zeroed: unlike QEMU,
//    nothing of the old guest's RAM survives), the PCI bus with every function's config space,
//    BARs and MSI-X table, the legacy devices, statistics. Power-on state is what the
//    constructor gives: a new device needs no reset code if Vm::build() (or a step it calls)
//    makes it. Boot-time loading (kernel, initrd, boot_params, ACPI/MP tables, firmware images,
//    fw_cfg contents) is a build step too, so it runs again at every reset.
//  - Host side: what prepare_boot() opens before the VM exists and keeps in BootInputs — disk
//    images with their locks, taps, vhost-user connections (BootInputs::devices), a firmware
//    variable store file — plus the console output (KeptHost). It outlives the guest side. A
//    host-side object that also holds guest-visible state must return it to power-on state in
//    its reset(), which the teardown calls (virtio: VirtioDevice::reset(), as when the driver
//    writes status 0; the virtio-pci transport calls it when destroyed), and must accept being
//    built into a new VM again (PciFunctionModel::make_function once per VM).
//  - Before the teardown the vCPUs are joined, every device is quiesced (requests taken from a
//    ring completed into it) and the writable disks are flushed (prepare_reset()): a write the
//    guest got a completion for is on stable storage whatever the cache mode.
// So a new piece of the machine either is made in Vm::build() (guest side) or is opened in
// prepare_boot() into BootInputs with a reset() (host side); nothing else is needed for reboot.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "base/result.h"
#include "devices/device_activator.h"
#include "devices/pci/pc_chipset.h"
#include "firmware/fw_cfg/fw_cfg_device.h"
#include "firmware/pflash/pflash_device.h"
#include "firmware/rom_region.h"
#include "bus/bus.h"
#include "kvm/guest_clock_hold.h"
#include "kvm/kvm_system.h"
#include "memory/guest_memory.h"
#include "vmm/machine_state.h"
#include "snapshot/snapshot_pair.h"
#include "snapshot/state_file.h"
#include "stats/vm_stats.h"
#include "vcpu/stop_event.h"
#include "vcpu/vcpu_thread.h"
#include "vmm/boot_inputs.h"
#include "vmm/devices/made_device.h"
#include "vmm/machine.h"
#include "vmm/restore_inputs.h"

namespace tern {

class ConsoleOutput;
class LegacyDevices;
class PciDevices;

/// Host resources a Vm hands to the Vm built after a guest reset ("Reset rule" above) that are
/// not in BootInputs because the VM opens them: the console output (its file is created and
/// truncated once; its writer thread goes on), and the firmware variable store, which the first
/// VM took from BootInputs and whose contents the guest changed (a flash keeps them across a
/// reset).
struct KeptHost {
  std::shared_ptr<ConsoleOutput> console;  ///< Null: open BootInputs::console.
  /// --firmware-vars after a reset: the locked file, initial() = the flash as the guest left it
  /// (PflashDevice::release_file). Null: take BootInputs::firmware_vars (the first build).
  std::optional<VarsFile> firmware_vars;
};

class Vm {
 public:
  /// Builds the whole VM from validated inputs (see prepare_boot()): KVM VM, RAM, kernel, firmware
  /// tables, devices, vCPUs. `inputs` is not consumed: a reset builds again from it, with what
  /// the previous Vm kept (release_host()). Errors here are host/KVM failures. No vCPU runs until
  /// run().
  static Result<std::unique_ptr<Vm>> create(const BootInputs& inputs, KeptHost kept = {});
  /// Rebuilds a VM from a snapshot (see prepare_restore()): KVM VM, RAM mapped copy-on-write from
  /// the memory file, devices, vCPUs, and every saved state applied in KVM's order (vm_snapshot.cc).
  /// No vCPU runs until start(). Errors name the section or file.
  static Result<std::unique_ptr<Vm>> restore(const RestoreInputs& inputs);
  ~Vm();

  /// Starts the vCPUs and console and blocks until the guest stops (or stop() is called).
  /// Returns why it stopped. Call once.
  StopEvent run();

  /// Asks a running VM to stop with `e` (thread-safe; e.g. from a signal watcher).
  void stop(StopEvent e);

  // The pieces of run(), for the control loop (src/vmm/control_loop.h), which owns the VM and calls
  // them from its own thread: start(), then wait_stopped() (on any thread), then finish().
  /// Starts the console and the vCPUs; returns at once. Call once.
  void start();
  /// Blocks until the guest stops or stop() is called; returns the first stop reason.
  StopEvent wait_stopped();
  /// Stops and joins the vCPU threads and flushes the console. Idempotent.
  void finish();
  /// Parks every vCPU outside KVM_RUN (pending PIO/MMIO completed); returns when all are parked.
  /// Then holds the guest's kvmclock (GuestClockHold): the pause is not guest time.
  void pause();
  /// Sets the kvmclock back to its held value, then lets paused vCPUs run again.
  void resume();
  /// Saves the VM to spec's files. The vCPUs must be parked (pause()) or never started. Paths that
  /// are the VM's disks, each other, or (for snapshot_path) the memory file it was restored from
  /// are refused first. Devices are quiesced (in-flight disk requests completed) for the save and
  /// resumed after it; the VM itself stays paused. Both files go to temporaries, writable disks are
  /// fdatasync'ed, then memory file and state file are renamed into place
  /// (snap::save_snapshot_pair); any failure or cancel leaves the previous files untouched. See
  /// vm_snapshot.cc.
  [[nodiscard]] Result<SnapshotReport> save_snapshot(const SnapshotCreateSpec& spec,
                                                     const SaveProgress& progress,
                                                     const std::atomic<bool>& cancel);
  /// Turns in-kernel exit accounting on or off (any thread). On: the reason when it cannot start
  /// (missing privilege or kernel support; the VM is unaffected).
  [[nodiscard]] Result<void> set_kernel_exits(bool enabled);
  /// Types Ctrl+Alt+Del on the i8042 keyboard. False if the guest's keyboard cannot take it.
  bool send_ctrl_alt_del();
  /// Before a reset drops this Vm (after finish()): quiesces every device (in-flight requests
  /// completed into their rings, workers parked) and flushes the writable disks (fdatasync; as a
  /// snapshot does). Errors name the disk; the Vm stays quiesced either way.
  [[nodiscard]] Result<void> prepare_reset();
  /// After finish(): the host resources the Vm built after a reset takes over (KeptHost).
  [[nodiscard]] KeptHost release_host();

  [[nodiscard]] const Bus& pio_bus() const { return pio_; }
  [[nodiscard]] const std::vector<std::unique_ptr<VcpuThread>>& vcpus() const { return vcpus_; }
  /// Exit accounting, device attribution, KVM and thread statistics (GET /tern/stats, /metrics,
  /// --stats-on-exit). Valid for the Vm's lifetime, any thread.
  [[nodiscard]] const StatsSource& stats() const { return *stats_; }
  /// Runs device activation/reset on the control thread once one attaches (device_activator.h).
  [[nodiscard]] DeviceActivator& activator() { return activator_; }

 private:
  Vm() = default;
  Result<void> build(const BootInputs& in, KeptHost kept);
  Result<void> build_restored(const RestoreInputs& in);
  /// build() for a firmware boot (--firmware; vm_firmware.cc): RAM, the image read-only below
  /// 4 GiB and its last 128 KiB at 0xE0000, devices, vCPUs in the RESET state.
  Result<void> build_firmware(const BootInputs& in, KeptHost kept);
  /// Maps `in.firmware` and the variable store (`kept_vars`, else in.firmware_vars) and records
  /// the image in machine_.firmware (vm_firmware.cc). After add_memory(). `restored`: RAM came
  /// from a snapshot, so the isa-bios copy below 1 MiB is not written (the guest's shadow RAM
  /// there is already as it was).
  Result<void> map_firmware(const BootInputs& in, std::optional<VarsFile> kept_vars,
                            bool restored = false);
  /// fw_cfg on 0x510 with the items the firmware reads (vm_firmware.cc). After build_devices().
  Result<void> attach_fw_cfg(const BootInputs& in);
  /// attach_fw_cfg() and, for SeaBIOS, the PIIX4 PM block's second view at 0x600.
  Result<void> attach_firmware_io(const BootInputs& in);
  /// build_restored()'s firmware steps before the devices' state is applied: the image mapped
  /// from the file the snapshot names (checked by prepare_restore), fw_cfg (items rebuilt from
  /// the config), the pflash store (vm_snapshot.cc).
  Result<void> rebuild_firmware(const RestoreInputs& in);
  /// Applies the firmware sections (chipset, INTx router, fw_cfg, pflash) (vm_snapshot.cc).
  Result<void> restore_firmware_state(const snap::StateFile& f);
  // The pieces both builds share, in the order they run.
  /// KVM system and VM, irqchip, PIT; KVM's TSS and identity-map pages at `tss_addr` and
  /// `identity_map_addr` (outside RAM and every device or firmware range).
  Result<void> build_kvm(uint32_t vcpus, uint64_t tss_addr, uint64_t identity_map_addr);
  Result<void> add_memory(GuestMemory mem);
  /// Guest RAM for `c` (layout.h ram_regions, the chosen backend) and its memslots.
  Result<void> build_ram(const VmConfig& c);
  /// Statistics, in-kernel exit accounting when asked, and machine_'s size and devices.
  void finish_build(const BootInputs& in);
  /// The legacy devices and PCI bus 0; `console_out`: the console output a reset kept (null:
  /// made from `console`); `firmware`: on the PC chipset (build_firmware_devices).
  Result<void> build_devices(const ConsoleTarget& console, const std::vector<MadeDevice>& devices,
                             std::shared_ptr<ConsoleOutput> console_out = nullptr,
                             bool firmware = false);
  /// Firmware boots (vm_firmware.cc): the legacy devices without their 0x600 PM registers, the
  /// i440FX/PIIX chipset in slots 0-1, `devices` from slot 2 with PIIX INTx wiring.
  Result<void> build_firmware_devices(const std::vector<MadeDevice>& devices);
  /// Creates vCPU `id` of `count` with its CPUID; returns it (owned by its VcpuThread).
  Result<KvmVcpu*> add_vcpu(uint32_t id, uint32_t count);
  void build_stats();
  /// Firmware boots: the counters of fw_cfg, the pflash and the code image's write sink, for
  /// GET /tern/stats "device_counters" (vm_firmware.cc). Any thread.
  void append_firmware_counters(std::vector<DeviceCounters>& out) const;
  Result<snap::StateFile> collect_state();
  /// clock_hold_.release(), a failure logged (the VM runs on).
  void release_clock();
  void flush_firmware_vars();  // --firmware-vars: store the pflash contents now (pause, stop)
  /// Refuses snapshot targets that are this VM's disks or memory backing file, or each other.
  [[nodiscard]] Result<void> check_snapshot_paths(const SnapshotCreateSpec& spec) const;

  std::optional<KvmSystem> kvm_;
  std::vector<kvm_cpuid_entry2> supported_cpuid_;
  bool tsc_deadline_ = false;
  snap::MachineState machine_;     // what a snapshot needs to rebuild this VM
  std::vector<MadeDevice> made_devices_;  // machine_.devices, slot order
  std::vector<uint32_t> msr_list_;  // MSRs a snapshot saves (computed at the first save)
  std::optional<RomRegion> firmware_rom_;  // before vm_: its mapping outlives the memslot
  std::optional<KvmVm> vm_;
  std::optional<GuestMemory> memory_;
  std::optional<snap::ProtectedFile> memory_backing_;  // a restored VM's memory file
  GuestClockHold clock_hold_;  // the kvmclock while paused, or a restored VM's until start()
  Bus pio_{"pio"};
  Bus mmio_{"mmio"};
  StopLatch stop_;
  std::unique_ptr<LegacyDevices> devices_;
  DeviceActivator activator_;        // before pci_: its transports use it until destroyed
  std::unique_ptr<PciDevices> pci_;  // after memory_/vm_: its devices use both until destroyed
  std::vector<std::unique_ptr<VcpuThread>> vcpus_;
  std::unique_ptr<PcChipset> chipset_;      // firmware boots: slots 0-1 of pci_, ports on pio_
  std::shared_ptr<FwCfgDevice> fw_cfg_;     // firmware boots: on pio_, reads memory_
  std::shared_ptr<PflashDevice> pflash_;    // --firmware-vars: on mmio_, flips memslots on vm_
  std::shared_ptr<RomWriteSink> rom_sink_;  // firmware boots: the code image's writes, on mmio_
  std::unique_ptr<VmStats> stats_;          // last: refers to the buses, pci_ and vCPUs above
};

}  // namespace tern
