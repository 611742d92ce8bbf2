#include "firmware/pflash/vars_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/fd.h"
#include "base/testing/temp_dir.h"

namespace tern {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Files in `dir` other than the ones named.
size_t entries(const std::string& dir) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

struct VarsFileTest : ::testing::Test {
  testing::TempDir dir{"tern-vars"};
  std::string tmpl = dir.path() + "/OVMF_VARS.fd";
  std::string vars = dir.path() + "/vm.vars";
  std::vector<uint8_t> tmpl_bytes = pattern(8 * 4096, 3);
  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    write_file(tmpl, tmpl_bytes);
  }
  VarsFileSpec spec() const { return VarsFileSpec{vars, tmpl, 4096, 64 * 4096}; }
};

TEST_F(VarsFileTest, CreatedFromTheTemplateOnFirstUse) {
  auto f = VarsFile::open(spec());
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_TRUE(f->created());
  EXPECT_EQ(f->initial(), tmpl_bytes);
  EXPECT_EQ(slurp(vars), tmpl_bytes);
  struct stat st {};
  ASSERT_EQ(::stat(vars.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(entries(dir.path()), 2u);  // template + store, no temporary left
}

TEST_F(VarsFileTest, ExistingStoreIsReadNotReplaced) {
  auto mine = pattern(8 * 4096, 99);
  write_file(vars, mine);
  auto f = VarsFile::open(spec());
  ASSERT_TRUE(f) << f.error().message();
  EXPECT_FALSE(f->created());
  EXPECT_EQ(f->initial(), mine);
}

TEST_F(VarsFileTest, StoreReplacesTheFileWholeAndKeepsItsMode) {
  write_file(vars, tmpl_bytes);
  ASSERT_EQ(::chmod(vars.c_str(), 0640), 0);
  auto f = VarsFile::open(spec());
  ASSERT_TRUE(f) << f.error().message();
  // The old inode is never written: whoever holds it open still reads the old store.
  UniqueFd old_fd(::open(vars.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(old_fd.valid());
  struct stat before {};
  ASSERT_EQ(::fstat(old_fd.get(), &before), 0);
  auto next = pattern(8 * 4096, 42);
  ASSERT_TRUE(f->store(next));
  EXPECT_EQ(slurp(vars), next);
  std::vector<uint8_t> old_view(tmpl_bytes.size());
  ASSERT_EQ(::pread(old_fd.get(), old_view.data(), old_view.size(), 0),
            static_cast<ssize_t>(old_view.size()));
  EXPECT_EQ(old_view, tmpl_bytes);
  struct stat after {};
  ASSERT_EQ(::stat(vars.c_str(), &after), 0);
  EXPECT_NE(after.st_ino, before.st_ino);
  struct stat st {};
  ASSERT_EQ(::stat(vars.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(entries(dir.path()), 2u);
  EXPECT_FALSE(f->store(pattern(4096, 1)));  // wrong size: refused
  EXPECT_EQ(slurp(vars), next);
}

// A failing write (here: the file-size limit, EFBIG) leaves the old store and no temporary.
TEST_F(VarsFileTest, FailedStoreLeavesTheOldFileAndNoTemporary) {
  auto f = VarsFile::open(spec());
  ASSERT_TRUE(f) << f.error().message();
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  auto r = f->store(pattern(8 * 4096, 77));
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("firmware-vars"), std::string::npos) << r.error().message();
  EXPECT_EQ(slurp(vars), tmpl_bytes);
  EXPECT_EQ(entries(dir.path()), 2u);
  ASSERT_TRUE(f->store(pattern(8 * 4096, 78)));  // and the next store works
}

// The store stays locked across replacements: a second opener is refused before and after.
TEST_F(VarsFileTest, SecondOpenerIsRefusedEvenAfterAStore) {
  auto f = VarsFile::open(spec());
  ASSERT_TRUE(f) << f.error().message();
  auto g = VarsFile::open(spec());
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message().find("firmware-vars"), std::string::npos);
  EXPECT_EQ(g.error().message().find("locking=off"), std::string::npos) << g.error().message();
  ASSERT_TRUE(f->store(pattern(8 * 4096, 5)));
  EXPECT_FALSE(VarsFile::open(spec()));
}

void expect_refused(const VarsFileSpec& s, const std::string& words) {
  auto f = VarsFile::open(s);
  ASSERT_FALSE(f) << "accepted " << s.path;
  std::string m = f.error().message();
  EXPECT_EQ(m.rfind("firmware-vars", 0), 0u) << m;
  EXPECT_NE(m.find(words), std::string::npos) << m;
}

TEST_F(VarsFileTest, BadInputIsRefusedNamingTheField) {
  auto s = spec();
  s.path = dir.path();
  expect_refused(s, "is a directory");
  s.path = dir.path() + "/missing/vm.vars";
  expect_refused(s, "does not exist");
  s = spec();
  s.template_path.clear();
  expect_refused(s, "no template");
  s = spec();
  s.template_path = dir.path() + "/nope.fd";
  expect_refused(s, "template");
  EXPECT_FALSE(fs::exists(vars));  // nothing created by a refusal

  write_file(vars, pattern(4096 * 8 + 1, 0));
  expect_refused(spec(), "not a multiple of the 4096-byte flash block");
  write_file(vars, pattern(4096 * 4, 0));
  expect_refused(spec(), "differs from the template");
  s = spec();
  s.template_path.clear();
  s.max_size = 2 * 4096;
  expect_refused(s, "does not fit");
  write_file(vars, {});
  expect_refused(spec(), "is empty");
  write_file(vars, tmpl_bytes);
  ASSERT_EQ(::chmod(vars.c_str(), 0444), 0);
  expect_refused(spec(), "read-only");
  EXPECT_EQ(slurp(vars), tmpl_bytes);  // every refusal lost nothing
}

}  // namespace
}  // namespace tern

namespace tern {
namespace {

// A process killed (SIGKILL) at any instant of a store leaves the previous store or the new one,
// whole: a child stores two patterns in turn, announcing each store on a pipe; the parent kills
// it after a varying number of announcements, i.e. somewhere inside a store.
TEST_F(VarsFileTest, SigkillDuringStoresNeverLeavesATornFile) {
  // 2 MiB stores: long enough that a kill lands inside one (an in-place writer fails this test).
  tmpl_bytes = pattern(512 * 4096, 3);
  write_file(tmpl, tmpl_bytes);
  auto s = spec();
  s.max_size = 0;
  auto a = pattern(512 * 4096, 11), b = pattern(512 * 4096, 22);
  ASSERT_TRUE(VarsFile::open(s));  // created from the template, lock released
  for (int round = 1; round <= 12; ++round) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(p[0]);
      auto f = VarsFile::open(s);
      if (!f) ::_exit(2);
      for (int i = 0;; ++i) {
        char c = 's';
        if (::write(p[1], &c, 1) != 1) ::_exit(3);
        if (!f->store(i % 2 ? b : a)) ::_exit(4);
      }
    }
    ::close(p[1]);
    char c;
    for (int n = 0; n < round; ++n) ASSERT_EQ(::read(p[0], &c, 1), 1);
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ::close(p[0]);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
    auto got = slurp(vars);
    EXPECT_TRUE(got == a || got == b || got == tmpl_bytes) << "torn store in round " << round;
    auto again = VarsFile::open(s);  // the lock died with the process
    ASSERT_TRUE(again) << again.error().message();
  }
}

// --firmware-vars naming a symlink: the store goes to the file the link names and the link
// stays (a rename over the link itself would leave the user's file unchanged for good).
TEST_F(VarsFileTest, StoreThroughASymlinkUpdatesItsTarget) {
  fs::create_directory(dir.path() + "/real");
  const std::string target = dir.path() + "/real/vm.vars";
  write_file(target, tmpl_bytes);
  ASSERT_EQ(::symlink(target.c_str(), vars.c_str()), 0);
  auto f = VarsFile::open(spec());
  ASSERT_TRUE(f) << f.error().message();
  auto next = pattern(8 * 4096, 55);
  ASSERT_TRUE(f->store(next));
  EXPECT_TRUE(fs::is_symlink(vars));
  EXPECT_EQ(slurp(target), next);
  EXPECT_EQ(slurp(vars), next);
  // And it stays locked under the link's target after the store.
  auto g = VarsFile::open(spec());
  EXPECT_FALSE(g);
}

// The template itself as the store: tern would write the VM's variables into the shared
// template every new VM is created from.
TEST_F(VarsFileTest, TheTemplateIsRefusedAsTheStore) {
  VarsFileSpec s = spec();
  s.path = tmpl;
  auto f = VarsFile::open(s);
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message().find("firmware-vars"), std::string::npos) << f.error().message();
  EXPECT_NE(f.error().message().find("template"), std::string::npos) << f.error().message();
  EXPECT_EQ(slurp(tmpl), tmpl_bytes);
}

}  // namespace
}  // namespace tern
