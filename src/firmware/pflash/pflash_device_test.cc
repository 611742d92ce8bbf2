// PflashDevice without KVM (no memslot: every access goes through read()/write()): persistence,
// snapshot state and reset. The ROMD memslot flip is covered by tests/kvm/pflash_romd_test.cc.
#include "firmware/pflash/pflash_device.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "base/testing/eventually.h"
#include "base/testing/temp_dir.h"

namespace tern {
namespace {

constexpr uint64_t kSize = 8 * 4096;
constexpr uint64_t kGpa = 0xFFC00000;

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct PflashDeviceTest : ::testing::Test {
  testing::TempDir dir{"tern-pflash"};
  std::string tmpl = dir.path() + "/OVMF_VARS.fd";
  std::string vars = dir.path() + "/vm.vars";
  std::vector<uint8_t> initial = std::vector<uint8_t>(kSize, 0xFF);

  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    initial[0] = 0x5A;
    std::ofstream(tmpl, std::ios::binary)
        .write(reinterpret_cast<const char*>(initial.data()), kSize);
  }
  std::shared_ptr<PflashDevice> make(std::chrono::milliseconds quiet = std::chrono::hours(1)) {
    auto f = VarsFile::open(VarsFileSpec{vars, tmpl, 4096, 0});
    EXPECT_TRUE(f) << f.error().message();
    auto d = PflashDevice::create(nullptr, std::move(*f), kGpa, 0, true, quiet);
    EXPECT_TRUE(d) << d.error().message();
    return *d;
  }
  static void w8(PflashDevice& d, uint64_t off, uint8_t v) {
    d.write(off, std::span<const uint8_t>(&v, 1));
  }
  static uint8_t r8(PflashDevice& d, uint64_t off) {
    uint8_t v = 0;
    d.read(off, std::span<uint8_t>(&v, 1));
    return v;
  }
  /// QemuFlashWrite: 0x10 + byte for each byte, then 0xFF.
  static void ovmf_write(PflashDevice& d, uint64_t off, std::span<const uint8_t> bytes) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      w8(d, off + i, 0x10);
      w8(d, off + i, bytes[i]);
    }
    w8(d, off + bytes.size() - 1, 0xFF);
  }
};

TEST_F(PflashDeviceTest, FlushWritesTheProgrammedBytesToTheFile) {
  auto d = make();
  EXPECT_EQ(d->gpa(), kGpa);
  EXPECT_EQ(d->size(), kSize);
  const uint8_t var[] = {'t', 'e', 'r', 'n'};
  ovmf_write(*d, 4096 + 10, var);
  EXPECT_EQ(slurp(vars), initial);  // nothing stored yet (quiet period of an hour)
  ASSERT_TRUE(d->flush());
  auto want = initial;
  std::copy(std::begin(var), std::end(var), want.begin() + 4096 + 10);
  EXPECT_EQ(slurp(vars), want);
  EXPECT_EQ(d->stats().stores, 1u);
  ASSERT_TRUE(d->flush());  // nothing changed: no second store
  EXPECT_EQ(d->stats().stores, 1u);
}

TEST_F(PflashDeviceTest, QuietFlashIsStoredInTheBackground) {
  auto d = make(std::chrono::milliseconds(1));
  const uint8_t var[] = {1, 2, 3};
  ovmf_write(*d, 100, var);
  ASSERT_TRUE(testing::eventually([&] { return d->stats().stores >= 1; }));
  auto want = initial;
  std::copy(std::begin(var), std::end(var), want.begin() + 100);
  EXPECT_EQ(slurp(vars), want);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.path()),
                          std::filesystem::directory_iterator()),
            2);  // no temporary left behind
}

// Not in read-array mode (a program awaiting its 0xFF): the background store waits; flush() does
// not.
TEST_F(PflashDeviceTest, NoBackgroundStoreMidCommand) {
  auto d = make(std::chrono::milliseconds(0));
  w8(*d, 5, 0x10);
  w8(*d, 5, 0x00);  // left in status mode
  // A later byte and its 0xFF give the persister its chance: the store then has both bytes.
  w8(*d, 6, 0x10);
  w8(*d, 6, 0x01);
  EXPECT_EQ(slurp(vars), initial);
  w8(*d, 6, 0xFF);
  ASSERT_TRUE(testing::eventually([&] { return d->stats().stores >= 1; }));
  auto got = slurp(vars);
  EXPECT_EQ(got[5], 0x00);
  EXPECT_EQ(got[6], 0x01);
}

TEST_F(PflashDeviceTest, DestructorStoresPendingChanges) {
  {
    auto d = make();
    w8(*d, 0, 0x20);
    w8(*d, 0, 0xD0);
    w8(*d, 0, 0xFF);
  }
  EXPECT_EQ(slurp(vars)[0], 0xFF);
}

TEST_F(PflashDeviceTest, SaveRestoreRoundTripsModeAndContents) {
  auto d = make();
  const uint8_t var[] = {9, 8, 7};
  ovmf_write(*d, 200, var);
  w8(*d, 0, 0x70);  // save in status mode
  snap::ByteWriter w;
  d->save_state(w);
  auto saved = d->contents();

  w8(*d, 0, 0x50);
  ovmf_write(*d, 200, std::span<const uint8_t>(var, 1));  // diverge after the save
  w8(*d, 300, 0x10);
  w8(*d, 300, 0x44);
  w8(*d, 0, 0xFF);
  snap::ByteReader r(w.data(), "state section pflash");
  ASSERT_TRUE(d->restore_state(r));
  ASSERT_TRUE(r.expect_end());
  EXPECT_EQ(d->contents(), saved);
  EXPECT_EQ(r8(*d, 0), kCfiStatusReady);  // status mode again
  w8(*d, 0, 0xFF);
  EXPECT_EQ(r8(*d, 201), 8);
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(slurp(vars), saved);  // the file gets exactly the saved store
}

TEST_F(PflashDeviceTest, RestoreRefusesBadState) {
  auto d = make();
  snap::ByteWriter good;
  d->save_state(good);
  auto bad = [&](size_t at, uint8_t v, const std::string& field) {
    auto bytes = good.data();
    bytes[at] = v;
    snap::ByteReader r(bytes, "state section pflash");
    auto res = d->restore_state(r);
    ASSERT_FALSE(res) << field;
    EXPECT_NE(res.error().message().find(field), std::string::npos) << res.error().message();
  };
  bad(0, 9, "version");
  bad(4, 200, "mode");
  bad(6 + 7, 0xFF, "erase address");
  bad(14, 1, "size");
  auto trunc = good.data();
  trunc.resize(trunc.size() - 1);
  snap::ByteReader r(trunc, "state section pflash");
  EXPECT_FALSE(d->restore_state(r));
  EXPECT_EQ(r8(*d, 0), 0x5A);  // nothing applied
}

TEST_F(PflashDeviceTest, ResetReturnsToReadArray) {
  auto d = make();
  w8(*d, 0, 0x90);
  EXPECT_EQ(r8(*d, 0), kCfiManufacturerIntel);
  ASSERT_TRUE(d->reset());
  EXPECT_EQ(r8(*d, 0), 0x5A);
}

TEST_F(PflashDeviceTest, ReleasedFileCarriesTheGuestsContentsIntoTheNextDevice) {
  // Reset in place (vm.h "Reset rule"): the VM and its flash device are rebuilt; the store the
  // guest wrote must be what the next device starts from, and it is on disk. Before, the next
  // VM took a VarsFile already moved from (size 0): the reset failed with "mmap: pflash storage".
  auto d = make();
  const uint8_t var[] = {'b', 'o', 'o', 't'};
  ovmf_write(*d, 2 * 4096, var);
  VarsFile file = d->release_file();
  auto want = initial;
  std::copy(std::begin(var), std::end(var), want.begin() + 2 * 4096);
  EXPECT_EQ(file.initial(), want);
  EXPECT_EQ(slurp(vars), want);  // stored at the release
  ASSERT_TRUE(d->flush());       // released: nothing left to store
  d.reset();                     // the old VM goes away; its destructor stores nothing
  EXPECT_FALSE(VarsFile::open(VarsFileSpec{vars, tmpl, 4096, 0}))
      << "the store's lock was dropped by the release";
  auto next = PflashDevice::create(nullptr, std::move(file), kGpa, 0, true, std::chrono::hours(1));
  ASSERT_TRUE(next) << next.error().message();
  EXPECT_EQ(r8(**next, 2 * 4096), 'b');
  EXPECT_EQ(r8(**next, 0), 0x5A);
}

}  // namespace
}  // namespace tern
