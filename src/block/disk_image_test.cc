// DiskImage's refusals before a VM starts (missing, read-only, in use) and its image lock: OFD
// locks conflict per open file description, so two opens in this one process stand for two
// terns; a forked child stands for another process.
#include "block/disk_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"

namespace tern {
namespace {

class DiskImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    path_ = dir_.path() + "/disk.img";
    std::ofstream(path_, std::ios::binary) << std::string(64 * 1024, 'x');
  }
  DiskConfig config(bool read_only = false, bool locking = true) const {
    DiskConfig c;
    c.path = path_;
    c.read_only = read_only;
    c.locking = locking;
    return c;
  }
  /// The error opening with `c`, or "(opened)".
  static std::string refusal(const DiskConfig& c) {
    auto d = DiskImage::open(c);
    return d ? "(opened)" : d.error().message();
  }
  std::string in_use_here(const char* lock) const {
    return "--disk path=" + path_ + ": in use by another disk of this VM (it holds " + lock +
           " on it); give each disk its own image, or add locking=off to share it anyway";
  }

  testing::TempDir dir_{"tern-disk-image"};
  std::string path_;
};

TEST_F(DiskImageTest, MissingImageNamesTheFile) {
  auto c = config();
  c.path = dir_.path() + "/nope.img";
  EXPECT_EQ(refusal(c), "--disk path=" + c.path + ": No such file or directory");
}

TEST_F(DiskImageTest, ReadOnlyImageNamesTheFileAndTheRemedy) {
  ASSERT_EQ(::chmod(path_.c_str(), 0444), 0);
  EXPECT_EQ(refusal(config()), "--disk path=" + path_ +
                                   ": image is read-only (no write permission bits); add "
                                   "readonly=on");
  EXPECT_EQ(refusal(config(/*read_only=*/true)), "(opened)");
}

TEST_F(DiskImageTest, WriterExcludesASecondWriter) {
  auto first = DiskImage::open(config());
  ASSERT_TRUE(first) << first.error().message();
  EXPECT_TRUE(first->locked());
  EXPECT_EQ(refusal(config()), in_use_here("a write lock"));
}

TEST_F(DiskImageTest, ReadersShare) {
  auto a = DiskImage::open(config(/*read_only=*/true));
  ASSERT_TRUE(a) << a.error().message();
  auto b = DiskImage::open(config(/*read_only=*/true));
  ASSERT_TRUE(b) << b.error().message();
  EXPECT_TRUE(a->locked() && b->locked());
}

TEST_F(DiskImageTest, WriterAndReaderExcludeEachOther) {
  {
    auto reader = DiskImage::open(config(/*read_only=*/true));
    ASSERT_TRUE(reader) << reader.error().message();
    EXPECT_EQ(refusal(config()), in_use_here("a read lock"));
  }
  auto writer = DiskImage::open(config());
  ASSERT_TRUE(writer) << writer.error().message();
  EXPECT_EQ(refusal(config(/*read_only=*/true)), in_use_here("a write lock"));
}

TEST_F(DiskImageTest, LockGoesWithTheImage) {
  std::optional<DiskImage> first;
  auto d = DiskImage::open(config());
  ASSERT_TRUE(d) << d.error().message();
  first.emplace(std::move(*d));
  EXPECT_NE(refusal(config()), "(opened)");
  first.reset();
  EXPECT_EQ(refusal(config()), "(opened)");
}

TEST_F(DiskImageTest, LockingOffNeitherTakesNorTests) {
  auto locked = DiskImage::open(config());
  ASSERT_TRUE(locked) << locked.error().message();
  auto shared = DiskImage::open(config(false, /*locking=*/false));
  ASSERT_TRUE(shared) << shared.error().message();
  EXPECT_FALSE(shared->locked());
  auto reader = DiskImage::open(config(true, /*locking=*/false));
  EXPECT_TRUE(reader) << reader.error().message();
}

TEST_F(DiskImageTest, UnlockedOpenLeavesTheImageFree) {
  auto unlocked = DiskImage::open(config(false, /*locking=*/false));
  ASSERT_TRUE(unlocked) << unlocked.error().message();
  EXPECT_EQ(refusal(config()), "(opened)");
}

TEST_F(DiskImageTest, CacheNoneLocksTheDirectFd) {
  DiskConfig c = config();
  c.cache = CacheMode::kNone;
  auto direct = DiskImage::open(c);
  if (!direct) GTEST_SKIP() << direct.error().message();  // no O_DIRECT on this file system
  EXPECT_EQ(refusal(config()), in_use_here("a write lock"));
}

// Another process holding the lock (a forked child: its own open file description).
TEST_F(DiskImageTest, AnotherProcessHoldsTheLock) {
  for (bool child_writes : {true, false}) {
    int ready[2], release[2];
    ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(release, O_CLOEXEC), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Only async-signal-safe calls here.
      ::close(release[1]);  // else its own copy keeps the pipe open: read() would never end
      ::close(ready[0]);
      int fd = ::open(path_.c_str(), child_writes ? O_RDWR : O_RDONLY);
      struct flock fl {};
      fl.l_type = child_writes ? F_WRLCK : F_RDLCK;
      fl.l_whence = SEEK_SET;
      char ok = fd >= 0 && ::fcntl(fd, F_OFD_SETLK, &fl) == 0 ? 'y' : 'n';
      if (::write(ready[1], &ok, 1) != 1) ::_exit(1);
      char c;
      (void)::read(release[0], &c, 1);  // until the parent closes its end
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    char ok = 0;
    ASSERT_EQ(::read(ready[0], &ok, 1), 1);
    ASSERT_EQ(ok, 'y');
    const std::string held = child_writes ? "a write lock" : "a read lock";
    EXPECT_EQ(refusal(config()), "--disk path=" + path_ + ": in use by another process (" + held +
                                     " is held on it); stop that VM, or add locking=off to share "
                                     "it anyway");
    EXPECT_EQ(refusal(config(true)), child_writes ? "--disk path=" + path_ +
                                                        ": in use by another process (a write "
                                                        "lock is held on it); stop that VM, or "
                                                        "add locking=off to share it anyway"
                                                  : "(opened)");
    EXPECT_EQ(refusal(config(false, /*locking=*/false)), "(opened)");
    ::close(release[1]);
    ::close(ready[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_EQ(refusal(config()), "(opened)");  // the lock went with the process
  }
}

}  // namespace
}  // namespace tern
