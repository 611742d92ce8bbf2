// PciDevices: PCI bus 0 of a tern VM — the host bridge and config mechanism #1, the MMIO window
// for BARs, and its PCI functions (one virtio-pci function per virtio device, one per
// PciFunctionModel such as an NVMe controller; disks first: the first --disk is slot 1 and so
// /dev/vda or /dev/nvme0n1; any other PciFunction) — wired to KVM: GSI routing +
// irqfds for MSI-X, KVM_IRQ_LINE for INTx, ioeventfds for queue notifications.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "devices/device_activator.h"
#include "devices/pci/intx_router.h"
#include "devices/pci/pci_function.h"
#include "devices/pci/pci_platform.h"
#include "devices/pci/pci_root.h"
#include "kvm/gsi_router.h"
#include "kvm/kvm_vm.h"
#include "memory/guest_memory.h"
#include "snapshot/codec.h"
#include "stats/device_counters.h"
#include "virtio/transport/virtio_pci_transport.h"
#include "virtio/virtio_device.h"
#include "vmm/devices/made_device.h"

namespace tern {

/// PciPlatform on a KvmVm (KVM_IRQFD, KVM_SET_GSI_ROUTING via GsiRouter, KVM_IRQ_LINE,
/// KVM_IOEVENTFD).
class KvmPciPlatform final : public PciPlatform {
 public:
  explicit KvmPciPlatform(KvmVm& vm) : vm_(vm), router_(vm) {}
  Result<uint32_t> allocate_msi(BorrowedFd irqfd) override;
  Result<void> set_msi_route(uint32_t gsi, uint64_t address, uint32_t data) override;
  void set_irq_level(uint32_t irq, bool level) override;
  Result<void> set_ioeventfd(uint64_t gpa, uint32_t len, BorrowedFd fd, bool assign) override;

 private:
  KvmVm& vm_;
  GsiRouter router_;
  RateLimit log_limit_{5};
};

/// PCI bus 0 of a VM and its functions. Any PciFunction can be added: add() allocates its
/// declared BARs from the root's MMIO window (in declaration order, size-aligned, as firmware
/// would), wires its INTx pin, places it and puts it in the next slot. add_virtio() wraps a
/// VirtioDevice in a VirtioPciTransport first.
class PciDevices {
 public:
  /// Legacy IRQs the INTx pins of PCI slots are wired to, round-robin (ISA IRQs free on a tern
  /// guest; also the Interrupt Line register value).
  static constexpr uint8_t kIntxIrqs[] = {10, 11};

  /// An empty bus on `vm` (host bridge only). `vm` must outlive the result.
  [[nodiscard]] static Result<std::unique_ptr<PciDevices>> create(KvmVm& vm);
  /// Builds the bus with one PCI function per entry of `devices`, in order: a virtio device in a
  /// virtio-pci transport (add_virtio), a PciFunctionModel as its make_function() builds it on
  /// this bus's memory, platform and `activator` (add_model). Activation/reset go through
  /// `activator` (null: inline on the vCPU). `vm`, `mem` and `activator` must outlive the result.
  /// Errors: KVM failures (irqfd, routing), window exhausted; each names the device.
  [[nodiscard]] static Result<std::unique_ptr<PciDevices>> create(
      KvmVm& vm, const GuestMemory& mem, std::vector<MadeDevice> devices,
      DeviceActivator* activator = nullptr);
  /// add_virtio() / add_model() of each of `devices` in order (what create() does after making
  /// the bus; firmware boots call it after the chipset took slots 0-1).
  [[nodiscard]] Result<void> add_all(const GuestMemory& mem, std::vector<MadeDevice> devices,
                                     DeviceActivator* activator);
  /// Resets every device (stopping their threads) before the functions go away.
  ~PciDevices();

  /// Firmware boots: INTx pins are wired the way SeaBIOS and OVMF program the Interrupt Line on
  /// the PIIX chipset (piix_intx_irq(slot, pin)) instead of round-robin. Before add().
  /// Each function then drives its INTx through its own source of one IntxRouter (the lines
  /// are shared and level-triggered: see pc_chipset.h).
  void use_piix_intx();
  /// The router firmware boots drive INTx through (null before use_piix_intx()).
  [[nodiscard]] const IntxRouter* intx_router() const { return intx_router_.get(); }
  [[nodiscard]] IntxRouter* intx_router() { return intx_router_.get(); }
  /// Places `fn` (BARs from its declaration, INTx) and puts it in the next free slot; returns
  /// the slot. Before vCPUs run. Errors name the function: window exhausted, 31 slots used.
  [[nodiscard]] Result<uint8_t> add(std::shared_ptr<PciFunction> fn);
  /// add() of a virtio-pci transport for `device`.
  [[nodiscard]] Result<uint8_t> add_virtio(std::shared_ptr<VirtioDevice> device,
                                           const GuestMemory& mem,
                                           DeviceActivator* activator = nullptr);
  /// add() of the function `model` builds (PciFunctionServices{&mem, &platform(), activator}).
  [[nodiscard]] Result<uint8_t> add_model(PciFunctionModel& model, const GuestMemory& mem,
                                          DeviceActivator* activator = nullptr);
  /// The MSI/INTx/ioeventfd services functions are built with (e.g. their MsixTable).
  [[nodiscard]] PciPlatform& platform() { return *platform_; }

  /// Claims 0xCF8-0xCFF on `pio` and the 32-bit PCI MMIO window on `mmio`.
  [[nodiscard]] Result<void> attach(Bus& pio, Bus& mmio);

  /// Snapshots. quiesce() brings every function to a consistent point (virtio: in-flight
  /// requests completed into the used rings, workers parked, kicks left pending); unquiesce()
  /// resumes them. Call with the vCPUs paused.
  void quiesce();
  void unquiesce();
  /// The "pci" section (version 2, snap::kPciSectionVersion): root (CONFIG_ADDRESS, host bridge)
  /// and, per function in slot order, its kind and name then its own state (a length-prefixed
  /// blob). Must be quiesced.
  void save_state(snap::ByteWriter& w) const;
  /// Restores the "pci" section into a freshly created PciDevices with the same functions in the
  /// same order (a different count, kind or name is an error naming it). Before any vCPU runs
  /// and after guest memory is restored: active devices start serving their queues. Version 1
  /// sections (tern before the generic PCI functions) are refused by the section version check.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

  /// Per function in slot order: its counters (virtio: the device's, then the transport's
  /// "protocol_errors", "interrupts_sent", "config_interrupts"), then for every function the
  /// root's "mmio_reads" and "mmio_writes": guest accesses to its BARs that exited to tern (one
  /// vCPU exit each; ioeventfd doorbells never count). Any thread; never blocks on a lock a vCPU
  /// may hold.
  [[nodiscard]] std::vector<DeviceCounters> counters() const;

  [[nodiscard]] PciRoot& root() { return *root_; }
  /// Every function in slot order.
  [[nodiscard]] const std::vector<std::shared_ptr<PciFunction>>& functions() const {
    return functions_;
  }
  /// The PCI slot (device number) of functions()[i].
  [[nodiscard]] uint8_t slot(size_t i) const { return slots_.at(i); }
  /// The virtio-pci functions among them, in slot order.
  [[nodiscard]] const std::vector<std::shared_ptr<VirtioPciTransport>>& transports() const {
    return transports_;
  }

 private:
  PciDevices() = default;
  /// The platform the next function gets: platform_, or a new IntxRouter source.
  PciPlatform& next_platform();
  std::unique_ptr<KvmPciPlatform> platform_;
  std::unique_ptr<IntxRouter> intx_router_;                // over platform_ (firmware boots)
  std::vector<std::unique_ptr<PciPlatform>> intx_sources_;  // one per function, outlive them
  std::unique_ptr<PciRoot> root_;
  std::vector<std::shared_ptr<PciFunction>> functions_;
  std::vector<uint8_t> slots_;  // functions_[i]'s slot
  bool piix_intx_ = false;
  std::vector<std::shared_ptr<VirtioPciTransport>> transports_;
  bool quiesced_ = false;
};

}  // namespace tern
