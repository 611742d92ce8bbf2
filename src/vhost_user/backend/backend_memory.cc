#include "vhost_user/backend/backend_memory.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <cstdio>

#include "base/checked.h"

namespace tern::vhost_user {

namespace {
std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%#llx", static_cast<unsigned long long>(v));
  return buf;
}
bool overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen) {
  return a < b + blen && b < a + alen;
}
}  // namespace

Result<void> BackendMemory::add(const VhostUserMemoryRegion& r, BorrowedFd fd) {
  const std::string what = "memory region at guest " + hex(r.guest_phys_addr);
  if (regions_.size() >= kMaxSlots)
    return fail("vhost-user memory", what + ": more than " + std::to_string(kMaxSlots) + " regions");
  auto map_len = checked_add(r.mmap_offset, r.memory_size);
  if (r.memory_size == 0 || !map_len || !checked_add(r.guest_phys_addr, r.memory_size) ||
      !checked_add(r.userspace_addr, r.memory_size))
    return fail("vhost-user memory", what + ": size " + hex(r.memory_size) + " overflows");
  for (const auto& m : regions_) {
    if (overlaps(m.region.guest_phys_addr, m.region.memory_size, r.guest_phys_addr, r.memory_size) ||
        overlaps(m.region.userspace_addr, m.region.memory_size, r.userspace_addr, r.memory_size))
      return fail("vhost-user memory", what + " overlaps the region at guest " +
                                           hex(m.region.guest_phys_addr));
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return fail_errno("fstat", what);
  // Regular files and memfds have a size: a mapping past it would SIGBUS on first touch.
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) < *map_len)
    return fail("vhost-user memory", what + ": the file holds " + hex(st.st_size) +
                                         " bytes, the region needs " + hex(*map_len));
  void* p = ::mmap(nullptr, *map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd.get(), 0);
  if (p == MAP_FAILED) return fail_errno("mmap", what);
  regions_.push_back(Mapped{r, std::unique_ptr<uint8_t, Unmapper>(static_cast<uint8_t*>(p),
                                                                   Unmapper{*map_len})});
  rebuild();
  return {};
}

Result<void> BackendMemory::remove(const VhostUserMemoryRegion& r) {
  for (auto it = regions_.begin(); it != regions_.end(); ++it) {
    if (it->region.guest_phys_addr == r.guest_phys_addr &&
        it->region.memory_size == r.memory_size && it->region.userspace_addr == r.userspace_addr) {
      regions_.erase(it);
      rebuild();
      return {};
    }
  }
  return fail("vhost-user memory", "no region at guest " + hex(r.guest_phys_addr) + " to remove");
}

void BackendMemory::clear() {
  regions_.clear();
  rebuild();
}

void BackendMemory::rebuild() {
  std::vector<MemoryRegion> v;
  for (const auto& m : regions_) {
    MemoryRegion mr;
    mr.gpa = m.region.guest_phys_addr;
    mr.size = m.region.memory_size;
    mr.host = m.map.get() + m.region.mmap_offset;
    v.push_back(mr);
  }
  mem_ = GuestMemory::wrap(std::move(v));
}

Result<uint64_t> BackendMemory::to_gpa(uint64_t uva, uint64_t len) const {
  auto end = checked_add(uva, len);
  if (end) {
    for (const auto& m : regions_) {
      const auto& r = m.region;
      if (uva >= r.userspace_addr && *end <= r.userspace_addr + r.memory_size)
        return r.guest_phys_addr + (uva - r.userspace_addr);
    }
  }
  return fail("vhost-user memory", "front-end address " + hex(uva) + " (+" + hex(len) +
                                       ") is in no memory region");
}

}  // namespace tern::vhost_user
