#include "devices/pci/msix_table.h"

#include <sys/eventfd.h>

#include <cstring>

#include "devices/pci/pci_registers.h"

namespace tern {

Result<std::unique_ptr<MsixTable>> MsixTable::create(uint16_t vectors, PciPlatform& platform) {
  if (vectors == 0 || vectors > pci::kMsixMaxVectors)
    return fail("MSI-X table", std::to_string(vectors) + " vectors (1..2048)");
  auto t = std::unique_ptr<MsixTable>(new MsixTable(platform));
  t->entries_.resize(vectors);
  for (auto& e : t->entries_) {
    ASSIGN_OR_RETURN(e.irqfd, make_eventfd(0, EFD_NONBLOCK));
    ASSIGN_OR_RETURN(e.gsi, platform.allocate_msi(e.irqfd.borrow()));
  }
  return t;
}

void MsixTable::table_read(uint64_t offset, std::span<uint8_t> data) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < data.size(); ++i) {
    uint64_t o = offset + i;
    uint64_t idx = o / pci::kMsixEntrySize;
    if (idx >= entries_.size()) {
      data[i] = 0;
      continue;
    }
    const Entry& e = entries_[idx];
    uint32_t words[4] = {e.addr_lo, e.addr_hi, e.data, e.control};
    uint32_t w = words[(o % 16) / 4];
    data[i] = static_cast<uint8_t>(w >> (8 * (o % 4)));
  }
}

void MsixTable::table_write(uint64_t offset, std::span<const uint8_t> data) {
  std::lock_guard lock(mu_);
  std::vector<bool> touched(entries_.size(), false);
  std::vector<uint32_t> old_control(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) old_control[i] = entries_[i].control;
  for (size_t i = 0; i < data.size(); ++i) {
    uint64_t o = offset + i;
    uint64_t idx = o / pci::kMsixEntrySize;
    if (idx >= entries_.size()) continue;
    Entry& e = entries_[idx];
    uint32_t* words[4] = {&e.addr_lo, &e.addr_hi, &e.data, &e.control};
    uint32_t* w = words[(o % 16) / 4];
    unsigned shift = 8 * (o % 4);
    *w = (*w & ~(0xFFu << shift)) | (uint32_t{data[i]} << shift);
    touched[idx] = true;
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!touched[i]) continue;
    Entry& e = entries_[i];
    e.control &= pci::kMsixVectorMasked;  // other bits reserved
    bool was_masked = old_control[i] & pci::kMsixVectorMasked;
    bool masked = e.control & pci::kMsixVectorMasked;
    if (!masked) route_locked(e);  // newly unmasked, or address/data changed while unmasked
    if (was_masked && !masked && e.pending && deliverable_locked(e)) signal_locked(e);
  }
  notify_locked();
}

void MsixTable::pba_read(uint64_t offset, std::span<uint8_t> data) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < data.size(); ++i) {
    uint8_t b = 0;
    for (unsigned bit = 0; bit < 8; ++bit) {
      uint64_t v = (offset + i) * 8 + bit;
      if (v < entries_.size() && entries_[v].pending) b |= static_cast<uint8_t>(1u << bit);
    }
    data[i] = b;
  }
}

void MsixTable::set_control(bool enabled, bool function_mask) {
  std::lock_guard lock(mu_);
  enabled_ = enabled;
  function_mask_ = function_mask;
  flush_pending_locked();
  notify_locked();
}

bool MsixTable::enabled() const {
  std::lock_guard lock(mu_);
  return enabled_;
}

bool MsixTable::fire(uint16_t v) {
  std::lock_guard lock(mu_);
  if (v >= entries_.size()) return false;
  Entry& e = entries_[v];
  if (deliverable_locked(e))
    signal_locked(e);
  else
    e.pending = true;
  return true;
}

MsixTable::Fired MsixTable::fire_if_enabled(uint16_t v) {
  std::lock_guard lock(mu_);
  if (!enabled_) return Fired::kDisabled;
  if (v >= entries_.size()) return Fired::kNoVector;
  Entry& e = entries_[v];
  if (!deliverable_locked(e)) {
    e.pending = true;
    return Fired::kPending;
  }
  signal_locked(e);
  return Fired::kSent;
}

void MsixTable::reset() {
  std::lock_guard lock(mu_);
  enabled_ = false;
  function_mask_ = false;
  for (auto& e : entries_) {
    e.addr_lo = e.addr_hi = e.data = 0;
    e.control = pci::kMsixVectorMasked;
    e.pending = false;
  }
  notify_locked();
}

uint64_t MsixTable::add_mask_notifier(uint16_t v, MaskNotifier fn) {
  std::lock_guard lock(mu_);
  if (v >= entries_.size() || !fn) return 0;
  Notifier n{next_notifier_id_++, v, deliverable_locked(entries_[v]), std::move(fn)};
  n.fn(n.deliverable);
  notifiers_.push_back(std::move(n));
  return notifiers_.back().id;
}

void MsixTable::remove_mask_notifier(uint64_t id) {
  std::lock_guard lock(mu_);
  std::erase_if(notifiers_, [id](const Notifier& n) { return n.id == id; });
}

void MsixTable::notify_locked() {
  for (Notifier& n : notifiers_) {
    bool now = deliverable_locked(entries_[n.vector]);
    if (now == n.deliverable) continue;
    n.deliverable = now;
    n.fn(now);
  }
}

bool MsixTable::pending(uint16_t v) const {
  std::lock_guard lock(mu_);
  return v < entries_.size() && entries_[v].pending;
}

uint64_t MsixTable::route_errors() const {
  std::lock_guard lock(mu_);
  return route_errors_;
}

bool MsixTable::deliverable_locked(const Entry& e) const {
  return enabled_ && !function_mask_ && !(e.control & pci::kMsixVectorMasked);
}

void MsixTable::route_locked(Entry& e) {
  uint64_t addr = uint64_t{e.addr_hi} << 32 | e.addr_lo;
  auto r = platform_.set_msi_route(e.gsi, addr, e.data);
  if (!r) {
    ++route_errors_;
    TERN_LOG_RATELIMITED(log_limit_, warn, "MSI-X route for GSI {}: {}", e.gsi,
                         r.error().message());
  }
}

void MsixTable::signal_locked(Entry& e) {
  e.pending = false;
  uint64_t one = 1;
  // A full counter (EAGAIN) means an injection is already pending: nothing is lost.
  [[maybe_unused]] ssize_t n = ::write(e.irqfd.get(), &one, sizeof one);
}

void MsixTable::flush_pending_locked() {
  for (auto& e : entries_)
    if (e.pending && deliverable_locked(e)) signal_locked(e);
}

}  // namespace tern
