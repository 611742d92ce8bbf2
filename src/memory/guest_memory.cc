#include "memory/guest_memory.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#define PR_SET_VMA_ANON_NAME 0
#endif

#include "base/checked.h"
#include "memory/memory_layout.h"

namespace tern {

namespace {
constexpr uint64_t kPage = 4096;
constexpr size_t kHuge = 2 << 20;
}  // namespace

namespace memory_detail {

Result<uint64_t> validate_specs(std::span<const RegionSpec> specs) {
  if (specs.empty()) return fail("guest memory", "no regions");
  uint64_t total = 0;
  for (const auto& s : specs) {
    if (s.size == 0 || s.size % kPage != 0 || s.gpa % kPage != 0)
      return fail("guest memory", "region size/address not page-aligned");
    auto t = checked_add(total, s.size);
    if (!t || !checked_add(s.gpa, s.size)) return fail("guest memory", "size overflow");
    total = *t;
  }
  for (size_t i = 0; i < specs.size(); ++i)
    for (size_t j = i + 1; j < specs.size(); ++j)
      if (specs[i].gpa < specs[j].gpa + specs[j].size && specs[j].gpa < specs[i].gpa + specs[i].size)
        return fail("guest memory", "overlapping regions");
  return total;
}

Result<uint8_t*> map_aligned(uint64_t total, int prot) {
  size_t reserve = total + kHuge;
  void* raw = ::mmap(nullptr, reserve, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (raw == MAP_FAILED)
    return fail_errno("mmap", "guest RAM of " + std::to_string(total >> 20) + " MiB");
  auto base = reinterpret_cast<uintptr_t>(raw);
  uintptr_t aligned = (base + kHuge - 1) & ~uintptr_t{kHuge - 1};
  if (aligned > base) ::munmap(raw, aligned - base);
  if (uintptr_t end = aligned + total; end < base + reserve) ::munmap(reinterpret_cast<void*>(end), base + reserve - end);
  return reinterpret_cast<uint8_t*>(aligned);
}

Result<void> check_memory_file(std::span<const RegionSpec> specs, BorrowedFd fd) {
  uint64_t need = 0;
  for (const auto& s : specs) need = std::max(need, s.gpa + s.size);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", "guest memory file");
  if (!S_ISREG(st.st_mode)) return fail("guest memory", "memory file is not a regular file");
  if (static_cast<uint64_t>(st.st_size) < need)
    return fail("guest memory", "memory file is " + std::to_string(st.st_size) +
                                    " bytes, the regions need " + std::to_string(need));
  return {};
}

std::string range_text(uint64_t gpa, uint64_t size) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%#llx, +%#llx)", static_cast<unsigned long long>(gpa),
                static_cast<unsigned long long>(size));
  return buf;
}

}  // namespace memory_detail

namespace {

using memory_detail::map_aligned;
using memory_detail::validate_specs;

bool by_gpa(const MemoryRegion& a, const MemoryRegion& b) { return a.gpa < b.gpa; }

}  // namespace

Result<GuestMemory> GuestMemory::create(std::span<const RegionSpec> specs) {
  ASSIGN_OR_RETURN(uint64_t total, validate_specs(specs));

  // Anonymous private memory, 2 MiB-aligned, with MADV_HUGEPAGE: the host backs it with
  // transparent huge pages (Debian's default THP mode is "always" for anonymous memory but
  // "never" for shmem/memfd), so KVM maps guest RAM in 2 MiB pieces. With 4 KiB pages a Linux
  // boot took ~29 000 nested-page-fault exits instead of ~1 000 (docs/boot.md).
  GuestMemory m;
  ASSIGN_OR_RETURN(uint8_t* base, map_aligned(total, PROT_READ | PROT_WRITE));
  void* addr = base;
  m.mapping_ = std::unique_ptr<uint8_t, Unmapper>(base, Unmapper{total});
  ::madvise(addr, total, MADV_HUGEPAGE);
  ::madvise(addr, total, MADV_DONTDUMP);
  // Name the mapping in /proc/PID/maps ("[anon:tern-guest-ram]") where the kernel supports it.
  ::prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, total, "tern-guest-ram");
  uint64_t off = 0;
  for (const auto& s : specs) {
    m.regions_.push_back(MemoryRegion{s.gpa, s.size, base + off, off});
    off += s.size;
  }
  std::sort(m.regions_.begin(), m.regions_.end(), by_gpa);
  return m;
}

Result<GuestMemory> GuestMemory::create_from_file(std::span<const RegionSpec> specs, BorrowedFd fd) {
  ASSIGN_OR_RETURN(uint64_t total, validate_specs(specs));
  // A page beyond the end of the file would SIGBUS on first touch: check the length up front.
  TRY(memory_detail::check_memory_file(specs, fd));

  // Reserve the whole area inaccessible, then map each region's piece of the file over it
  // (MAP_FIXED) copy-on-write: one Unmapper frees everything, even after a partial failure.
  GuestMemory m;
  ASSIGN_OR_RETURN(uint8_t* base, map_aligned(total, PROT_NONE));
  m.mapping_ = std::unique_ptr<uint8_t, Unmapper>(base, Unmapper{total});
  uint64_t off = 0;
  for (const auto& s : specs) {
    // No MAP_POPULATE / MADV_WILLNEED: pages are read on first touch so restore stays flat.
    void* p = ::mmap(base + off, s.size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd.get(), static_cast<off_t>(s.gpa));
    if (p == MAP_FAILED) {
      return fail_errno("mmap", "memory file region " + memory_detail::range_text(s.gpa, s.size));
    }
    m.regions_.push_back(MemoryRegion{s.gpa, s.size, base + off, off});
    off += s.size;
  }
  ::madvise(base, total, MADV_DONTDUMP);
  std::sort(m.regions_.begin(), m.regions_.end(), by_gpa);
  return m;
}

GuestMemory GuestMemory::wrap(std::vector<MemoryRegion> regions) {
  GuestMemory m;
  m.regions_ = std::move(regions);
  std::sort(m.regions_.begin(), m.regions_.end(), by_gpa);
  return m;
}

void Unmapper::operator()(uint8_t* p) const {
  if (p != nullptr) ::munmap(p, len);
}

Result<std::span<uint8_t>> GuestMemory::slice(uint64_t gpa, uint64_t len) const {
  auto end = checked_add(gpa, len);
  if (!end) return fail("guest memory", "address range overflows");
  for (const auto& r : regions_) {
    if (gpa >= r.gpa && *end <= r.gpa + r.size) {
      return std::span<uint8_t>(r.host + (gpa - r.gpa), static_cast<size_t>(len));
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "[%#llx, +%#llx) is not guest RAM",
                static_cast<unsigned long long>(gpa), static_cast<unsigned long long>(len));
  return fail("guest memory", buf);
}

Result<void> GuestMemory::read(uint64_t gpa, std::span<uint8_t> out) const {
  ASSIGN_OR_RETURN(auto s, slice(gpa, out.size()));
  if (!out.empty()) std::memcpy(out.data(), s.data(), out.size());
  return {};
}

Result<void> GuestMemory::write(uint64_t gpa, std::span<const uint8_t> in) const {
  ASSIGN_OR_RETURN(auto s, slice(gpa, in.size()));
  if (!in.empty()) std::memcpy(s.data(), in.data(), in.size());
  return {};
}

uint64_t GuestMemory::total_size() const {
  uint64_t t = 0;
  for (const auto& r : regions_) t += r.size;
  return t;
}

}  // namespace tern
