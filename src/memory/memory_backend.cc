#include "memory/memory_backend.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace tern {

namespace {

// The first line of a small sysfs file, or nullopt.
std::optional<std::string> read_sysfs_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return std::nullopt;
  return line;
}

std::optional<uint64_t> read_sysfs_u64(const char* path) {
  auto line = read_sysfs_line(path);
  if (!line) return std::nullopt;
  std::istringstream in(*line);
  uint64_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

Result<MemoryBackend> parse_memory_backend(std::string_view s) {
  if (s == "anon") return MemoryBackend::kAnon;
  if (s == "memfd") return MemoryBackend::kMemfd;
  if (s == "hugetlbfs") return MemoryBackend::kHugetlbfs;
  return fail("--memory-backend",
              "\"" + std::string(s) + "\": unknown backend (anon, memfd, hugetlbfs)");
}

std::string_view memory_backend_name(MemoryBackend b) {
  switch (b) {
    case MemoryBackend::kAnon: return "anon";
    case MemoryBackend::kMemfd: return "memfd";
    case MemoryBackend::kHugetlbfs: return "hugetlbfs";
  }
  return "?";
}

std::optional<std::string> shmem_thp_mode() {
  // "always within_size advise [never] deny force": the active mode is in brackets.
  auto line = read_sysfs_line("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  if (!line) return std::nullopt;
  size_t open = line->find('[');
  size_t close = line->find(']', open);
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  return line->substr(open + 1, close - open - 1);
}

std::optional<uint64_t> available_huge_pages_2m() {
  auto free = read_sysfs_u64("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");
  if (!free) return std::nullopt;
  // Reserved pages are promised to mappings already made, though still counted as free.
  uint64_t resv =
      read_sysfs_u64("/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages").value_or(0);
  return *free > resv ? *free - resv : 0;
}

std::string huge_pages_missing(uint64_t needed, std::optional<uint64_t> available) {
  constexpr const char* kHugePool = "/sys/kernel/mm/hugepages/hugepages-2048kB";
  if (!available)
    return "this host has no 2 MiB huge page pool (" + std::string(kHugePool) + " is missing)";
  uint64_t now = read_sysfs_u64((std::string(kHugePool) + "/nr_hugepages").c_str()).value_or(0);
  return std::to_string(needed) + " free 2 MiB huge pages needed, " + std::to_string(*available) +
         " free (" + kHugePool + "/free_hugepages minus resv_hugepages); reserve them with "
         "\"sysctl vm.nr_hugepages=" + std::to_string(now + needed - std::min(needed, *available)) +
         "\" (/proc/sys/vm/nr_hugepages)";
}

}  // namespace tern
