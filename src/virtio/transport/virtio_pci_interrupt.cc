#include "virtio/transport/virtio_pci_interrupt.h"

#include "virtio/transport/virtio_pci_registers.h"

namespace tern {

using virtio_pci::VIRTIO_MSI_NO_VECTOR;

VirtioPciInterrupt::VirtioPciInterrupt(std::unique_ptr<MsixTable> msix, PciPlatform& platform,
                                       uint32_t intx_irq, uint16_t num_queues)
    : msix_(std::move(msix)),
      platform_(platform),
      intx_irq_(intx_irq),
      config_vector_(VIRTIO_MSI_NO_VECTOR),
      queue_vectors_(num_queues, VIRTIO_MSI_NO_VECTOR) {}

void VirtioPciInterrupt::signal_used_queue(uint16_t queue) {
  std::lock_guard lock(mu_);
  uint16_t v = queue < queue_vectors_.size() ? queue_vectors_[queue] : VIRTIO_MSI_NO_VECTOR;
  raise_locked(virtio_pci::kIsrQueue, v);
}

BorrowedFd VirtioPciInterrupt::queue_irqfd(uint16_t queue) const {
  std::lock_guard lock(mu_);  // then the table's lock (enabled()), as in raise_locked()
  uint16_t v = queue < queue_vectors_.size() ? queue_vectors_[queue] : VIRTIO_MSI_NO_VECTOR;
  if (v >= msix_->size() || !msix_->enabled()) return BorrowedFd(-1);
  return msix_->irqfd(v);
}

uint64_t VirtioPciInterrupt::watch_queue_irqfd(uint16_t queue, IrqfdWatch fn) {
  uint16_t v = queue_vector(queue);  // our lock is released before the table's is taken
  if (v >= msix_->size() || !fn) return 0;
  BorrowedFd irqfd = msix_->irqfd(v);
  return msix_->add_mask_notifier(
      v, [irqfd, fn = std::move(fn)](bool deliverable) { fn(deliverable ? irqfd : BorrowedFd(-1)); });
}

void VirtioPciInterrupt::unwatch_queue_irqfd(uint64_t id) {
  if (id != 0) msix_->remove_mask_notifier(id);
}

void VirtioPciInterrupt::signal_config_change() {
  config_raised_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(mu_);
  raise_locked(virtio_pci::kIsrConfig, config_vector_);
}

void VirtioPciInterrupt::set_needs_reset() {
  // One configuration-change notification per transition (virtio 1.2 §2.1.2): callers that
  // report the same broken state again (vhost-net signals its vring error eventfd at every
  // packet that meets a bad chain) must not send the guest a notification each time.
  if (needs_reset_.exchange(true)) return;
  signal_config_change();
}

void VirtioPciInterrupt::raise_locked(uint8_t isr_bit, uint16_t vector) {
  // One decision under the table's lock: MSI-X Enable cleared by a vCPU between "is it
  // enabled?" and "fire" would otherwise leave the interrupt as a PBA bit nobody reads.
  MsixTable::Fired fired = msix_->fire_if_enabled(vector);
  if (fired != MsixTable::Fired::kDisabled) {
    // §4.1.5.3/4: with MSI-X the config bit is still reported in ISR; queue bits are not.
    if (isr_bit == virtio_pci::kIsrConfig) isr_ |= isr_bit;
    if (fired != MsixTable::Fired::kNoVector) sent_.fetch_add(1);
    return;
  }
  isr_ |= isr_bit;
  // An edge for edge-triggered pins even when the line was already high.
  if (line_) {
    line_ = false;
    platform_.set_irq_level(intx_irq_, false);
  }
  update_line_locked();
  sent_.fetch_add(1);
}

void VirtioPciInterrupt::update_line_locked() {
  bool level = isr_ != 0 && !intx_disabled_;
  if (level == line_) return;
  line_ = level;
  platform_.set_irq_level(intx_irq_, level);
}

uint8_t VirtioPciInterrupt::read_and_clear_isr() {
  std::lock_guard lock(mu_);
  uint8_t v = isr_;
  isr_ = 0;
  update_line_locked();
  return v;
}

void VirtioPciInterrupt::set_config_vector(uint16_t v) {
  std::lock_guard lock(mu_);
  config_vector_ = v < msix_->size() ? v : VIRTIO_MSI_NO_VECTOR;
}

void VirtioPciInterrupt::set_queue_vector(uint16_t queue, uint16_t v) {
  std::lock_guard lock(mu_);
  if (queue >= queue_vectors_.size()) return;
  queue_vectors_[queue] = v < msix_->size() ? v : VIRTIO_MSI_NO_VECTOR;
}

uint16_t VirtioPciInterrupt::config_vector() const {
  std::lock_guard lock(mu_);
  return config_vector_;
}

uint16_t VirtioPciInterrupt::queue_vector(uint16_t queue) const {
  std::lock_guard lock(mu_);
  return queue < queue_vectors_.size() ? queue_vectors_[queue] : VIRTIO_MSI_NO_VECTOR;
}

void VirtioPciInterrupt::set_intx_irq(uint32_t irq) {
  std::lock_guard lock(mu_);
  intx_irq_ = irq;
}

void VirtioPciInterrupt::set_intx_disabled(bool disabled) {
  std::lock_guard lock(mu_);
  intx_disabled_ = disabled;
  update_line_locked();
}

void VirtioPciInterrupt::reset() {
  std::lock_guard lock(mu_);
  isr_ = 0;
  update_line_locked();
  config_vector_ = VIRTIO_MSI_NO_VECTOR;
  for (auto& v : queue_vectors_) v = VIRTIO_MSI_NO_VECTOR;
  needs_reset_.store(false);
}

}  // namespace tern
