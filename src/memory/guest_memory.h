// GuestMemory: the guest's RAM and the only way tern touches it.
//
// Guest RAM is a list of regions, each a range of guest-physical addresses (GPA) backed by one
// host-virtual mapping. Every access is bounds- and overflow-checked and must fall inside ONE
// region (regions are not contiguous across the 32-bit PCI hole). Data moves with memcpy, so
// unaligned guest addresses are fine; read_obj/write_obj move an aligned 2-, 4- or 8-byte field
// with one load or store (never torn against the guest's concurrent access). Accesses from several
// threads are allowed: the region list never changes after creation; racing guest writes are the
// guest's business.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/memory_backend.h"

namespace tern {

/// One contiguous range of guest RAM.
struct MemoryRegion {
  uint64_t gpa = 0;         ///< First guest-physical address.
  uint64_t size = 0;        ///< Length in bytes (multiple of the page size for memfd regions).
  uint8_t* host = nullptr;  ///< Host-virtual address of `gpa`.
  uint64_t fd_offset = 0;   ///< Offset of this region from the start of all guest RAM.
  /// Shared backends (memfd, hugetlbfs): the file holding this region at file offset 0, owned by
  /// the GuestMemory (a vhost-user back-end maps it: VhostUserMemoryRegion.mmap_offset = 0).
  /// -1 for anonymous memory and wrap().
  int fd = -1;
};

/// Where one region of RAM lives: guest-physical start and size in bytes.
struct RegionSpec {
  uint64_t gpa = 0;
  uint64_t size = 0;
};

/// Size-aware munmap deleter so a mapping can be owned by a unique_ptr (moves are safe).
struct Unmapper {
  size_t len = 0;
  void operator()(uint8_t* p) const;
};

class GuestMemory {
 public:
  /// Allocates RAM for `specs` (sizes page-aligned, non-zero, non-overlapping) as one anonymous,
  /// 2 MiB-aligned mapping advised MADV_HUGEPAGE and named "tern-guest-ram" where the kernel
  /// allows. Pages are allocated on first touch. Fails naming the size when it cannot be mapped.
  static Result<GuestMemory> create(std::span<const RegionSpec> specs);
  /// As create() with `backend`: kAnon is create(); kMemfd / kHugetlbfs make one file per region
  /// (sealed against shrinking), mapped MAP_SHARED into the same 2 MiB-aligned layout, each
  /// region's fd in MemoryRegion::fd. Errors name the backend and the size.
  static Result<GuestMemory> create(std::span<const RegionSpec> specs, MemoryBackend backend);

  /// Guest RAM mapped copy-on-write from `fd` (a memory file written by snap::save_memory_file,
  /// guest-physical address == file offset): one PROT_READ|PROT_WRITE, MAP_PRIVATE mapping per
  /// region at file offset = region gpa, placed inside one reserved 2 MiB-aligned area exactly like
  /// create() lays regions out (same host layout, same fd_offset values). Pages are read from the
  /// file on first touch (no copy, no populate up front), so the cost does not grow with RAM size;
  /// guest writes never reach the file. The file must be a regular file at least as long as the
  /// end of the highest region (checked; error names the sizes) and must not be truncated while
  /// mapped (a touched page past its end would SIGBUS). `fd` may be closed after the call.
  static Result<GuestMemory> create_from_file(std::span<const RegionSpec> specs, BorrowedFd fd);

  /// A restore onto a shared backend (kMemfd / kHugetlbfs; kAnon is create_from_file): RAM
  /// created as create(specs, backend), then the memory file's contents read into it (holes
  /// skipped with SEEK_DATA), so a vhost-user back-end sees the restored RAM. Costs a read of
  /// the non-zero RAM; `progress(done, total)` (bytes) is called at most every 50 ms.
  static Result<GuestMemory> create_from_file(
      std::span<const RegionSpec> specs, BorrowedFd fd, MemoryBackend backend,
      const std::function<void(uint64_t, uint64_t)>& progress);

  /// Wraps caller-owned buffers (for tests and fuzzers): nothing is mapped or freed.
  static GuestMemory wrap(std::vector<MemoryRegion> regions);

  GuestMemory(GuestMemory&&) noexcept = default;
  GuestMemory& operator=(GuestMemory&&) noexcept = default;

  /// Host view of [gpa, gpa+len) if it lies inside one region; error otherwise (also on overflow).
  [[nodiscard]] Result<std::span<uint8_t>> slice(uint64_t gpa, uint64_t len) const;

  /// Copies guest bytes at `gpa` into `out`.
  [[nodiscard]] Result<void> read(uint64_t gpa, std::span<uint8_t> out) const;
  /// Copies `in` into guest memory at `gpa`.
  [[nodiscard]] Result<void> write(uint64_t gpa, std::span<const uint8_t> in) const;

  /// Reads a trivially copyable T stored at `gpa` (any alignment). A 2-, 4- or 8-byte T at a
  /// naturally aligned address is read with one load, so a field the guest writes meanwhile
  /// (avail->idx, used_event) is the old or the new value, never half of each (glibc's memcpy of
  /// 2 bytes loads the second byte again: avail->idx 0x28ff -> 0x2900 could read as 0x29ff).
  template <class T>
  [[nodiscard]] Result<T> read_obj(uint64_t gpa) const {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    ASSIGN_OR_RETURN(std::span<uint8_t> s, slice(gpa, sizeof(T)));
    if constexpr (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
      using U = std::conditional_t<sizeof(T) == 2, uint16_t,
                                   std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
      if (reinterpret_cast<uintptr_t>(s.data()) % sizeof(T) == 0) {
        U u = __atomic_load_n(reinterpret_cast<const U*>(s.data()), __ATOMIC_RELAXED);
        std::memcpy(&v, &u, sizeof(T));
        return v;
      }
    }
    std::memcpy(&v, s.data(), sizeof(T));
    return v;
  }
  /// Writes a trivially copyable T at `gpa` (any alignment). As read_obj: a 2-, 4- or 8-byte T
  /// at a naturally aligned address is one store, so the guest reading it meanwhile (used->idx,
  /// avail_event) sees the old or the new value, never half of each.
  template <class T>
  [[nodiscard]] Result<void> write_obj(uint64_t gpa, const T& v) const {
    static_assert(std::is_trivially_copyable_v<T>);
    ASSIGN_OR_RETURN(std::span<uint8_t> s, slice(gpa, sizeof(T)));
    if constexpr (sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8) {
      using U = std::conditional_t<sizeof(T) == 2, uint16_t,
                                   std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
      if (reinterpret_cast<uintptr_t>(s.data()) % sizeof(T) == 0) {
        U u;
        std::memcpy(&u, &v, sizeof(T));
        __atomic_store_n(reinterpret_cast<U*>(s.data()), u, __ATOMIC_RELAXED);
        return {};
      }
    }
    std::memcpy(s.data(), &v, sizeof(T));
    return {};
  }

  [[nodiscard]] const std::vector<MemoryRegion>& regions() const { return regions_; }
  /// Sum of all region sizes in bytes.
  [[nodiscard]] uint64_t total_size() const;
  /// True if every region has an fd another process can map (kMemfd / kHugetlbfs).
  [[nodiscard]] bool shareable() const;
  [[nodiscard]] MemoryBackend backend() const { return backend_; }

 private:
  GuestMemory() = default;
  std::vector<MemoryRegion> regions_;
  std::unique_ptr<uint8_t, Unmapper> mapping_;  // all regions, when created by create()
  std::vector<UniqueFd> fds_;                   // shared backends: one per region (regions_[i].fd)
  MemoryBackend backend_ = MemoryBackend::kAnon;
};

}  // namespace tern
