// NVMe queues as guest memory rings (NVMe base spec 1.4 §4.1, §4.6, §7.1) and the Doorbell Buffer
// Config shadow doorbells (§5.8). No threads here: the admin thread and the I/O workers
// (nvme_io_worker.h) use these to fetch entries and post completions. Every guest address goes
// through the bounds-checked GuestMemory accessor; a ring that is not in RAM is refused at
// creation, so fetching and posting cannot fault later.
#pragma once

#include <cstdint>
#include <optional>

#include "base/result.h"
#include "memory/guest_memory.h"
#include "nvme/nvme_spec.h"
#include "snapshot/codec.h"

namespace tern::nvme {

/// A submission queue as created: Create I/O Submission Queue (§5.4) or ASQ/AQA (qid 0).
struct SqConfig {
  uint16_t qid = 0;
  uint64_t gpa = 0;       ///< Guest-physical base, page aligned (CAP.CQR: physically contiguous).
  uint32_t entries = 0;   ///< Queue size in entries (2..CAP.MQES+1; the spec's QSIZE + 1).
  uint16_t cqid = 0;      ///< The completion queue its commands complete to.
};
/// A completion queue as created: Create I/O Completion Queue (§5.3) or ACQ/AQA (qid 0).
struct CqConfig {
  uint16_t qid = 0;
  uint64_t gpa = 0;
  uint32_t entries = 0;
  uint16_t vector = 0;              ///< MSI-X vector (IV); 0 for the admin queue.
  bool interrupts_enabled = true;   ///< IEN.
};

/// Doorbell Buffer Config (admin opcode 7Ch): one page of shadow doorbells the host writes and one
/// page of EventIdx values the controller writes. Both 0: not configured (MMIO doorbells only).
struct ShadowDoorbells {
  uint64_t shadow_gpa = 0;    ///< PRP1: page aligned.
  uint64_t eventidx_gpa = 0;  ///< PRP2: page aligned.
  [[nodiscard]] bool enabled() const { return shadow_gpa != 0; }
  /// Reads the host's shadow tail (SQ) or head (CQ) of `qid`, with acquire ordering against the
  /// host's later entries. nullopt: the page is not RAM (checked by Doorbell Buffer Config, so
  /// only after a hostile remap — treated as "no new value").
  [[nodiscard]] std::optional<uint32_t> read_shadow(const GuestMemory& mem, uint16_t qid,
                                                    bool completion) const;
  /// Writes EventIdx of `qid` (release ordering, then a full fence so that a following
  /// read_shadow() sees a host update made before the host read this EventIdx — §5.8's race).
  void write_eventidx(const GuestMemory& mem, uint16_t qid, bool completion, uint32_t value) const;
};

/// Checks a queue's memory: [gpa, gpa + entries << entry_shift) inside one RAM region and gpa
/// page aligned to `page_size`. False: Create I/O SQ/CQ answers kInvalidField.
[[nodiscard]] bool ring_in_ram(const GuestMemory& mem, uint64_t gpa, uint32_t entries,
                               unsigned entry_shift, uint32_t page_size);

/// A submission queue's ring: the controller's head, the last valid tail the host wrote.
class SubmissionRing {
 public:
  /// `config`'s ring must satisfy ring_in_ram() (the creator checked it).
  SubmissionRing(const GuestMemory& mem, SqConfig config) : mem_(&mem), config_(config) {}
  [[nodiscard]] const SqConfig& config() const { return config_; }
  [[nodiscard]] uint32_t head() const { return head_; }
  [[nodiscard]] uint32_t tail() const { return tail_; }
  /// A new tail from the doorbell or the shadow doorbell. False (ignored, nothing changes) if
  /// `tail` ≥ entries: the caller reports "Invalid Doorbell Write Value" (§5.2 event info 01h).
  bool set_tail(uint32_t tail);
  /// Entries between head and tail.
  [[nodiscard]] uint32_t pending() const;
  /// Copies the entry at head into `out` and advances head. False if the ring is empty.
  bool fetch(SubmissionEntry& out);
  /// Snapshot / restore of head and tail (restore validates both < entries).
  void save(snap::ByteWriter& w) const;
  [[nodiscard]] Result<void> restore(snap::ByteReader& r);

 private:
  const GuestMemory* mem_;
  SqConfig config_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
};

/// A completion queue's ring: the controller's tail and phase tag, the last valid head the host
/// wrote.
class CompletionRing {
 public:
  CompletionRing(const GuestMemory& mem, CqConfig config) : mem_(&mem), config_(config) {}
  [[nodiscard]] const CqConfig& config() const { return config_; }
  [[nodiscard]] uint32_t head() const { return head_; }
  [[nodiscard]] uint32_t tail() const { return tail_; }
  [[nodiscard]] bool phase() const { return phase_; }
  /// A new head from the doorbell or the shadow doorbell. False (ignored) if head ≥ entries.
  bool set_head(uint32_t head);
  /// Free entries: entries - 1 - (tail - head) mod entries.
  [[nodiscard]] uint32_t free() const;
  /// Writes `e` at tail with the current phase tag (status field bit 0 set last, after the rest
  /// of the entry is visible: the host polls the phase tag), advances tail (flipping the phase
  /// on wrap). Requires free() > 0 (the caller reserves a slot for every fetched command).
  void post(CompletionEntry e);
  void save(snap::ByteWriter& w) const;
  [[nodiscard]] Result<void> restore(snap::ByteReader& r);

 private:
  const GuestMemory* mem_;
  CqConfig config_;
  uint32_t head_ = 0;
  uint32_t tail_ = 0;
  bool phase_ = true;  ///< Phase tag of the next entry written (1 after creation, §4.6).
};

}  // namespace tern::nvme
