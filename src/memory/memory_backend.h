// MemoryBackend: what backs guest RAM (--memory-backend), and the host facts the shared backends
// depend on (shmem transparent huge pages, free 2 MiB huge pages). Kept apart from guest_memory.h
// so configuration types (src/config) can name a backend without the memory access code.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// What backs guest RAM (--memory-backend).
enum class MemoryBackend {
  kAnon,       ///< "anon": private anonymous memory with MADV_HUGEPAGE (default without vhost-user).
  kMemfd,      ///< "memfd": one memfd per region, MAP_SHARED (another process can map it); THP
               ///< only where /sys/kernel/mm/transparent_hugepage/shmem_enabled allows (said once).
  kHugetlbfs,  ///< "hugetlbfs": one MFD_HUGETLB|MFD_HUGE_2MB memfd per region (needs free 2 MiB
               ///< huge pages: /proc/sys/vm/nr_hugepages; the error says how many are missing).
};

/// "anon" | "memfd" | "hugetlbfs"; the error names "--memory-backend".
[[nodiscard]] Result<MemoryBackend> parse_memory_backend(std::string_view s);
[[nodiscard]] std::string_view memory_backend_name(MemoryBackend b);

/// The size every hugetlbfs region must be a multiple of (2 MiB huge pages).
inline constexpr uint64_t kHugePageSize = 2ull << 20;

/// The active value of /sys/kernel/mm/transparent_hugepage/shmem_enabled ("never", "advise",
/// "within_size", "always", "deny", "force"), or nullopt when the file is missing or unreadable.
[[nodiscard]] std::optional<std::string> shmem_thp_mode();

/// 2 MiB huge pages that a new mapping can still get: free_hugepages - resv_hugepages from
/// /sys/kernel/mm/hugepages/hugepages-2048kB/; nullopt when the kernel has no 2 MiB pool.
[[nodiscard]] std::optional<uint64_t> available_huge_pages_2m();

/// Why `needed` 2 MiB huge pages cannot be had when `available` (available_huge_pages_2m()) are:
/// how many are free, and the sysctl that would reserve enough (vm.nr_hugepages).
[[nodiscard]] std::string huge_pages_missing(uint64_t needed, std::optional<uint64_t> available);

}  // namespace tern
