// PciDevices: PCI bus 0 of a tern VM — the host bridge and config mechanism #1, the MMIO window
// for BARs, and one virtio-pci function per virtio device (disks first: the first --disk is
// slot 1 and so /dev/vda) — wired to KVM: GSI routing + irqfds for MSI-X, KVM_IRQ_LINE for INTx,
// ioeventfds for queue notifications.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "bus/bus.h"
#include "devices/pci/pci_platform.h"
#include "devices/pci/pci_root.h"
#include "kvm/gsi_router.h"
#include "kvm/kvm_vm.h"
#include "memory/guest_memory.h"
#include "snapshot/codec.h"
#include "stats/device_counters.h"
#include "virtio/transport/virtio_pci_transport.h"
#include "virtio/virtio_device.h"

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

class PciDevices {
 public:
  /// Legacy IRQs the INTx pins of PCI slots are wired to, round-robin (ISA IRQs free on a tern
  /// guest; also the Interrupt Line register value).
  static constexpr uint8_t kIntxIrqs[] = {10, 11};

  /// Builds the bus with one virtio-pci function per entry of `devices`, in order. `vm` and `mem`
  /// must outlive the result. Errors: KVM failures (irqfd, routing), window exhausted.
  [[nodiscard]] static Result<std::unique_ptr<PciDevices>> create(
      KvmVm& vm, const GuestMemory& mem, std::vector<std::shared_ptr<VirtioDevice>> devices);
  /// Resets every device (stopping their threads) before the transports go away.
  ~PciDevices();

  /// Claims 0xCF8-0xCFF on `pio` and the 32-bit PCI MMIO window on `mmio`.
  [[nodiscard]] Result<void> attach(Bus& pio, Bus& mmio);

  /// Snapshots. quiesce() brings every virtio device to a consistent point (in-flight requests
  /// completed into the used rings, workers parked, kicks left pending); unquiesce() resumes
  /// them. Call with the vCPUs paused.
  void quiesce();
  void unquiesce();
  /// The "pci" section (version 1): root (CONFIG_ADDRESS, host bridge) and, per function in slot
  /// order, its device type and name then the transport's state. Must be quiesced.
  void save_state(snap::ByteWriter& w) const;
  /// Restores the "pci" section into a freshly created PciDevices with the same devices in the
  /// same order (a different count, type or name is an error naming it). Before any vCPU runs
  /// and after guest memory is restored: active devices start serving their queues.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r);

  // TEMPORARY (helper "stats", issue 9 item 6): a minimal counters() so the statistics can be
  // wired before helper "pcidev"'s PciDevices::counters() lands; at merge take pcidev's version.
  /// Every function's DeviceCounters in slot order: the device's own (VirtioDevice::counters())
  /// with the transport's "protocol_errors" and "interrupts_sent" appended. Any thread.
  [[nodiscard]] std::vector<DeviceCounters> counters() const;

  [[nodiscard]] PciRoot& root() { return *root_; }
  [[nodiscard]] const std::vector<std::shared_ptr<VirtioPciTransport>>& transports() const {
    return transports_;
  }

 private:
  PciDevices() = default;
  std::unique_ptr<KvmPciPlatform> platform_;
  std::unique_ptr<PciRoot> root_;
  std::vector<std::shared_ptr<VirtioPciTransport>> transports_;
  bool quiesced_ = false;
};

}  // namespace tern
