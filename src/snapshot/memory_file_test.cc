#include "snapshot/memory_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <vector>

#include "base/fd.h"

namespace tern::snap {
namespace {

constexpr uint64_t kPage = 4096;

// Three regions with a gap (like the PCI hole): RAM ends at 0x700000.
const std::array<RegionSpec, 3> kSpecs{{{0, 0x100000}, {0x200000, 0x80000}, {0x400000, 0x300000}}};
constexpr uint64_t kEnd = 0x700000;

/// Fills every third page with random bytes and one more page with a single non-zero byte at its
/// end; returns the number of non-zero bytes (whole pages).
uint64_t fill(const GuestMemory& m, uint32_t seed) {
  std::mt19937 rng(seed);
  uint64_t nonzero = 0;
  for (const auto& r : m.regions()) {
    for (uint64_t off = 0; off < r.size; off += kPage) {
      if ((off / kPage) % 3 == 0) {
        for (uint64_t i = 0; i < kPage; i += 4) {
          uint32_t v = rng() | 1;
          std::memcpy(r.host + off + i, &v, 4);
        }
        nonzero += kPage;
      } else if ((off / kPage) % 7 == 1) {
        r.host[off + kPage - 1] = 0x5A;
        nonzero += kPage;
      }
    }
  }
  return nonzero;
}

uint64_t allocated_bytes(const std::string& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0);
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(MemoryFile, SaveIsSparseAndRestoreMatchesEveryByte) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem) << mem.error().message();
  uint64_t nonzero = fill(*mem, 1);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/vm.mem";
  auto r = save_memory_file(*mem, p);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->total_bytes, mem->total_size());
  EXPECT_EQ(r->written_bytes, nonzero);
  EXPECT_EQ(r->zero_bytes, mem->total_size() - nonzero);
  EXPECT_EQ(std::filesystem::file_size(p), kEnd + kMemoryTrailerSize);
  EXPECT_LT(allocated_bytes(p), nonzero + 256 * 1024);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto opened = open_memory_file(p, kSpecs);
  ASSERT_TRUE(opened) << opened.error().message();
  EXPECT_EQ(opened->token, PairingToken{});  // save_memory_file's default token
  auto back = GuestMemory::create_from_file(kSpecs, opened->fd.borrow());
  ASSERT_TRUE(back) << back.error().message();
  ASSERT_EQ(back->regions().size(), mem->regions().size());
  for (size_t i = 0; i < back->regions().size(); ++i) {
    const auto& a = mem->regions()[i];
    const auto& b = back->regions()[i];
    EXPECT_EQ(a.gpa, b.gpa);
    EXPECT_EQ(a.size, b.size);
    EXPECT_EQ(a.fd_offset, b.fd_offset);
    EXPECT_EQ(b.host - back->regions()[0].host, a.host - mem->regions()[0].host);  // same layout
    EXPECT_EQ(std::memcmp(a.host, b.host, a.size), 0) << "region " << i;
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(back->regions()[0].host) % (2 << 20), 0u);
}

TEST(MemoryFile, RestoredMemoryIsCopyOnWrite) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  fill(*mem, 2);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/vm.mem";
  ASSERT_TRUE(save_memory_file(*mem, p));
  auto fd = open_file(p, O_RDWR);  // even a writable fd must not let guest writes through
  ASSERT_TRUE(fd);
  auto back = GuestMemory::create_from_file(kSpecs, fd->borrow());
  ASSERT_TRUE(back) << back.error().message();
  std::vector<uint8_t> junk(3 * kPage, 0xC3);
  ASSERT_TRUE(back->write(0x400000 + 100, junk));
  ASSERT_TRUE(back->write_obj<uint64_t>(0x10, 0x1122334455667788));
  auto v = back->read_obj<uint64_t>(0x10);
  ASSERT_TRUE(v);
  EXPECT_EQ(*v, 0x1122334455667788u);

  std::vector<uint8_t> file(junk.size());
  ASSERT_EQ(::pread(fd->get(), file.data(), file.size(), 0x400000 + 100), ssize_t(file.size()));
  auto orig = mem->slice(0x400000 + 100, junk.size());
  ASSERT_TRUE(orig);
  EXPECT_EQ(std::memcmp(file.data(), orig->data(), file.size()), 0);
  auto again = GuestMemory::create_from_file(kSpecs, fd->borrow());
  ASSERT_TRUE(again);
  EXPECT_EQ(std::memcmp(again->regions()[0].host, mem->regions()[0].host, 0x100000), 0);
}

TEST(MemoryFile, CreateFromFileRefusesShortFileNamingSizes) {
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/short.mem";
  auto fd = open_file(p, O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd->get(), 0x100000), 0);
  auto m = GuestMemory::create_from_file(kSpecs, fd->borrow());
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("1048576 bytes"), std::string::npos) << m.error().message();
  EXPECT_NE(m.error().message().find(std::to_string(kEnd)), std::string::npos);
  std::array<RegionSpec, 1> bad{{{0x123, 0x1000}}};
  EXPECT_FALSE(GuestMemory::create_from_file(bad, fd->borrow()));
}

TEST(MemoryFile, DirectWritesRoundTrip) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  fill(*mem, 3);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/direct.mem";
  MemorySaveOptions o;
  o.direct = true;
  auto r = save_memory_file(*mem, p, o);
  if (!r && r.error().errnum == EINVAL) GTEST_SKIP() << r.error().message();
  ASSERT_TRUE(r) << r.error().message();
  auto fd = open_file(p, O_RDONLY);
  ASSERT_TRUE(fd);
  auto back = GuestMemory::create_from_file(kSpecs, fd->borrow());
  ASSERT_TRUE(back);
  for (size_t i = 0; i < kSpecs.size(); ++i)
    EXPECT_EQ(std::memcmp(mem->regions()[i].host, back->regions()[i].host, kSpecs[i].size), 0);
}

TEST(MemoryFile, ProgressCountsZeroBytesAndEndsAtTotal) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  testing::TempDir d{"tern-mem"};
  std::vector<std::pair<uint64_t, uint64_t>> calls;
  MemorySaveOptions o;
  o.progress = [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); };
  auto r = save_memory_file(*mem, d.path() + "/zero.mem", o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_FALSE(calls.empty());
  EXPECT_EQ(calls.back(), std::make_pair(mem->total_size(), mem->total_size()));
  EXPECT_EQ(r->written_bytes, 0u);
}

TEST(MemoryFile, RateLimitPacesTheWrites) {
  // 1 MiB of non-zero memory at 2 MiB/s takes >= 0.5 s, so progress (every >= 50 ms) is reported
  // several times; unpaced, this save would take a few milliseconds.
  std::array<RegionSpec, 1> spec{{{0, 1 << 20}}};
  auto mem = GuestMemory::create(spec);
  ASSERT_TRUE(mem);
  std::memset(mem->regions()[0].host, 0x11, 1 << 20);
  testing::TempDir d{"tern-mem"};
  std::vector<uint64_t> done;
  MemorySaveOptions o;
  o.rate_limit_bytes_per_s = 2 << 20;
  o.progress = [&](uint64_t n, uint64_t) { done.push_back(n); };
  auto r = save_memory_file(*mem, d.path() + "/paced.mem", o);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_GE(done.size(), 4u);
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
  EXPECT_EQ(done.back(), uint64_t{1} << 20);
}

TEST(MemoryFile, SixtyFourMiBOfZerosAllocatesNothing) {
  std::array<RegionSpec, 1> spec{{{0, 64 << 20}}};
  auto mem = GuestMemory::create(spec);
  ASSERT_TRUE(mem);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/zeros.mem";
  auto r = save_memory_file(*mem, p);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->written_bytes, 0u);
  EXPECT_EQ(r->zero_bytes, uint64_t{64} << 20);
  EXPECT_EQ(std::filesystem::file_size(p), (uint64_t{64} << 20) + kMemoryTrailerSize);
  EXPECT_LE(allocated_bytes(p), kMemoryTrailerSize);  // the trailer only
}

TEST(MemoryFile, CancelledSaveFailsAndLeavesNoFile) {
  std::array<RegionSpec, 1> spec{{{0, 8 << 20}}};
  auto mem = GuestMemory::create(spec);
  ASSERT_TRUE(mem);
  std::vector<uint8_t> ones(4096, 1);
  for (uint64_t gpa = 0; gpa < (8 << 20); gpa += 4096) ASSERT_TRUE(mem->write(gpa, ones));
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/cancelled.mem";
  std::atomic<bool> cancel{false};
  MemorySaveOptions o;
  o.cancel = &cancel;
  o.rate_limit_bytes_per_s = 4 << 20;  // writes in ~50 ms pieces, so the flag is seen early
  int calls = 0;
  o.progress = [&](uint64_t, uint64_t) {
    if (++calls == 1) cancel = true;
  };
  auto r = save_memory_file(*mem, p, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("cancelled"), std::string::npos) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(p));
  EXPECT_TRUE(std::filesystem::is_empty(d.path()));  // no temporary left
}

// A tiny rate limit (the API takes 1 B/s) made each one-page run sleep page/limit seconds without
// looking at the cancel flag: PUT /tern/power-off answered 204 and tern then waited ~68 min per
// page for the save thread. Here the save is cancelled before it starts at 1 B/s: it must end
// after its first page (the old code slept 4096 s there, so this test hung).
TEST(MemoryFile, CancelInterruptsASlowRateLimit) {
  std::array<RegionSpec, 1> spec{{{0, 1 << 20}}};
  auto mem = GuestMemory::create(spec);
  ASSERT_TRUE(mem);
  std::memset(mem->regions()[0].host, 0x22, 1 << 20);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/slow.mem";
  std::atomic<bool> cancel{true};
  MemorySaveOptions o;
  o.cancel = &cancel;
  o.rate_limit_bytes_per_s = 1;
  auto r = save_memory_file(*mem, p, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("cancelled"), std::string::npos) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(p));
}

TEST(MemoryFile, OpenMemoryFileChecksSizeAndReadsTheTrailer) {
  testing::TempDir d{"tern-mem"};
  auto missing = open_memory_file(d.path() + "/none.mem", kSpecs);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().errnum, ENOENT);
  EXPECT_NE(missing.error().message().find("none.mem"), std::string::npos);

  const std::string p = d.path() + "/short.mem";
  auto fd = open_file(p, O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(fd);
  ASSERT_EQ(::ftruncate(fd->get(), 1048576), 0);
  auto shortf = open_memory_file(p, kSpecs);
  ASSERT_FALSE(shortf);
  EXPECT_NE(shortf.error().message().find(p + ": memory file is 1048576 bytes, the snapshot needs " +
                                          std::to_string(kEnd)),
            std::string::npos)
      << shortf.error().message();

  auto dir = open_memory_file(d.path(), kSpecs);
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message().find("not a regular file"), std::string::npos);

  // Exactly the RAM extent, or longer with zeros: a format 1.0 file, no token.
  ASSERT_EQ(::ftruncate(fd->get(), kEnd), 0);
  auto v10 = open_memory_file(p, kSpecs);
  ASSERT_TRUE(v10) << v10.error().message();
  EXPECT_FALSE(v10->token);
  ASSERT_EQ(::ftruncate(fd->get(), kEnd + kMemoryTrailerSize), 0);
  ASSERT_TRUE(open_memory_file(p, kSpecs));
  EXPECT_FALSE(open_memory_file(p, kSpecs)->token);

  // A saved file's trailer carries its token; a flipped trailer byte is "corrupt".
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  auto token = PairingToken::random();
  ASSERT_TRUE(token);
  EXPECT_NE(*token, PairingToken{});
  EXPECT_EQ(token->hex().size(), 32u);
  const std::string q = d.path() + "/t.mem";
  ASSERT_TRUE(save_memory_file(*mem, q, {}, *token));
  auto t = open_memory_file(q, kSpecs);
  ASSERT_TRUE(t) << t.error().message();
  ASSERT_TRUE(t->token);
  EXPECT_EQ(*t->token, *token);
  auto w = open_file(q, O_RDWR);
  ASSERT_TRUE(w);
  uint8_t b = 0;
  ASSERT_EQ(::pread(w->get(), &b, 1, kEnd + 20), 1);
  b ^= 0xFF;
  ASSERT_EQ(::pwrite(w->get(), &b, 1, kEnd + 20), 1);
  auto bad = open_memory_file(q, kSpecs);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("trailer is corrupt"), std::string::npos)
      << bad.error().message();
}

TEST(MemoryFile, SavingOverTheFileAVmMapsKeepsItsMemory) {
  // Issue #8 defect 1 (failed before: the save opened the mapped file with O_TRUNC, so every page
  // the restored guest had not written yet read back as zero, in the VM and in the new file).
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  fill(*mem, 7);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/vm.mem";
  ASSERT_TRUE(save_memory_file(*mem, p));
  auto fd = open_file(p, O_RDONLY);
  ASSERT_TRUE(fd);
  auto restored = GuestMemory::create_from_file(kSpecs, fd->borrow());
  ASSERT_TRUE(restored) << restored.error().message();
  fd->reset();  // as in tern restore, only the mapping keeps the file
  // The restored VM saves itself to the file it maps (nothing touched since the restore).
  auto r = save_memory_file(*restored, p);
  ASSERT_TRUE(r) << r.error().message();
  for (size_t i = 0; i < kSpecs.size(); ++i)
    EXPECT_EQ(std::memcmp(mem->regions()[i].host, restored->regions()[i].host, kSpecs[i].size), 0)
        << "the running VM's region " << i;
  auto again = open_memory_file(p, kSpecs);
  ASSERT_TRUE(again);
  auto back = GuestMemory::create_from_file(kSpecs, again->fd.borrow());
  ASSERT_TRUE(back);
  for (size_t i = 0; i < kSpecs.size(); ++i)
    EXPECT_EQ(std::memcmp(mem->regions()[i].host, back->regions()[i].host, kSpecs[i].size), 0)
        << "the new file's region " << i;
}

TEST(MemoryFile, FailedSaveKeepsThePreviousFile) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  fill(*mem, 8);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/vm.mem";
  ASSERT_TRUE(save_memory_file(*mem, p));
  const std::string before = read_file(p, 64 << 20).value();
  std::atomic<bool> cancel{true};
  MemorySaveOptions o;
  o.cancel = &cancel;
  fill(*mem, 9);
  ASSERT_FALSE(save_memory_file(*mem, p, o));
  EXPECT_EQ(read_file(p, 64 << 20).value(), before);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(d.path()), {}), 1);
}

TEST(MemoryFile, SaveToDeviceRefusedAndDeviceKept) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  fill(*mem, 4);
  auto r = save_memory_file(*mem, "/dev/full");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("/dev/full"), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(MemoryFile, SaveToUnwritableDirFailsNamingPath) {
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  testing::TempDir d{"tern-mem"};
  // root ignores directory permissions; /sys refuses new files even for root.
  std::string dir = "/sys";
  if (::geteuid() != 0) {
    dir = d.path() + "/ro";
    ASSERT_EQ(::mkdir(dir.c_str(), 0500), 0);
  }
  for (const std::string& p : {dir + "/vm.mem", d.path() + "/no/dir/vm.mem"}) {
    auto r = save_memory_file(*mem, p);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find(p), std::string::npos) << r.error().message();
    EXPECT_FALSE(std::filesystem::exists(p));
  }
}

/// Runs `body` in a child process; returns its exit status (77: skipped).
template <class F>
int in_child(F body) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(MemoryFile, FailedSaveUnlinksThePartialFile) {
  // A file size limit below the memory's end makes the ftruncate fail after the file exists.
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/limited.mem";
  int rc = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{kEnd / 2, kEnd / 2};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 77;
    auto r = save_memory_file(*mem, p);
    if (r) return 1;
    if (r.error().message().find(p) == std::string::npos) return 2;
    if (!std::filesystem::is_empty(d.path())) return 4;  // no temporary either
    return std::filesystem::exists(p) ? 3 : 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_FALSE(std::filesystem::exists(p));
}

TEST(MemoryFile, NoSpaceFailsNamingPathAndUnlinks) {
  // A 256 KiB tmpfs in a private mount namespace (needs CAP_SYS_ADMIN; skipped otherwise).
  auto mem = GuestMemory::create(kSpecs);
  ASSERT_TRUE(mem);
  fill(*mem, 5);
  testing::TempDir d{"tern-mem"};
  const std::string p = d.path() + "/vm.mem";
  int rc = in_child([&] {
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tern-test", d.path().c_str(), "tmpfs", 0, "size=256k") != 0) return 77;
    auto r = save_memory_file(*mem, p);
    if (r) return 1;
    if (r.error().errnum != ENOSPC) return 2;
    if (r.error().message().find(p) == std::string::npos) return 3;
    if (!std::filesystem::is_empty(d.path())) return 5;
    return std::filesystem::exists(p) ? 4 : 0;
  });
  if (rc == 77) GTEST_SKIP() << "cannot mount a tmpfs here";
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace tern::snap
