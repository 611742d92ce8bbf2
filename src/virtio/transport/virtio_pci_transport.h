// VirtioPciTransport: a virtio device on PCI, modern interface only (virtio 1.2 §4.1) — the PCI
// function with its virtio capabilities and MSI-X, the common configuration (feature negotiation,
// queue setup, device status state machine), ISR, notifications via KVM ioeventfds, device
// configuration pass-through, and activation/reset of the VirtioDevice.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "devices/device_activator.h"
#include "devices/pci/msix_capability.h"
#include "devices/pci/pci_config_space.h"
#include "devices/pci/pci_function.h"
#include "devices/pci/pci_platform.h"
#include "memory/guest_memory.h"
#include "snapshot/codec.h"
#include "virtio/transport/virtio_pci_interrupt.h"
#include "virtio/virtio_device.h"

namespace tern {

/// Where the platform put the function (the two-BAR shorthand of PciPlacement used by tests):
/// initial BAR addresses (guest-physical, inside the PCI MMIO window, size-aligned) and the legacy
/// IRQ its INTx pin is wired to.
struct VirtioPciPlacement {
  uint32_t virtio_bar_gpa = 0;  ///< BAR0, virtio_pci::kVirtioBarSize bytes.
  uint32_t msix_bar_gpa = 0;    ///< BAR1, virtio_pci::kMsixBarSize bytes.
  uint8_t intx_irq = 0xFF;      ///< Interrupt Line / KVM_IRQ_LINE pin; 0xFF: INTx not wired.
};

/// Guest-visible behaviour on bad driver input (counted in protocol_errors(), logged at a limited
/// rate, never fatal): writes to read-only or unknown fields, odd-width or unaligned accesses,
/// feature writes outside DRIVER..FEATURES_OK, queue writes after the queue is enabled or after
/// DRIVER_OK, a queue size that is not a power of two or exceeds max_queue_size(), status writes
/// that clear bits, are ignored. Features the device does not offer or a missing VERSION_1 keep
/// FEATURES_OK clear (§3.1.1). DRIVER_OK without FEATURES_OK, or an activate() error, sets
/// DEVICE_NEEDS_RESET and signals a configuration change. Unimplemented BAR offsets read 0.
///
/// Activation and reset: DRIVER_OK (VirtioDevice::activate) and a status-0 write of an active
/// device (VirtioDevice::reset, which joins device threads) run through the DeviceActivator given
/// to create(): on the control thread while the writing vCPU waits, holding this transport's
/// mutex, so the write returns with the work done (see device_activator.h for the deadlock
/// rules). The activation work touches only the device, never this transport's state. Without an
/// activator the work runs inline on the vCPU.
class VirtioPciTransport final : public PciFunction {
 public:
  /// Builds the function for `device` (num_queues() ≤ virtio_pci::kMaxQueues): one MSI-X vector
  /// per queue plus one for configuration changes, one kick eventfd per queue registered as an
  /// ioeventfd wherever BAR0 is decoded; BAR0 (virtio structures) and BAR1 (MSI-X) declared, not
  /// placed (place()). `mem`, `platform` and `activator` (may be null: inline) must outlive the
  /// transport.
  [[nodiscard]] static Result<std::shared_ptr<VirtioPciTransport>> create(
      std::shared_ptr<VirtioDevice> device, const GuestMemory& mem, PciPlatform& platform,
      DeviceActivator* activator = nullptr);
  /// create() then place() at `placement`, without an activator.
  [[nodiscard]] static Result<std::shared_ptr<VirtioPciTransport>> create(
      std::shared_ptr<VirtioDevice> device, const GuestMemory& mem, PciPlatform& platform,
      const VirtioPciPlacement& placement);
  /// Resets the device (stopping its threads) and removes the ioeventfds.
  ~VirtioPciTransport() override;

  // PciFunction.
  std::string_view kind() const override { return device_->kind(); }
  std::vector<PciBarDecl> bars() const override;
  [[nodiscard]] Result<void> place(const PciPlacement& placement) override;
  /// VirtioDevice::quiesce()/unquiesce().
  void quiesce() override { device_->quiesce(); }
  void unquiesce() override { device_->unquiesce(); }
  /// The device's counters followed by the transport's: "protocol_errors", "interrupts_sent"
  /// (MSI-X messages and INTx edges), "config_interrupts" (configuration-change notifications
  /// raised). Atomics only (never the transport mutex).
  DeviceCounters counters() const override;

  std::string_view name() const override { return device_->name(); }
  void config_read(uint32_t offset, std::span<uint8_t> data) override;
  void config_write(uint32_t offset, std::span<const uint8_t> data) override;
  std::vector<PciBarWindow> memory_windows() const override;
  void bar_read(uint8_t bar, uint64_t offset, std::span<uint8_t> data) override;
  void bar_write(uint8_t bar, uint64_t offset, std::span<const uint8_t> data) override;

  /// Current device status byte (DEVICE_NEEDS_RESET included).
  [[nodiscard]] uint8_t device_status() const;
  [[nodiscard]] uint64_t driver_features() const;
  [[nodiscard]] bool activated() const;
  [[nodiscard]] uint64_t protocol_errors() const { return protocol_errors_.load(); }
  /// Guest-physical address the ioeventfds are registered at (nullopt: BAR0 not decoded).
  [[nodiscard]] std::optional<uint64_t> notify_gpa() const;
  [[nodiscard]] VirtioPciInterrupt& interrupt() { return *interrupt_; }
  [[nodiscard]] VirtioDevice& device() { return *device_; }

  /// Snapshot (version 1): PCI config space (BARs, command, MSI-X control), MSI-X table and PBA,
  /// ISR and vectors, common configuration (status, feature selects, acked driver features,
  /// queue_select, config generation), per queue size/enable/ring addresses and — when the
  /// device is active — its ring positions, then the device's own state. The device must be
  /// quiesced (VirtioDevice::quiesce) so the positions are consistent.
  void save_state(snap::ByteWriter& w) const override;
  /// Restores save_state()'s bytes into a transport freshly created for the same device
  /// configuration, before any vCPU runs and after guest memory holds the snapshot's contents.
  /// Every field is validated (untrusted input; errors name the device and the field) and
  /// applied: registers, ioeventfds moved to the restored BAR0, MSI routes re-programmed, and if
  /// the device was active, activate() with the restored queues and positions (no feature
  /// negotiation) as the last step. Fails if the transport was already used or activation
  /// fails; after an error the transport may be partly restored (discard it).
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r) override;

 private:
  struct Queue {
    VirtqueueConfig config;
    uint16_t notify_off = 0;
  };
  VirtioPciTransport(std::shared_ptr<VirtioDevice> device, const GuestMemory& mem,
                     PciPlatform& platform, DeviceActivator* activator, PciIdentity id);

  void msix_bar_read(uint64_t offset, std::span<uint8_t> data);
  void msix_bar_write(uint64_t offset, std::span<const uint8_t> data);
  void virtio_bar_read_locked(uint64_t offset, std::span<uint8_t> data);
  void virtio_bar_write_locked(uint64_t offset, std::span<const uint8_t> data);
  void common_read(uint64_t offset, std::span<uint8_t> data);
  void common_write(uint64_t offset, std::span<const uint8_t> data);
  void write_status(uint8_t v);
  void reset_locked();
  void activate_locked();
  /// Starts the device with the configured queues: a DRIVER_OK through the activator, or a
  /// snapshot restore (`restoring`) directly, before any vCPU runs, with every queue marked
  /// VirtqueueConfig::restored (the device then owes each enabled queue a notification).
  [[nodiscard]] Result<void> start_device_locked(bool restoring);
  /// Runs device activation/reset work through the activator (inline without one).
  void run_device_work(const DeviceActivator::Work& work);
  void move_ioeventfds_locked();
  void pci_cfg_access_locked(bool write, std::span<uint8_t> data);
  void protocol_error(const char* what, uint64_t offset, uint64_t value);

  std::shared_ptr<VirtioDevice> device_;
  const GuestMemory& mem_;
  PciPlatform& platform_;
  DeviceActivator* activator_;
  std::shared_ptr<VirtioPciInterrupt> interrupt_;
  std::vector<UniqueFd> kicks_;  // one per queue; dup()s go to the device on activate

  mutable std::mutex mu_;  // everything below
  PciConfigSpace config_;
  MsixCapability msix_cap_;
  uint8_t pci_cfg_cap_ = 0;
  std::optional<uint64_t> notify_gpa_;  // where the ioeventfds are registered now
  uint32_t device_feature_select_ = 0;
  uint32_t driver_feature_select_ = 0;
  uint64_t driver_features_ = 0;
  uint8_t status_ = 0;
  uint8_t config_generation_ = 0;
  uint16_t queue_select_ = 0;
  std::vector<Queue> queues_;
  bool activated_ = false;

  std::atomic<uint64_t> protocol_errors_{0};
  RateLimit log_limit_{5};
};

}  // namespace tern
