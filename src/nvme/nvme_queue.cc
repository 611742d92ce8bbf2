#include "nvme/nvme_queue.h"

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>

namespace tern::nvme {

namespace {

// One 2- or 4-byte access of a doorbell / EventIdx / phase halfword the other side polls: a single
// acquire load / release store where the host address is naturally aligned (always, for
// page-aligned RAM regions), a memcpy behind a fence otherwise.
template <class T>
T load_acquire(uint8_t* p) {
  if (reinterpret_cast<uintptr_t>(p) % alignof(T) == 0)
    return std::atomic_ref<T>(*reinterpret_cast<T*>(p)).load(std::memory_order_acquire);
  T v;
  std::memcpy(&v, p, sizeof v);
  std::atomic_thread_fence(std::memory_order_acquire);
  return v;
}
template <class T>
void store_release(uint8_t* p, T v) {
  if (reinterpret_cast<uintptr_t>(p) % alignof(T) == 0) {
    std::atomic_ref<T>(*reinterpret_cast<T*>(p)).store(v, std::memory_order_release);
    return;
  }
  std::atomic_thread_fence(std::memory_order_release);
  std::memcpy(p, &v, sizeof v);
}

uint32_t ring_used(uint32_t head, uint32_t tail, uint32_t entries) {
  return tail >= head ? tail - head : entries - head + tail;
}

}  // namespace

std::optional<uint32_t> ShadowDoorbells::read_shadow(const GuestMemory& mem, uint16_t qid,
                                                     bool completion) const {
  if (!enabled()) return std::nullopt;
  auto s = mem.slice(shadow_gpa + shadow_offset(qid, completion), sizeof(uint32_t));
  if (!s) return std::nullopt;
  // Acquire: the host wrote its entries before this value; nothing read after it is hoisted.
  return load_acquire<uint32_t>(s->data());
}

void ShadowDoorbells::write_eventidx(const GuestMemory& mem, uint16_t qid, bool completion,
                                     uint32_t value) const {
  if (eventidx_gpa == 0) return;
  auto s = mem.slice(eventidx_gpa + shadow_offset(qid, completion), sizeof(uint32_t));
  if (!s) return;
  store_release<uint32_t>(s->data(), value);
  // §5.8's race (the virtio EVENT_IDX one): the host writes its shadow value, then reads
  // EventIdx to decide whether to ring. Without a full fence here our following read_shadow()
  // could be satisfied before this store is visible (store->load reordering), both sides would
  // see the old values, and the host would not ring while we go to sleep.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool ring_in_ram(const GuestMemory& mem, uint64_t gpa, uint32_t entries, unsigned entry_shift,
                 uint32_t page_size) {
  if (entries < 2 || entries > 65536 || entry_shift > 12) return false;
  if (page_size == 0 || (page_size & (page_size - 1)) != 0) return false;
  if (gpa % page_size != 0) return false;
  uint64_t len = uint64_t{entries} << entry_shift;
  return mem.slice(gpa, len).has_value();
}

// ---- SubmissionRing ----

bool SubmissionRing::set_tail(uint32_t tail) {
  if (tail >= config_.entries) return false;
  tail_ = tail;
  return true;
}

uint32_t SubmissionRing::pending() const { return ring_used(head_, tail_, config_.entries); }

bool SubmissionRing::fetch(SubmissionEntry& out) {
  if (head_ == tail_) return false;
  uint64_t gpa = config_.gpa + (uint64_t{head_} << kSqEntryShift);
  // Checked by ring_in_ram() at creation and the region list never changes: cannot fail. If it
  // ever did, the ring reads as empty rather than handing out garbage.
  auto e = mem_->read_obj<SubmissionEntry>(gpa);
  if (!e) return false;
  out = *e;
  head_ = head_ + 1 == config_.entries ? 0 : head_ + 1;
  return true;
}

void SubmissionRing::save(snap::ByteWriter& w) const {
  w.u32(head_);
  w.u32(tail_);
}

Result<void> SubmissionRing::restore(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(uint32_t head, r.u32());
  ASSIGN_OR_RETURN(uint32_t tail, r.u32());
  if (head >= config_.entries || tail >= config_.entries)
    return fail(r.what(), "SQ " + std::to_string(config_.qid) + ": head " + std::to_string(head) +
                              " / tail " + std::to_string(tail) + " outside a queue of " +
                              std::to_string(config_.entries) + " entries");
  head_ = head;
  tail_ = tail;
  return {};
}

// ---- CompletionRing ----

bool CompletionRing::set_head(uint32_t head) {
  if (head >= config_.entries) return false;
  head_ = head;
  return true;
}

uint32_t CompletionRing::free() const {
  return config_.entries - 1 - ring_used(head_, tail_, config_.entries);
}

void CompletionRing::post(CompletionEntry e) {
  uint64_t gpa = config_.gpa + (uint64_t{tail_} << kCqEntryShift);
  auto s = mem_->slice(gpa, sizeof(CompletionEntry));
  if (s) {
    // Everything but the status halfword first; the slot's stale phase tag keeps the host off it.
    // Then the status halfword with a release store: the rest is visible before the phase tag.
    std::memcpy(s->data(), &e, offsetof(CompletionEntry, status));
    uint16_t status = static_cast<uint16_t>((e.status & ~1u) | (phase_ ? 1u : 0u));
    store_release<uint16_t>(s->data() + offsetof(CompletionEntry, status), status);
  }
  if (++tail_ == config_.entries) {
    tail_ = 0;
    phase_ = !phase_;
  }
}

void CompletionRing::save(snap::ByteWriter& w) const {
  w.u32(head_);
  w.u32(tail_);
  w.boolean(phase_);
}

Result<void> CompletionRing::restore(snap::ByteReader& r) {
  ASSIGN_OR_RETURN(uint32_t head, r.u32());
  ASSIGN_OR_RETURN(uint32_t tail, r.u32());
  ASSIGN_OR_RETURN(bool phase, r.boolean());
  if (head >= config_.entries || tail >= config_.entries)
    return fail(r.what(), "CQ " + std::to_string(config_.qid) + ": head " + std::to_string(head) +
                              " / tail " + std::to_string(tail) + " outside a queue of " +
                              std::to_string(config_.entries) + " entries");
  head_ = head;
  tail_ = tail;
  phase_ = phase;
  return {};
}

}  // namespace tern::nvme
