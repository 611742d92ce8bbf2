// VirtioPciInterrupt: the virtio-pci implementation of VirtioInterrupt — MSI-X vectors per queue
// and for configuration changes, or the ISR status byte plus an INTx line (virtio 1.2 §4.1.4.5,
// §4.1.5.3, §4.1.5.4).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "devices/pci/msix_table.h"
#include "devices/pci/pci_platform.h"
#include "snapshot/codec.h"
#include "virtio/virtio_device.h"

namespace tern {

/// Shared by the transport (vCPU threads: vector registers, ISR reads, reset) and the device's
/// worker threads (signal_*). One mutex guards ISR, vector numbers and the INTx level; the MSI-X
/// table has its own (taken inside ours, never the other way round). The "needs reset" flag is an
/// atomic so a worker can raise it without the transport's configuration lock.
class VirtioPciInterrupt final : public VirtioInterrupt {
 public:
  /// `intx_irq`: legacy IRQ the INTx line drives (KVM_IRQ_LINE) when MSI-X is disabled.
  VirtioPciInterrupt(std::unique_ptr<MsixTable> msix, PciPlatform& platform, uint32_t intx_irq,
                     uint16_t num_queues);

  void signal_used_queue(uint16_t queue) override;
  void signal_config_change() override;
  void set_needs_reset() override;
  /// The irqfd of queue `queue`'s MSI-X vector (MsixTable::irqfd) while MSI-X is enabled and
  /// the vector is in the table; BorrowedFd(-1) otherwise (INTx, VIRTIO_MSI_NO_VECTOR). Writing
  /// it bypasses the vector's mask bit and PBA (VirtioInterrupt::queue_irqfd).
  [[nodiscard]] BorrowedFd queue_irqfd(uint16_t queue) const override;
  /// The vector's MsixTable mask notifier: fn(irqfd) while it is deliverable, fn(-1) otherwise.
  /// 0 for a queue with no vector in the table (VirtioInterrupt::watch_queue_irqfd).
  [[nodiscard]] uint64_t watch_queue_irqfd(uint16_t queue, IrqfdWatch fn) override;
  void unwatch_queue_irqfd(uint64_t id) override;

  /// ISR status read (§4.1.4.5): returns the bits and clears them, lowering INTx.
  uint8_t read_and_clear_isr();
  /// MSI-X vector numbers (VIRTIO_MSI_NO_VECTOR when not mapped). set_* store NO_VECTOR for a
  /// vector outside the table (§4.1.5.1.2: the driver reads back to check).
  void set_config_vector(uint16_t v);
  void set_queue_vector(uint16_t queue, uint16_t v);
  [[nodiscard]] uint16_t config_vector() const;
  [[nodiscard]] uint16_t queue_vector(uint16_t queue) const;
  /// PCI command register INTx Disable bit.
  void set_intx_disabled(bool disabled);
  [[nodiscard]] bool needs_reset() const { return needs_reset_.load(); }
  /// Device reset: ISR 0, INTx low, vectors unmapped, needs_reset cleared. MSI-X table untouched
  /// (that is PCI function state, reset with the function).
  void reset();

  /// Snapshot: ISR, config and queue vectors, needs-reset flag (not the MSI-X table).
  void save_state(snap::ByteWriter& w) const;
  /// Restores save_state()'s bytes (vectors must be in the table or NO_VECTOR, ISR bits known).
  /// `intx_disabled` is the restored PCI command bit. The INTx level is adopted, not driven:
  /// the irqchip's restored state holds it. Errors name `device` and the field.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r, std::string_view device,
                                           bool intx_disabled);

  [[nodiscard]] MsixTable& msix() { return *msix_; }
  [[nodiscard]] uint64_t interrupts_sent() const { return sent_.load(); }
  /// Configuration-change notifications raised (signal_config_change(), set_needs_reset()).
  [[nodiscard]] uint64_t config_interrupts() const { return config_raised_.load(); }
  /// Wires INTx to legacy IRQ `irq` (placement, before the guest runs).
  void set_intx_irq(uint32_t irq);

 private:
  void raise_locked(uint8_t isr_bit, uint16_t vector);
  void update_line_locked();

  std::unique_ptr<MsixTable> msix_;
  PciPlatform& platform_;
  uint32_t intx_irq_;
  mutable std::mutex mu_;
  uint8_t isr_ = 0;
  bool line_ = false;
  bool intx_disabled_ = false;
  uint16_t config_vector_;
  std::vector<uint16_t> queue_vectors_;
  std::atomic<bool> needs_reset_{false};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> config_raised_{0};
};

}  // namespace tern
