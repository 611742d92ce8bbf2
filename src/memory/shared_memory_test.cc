// The shared backends (memfd, hugetlbfs): a second mapping of MemoryRegion::fd — what a
// vhost-user back-end makes — sees the guest's writes; files are CLOEXEC and sealed; restore
// from a memory file copies the data and keeps holes zero.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "memory/guest_memory.h"

namespace tern {
namespace {

constexpr uint64_t kMiB = 1ull << 20;

// The checks every backend must pass: RAM reads back what was written, and (shared backends)
// an independent MAP_SHARED mapping of each region's fd sees it at file offset gpa - region.gpa.
void expect_usable(const GuestMemory& mem, MemoryBackend backend) {
  EXPECT_EQ(mem.backend(), backend);
  EXPECT_EQ(mem.shareable(), backend != MemoryBackend::kAnon);
  uint64_t expected_offset = 0;
  for (const MemoryRegion& r : mem.regions()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.host) % (2 * kMiB), expected_offset % (2 * kMiB));
    EXPECT_EQ(r.fd_offset, expected_offset);
    expected_offset += r.size;
    uint64_t gpa = r.gpa + r.size - 8;
    ASSERT_TRUE(mem.write_obj<uint64_t>(gpa, 0x1122334455667788ull ^ r.gpa));
    auto v = mem.read_obj<uint64_t>(gpa);
    ASSERT_TRUE(v);
    EXPECT_EQ(*v, 0x1122334455667788ull ^ r.gpa);
    if (backend == MemoryBackend::kAnon) {
      EXPECT_EQ(r.fd, -1);
      continue;
    }
    ASSERT_GE(r.fd, 0);
    void* other = ::mmap(nullptr, r.size, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd, 0);
    ASSERT_NE(other, MAP_FAILED) << std::strerror(errno);
    uint64_t seen = 0;
    std::memcpy(&seen, static_cast<uint8_t*>(other) + r.size - 8, sizeof seen);
    EXPECT_EQ(seen, 0x1122334455667788ull ^ r.gpa);
    // And the other way: what the back-end writes, the guest reads.
    static_cast<uint8_t*>(other)[0] = 0x5a;
    auto b = mem.read_obj<uint8_t>(r.gpa);
    ASSERT_TRUE(b);
    EXPECT_EQ(*b, 0x5a);
    ::munmap(other, r.size);

    EXPECT_TRUE(::fcntl(r.fd, F_GETFD) & FD_CLOEXEC);
    int seals = ::fcntl(r.fd, F_GET_SEALS);
    EXPECT_EQ(seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL),
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    EXPECT_NE(::ftruncate(r.fd, 0), 0) << "a back-end's mapping must never lose its pages";
    EXPECT_NE(::ftruncate(r.fd, static_cast<off_t>(r.size * 2)), 0);
  }
}

TEST(SharedMemory, ParsesBackendNamesAndNamesTheOption) {
  for (MemoryBackend b : {MemoryBackend::kAnon, MemoryBackend::kMemfd, MemoryBackend::kHugetlbfs}) {
    auto p = parse_memory_backend(memory_backend_name(b));
    ASSERT_TRUE(p);
    EXPECT_EQ(*p, b);
  }
  auto bad = parse_memory_backend("shm");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("--memory-backend"), std::string::npos);
  EXPECT_NE(bad.error().message().find("\"shm\""), std::string::npos);
}

TEST(SharedMemory, AnonAndMemfdCreateMapAndShare) {
  // Two regions like x86::ram_regions' split around the PCI hole, the second not 2 MiB-sized.
  std::array<RegionSpec, 2> specs{{{0, 4 * kMiB}, {0x100000000ull, 3 * kMiB + 4096}}};
  for (MemoryBackend b : {MemoryBackend::kAnon, MemoryBackend::kMemfd}) {
    SCOPED_TRACE(std::string(memory_backend_name(b)));
    auto mem = GuestMemory::create(specs, b);
    ASSERT_TRUE(mem) << mem.error().message();
    EXPECT_EQ(mem->total_size(), 7 * kMiB + 4096);
    expect_usable(*mem, b);
  }
}

TEST(SharedMemory, HugetlbfsCreatesMapsAndShares) {
  auto avail = available_huge_pages_2m();
  if (!avail || *avail < 2)
    GTEST_SKIP() << "needs 2 free 2 MiB huge pages (this host has "
                 << (avail ? std::to_string(*avail) : std::string("no 2 MiB pool")) << ")";
  std::array<RegionSpec, 2> specs{{{0, 2 * kMiB}, {0x100000000ull, 2 * kMiB}}};
  auto mem = GuestMemory::create(specs, MemoryBackend::kHugetlbfs);
  ASSERT_TRUE(mem) << mem.error().message();
  expect_usable(*mem, MemoryBackend::kHugetlbfs);
}

TEST(SharedMemory, HugetlbfsWithoutEnoughHugePagesSaysHowManyAndHowToReserve) {
  auto avail = available_huge_pages_2m();
  if (!avail) GTEST_SKIP() << "this kernel has no 2 MiB hugetlb pool: nothing to run out of";
  // One page more than the pool has: refused up front, before anything is allocated.
  uint64_t pages = *avail + 1;
  std::array<RegionSpec, 1> specs{{{0, pages * 2 * kMiB}}};
  auto mem = GuestMemory::create(specs, MemoryBackend::kHugetlbfs);
  ASSERT_FALSE(mem);
  const std::string msg = mem.error().message();
  EXPECT_NE(msg.find("--memory-backend hugetlbfs"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(pages) + " free 2 MiB huge pages needed, " +
                     std::to_string(*avail) + " free"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("/proc/sys/vm/nr_hugepages"), std::string::npos) << msg;
}

TEST(SharedMemory, HugetlbfsRefusesSizesThatAreNotWholeHugePages) {
  std::array<RegionSpec, 1> specs{{{0, 3 * kMiB}}};
  auto mem = GuestMemory::create(specs, MemoryBackend::kHugetlbfs);
  ASSERT_FALSE(mem);
  EXPECT_NE(mem.error().message().find("multiple of 2 MiB"), std::string::npos)
      << mem.error().message();
}

TEST(SharedMemory, MemfdRestoreCopiesDataKeepsHolesZeroAndReportsProgress) {
  // A sparse memory file (file offset = gpa): data at the start of region 0, in the middle of
  // region 1, and nothing else.
  std::array<RegionSpec, 2> specs{{{0, 4 * kMiB}, {8 * kMiB, 4 * kMiB}}};
  UniqueFd file(::memfd_create("test-mem-file", MFD_CLOEXEC));
  ASSERT_TRUE(file.valid());
  ASSERT_EQ(::ftruncate(file.get(), 12 * kMiB), 0);
  std::vector<uint8_t> a(64 * 1024, 0xa1), b(3 * 4096, 0xb2);
  ASSERT_EQ(::pwrite(file.get(), a.data(), a.size(), 0), static_cast<ssize_t>(a.size()));
  const uint64_t b_at = 10 * kMiB + 4096;
  ASSERT_EQ(::pwrite(file.get(), b.data(), b.size(), b_at), static_cast<ssize_t>(b.size()));

  uint64_t last_done = 0, last_total = 0;
  auto mem = GuestMemory::create_from_file(specs, file.borrow(), MemoryBackend::kMemfd,
                                           [&](uint64_t done, uint64_t total) {
                                             EXPECT_GE(done, last_done);
                                             last_done = done;
                                             last_total = total;
                                           });
  ASSERT_TRUE(mem) << mem.error().message();
  EXPECT_TRUE(mem->shareable());
  EXPECT_EQ(last_total, 8 * kMiB);
  EXPECT_EQ(last_done, 8 * kMiB);  // the final call reports everything done

  std::vector<uint8_t> got(a.size());
  ASSERT_TRUE(mem->read(0, got));
  EXPECT_EQ(got, a);
  got.resize(b.size());
  ASSERT_TRUE(mem->read(b_at, got));
  EXPECT_EQ(got, b);
  // Holes around the data are zero.
  for (uint64_t gpa : {uint64_t{a.size()}, 4 * kMiB - 8, 8 * kMiB, b_at - 8, b_at + b.size(),
                       12 * kMiB - 8}) {
    auto v = mem->read_obj<uint64_t>(gpa);
    ASSERT_TRUE(v);
    EXPECT_EQ(*v, 0u) << "gpa " << gpa;
  }
  // The restored RAM is in the region's fd, where a back-end maps it.
  const MemoryRegion& r1 = mem->regions()[1];
  uint8_t byte = 0;
  ASSERT_EQ(::pread(r1.fd, &byte, 1, static_cast<off_t>(b_at - r1.gpa)), 1);
  EXPECT_EQ(byte, 0xb2);
}

TEST(SharedMemory, RestoreRefusesAShortMemoryFile) {
  std::array<RegionSpec, 1> specs{{{0, 4 * kMiB}}};
  UniqueFd file(::memfd_create("test-short", MFD_CLOEXEC));
  ASSERT_TRUE(file.valid());
  ASSERT_EQ(::ftruncate(file.get(), 2 * kMiB), 0);
  auto mem = GuestMemory::create_from_file(specs, file.borrow(), MemoryBackend::kMemfd, nullptr);
  ASSERT_FALSE(mem);
  EXPECT_NE(mem.error().message().find("the regions need"), std::string::npos);
}

}  // namespace
}  // namespace tern
