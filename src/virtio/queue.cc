#include "virtio/queue.h"

#include <atomic>

#include "virtio/virtio_spec.h"

namespace tern::virtio {

Virtqueue::Virtqueue(const GuestMemory& mem, const VirtqueueConfig& config, uint64_t features)
    : mem_(mem),
      config_(config),
      event_idx_((features & feature(VIRTIO_F_EVENT_IDX)) != 0),
      indirect_((features & feature(VIRTIO_F_INDIRECT_DESC)) != 0),
      last_avail_(config.position.next_avail),
      used_idx_(config.position.next_used),
      published_used_(config.position.next_used) {}

Result<void> Virtqueue::validate() const {
  uint16_t n = config_.size;
  if (n == 0 || (n & (n - 1)) != 0)
    return fail("virtqueue", "queue size " + std::to_string(n) + " is not a power of two");
  if (!mem_.slice(config_.desc_gpa, uint64_t{16} * n))
    return fail("virtqueue", "descriptor table not in guest RAM");
  if (!mem_.slice(config_.avail_gpa, avail_ring_bytes(n)))
    return fail("virtqueue", "available ring not in guest RAM");
  if (!mem_.slice(config_.used_gpa, used_ring_bytes(n)))
    return fail("virtqueue", "used ring not in guest RAM");
  return {};
}

Result<uint16_t> Virtqueue::read_avail_idx() const {
  ASSIGN_OR_RETURN(uint16_t idx, mem_.read_obj<uint16_t>(config_.avail_gpa + avail_idx_offset()));
  // Pairs with the driver's write barrier before it bumps avail->idx: ring entries and
  // descriptors read after this are at least as new as idx.
  std::atomic_thread_fence(std::memory_order_acquire);
  return idx;
}

PopResult Virtqueue::pop() {
  PopResult r;
  auto idx = read_avail_idx();
  if (!idx) {
    r.kind = PopResult::Kind::kFatal;
    r.reason = "available ring not in guest RAM";
    return r;
  }
  uint16_t pending = static_cast<uint16_t>(*idx - last_avail_);
  if (pending == 0) return r;
  if (pending > config_.size) {
    r.kind = PopResult::Kind::kFatal;
    r.reason = "avail->idx " + std::to_string(*idx) + " is " + std::to_string(pending) +
               " entries ahead of the device (queue size " + std::to_string(config_.size) + ")";
    return r;
  }
  uint16_t slot = last_avail_ % config_.size;
  auto head = mem_.read_obj<uint16_t>(config_.avail_gpa + avail_ring_offset(slot));
  if (!head) {
    r.kind = PopResult::Kind::kFatal;
    r.reason = "available ring not in guest RAM";
    return r;
  }
  ++last_avail_;
  return walk(*head);
}

PopResult Virtqueue::walk(uint16_t head) const {
  PopResult r;
  r.head = head;
  auto chain = walk_descriptor_chain(mem_, config_.desc_gpa, config_.size, head, indirect_);
  if (chain) {
    r.kind = PopResult::Kind::kChain;
    r.chain = std::move(*chain);
    return r;
  }
  r.error = chain.error();
  r.reason = std::string(chain_error_name(chain.error())) + " (head " + std::to_string(head) + ")";
  // A head we cannot name in the used ring leaves the ring unusable (§2.1.2 NEEDS_RESET).
  r.kind = chain.error() == ChainError::kHeadOutOfRange ? PopResult::Kind::kFatal
                                                        : PopResult::Kind::kMalformed;
  return r;
}

Result<void> Virtqueue::add_used(uint16_t head, uint32_t len) {
  uint16_t slot = used_idx_ % config_.size;
  TRY(mem_.write_obj(config_.used_gpa + used_ring_offset(slot), VirtqUsedElem{head, len}));
  ++used_idx_;
  return {};
}

Result<bool> Virtqueue::publish_used() {
  uint16_t old_idx = published_used_;
  uint16_t new_idx = used_idx_;
  if (old_idx == new_idx) return false;
  // Used elements must be visible before the index that announces them.
  std::atomic_thread_fence(std::memory_order_release);
  TRY(mem_.write_obj(config_.used_gpa + used_idx_offset(), new_idx));
  published_used_ = new_idx;
  // The index write must be visible before we read the driver's suppression state (otherwise
  // both sides can decide the other will act).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (event_idx_) {
    ASSIGN_OR_RETURN(uint16_t used_event,
                     mem_.read_obj<uint16_t>(config_.avail_gpa + used_event_offset(config_.size)));
    return vring_need_event(used_event, new_idx, old_idx);
  }
  ASSIGN_OR_RETURN(uint16_t flags, mem_.read_obj<uint16_t>(config_.avail_gpa));
  return (flags & VIRTQ_AVAIL_F_NO_INTERRUPT) == 0;
}

Result<bool> Virtqueue::enable_notification() {
  if (event_idx_) {
    TRY(mem_.write_obj(config_.used_gpa + avail_event_offset(config_.size), last_avail_));
  } else {
    // Always written, not only after our own disable_notification(): a queue restored from a
    // snapshot taken while notifications were off starts with the flag set in guest RAM.
    TRY(mem_.write_obj(config_.used_gpa, uint16_t{0}));
    no_notify_set_ = false;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ASSIGN_OR_RETURN(uint16_t idx, read_avail_idx());
  return idx != last_avail_;
}

Result<void> Virtqueue::disable_notification() {
  if (event_idx_ || no_notify_set_) return {};
  TRY(mem_.write_obj(config_.used_gpa, VIRTQ_USED_F_NO_NOTIFY));
  no_notify_set_ = true;
  return {};
}

Result<bool> Virtqueue::has_available() const {
  ASSIGN_OR_RETURN(uint16_t idx, read_avail_idx());
  return idx != last_avail_;
}

}  // namespace tern::virtio
