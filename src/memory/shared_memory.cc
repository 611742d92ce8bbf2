// GuestMemory on the shared backends (memfd, hugetlbfs): RAM another process (a vhost-user
// back-end) can map from MemoryRegion::fd, and the restore of a memory file into such RAM.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "base/log.h"
#include "base/size.h"
#include "memory/guest_memory.h"
#include "memory/memory_layout.h"

#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)  // log2(2 MiB) << MFD_HUGE_SHIFT
#endif

namespace tern {

namespace {

using memory_detail::range_text;

constexpr const char* kShmemEnabled = "/sys/kernel/mm/transparent_hugepage/shmem_enabled";

// Says once per process when shmem (memfd) RAM cannot get transparent huge pages.
void say_shmem_thp_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto mode = shmem_thp_mode();
    if (!mode) {
      spdlog::info("guest RAM (memfd): cannot read {}; it may be backed by 4 KiB pages",
                   kShmemEnabled);
    } else if (*mode == "never" || *mode == "deny") {
      spdlog::warn(
          "guest RAM (memfd): {} is \"{}\", so shared guest RAM gets no transparent huge pages "
          "and the guest takes many more nested-page-fault exits (4 KiB mappings). Write "
          "\"advise\" (or within_size, always) there, or use --memory-backend hugetlbfs",
          kShmemEnabled, *mode);
    }
  });
}

// One sealed file holding one region at file offset 0.
Result<UniqueFd> make_region_file(const RegionSpec& s, MemoryBackend backend, uint64_t pages) {
  const bool huge = backend == MemoryBackend::kHugetlbfs;
  const std::string what = std::string(memory_backend_name(backend)) + " region " +
                           range_text(s.gpa, s.size) + " (" + format_size(s.size) + ")";
  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0);
  UniqueFd fd(::memfd_create("tern-guest-ram", flags));
  if (!fd.valid()) {
    if (huge && (errno == EINVAL || errno == ENOENT || errno == ENOSYS))
      return fail_errno("memfd_create(MFD_HUGETLB | MFD_HUGE_2MB)",
                        what + ": this kernel cannot make 2 MiB hugetlbfs files");
    return fail_errno("memfd_create", what);
  }
  if (retry_eintr([&] { return ::ftruncate(fd.get(), static_cast<off_t>(s.size)); }) != 0)
    return fail_errno("ftruncate", what);
  // hugetlbfs: allocate every huge page now. A page the pool cannot give later would be a SIGBUS
  // on the guest's first touch (tern's or a back-end's), so running out is a start-up error.
  if (huge &&
      retry_eintr([&] { return ::fallocate(fd.get(), 0, 0, static_cast<off_t>(s.size)); }) != 0) {
    if (errno == ENOSPC || errno == ENOMEM)
      return fail("--memory-backend hugetlbfs",
                  what + ": " + huge_pages_missing(pages, available_huge_pages_2m()));
    return fail_errno("fallocate", what);
  }
  // A back-end maps the file too: it must never shrink under either mapping (SIGBUS) nor grow.
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return fail_errno("fcntl(F_ADD_SEALS)", what);
  return fd;
}

}  // namespace

Result<GuestMemory> GuestMemory::create(std::span<const RegionSpec> specs, MemoryBackend backend) {
  if (backend == MemoryBackend::kAnon) return create(specs);
  ASSIGN_OR_RETURN(uint64_t total, memory_detail::validate_specs(specs));
  const bool huge = backend == MemoryBackend::kHugetlbfs;
  const uint64_t pages = total / kHugePageSize;
  if (huge) {
    // Every region starts 2 MiB-aligned in the reservation only if all sizes are 2 MiB multiples.
    for (const auto& s : specs)
      if (s.size % kHugePageSize != 0 || s.gpa % kHugePageSize != 0)
        return fail("--memory-backend hugetlbfs",
                    "guest RAM must be a multiple of 2 MiB (region " + range_text(s.gpa, s.size) +
                        " is not)");
    if (auto avail = available_huge_pages_2m(); !avail || *avail < pages)
      return fail("--memory-backend hugetlbfs",
                  format_size(total) + " of RAM: " + huge_pages_missing(pages, avail));
  } else {
    say_shmem_thp_once();
  }

  // The same 2 MiB-aligned layout as create(): reserve it inaccessible, then map each region's
  // file over its piece (MAP_FIXED). One Unmapper frees everything, even after a partial failure.
  GuestMemory m;
  m.backend_ = backend;
  ASSIGN_OR_RETURN(uint8_t* base, memory_detail::map_aligned(total, PROT_NONE));
  m.mapping_ = std::unique_ptr<uint8_t, Unmapper>(base, Unmapper{total});
  uint64_t off = 0;
  for (const auto& s : specs) {
    ASSIGN_OR_RETURN(UniqueFd fd, make_region_file(s, backend, pages));
    void* p = ::mmap(base + off, s.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd.get(), 0);
    if (p == MAP_FAILED)
      return fail_errno("mmap", std::string(memory_backend_name(backend)) + " region " +
                                    range_text(s.gpa, s.size) + " (" + format_size(s.size) + ")");
    // shmem THP where shmem_enabled is "advise"; hugetlbfs pages are huge already.
    if (!huge) ::madvise(p, s.size, MADV_HUGEPAGE);
    ::madvise(p, s.size, MADV_DONTDUMP);
    MemoryRegion r{s.gpa, s.size, base + off, off};
    r.fd = fd.get();
    m.regions_.push_back(r);
    m.fds_.push_back(std::move(fd));
    off += s.size;
  }
  std::sort(m.regions_.begin(), m.regions_.end(),
            [](const MemoryRegion& a, const MemoryRegion& b) { return a.gpa < b.gpa; });
  return m;
}

Result<GuestMemory> GuestMemory::create_from_file(
    std::span<const RegionSpec> specs, BorrowedFd fd, MemoryBackend backend,
    const std::function<void(uint64_t, uint64_t)>& progress) {
  if (backend == MemoryBackend::kAnon) return create_from_file(specs, fd);
  TRY(memory_detail::check_memory_file(specs, fd));
  ASSIGN_OR_RETURN(GuestMemory m, create(specs, backend));

  using Clock = std::chrono::steady_clock;
  constexpr auto kEvery = std::chrono::milliseconds(50);
  constexpr uint64_t kChunk = 8ull << 20;  // one pread
  const uint64_t total = m.total_size();
  uint64_t done = 0;  // bytes of RAM behind us (read or skipped as a hole)
  auto last = Clock::now();
  auto report = [&](bool final) {
    if (!progress) return;
    auto now = Clock::now();
    if (!final && now - last < kEvery) return;
    last = now;
    progress(done, total);
  };
  for (const MemoryRegion& r : m.regions_) {
    const uint64_t end = r.gpa + r.size;  // file offset == gpa
    uint64_t pos = r.gpa;
    while (pos < end) {
      // The next data extent; a hole stays as the new file made it: zero.
      off_t data = ::lseek(fd.get(), static_cast<off_t>(pos), SEEK_DATA);
      if (data < 0 && errno == ENXIO) break;  // only a hole up to the end of the file
      uint64_t extent_end = end;
      if (data < 0) {
        data = static_cast<off_t>(pos);  // SEEK_DATA unsupported here: read everything
      } else {
        off_t hole = ::lseek(fd.get(), data, SEEK_HOLE);
        if (hole >= 0) extent_end = std::min<uint64_t>(end, static_cast<uint64_t>(hole));
      }
      if (static_cast<uint64_t>(data) >= end) break;
      done += static_cast<uint64_t>(data) - pos;
      pos = static_cast<uint64_t>(data);
      while (pos < extent_end) {
        size_t n = static_cast<size_t>(std::min(kChunk, extent_end - pos));
        ssize_t got = retry_eintr(
            [&] { return ::pread(fd.get(), r.host + (pos - r.gpa), n, static_cast<off_t>(pos)); });
        if (got < 0) return fail_errno("pread", "memory file at offset " + std::to_string(pos));
        if (got == 0)
          return fail("guest memory", "memory file ended at offset " + std::to_string(pos) +
                                          " while being read (truncated?)");
        pos += static_cast<uint64_t>(got);
        done += static_cast<uint64_t>(got);
        report(false);
      }
    }
    done += end - pos;
    report(false);
  }
  report(true);
  return m;
}

bool GuestMemory::shareable() const {
  return !regions_.empty() &&
         std::all_of(regions_.begin(), regions_.end(), [](const MemoryRegion& r) { return r.fd >= 0; });
}

}  // namespace tern
