#include "firmware/pflash/vars_file.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>

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
  auto next = pattern(8 * 4096, 42);
  ASSERT_TRUE(f->store(next));
  EXPECT_EQ(slurp(vars), next);
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
