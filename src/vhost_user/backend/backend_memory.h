// BackendMemory: the VM's RAM as a vhost-user back-end sees it: the regions of SET_MEM_TABLE /
// ADD_MEM_REG, each fd mapped MAP_SHARED (owned here, unmapped on removal), presented as one
// GuestMemory (gpa = guest_phys_addr) so the bounds-checked accessor stays the only way to touch
// guest memory. Ring addresses arrive as front-end host-virtual addresses (SET_VRING_ADDR);
// to_gpa() translates them through each region's userspace_addr.
//
// Not thread-safe: the session changes it only while no queue worker runs.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "vhost_user/vhost_user_spec.h"

namespace tern::vhost_user {

/// See the file comment.
class BackendMemory {
 public:
  /// GET_MAX_MEM_SLOTS: the most regions the back-end maps at once.
  static constexpr uint64_t kMaxSlots = 32;

  /// Maps `region` from `fd` (mmap_offset + memory_size bytes, MAP_SHARED, read-write). Errors:
  /// too many regions, overlapping guest-physical or user ranges, a file shorter than the
  /// region (an access past its end would SIGBUS), mmap failure.
  [[nodiscard]] Result<void> add(const VhostUserMemoryRegion& region, BorrowedFd fd);
  /// Unmaps the region with the same guest_phys_addr, memory_size and userspace_addr (REM_MEM_REG).
  [[nodiscard]] Result<void> remove(const VhostUserMemoryRegion& region);
  /// Unmaps everything.
  void clear();

  /// The mapped regions as guest memory (valid until the next add/remove/clear).
  [[nodiscard]] const GuestMemory& mem() const { return mem_; }
  /// The guest-physical address of front-end user address `uva`, if [uva, uva+len) lies in one
  /// region; an error naming the address otherwise.
  [[nodiscard]] Result<uint64_t> to_gpa(uint64_t uva, uint64_t len) const;
  [[nodiscard]] size_t size() const { return regions_.size(); }

 private:
  struct Mapped {
    VhostUserMemoryRegion region;
    std::unique_ptr<uint8_t, Unmapper> map;  // mmap_offset + memory_size bytes
  };
  void rebuild();

  std::vector<Mapped> regions_;
  GuestMemory mem_ = GuestMemory::wrap({});
};

}  // namespace tern::vhost_user
