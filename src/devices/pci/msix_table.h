// MsixTable: the MSI-X vector table and Pending Bit Array of one PCI function (PCI 3.0 §6.8.2),
// each vector delivered through its own irqfd bound to a GSI with an MSI route.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "base/fd.h"
#include "base/log.h"
#include "base/result.h"
#include "devices/pci/pci_platform.h"
#include "snapshot/codec.h"

namespace tern {

/// Thread-safe (one mutex): the table is written from vCPU threads, vectors fired from device
/// worker threads. A vector fires only while MSI-X is enabled and neither the function nor the
/// vector is masked; otherwise its PBA bit is set and it fires when unmasked. The MSI route of a
/// vector is (re)installed when it is unmasked or its address/data change while unmasked.
class MsixTable {
 public:
  /// `vectors` (1..2048) irqfds, each bound to a GSI from `platform`, which must outlive this.
  [[nodiscard]] static Result<std::unique_ptr<MsixTable>> create(uint16_t vectors,
                                                                 PciPlatform& platform);

  [[nodiscard]] uint16_t size() const { return static_cast<uint16_t>(entries_.size()); }
  /// Bytes of the table (16 per vector) and of the PBA (8 per 64 vectors).
  [[nodiscard]] uint32_t table_bytes() const { return size() * 16u; }
  [[nodiscard]] uint32_t pba_bytes() const { return ((size() + 63u) / 64u) * 8u; }

  /// Table access at byte `offset` (any width; bytes outside the table read 0, writes ignored).
  void table_read(uint64_t offset, std::span<uint8_t> data) const;
  void table_write(uint64_t offset, std::span<const uint8_t> data);
  /// PBA read (read-only; writes are ignored by the caller).
  void pba_read(uint64_t offset, std::span<uint8_t> data) const;

  /// The MSI-X Message Control bits changed (capability write, or reset with both false).
  void set_control(bool enabled, bool function_mask);
  [[nodiscard]] bool enabled() const;

  /// Delivers vector `v` or marks it pending. Returns false for a vector outside the table.
  bool fire(uint16_t v);

  /// What fire_if_enabled() did.
  enum class Fired {
    kDisabled,  ///< MSI-X Enable is clear: nothing done; the caller signals INTx instead.
    kSent,      ///< Delivered through the vector's irqfd.
    kPending,   ///< Masked (vector or function): PBA bit set, sent when unmasked.
    kNoVector,  ///< `v` is outside the table (e.g. VIRTIO_MSI_NO_VECTOR): nothing to send.
  };
  /// enabled() and fire() under one lock: a concurrent clear of MSI-X Enable either comes first
  /// (kDisabled: the caller uses INTx) or after the message was handled — the interrupt is never
  /// left as a PBA bit of a disabled MSI-X capability (PCI 3.0 §6.8.2).
  Fired fire_if_enabled(uint16_t v);
  /// Masks every vector, clears addresses, data and pending bits (function reset).
  void reset();

  /// Told whether a vector is deliverable: MSI-X enabled, function and vector unmasked (its
  /// MSI route installed: a vector is routed when unmasked). Called under the table's lock, on
  /// the thread that changed the state (a vCPU writing the table or the Message Control bits),
  /// after the Pending bit was sent: the notifier must not call back into this table (nor into
  /// anything that fires it). The mechanism behind QEMU's "guest notifier mask" for vhost.
  using MaskNotifier = std::function<void(bool deliverable)>;
  /// Calls `fn` with vector `v`'s current state before returning, then at every change of it.
  /// Returns the id for remove_mask_notifier(); 0 (nothing added) for a vector outside the table.
  [[nodiscard]] uint64_t add_mask_notifier(uint16_t v, MaskNotifier fn);
  /// Once this returns, the notifier `id` runs no more (unknown ids are ignored).
  void remove_mask_notifier(uint64_t id);

  /// Snapshot: per vector address, data, vector control and pending bit. Enable and Function
  /// Mask are PCI config space state (restored through set_control()).
  void save_state(snap::ByteWriter& w) const;
  /// Restores save_state()'s bytes into a table of the same size, then installs the MSI route
  /// (KVM_SET_GSI_ROUTING through the platform) of every unmasked vector; the irqfds were bound
  /// by create(). Errors name `device` and the field; nothing changes on error.
  [[nodiscard]] Result<void> restore_state(snap::ByteReader& r, std::string_view device);

  /// For tests and statistics.
  [[nodiscard]] BorrowedFd irqfd(uint16_t v) const { return entries_[v].irqfd.borrow(); }
  [[nodiscard]] uint32_t gsi(uint16_t v) const { return entries_[v].gsi; }
  [[nodiscard]] bool pending(uint16_t v) const;
  [[nodiscard]] uint64_t route_errors() const;

 private:
  struct Entry {
    uint32_t addr_lo = 0, addr_hi = 0, data = 0, control = 1;  // masked at reset
    bool pending = false;
    UniqueFd irqfd;
    uint32_t gsi = 0;
  };
  explicit MsixTable(PciPlatform& platform) : platform_(platform) {}
  bool deliverable_locked(const Entry& e) const;
  void route_locked(Entry& e);
  void signal_locked(Entry& e);
  void flush_pending_locked();
  void notify_locked();  // calls the notifiers whose vector's deliverability changed

  struct Notifier {
    uint64_t id = 0;
    uint16_t vector = 0;
    bool deliverable = false;  // as last told
    MaskNotifier fn;
  };

  PciPlatform& platform_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  bool enabled_ = false;
  bool function_mask_ = false;
  uint64_t route_errors_ = 0;
  std::vector<Notifier> notifiers_;
  uint64_t next_notifier_id_ = 1;
  RateLimit log_limit_{5};
};

}  // namespace tern
