// RomRegion: firmware bytes the guest sees as read-only memory (a KVM_MEM_READONLY memslot).
//
// The bytes live in a sealed memfd mapped read-only into tern (shareable with another process,
// never written after creation). Guest reads are plain memory accesses; a guest write to a
// KVM_MEM_READONLY slot leaves KVM as KVM_EXIT_MMIO (KVM API, KVM_SET_USER_MEMORY_REGION), so the
// writer decides what to do with it: nothing claims it on the MMIO bus → counted as unclaimed,
// dropped. Used for the firmware code image (OVMF_CODE, SeaBIOS) and its aliases below 1 MiB.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/fd.h"
#include "base/result.h"
#include "bus/bus_device.h"
#include "kvm/kvm_vm.h"
#include "memory/guest_memory.h"

namespace tern {

/// Largest firmware image tern maps (bytes): the 16 MiB below 4 GiB QEMU's pc machine allows.
inline constexpr uint64_t kMaxRomBytes = 16ull << 20;

/// Read-only guest memory with fixed contents. Move-only; the mapping must outlive every memslot
/// made from it (keep it beside the KvmVm, destroy it after the VM fd).
class RomRegion {
 public:
  /// The whole file at `path`: a regular file, size a non-zero multiple of 4 KiB and at most
  /// kMaxRomBytes. Errors name `field` (e.g. "--firmware") and say what is wrong: missing,
  /// a directory, unreadable, empty, size not a multiple of 4096, too large.
  [[nodiscard]] static Result<RomRegion> from_file(const std::string& path,
                                                   const std::string& field);
  /// A copy of `bytes` (non-empty, a multiple of 4 KiB, ≤ kMaxRomBytes); `name` names the memfd
  /// and errors. For tests and for images tern builds itself.
  [[nodiscard]] static Result<RomRegion> from_bytes(std::span<const uint8_t> bytes,
                                                    std::string_view name);

  /// Maps [offset, offset+size) of the image read-only at guest-physical `gpa` with memslot
  /// `slot` (KVM_MEM_READONLY; needs KVM_CAP_READONLY_MEM, refused naming it otherwise). `offset`
  /// and `size` must be 4 KiB-aligned and inside the image; `gpa` 4 KiB-aligned. The slot number
  /// is the caller's (it must not collide with RAM's slots, which count up from 0).
  [[nodiscard]] Result<void> map(KvmVm& vm, uint32_t slot, uint64_t gpa, uint64_t offset,
                                 uint64_t size) const;
  /// Maps the whole image at `gpa`.
  [[nodiscard]] Result<void> map(KvmVm& vm, uint32_t slot, uint64_t gpa) const {
    return map(vm, slot, gpa, 0, size());
  }

  /// The image (read-only view of the mapping).
  [[nodiscard]] std::span<const uint8_t> bytes() const { return {mapping_.get(), size_}; }
  [[nodiscard]] uint64_t size() const { return size_; }
  /// The sealed memfd holding the image (F_SEAL_WRITE|F_SEAL_SHRINK|F_SEAL_GROW).
  [[nodiscard]] BorrowedFd fd() const { return fd_.borrow(); }

 private:
  RomRegion() = default;
  UniqueFd fd_;
  std::unique_ptr<uint8_t, Unmapper> mapping_;
  uint64_t size_ = 0;
};

/// The MMIO-bus side of a RomRegion mapped read-only: guest writes to the image (which leave KVM
/// as MMIO exits) are dropped and counted; a read that exits anyway (a range mapped without a
/// memslot) returns the image's bytes, 0xFF past its end. Insert it over the mapped range.
class RomWriteSink : public BusDevice {
 public:
  /// `rom` must outlive the sink; `name` is the bus name ("firmware-code").
  RomWriteSink(const RomRegion& rom, std::string name) : rom_(rom), name_(std::move(name)) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  void read(uint64_t offset, std::span<uint8_t> data) override;
  void write(uint64_t offset, std::span<const uint8_t> data) override;
  /// Guest writes dropped so far (any thread).
  [[nodiscard]] uint64_t dropped_writes() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  const RomRegion& rom_;
  std::string name_;
  std::atomic<uint64_t> dropped_{0};
};

/// Checks that `vm` can make KVM_MEM_READONLY memslots; the error names KVM_CAP_READONLY_MEM.
[[nodiscard]] Result<void> require_readonly_mem(const KvmVm& vm);

}  // namespace tern
