// Virtqueue: the device side of one split virtqueue (virtio 1.2 §2.7): takes chains from the
// available ring, returns them through the used ring, and decides used-buffer notifications
// (VIRTQ_AVAIL_F_NO_INTERRUPT, or used_event with VIRTIO_F_EVENT_IDX).
//
// Not thread-safe: one device worker thread owns a Virtqueue. Guest memory is reached only through
// GuestMemory. Barriers: acquire after reading avail->idx, release before publishing used->idx,
// full fence before reading the driver's suppression fields.
#pragma once

#include <cstdint>
#include <string>

#include "memory/guest_memory.h"
#include "virtio/descriptor_chain.h"
#include "virtio/virtio_device.h"

namespace tern::virtio {

/// What pop() found.
struct PopResult {
  enum class Kind {
    kEmpty,      ///< Nothing new in the available ring.
    kChain,      ///< `chain` is a validated chain to serve.
    kMalformed,  ///< The chain at `head` is malformed; the handler refuses it (refuse()).
    kFatal,      ///< The ring itself is broken (avail->idx ran ahead, head out of range, ring not
                 ///< in RAM): the device must set DEVICE_NEEDS_RESET and stop using this queue.
  };
  Kind kind = Kind::kEmpty;
  DescriptorChain chain;  ///< kChain.
  uint16_t head = 0;      ///< kChain / kMalformed.
  ChainError error{};     ///< kMalformed / kFatal from the walker.
  std::string reason;     ///< kMalformed / kFatal: for the (rate-limited) log.
};

class Virtqueue {
 public:
  /// `features` are the negotiated feature bits (INDIRECT_DESC, EVENT_IDX are honoured). The
  /// queue starts at `config.position` (snapshot restore; {0, 0} otherwise).
  Virtqueue(const GuestMemory& mem, const VirtqueueConfig& config, uint64_t features);

  /// Checks the configuration: size a power of two in 1..32768, and the descriptor table,
  /// available and used rings inside guest RAM. Call before the first pop().
  [[nodiscard]] Result<void> validate() const;

  /// Takes the next available chain and walks it. Each head is consumed exactly once: a malformed
  /// chain is reported once (the caller returns it with add_used(head, 0)), never re-parsed.
  [[nodiscard]] PopResult pop();

  /// Walks the chain at `head` again without touching the available ring (a vhost-user
  /// back-end resubmitting a chain its predecessor took but never returned). kFatal if `head`
  /// is out of range, kMalformed for a bad chain, else kChain.
  [[nodiscard]] PopResult walk(uint16_t head) const;

  /// The last buffer of the refused chain at `head` if it is device-writable (refused_chain_tail()).
  [[nodiscard]] std::optional<ChainSegment> refused_tail(uint16_t head) const {
    return refused_chain_tail(mem_, config_.desc_gpa, config_.size, head, indirect_);
  }

  /// Writes a used element (head, bytes written) at the next used slot; not visible to the driver
  /// until publish_used(). Fails only if the used ring is not in guest RAM.
  [[nodiscard]] Result<void> add_used(uint16_t head, uint32_t len);

  /// Publishes used->idx (release) and returns whether the driver wants a used-buffer
  /// notification for the elements added since the last publish (§2.7.7.2). False when nothing
  /// was added.
  [[nodiscard]] Result<bool> publish_used();

  /// With EVENT_IDX: writes avail_event = next index the device will read, then (full fence)
  /// re-reads avail->idx. Returns true if more chains arrived in the meantime, so the caller
  /// loops instead of waiting for a kick that will not come. Without EVENT_IDX: same re-check.
  [[nodiscard]] Result<bool> enable_notification();

  /// Asks the driver not to notify (§2.7.10): without EVENT_IDX sets VIRTQ_USED_F_NO_NOTIFY in
  /// used->flags (enable_notification() clears it); with EVENT_IDX leaves avail_event where the
  /// last enable_notification() put it, behind every entry taken since, so the driver's
  /// vring_need_event() check stays false. A driver may still notify (the flag is a hint):
  /// harmless, the kick is read and counted. Fails only if the used ring is not in guest RAM.
  [[nodiscard]] Result<void> disable_notification();

  /// True if the driver has made entries available that pop() has not taken yet (reads
  /// avail->idx). Fails only if the available ring is not in guest RAM.
  [[nodiscard]] Result<bool> has_available() const;

  /// Moves the next available index back by `n` (≤ the chains popped): those entries are popped
  /// again. Only for chains the device has not returned (QueueWorker::unpop checks that).
  void unpop(uint16_t n) { last_avail_ = static_cast<uint16_t>(last_avail_ - n); }
  [[nodiscard]] uint16_t size() const { return config_.size; }
  [[nodiscard]] uint16_t last_avail_idx() const { return last_avail_; }
  [[nodiscard]] uint16_t used_idx() const { return used_idx_; }

 private:
  [[nodiscard]] Result<uint16_t> read_avail_idx() const;

  const GuestMemory& mem_;
  VirtqueueConfig config_;
  bool event_idx_;
  bool indirect_;
  uint16_t last_avail_ = 0;      // next available ring slot to read (free-running)
  uint16_t used_idx_ = 0;        // next used ring slot to write (free-running)
  uint16_t published_used_ = 0;  // used->idx as last published
  bool no_notify_set_ = false;   // VIRTQ_USED_F_NO_NOTIFY written (without EVENT_IDX)
};

}  // namespace tern::virtio
