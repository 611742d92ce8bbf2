#include "snapshot/snapshot_pair.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/fd.h"
#include "base/testing/temp_dir.h"
#include "snapshot/sections.h"

namespace tern::snap {
namespace {

const std::array<RegionSpec, 2> kSpecs{{{0, 0x200000}, {0x400000, 0x200000}}};

GuestMemory filled(uint8_t value) {
  auto m = GuestMemory::create(kSpecs);
  TERN_CHECK(m.has_value());
  for (const auto& r : m->regions()) std::memset(r.host, value, r.size);
  return std::move(*m);
}

StateFile state(uint8_t tag) {
  StateFile f;
  f.tern_version = "test";
  f.sections.push_back({kMachineSection, 1, {tag, tag, tag}});
  return f;
}

std::string slurp(const std::string& p) {
  return read_file(p, 64 << 20).value_or("<unreadable>");
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path().filename());
  std::sort(v.begin(), v.end());
  return v;
}

/// The checks tern restore makes on a pair (prepare_restore): token of the state file against
/// the memory file's trailer.
Result<void> pair_ok(const std::string& state_path, const std::string& mem_path) {
  ASSIGN_OR_RETURN(StateFile f, read_state_file(state_path));
  ASSIGN_OR_RETURN(auto st, state_pairing_token(f, state_path));
  ASSIGN_OR_RETURN(auto m, open_memory_file(mem_path, kSpecs));
  return check_pairing(st, state_path, m.token, mem_path);
}

struct Pair {
  testing::TempDir dir{"tern-pair"};
  std::string s = dir.path() + "/vm.state";
  std::string m = dir.path() + "/vm.mem";
};

TEST(SnapshotPair, SaveWritesAPairedPairAndNoTemporaries) {
  Pair p;
  GuestMemory mem = filled(0x11);
  auto r = save_snapshot_pair(mem, state(1), p.s, p.m, {});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->total_bytes, mem.total_size());
  EXPECT_EQ(entries(p.dir.path()), (std::vector<std::string>{"vm.mem", "vm.state"}));
  auto ok = pair_ok(p.s, p.m);
  EXPECT_TRUE(ok) << ok.error().message();
  auto f = read_state_file(p.s);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->format_minor, kStateFormatMinor);
  ASSERT_NE(f->find(kPairingSection), nullptr);
  EXPECT_EQ(f->find(kMachineSection)->data, (std::vector<uint8_t>{1, 1, 1}));
}

TEST(SnapshotPair, MemoryFileFromAnotherSaveIsRefused) {
  Pair a, b;
  ASSERT_TRUE(save_snapshot_pair(filled(1), state(1), a.s, a.m, {}));
  ASSERT_TRUE(save_snapshot_pair(filled(2), state(2), b.s, b.m, {}));
  EXPECT_TRUE(pair_ok(b.s, b.m));
  auto mixed = pair_ok(a.s, b.m);
  ASSERT_FALSE(mixed);
  EXPECT_NE(mixed.error().message().find("pairing token"), std::string::npos)
      << mixed.error().message();
  EXPECT_NE(mixed.error().message().find(b.m), std::string::npos);
  EXPECT_NE(mixed.error().message().find(a.s), std::string::npos);
}

TEST(SnapshotPair, FormatOneZeroPairsStillPairAndMixesAreRefused) {
  Pair p;
  // A 1.0 pair: state file without pairing section, memory file without trailer.
  StateFile old = state(3);
  old.format_minor = 0;
  auto none = state_pairing_token(old, "old.state");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  EXPECT_TRUE(check_pairing(std::nullopt, "old.state", std::nullopt, "old.mem"));
  // A 1.1 state file without its section is damaged; a 1.0 state with a 1.1 memory file is a mix.
  StateFile broken = state(3);
  auto missing = state_pairing_token(broken, "new.state");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("no pairing section"), std::string::npos);
  ASSERT_TRUE(save_snapshot_pair(filled(4), state(4), p.s, p.m, {}));
  auto m = open_memory_file(p.m, kSpecs);
  ASSERT_TRUE(m && m->token);
  EXPECT_FALSE(check_pairing(std::nullopt, "old.state", m->token, p.m));
  EXPECT_FALSE(check_pairing(m->token, p.s, std::nullopt, "old.mem"));
}

TEST(SnapshotPair, FailedSaveLeavesThePreviousPairAndNoTemporaries) {
  // Issue #8 defect 1 (failed before: a failed save unlinked the memory file of the old pair).
  Pair p;
  ASSERT_TRUE(save_snapshot_pair(filled(0x22), state(1), p.s, p.m, {}));
  const std::string old_s = slurp(p.s), old_m = slurp(p.m);
  PairSaveOptions o;
  int calls = 0;
  o.before_commit = [&]() -> Result<void> {
    ++calls;
    // Both temporaries exist, fully written, while the hook runs.
    EXPECT_EQ(entries(p.dir.path()).size(), 4u);
    return fail("fdatasync", "disk.img: Input/output error");
  };
  auto r = save_snapshot_pair(filled(0x33), state(2), p.s, p.m, o);
  ASSERT_FALSE(r);
  EXPECT_EQ(calls, 1);
  EXPECT_NE(r.error().message().find("disk.img"), std::string::npos) << r.error().message();
  EXPECT_EQ(slurp(p.s), old_s);
  EXPECT_EQ(slurp(p.m), old_m);
  EXPECT_EQ(entries(p.dir.path()), (std::vector<std::string>{"vm.mem", "vm.state"}));
  EXPECT_TRUE(pair_ok(p.s, p.m));
}

TEST(SnapshotPair, CancelledSaveLeavesThePreviousPair) {
  Pair p;
  ASSERT_TRUE(save_snapshot_pair(filled(0x44), state(1), p.s, p.m, {}));
  const std::string old_s = slurp(p.s), old_m = slurp(p.m);
  std::atomic<bool> cancel{false};
  PairSaveOptions o;
  o.memory.cancel = &cancel;
  o.memory.rate_limit_bytes_per_s = 16 << 20;  // ~50 ms pieces: the flag is seen mid-file
  o.memory.progress = [&](uint64_t, uint64_t) { cancel = true; };
  auto r = save_snapshot_pair(filled(0x55), state(2), p.s, p.m, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("cancelled"), std::string::npos) << r.error().message();
  EXPECT_EQ(slurp(p.s), old_s);
  EXPECT_EQ(slurp(p.m), old_m);
  EXPECT_EQ(entries(p.dir.path()), (std::vector<std::string>{"vm.mem", "vm.state"}));
  // Cancelled after the memory file was written but before the renames: also nothing changes.
  cancel = false;
  PairSaveOptions late;
  late.memory.cancel = &cancel;
  late.before_commit = [&]() -> Result<void> {
    cancel = true;
    return {};
  };
  ASSERT_FALSE(save_snapshot_pair(filled(0x66), state(3), p.s, p.m, late));
  EXPECT_EQ(slurp(p.s), old_s);
  EXPECT_EQ(slurp(p.m), old_m);
  EXPECT_EQ(entries(p.dir.path()), (std::vector<std::string>{"vm.mem", "vm.state"}));
}

TEST(SnapshotPair, KilledSaveLeavesThePreviousPairAndOneNamedTemporary) {
  Pair p;
  ASSERT_TRUE(save_snapshot_pair(filled(0x77), state(1), p.s, p.m, {}));
  const std::string old_s = slurp(p.s), old_m = slurp(p.m);
  GuestMemory next = filled(0x78);
  pid_t pid = ::fork();
  if (pid == 0) {
    PairSaveOptions o;
    o.memory.rate_limit_bytes_per_s = 16 << 20;
    o.memory.progress = [](uint64_t, uint64_t) { ::raise(SIGKILL); };  // mid memory file
    (void)save_snapshot_pair(next, state(2), p.s, p.m, o);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(slurp(p.s), old_s);
  EXPECT_EQ(slurp(p.m), old_m);
  EXPECT_TRUE(pair_ok(p.s, p.m));
  auto e = entries(p.dir.path());
  // One stray temporary per target (the state file's is written before the memory file).
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].rfind(".vm.mem.tern-tmp-", 0), 0u) << e[0];
  EXPECT_EQ(e[1].rfind(".vm.state.tern-tmp-", 0), 0u) << e[1];
}

/// What tern restore opens for the pair at (state_path, mem_path): the memory file's bytes, and
/// whether it had to take the ".tern-prev" file of a save that died between its renames.
struct Restorable {
  std::string mem;
  bool used_previous = false;
};
Result<Restorable> restorable(const std::string& state_path, const std::string& mem_path) {
  ASSIGN_OR_RETURN(StateFile f, read_state_file(state_path));
  ASSIGN_OR_RETURN(auto st, state_pairing_token(f, state_path));
  Restorable out;
  ASSIGN_OR_RETURN(auto m,
                   open_paired_memory_file(st, state_path, mem_path, kSpecs, &out.used_previous));
  out.mem = slurp(out.used_previous ? previous_memory_path(mem_path) : mem_path);
  return out;
}

TEST(SnapshotPair, SaveThatDiesBetweenItsRenamesLeavesThePreviousPairRestorable) {
  // Failed before: the new memory file beside the old state file paired with nothing.
  Pair p;
  ASSERT_TRUE(save_snapshot_pair(filled(0x21), state(1), p.s, p.m, {}));
  const std::string old_s = slurp(p.s), old_m = slurp(p.m);
  pid_t pid = ::fork();
  if (pid == 0) {
    PairSaveOptions o;
    o.between_renames = []() -> Result<void> {
      ::raise(SIGKILL);
      return {};
    };
    (void)save_snapshot_pair(filled(0x22), state(2), p.s, p.m, o);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(slurp(p.s), old_s);
  EXPECT_NE(slurp(p.m), old_m);  // the new memory file is in place
  auto r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->used_previous);
  EXPECT_EQ(r->mem, old_m);
  // A second save that dies in the same place still keeps the first pair's memory file.
  PairSaveOptions fails;
  fails.between_renames = []() -> Result<void> { return fail("test", "died between renames"); };
  auto again = save_snapshot_pair(filled(0x23), state(3), p.s, p.m, fails);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message().find(previous_memory_path(p.m)), std::string::npos)
      << again.error().message();
  r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->used_previous);
  EXPECT_EQ(r->mem, old_m);
  // A save that completes leaves its own pair (and the killed save's state-file temporary).
  ASSERT_TRUE(save_snapshot_pair(filled(0x24), state(4), p.s, p.m, {}));
  auto e = entries(p.dir.path());
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].rfind(".vm.state.tern-tmp-", 0), 0u) << e[0];
  EXPECT_EQ(e[1], "vm.mem");
  EXPECT_EQ(e[2], "vm.state");
  r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(r->used_previous);
  EXPECT_EQ(r->mem, slurp(p.m));
}

/// Writes a format 1.0 pair at (state_path, mem_path) as a tern before 1.1 did: a state file
/// with minor version 0 and no pairing section, a memory file without a trailer.
void write_format_one_zero_pair(const GuestMemory& mem, const std::string& state_path,
                                const std::string& mem_path, uint8_t tag) {
  std::vector<uint8_t> b = serialize_state_file(state(tag));
  b[10] = 0;  // minor version 0
  b.resize(b.size() - 4);
  uint32_t crc = static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), b.data(), b.size()));
  b.resize(b.size() + 4);
  std::memcpy(b.data() + b.size() - 4, &crc, 4);
  auto f = open_file(state_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(f);
  ASSERT_EQ(::write(f->get(), b.data(), b.size()), static_cast<ssize_t>(b.size()));
  auto m = open_file(mem_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(m);
  ASSERT_TRUE(write_memory_file(mem, m->get(), mem_path, PairingToken{}));
  ASSERT_EQ(::ftruncate(m->get(), 0x600000), 0);  // drop the trailer
  auto read = read_state_file(state_path);
  ASSERT_TRUE(read) << read.error().message();
  ASSERT_EQ(read->format_minor, 0);
  auto tok = memory_file_token(mem_path);
  ASSERT_TRUE(tok && !*tok);
}

TEST(SnapshotPair, SaveOverAFormatOneZeroPairThatDiesBetweenItsRenamesLeavesItRestorable) {
  // attack2: over a 1.0 pair (no token) nothing was kept as ".tern-prev", so a save that died
  // between its renames left the 1.0 state file beside the new memory file and no memory file
  // for it anywhere.
  Pair p;
  write_format_one_zero_pair(filled(0x51), p.s, p.m, 5);
  const std::string old_m = slurp(p.m);
  ASSERT_TRUE(restorable(p.s, p.m));
  PairSaveOptions fails;
  fails.between_renames = []() -> Result<void> { return fail("test", "died between renames"); };
  ASSERT_FALSE(save_snapshot_pair(filled(0x52), state(6), p.s, p.m, fails));
  auto r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->used_previous);
  EXPECT_EQ(r->mem, old_m);
  // ... and again: the kept 1.0 memory file stays the previous pair's.
  ASSERT_FALSE(save_snapshot_pair(filled(0x53), state(7), p.s, p.m, fails));
  r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->used_previous);
  EXPECT_EQ(r->mem, old_m);
  // A save that completes leaves the new pair and no ".tern-prev".
  ASSERT_TRUE(save_snapshot_pair(filled(0x54), state(8), p.s, p.m, {}));
  r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(r->used_previous);
  EXPECT_EQ(entries(p.dir.path()), (std::vector<std::string>{"vm.mem", "vm.state"}));
}

TEST(SnapshotPair, FailedMemoryRenameAfterADeadSaveKeepsThePreviousPair) {
  // attack2: after a save that died between its renames (previous pair: STATE + .tern-prev), a
  // save whose memory file rename failed unlinked .tern-prev — the previous pair's only memory
  // file — though the docs promise "the rename of step 6 fails: the previous pair".
  Pair p;
  ASSERT_TRUE(save_snapshot_pair(filled(0x61), state(1), p.s, p.m, {}));
  const std::string old_m = slurp(p.m);
  PairSaveOptions dies;
  dies.between_renames = []() -> Result<void> { return fail("test", "died between renames"); };
  ASSERT_FALSE(save_snapshot_pair(filled(0x62), state(2), p.s, p.m, dies));
  // The rename over the memory file fails: the target is immutable (EPERM, even for root).
  auto set_immutable = [&](bool on) {
    auto fd = open_file(p.m, O_RDONLY);
    int flags = 0;
    if (!fd || ::ioctl(fd->get(), FS_IOC_GETFLAGS, &flags) != 0) return false;
    flags = on ? (flags | FS_IMMUTABLE_FL) : (flags & ~FS_IMMUTABLE_FL);
    return ::ioctl(fd->get(), FS_IOC_SETFLAGS, &flags) == 0;
  };
  bool immutable = false;
  PairSaveOptions rename_fails;
  rename_fails.before_commit = [&]() -> Result<void> {
    immutable = set_immutable(true);
    return {};
  };
  auto r = save_snapshot_pair(filled(0x63), state(3), p.s, p.m, rename_fails);
  if (immutable) {
    ASSERT_TRUE(set_immutable(false));
  } else {
    GTEST_SKIP() << "no FS_IMMUTABLE_FL on " << p.dir.path();
  }
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("rename"), std::string::npos) << r.error().message();
  auto back = restorable(p.s, p.m);
  ASSERT_TRUE(back) << back.error().message();
  EXPECT_TRUE(back->used_previous);
  EXPECT_EQ(back->mem, old_m);
}

TEST(SnapshotPair, StalePreviousLinkIsReplacedByThePairOnDisk) {
  // A save that died after its state file's rename but before removing ".tern-prev" leaves a
  // link to an older memory file; the next save must keep the current pair's memory instead.
  Pair p, older;
  ASSERT_TRUE(save_snapshot_pair(filled(0x31), state(1), p.s, p.m, {}));
  const std::string current_m = slurp(p.m);
  ASSERT_TRUE(save_snapshot_pair(filled(0x3f), state(9), older.s, older.m, {}));
  ASSERT_EQ(::link(older.m.c_str(), previous_memory_path(p.m).c_str()), 0);
  PairSaveOptions fails;
  fails.between_renames = []() -> Result<void> { return fail("test", "died between renames"); };
  ASSERT_FALSE(save_snapshot_pair(filled(0x33), state(3), p.s, p.m, fails));
  auto r = restorable(p.s, p.m);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->used_previous);
  EXPECT_EQ(r->mem, current_m);
}

TEST(SnapshotPair, StatePathThatIsTheMemoryFilesPreviousNameIsRefused) {
  // attack2: snapshot_path ".NAME.tern-prev" beside mem_file_path NAME was accepted; the save
  // then unlinked the previous state file (step 5) and, after reporting success, the new one
  // (step 8): no state file left.
  Pair p;
  const std::string s = previous_memory_path(p.m);
  auto checked = check_snapshot_targets(s, p.m, {});
  ASSERT_FALSE(checked) << "accepted; a save then leaves: "
                        << (save_snapshot_pair(filled(0x41), state(1), s, p.m, {}) &&
                                    ::access(s.c_str(), F_OK) != 0
                                ? "no state file"
                                : "a state file");
  EXPECT_NE(checked.error().message().find("snapshot_path: " + s), std::string::npos)
      << checked.error().message();
  EXPECT_NE(checked.error().message().find(".tern-prev"), std::string::npos)
      << checked.error().message();
}

TEST(SnapshotPair, DiskAtTheMemoryFilesPreviousNameIsRefused) {
  // attack2: a disk image at ".NAME.tern-prev" beside mem_file_path NAME was unlinked by step 5.
  Pair p;
  const std::string prev = previous_memory_path(p.m);
  auto disk = open_file(prev, O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(disk);
  ASSERT_EQ(::pwrite(disk->get(), "data", 4, 0), 4);
  std::vector<ProtectedFile> files;
  files.push_back(protected_file(disk->get(), "the VM's disk 0 (" + prev + ")").value());
  auto checked = check_snapshot_targets(p.s, p.m, files);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().message().find("mem_file_path: " + p.m), std::string::npos)
      << checked.error().message();
  EXPECT_NE(checked.error().message().find("the VM's disk 0"), std::string::npos)
      << checked.error().message();
  // The memory file a VM was restored from may be the previous link (restore took it).
  std::vector<ProtectedFile> backing;
  backing.push_back(protected_file(disk->get(), "the memory file", true).value());
  EXPECT_TRUE(check_snapshot_targets(p.s, p.m, backing));
}

TEST(SnapshotPair, NamesTooLongForTheTemporaryAreRefusedBeforeAnythingIsWritten) {
  // attack2: a state file name of NAME_MAX-16 .. NAME_MAX bytes was accepted; its temporary
  // ".NAME.tern-tmp-XXXXXX" then failed with ENAMETOOLONG only after the whole memory file had
  // been written.
  Pair p;
  const long name_max = ::pathconf(p.dir.path().c_str(), _PC_NAME_MAX);
  ASSERT_GT(name_max, 20);
  const auto max = static_cast<size_t>(name_max);
  const std::string fits = p.dir.path() + "/" + std::string(max - 17, 's');
  for (const std::string& s : {p.dir.path() + "/" + std::string(max, 's'),
                               p.dir.path() + "/" + std::string(max - 16, 's')}) {
    auto r = check_snapshot_targets(s, p.m, {});
    ASSERT_FALSE(r) << s.size();
    EXPECT_NE(r.error().message().find("snapshot_path: "), std::string::npos)
        << r.error().message();
    EXPECT_NE(r.error().message().find("too long"), std::string::npos) << r.error().message();
    auto m = check_snapshot_targets(p.s, s, {});
    ASSERT_FALSE(m);
    EXPECT_NE(m.error().message().find("mem_file_path: "), std::string::npos)
        << m.error().message();
  }
  auto checked = check_snapshot_targets(fits, p.m, {});
  ASSERT_TRUE(checked) << checked.error().message();
  auto saved = save_snapshot_pair(filled(0x42), state(1), fits, p.m, {});
  EXPECT_TRUE(saved) << saved.error().message();
  const std::string mfits = p.dir.path() + "/" + std::string(max - 17, 'm');
  auto mchecked = check_snapshot_targets(p.s, mfits, {});
  ASSERT_TRUE(mchecked) << mchecked.error().message();
  saved = save_snapshot_pair(filled(0x42), state(1), p.s, mfits, {});
  EXPECT_TRUE(saved) << saved.error().message();
}

TEST(SnapshotPair, StateTemporaryThatCannotBeCreatedFailsBeforeTheMemoryFileIsWritten) {
  // attack2: the state file's temporary was made only after the whole memory file (minutes for a
  // big guest, the VM paused) had been written; a state directory removed (or made unwritable)
  // since the target check failed only then.
  Pair p;
  ASSERT_EQ(::mkdir((p.dir.path() + "/gone").c_str(), 0700), 0);
  const std::string s = p.dir.path() + "/gone/vm.state";
  ASSERT_TRUE(check_snapshot_targets(s, p.m, {}));
  ASSERT_EQ(::rmdir((p.dir.path() + "/gone").c_str()), 0);
  uint64_t written = 0;
  PairSaveOptions o;
  o.memory.progress = [&](uint64_t done, uint64_t) { written = done; };
  auto r = save_snapshot_pair(filled(0x43), state(1), s, p.m, o);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find(s), std::string::npos) << r.error().message();
  EXPECT_EQ(written, 0u) << "the memory file was written first";
  EXPECT_EQ(entries(p.dir.path()), std::vector<std::string>{});
}

TEST(SnapshotPair, TargetsThatAreTheSameFileAreRefused) {
  testing::TempDir d{"tern-pair"};
  const std::string dir = d.path();
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0700), 0);
  ASSERT_EQ(::symlink(dir.c_str(), (dir + "/link").c_str()), 0);
  auto refused = [](const std::string& s, const std::string& m) {
    auto r = check_snapshot_targets(s, m, {});
    if (r) return std::string("accepted");
    return r.error().message();
  };
  // Not yet existing, spelled differently.
  for (const std::string& other : {dir + "/./a", dir + "/sub/../a", dir + "/link/a", dir + "//a"})
    EXPECT_NE(refused(dir + "/a", other)
                  .find("mem_file_path: " + other +
                        " is the same file as "
                        "snapshot_path"),
              std::string::npos)
        << other << ": " << refused(dir + "/a", other);
  // Existing, through a hard link.
  ASSERT_TRUE(open_file(dir + "/a", O_WRONLY | O_CREAT, 0600));
  ASSERT_EQ(::link((dir + "/a").c_str(), (dir + "/hard").c_str()), 0);
  EXPECT_NE(refused(dir + "/a", dir + "/hard").find("same file"), std::string::npos);
  EXPECT_NE(refused(dir + "/hard", dir + "/sub/../a").find("same file"), std::string::npos);
  // Different files are fine; a directory or a symlink as target is not.
  EXPECT_EQ(refused(dir + "/a", dir + "/b"), "accepted");
  EXPECT_NE(refused(dir + "/sub", dir + "/b")
                .find("snapshot_path: " + dir +
                      "/sub: exists and is "
                      "not a regular file"),
            std::string::npos);
  EXPECT_NE(refused(dir + "/a", dir + "/link").find("mem_file_path"), std::string::npos);
  EXPECT_NE(refused(dir + "/a", dir + "/none/b").find("mem_file_path"), std::string::npos);
}

TEST(SnapshotPair, TargetsThatAreNotPlainFileNamesAreRefused) {
  // attack2 probes that held: nothing here may be followed or replaced.
  Pair p;
  const std::string dir = p.dir.path();
  auto outside = open_file(dir + "/outside", O_WRONLY | O_CREAT, 0600);  // e.g. /etc/passwd
  ASSERT_TRUE(outside);
  ASSERT_EQ(::symlink((dir + "/outside").c_str(), (dir + "/to-file").c_str()), 0);
  ASSERT_EQ(::symlink((dir + "/nowhere").c_str(), (dir + "/dangling").c_str()), 0);
  const std::string fd_path = "/proc/self/fd/" + std::to_string(outside->get());
  for (const std::string& bad : {dir + "/", dir + "/.", dir + "/..", dir + "/to-file",
                                 dir + "/dangling", fd_path, std::string()}) {
    auto s = check_snapshot_targets(bad, p.m, {});
    EXPECT_FALSE(s) << "snapshot_path " << bad;
    if (!s) {
      EXPECT_EQ(s.error().message().rfind("snapshot_path: ", 0), 0u) << s.error().message();
    }
    auto m = check_snapshot_targets(p.s, bad, {});
    EXPECT_FALSE(m) << "mem_file_path " << bad;
    if (!m) {
      EXPECT_EQ(m.error().message().rfind("mem_file_path: ", 0), 0u) << m.error().message();
    }
  }
  EXPECT_EQ(::access((dir + "/nowhere").c_str(), F_OK), -1);
}

TEST(SnapshotPair, TargetsThatAreTheVmsFilesAreRefused) {
  // Issue #8 defect 1 (failed before: a snapshot path naming a disk image truncated it).
  testing::TempDir d{"tern-pair"};
  const std::string dir = d.path();
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0700), 0);
  auto disk = open_file(dir + "/disk.img", O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(disk);
  ASSERT_EQ(::pwrite(disk->get(), "data", 4, 0), 4);
  auto backing = open_file(dir + "/old.mem", O_RDWR | O_CREAT, 0600);
  ASSERT_TRUE(backing);
  ASSERT_EQ(::link((dir + "/disk.img").c_str(), (dir + "/disk-link").c_str()), 0);
  std::vector<ProtectedFile> files;
  files.push_back(protected_file(disk->get(), "the VM's disk 0 (" + dir + "/disk.img)").value());
  files.push_back(
      protected_file(backing->get(), "the memory file this VM was restored from", true).value());
  auto msg = [&](const std::string& s, const std::string& m) {
    auto r = check_snapshot_targets(s, m, files);
    return r ? std::string("accepted") : r.error().message();
  };
  EXPECT_EQ(msg(dir + "/vm.state", dir + "/disk.img"),
            "mem_file_path: " + dir + "/disk.img is the VM's disk 0 (" + dir +
                "/disk.img); a snapshot must not replace it");
  EXPECT_NE(msg(dir + "/disk-link", dir + "/vm.mem")
                .find("snapshot_path: " + dir +
                      "/disk-link is "
                      "the VM's disk 0"),
            std::string::npos);
  EXPECT_NE(msg(dir + "/sub/../disk.img", dir + "/vm.mem").find("snapshot_path"),
            std::string::npos);
  // The memory file a restored VM maps may be replaced by its new memory file (rename: the VM keeps
  // the old inode), but not by a state file.
  EXPECT_EQ(msg(dir + "/vm.state", dir + "/old.mem"), "accepted");
  EXPECT_NE(msg(dir + "/old.mem", dir + "/vm.mem")
                .find("snapshot_path: " + dir +
                      "/old.mem is the "
                      "memory file this VM was restored from"),
            std::string::npos);
  char buf[4] = {};
  ASSERT_EQ(::pread(disk->get(), buf, 4, 0), 4);
  EXPECT_EQ(std::memcmp(buf, "data", 4), 0);
}

}  // namespace
}  // namespace tern::snap
