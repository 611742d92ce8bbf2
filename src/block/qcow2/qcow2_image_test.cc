// The qcow2 layer against the real peer, qemu-img: images qemu-img made (v2, v3, cluster sizes
// 512 B / 64 KiB / 2 MiB, compressed, with a backing file) read back the expected bytes; after
// tern writes a known pattern, `qemu-img check` is clean and `qemu-img compare` agrees with a raw
// file holding the expected content. Also the format rule (probe, format=, backing_files=).
#include "block/qcow2/qcow2_image.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "base/testing/temp_dir.h"
#include "block/disk_image.h"
#include "block/qcow2/testing/qemu_img.h"

namespace tern {
namespace {

using testing::check_clean;
using testing::pattern;
using testing::run_command;

class Qcow2ImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_EQ(run_command("qemu-img --version").status, 0) << "qemu-img missing (qemu-utils)";
  }
  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
  void qemu_img(const std::string& args) {
    auto r = run_command("qemu-img " + args);
    ASSERT_EQ(r.status, 0) << "qemu-img " << args << ": " << r.output;
  }
  /// A raw file of `size` bytes with a pattern in every other MiB (the rest zeros: holes).
  std::vector<uint8_t> make_raw(const std::string& name, size_t size, uint32_t seed) {
    auto bytes = pattern(size, seed);
    // Every third 64 KiB compresses well (convert -c stores compressed clusters only there).
    for (size_t at = 0; at + 65536 <= size; at += 3 * 65536)
      for (size_t i = 0; i < 65536; ++i) bytes[at + i] = static_cast<uint8_t>((i / 64) % 7);
    for (size_t mib = 1; mib * (1u << 20) < size; mib += 2)
      std::fill_n(bytes.begin() + mib * (1u << 20),
                  std::min<size_t>(1u << 20, size - mib * (1u << 20)), 0);
    testing::write_file(path(name), bytes);
    return bytes;
  }
  Result<DiskImage> open(const std::string& name, DiskFormat f = DiskFormat::kAuto,
                         bool backing = false, bool read_only = false) {
    DiskConfig c;
    c.path = path(name);
    c.format = f;
    c.backing_files = backing;
    c.read_only = read_only;
    return DiskImage::open(c);
  }
  std::vector<uint8_t> read_all(DiskImage& d) {
    std::vector<uint8_t> out(d.size_bytes());
    auto ok = d.qcow2()->read_sync(0, out.data(), out.size());
    EXPECT_TRUE(ok) << ok.error().message();
    return out;
  }
  void expect_check_and_compare(const std::string& img, const std::string& expected_raw) {
    auto check = run_command("qemu-img check " + path(img));
    EXPECT_TRUE(check_clean(check)) << check.status << ": " << check.output;
    auto cmp =
        run_command("qemu-img compare -f qcow2 -F raw " + path(img) + " " + path(expected_raw));
    EXPECT_EQ(cmp.status, 0) << cmp.output;
  }

  testing::TempDir dir_{"tern-qcow2"};
};

// Before: tern served a qcow2 file as a raw disk (the guest saw the metadata as its disk).
TEST_F(Qcow2ImageTest, ProbedQcow2IsServedAsQcow2AndFormatRawServesTheBytes) {
  qemu_img("create -q -f qcow2 " + path("a.qcow2") + " 64M");
  {
    auto q = open("a.qcow2");
    ASSERT_TRUE(q) << q.error().message();
    EXPECT_EQ(q->format(), DiskFormat::kQcow2);
    EXPECT_EQ(q->size_bytes(), 64u << 20);
  }
  auto raw = open("a.qcow2", DiskFormat::kRaw);
  ASSERT_TRUE(raw) << raw.error().message();
  EXPECT_EQ(raw->format(), DiskFormat::kRaw);
  EXPECT_EQ(raw->qcow2(), nullptr);
  EXPECT_LT(raw->size_bytes(), 1u << 20);  // the file's few clusters of metadata
  // A raw file: probed raw; format=qcow2 refused naming the field.
  make_raw("r.img", 1 << 20, 1);
  {
    auto r = open("r.img");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->format(), DiskFormat::kRaw);
  }
  auto bad = open("r.img", DiskFormat::kQcow2);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(),
            "--disk format=qcow2: " + path("r.img") + ": not a qcow2 image (no QFI\\xfb magic)");
}

// A guest-written qcow2 header naming a host file: never opened without backing_files=on.
TEST_F(Qcow2ImageTest, BackingFileOnlyWithBackingFilesOn) {
  auto base = make_raw("base.img", 4 << 20, 7);
  qemu_img("create -q -f qcow2 -b " + path("base.img") + " -F raw " + path("top.qcow2"));
  auto refused = open("top.qcow2");
  ASSERT_FALSE(refused);
  EXPECT_TRUE(refused.error().message().starts_with(
      "--disk backing_files: --disk path=" + path("top.qcow2") + " names backing file '" +
      path("base.img") + "'"))
      << refused.error().message();
  auto d = open("top.qcow2", DiskFormat::kAuto, /*backing=*/true);
  ASSERT_TRUE(d) << d.error().message();
  EXPECT_EQ(read_all(*d), base);
}

TEST_F(Qcow2ImageTest, BackingChainLoopsAndSelfReferencesAreRefused) {
  qemu_img("create -q -f qcow2 " + path("a.qcow2") + " 1M");
  // a -> b -> a (rebase -u rewrites the header without opening the chain).
  qemu_img("create -q -f qcow2 -b " + path("a.qcow2") + " -F qcow2 " + path("b.qcow2"));
  qemu_img("rebase -u -f qcow2 -b " + path("b.qcow2") + " -F qcow2 " + path("a.qcow2"));
  auto loop = open("a.qcow2", DiskFormat::kAuto, true);
  ASSERT_FALSE(loop);
  EXPECT_NE(loop.error().message().find("the backing chain loops"), std::string::npos)
      << loop.error().message();
  qemu_img("create -q -f qcow2 " + path("s.qcow2") + " 1M");
  qemu_img("rebase -u -f qcow2 -b s.qcow2 -F qcow2 " + path("s.qcow2"));
  auto self = open("s.qcow2", DiskFormat::kAuto, true);
  ASSERT_FALSE(self);
  EXPECT_NE(self.error().message().find("the backing chain loops"), std::string::npos)
      << self.error().message();
}

// Before: a backing file was opened before its type was checked, so a backing name naming a FIFO
// blocked the open (tern's start) until some writer came (this test hung), and a character
// device was opened (an open that may act). Now the type is checked first and the FIFO refused.
TEST_F(Qcow2ImageTest, BackingFileThatIsAFifoIsRefusedWithoutOpeningIt) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  qemu_img("create -q -f qcow2 -b fifo -F raw -u " + path("f.qcow2") + " 1M");
  auto d = open("f.qcow2", DiskFormat::kAuto, /*backing=*/true);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("fifo: not a regular file or block device"), std::string::npos)
      << d.error().message();
}

// Before: a write needing a refcount block beyond the refcount table failed with an I/O error
// ("refcount table full", growing not implemented): a 512 B-cluster image could not grow past
// 8 MiB of file (2 MiB with 64-bit refcounts). Now the table grows (a new one past the end of
// the file, durable before the header names it): every write succeeds, qemu-img check is clean
// and compare equal, and the header names a larger table.
TEST_F(Qcow2ImageTest, RefcountTableGrowsWhenFull) {
  for (const char* opts : {"cluster_size=512", "cluster_size=512,refcount_bits=64"}) {
    SCOPED_TRACE(opts);
    qemu_img("create -q -f qcow2 -o " + std::string(opts) + " " + path("r.qcow2") + " 64M");
    std::vector<uint8_t> expected(64u << 20, 0);
    {
      auto d = open("r.qcow2");
      ASSERT_TRUE(d) << d.error().message();
      std::vector<uint8_t> chunk(64 * 1024);
      for (uint64_t off = 0; off < (16u << 20); off += chunk.size()) {
        std::fill(chunk.begin(), chunk.end(), static_cast<uint8_t>(off >> 16) | 1);
        auto ok = d->qcow2()->write_sync(off, chunk.data(), chunk.size());
        ASSERT_TRUE(ok) << "at " << off << ": " << ok.error().message();
        std::copy(chunk.begin(), chunk.end(), expected.begin() + off);
      }
      ASSERT_TRUE(d->qcow2()->flush());
      EXPECT_TRUE(read_all(*d) == expected);
    }
    auto bytes = testing::read_file(path("r.qcow2"));
    EXPECT_GT((uint32_t{bytes[56]} << 24) | (uint32_t{bytes[57]} << 16) |
                  (uint32_t{bytes[58]} << 8) | bytes[59],
              1u);  // refcount_table_clusters
    testing::write_file(path("r.raw"), expected);
    expect_check_and_compare("r.qcow2", "r.raw");
    {
      auto d = open("r.qcow2");  // reopens with the grown table and reads the same bytes
      ASSERT_TRUE(d) << d.error().message();
      EXPECT_TRUE(read_all(*d) == expected);
    }
  }
}

// Before: on a block device (a qcow2 image on LVM or a loop device) allocation started at the
// device's end — its size, not the image's — so every allocating write failed (ENOSPC). Now it
// starts after the last cluster the refcounts count. Needs root and a free loop device.
TEST_F(Qcow2ImageTest, AllocatesOnABlockDevice) {
  if (::geteuid() != 0 || run_command("losetup -f").status != 0)
    GTEST_SKIP() << "needs root and a loop device";
  qemu_img("create -q -f qcow2 " + path("b.qcow2") + " 8M");
  ASSERT_EQ(::truncate(path("b.qcow2").c_str(), 16 << 20), 0);
  auto lo = run_command("losetup -f --show " + path("b.qcow2"));
  ASSERT_EQ(lo.status, 0) << lo.output;
  std::string dev = lo.output.substr(0, lo.output.find('\n'));
  std::vector<uint8_t> data(192 * 1024);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  {
    DiskConfig c;
    c.path = dev;
    auto d = DiskImage::open(c);
    if (d) {
      EXPECT_EQ(d->format(), DiskFormat::kQcow2);
      auto ok = d->qcow2()->write_sync(1 << 20, data.data(), data.size());
      EXPECT_TRUE(ok) << ok.error().message();
      EXPECT_TRUE(d->qcow2()->flush());
    } else {
      ADD_FAILURE() << d.error().message();
    }
  }
  EXPECT_EQ(run_command("losetup -d " + dev).status, 0);
  std::vector<uint8_t> expected(8u << 20, 0);
  std::copy(data.begin(), data.end(), expected.begin() + (1 << 20));
  testing::write_file(path("b.raw"), expected);
  expect_check_and_compare("b.qcow2", "b.raw");
}

struct Layout {
  const char* options;
  const char* name;
};

TEST_F(Qcow2ImageTest, ReadsWhatQemuImgConverted) {
  auto expected = make_raw("src.img", 6 << 20, 3);
  for (Layout l :
       {Layout{"compat=0.10", "v2"}, Layout{"compat=1.1", "v3"}, Layout{"cluster_size=512", "c512"},
        Layout{"cluster_size=2M", "c2M"}, Layout{"compat=1.1,refcount_bits=1", "rc1"},
        Layout{"compat=1.1,refcount_bits=64", "rc64"}}) {
    SCOPED_TRACE(l.name);
    std::string img = std::string(l.name) + ".qcow2";
    qemu_img("convert -f raw -O qcow2 -o " + std::string(l.options) + " " + path("src.img") + " " +
             path(img));
    auto d = open(img);
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(read_all(*d), expected);
  }
  // Compressed clusters (deflate) and zstd.
  qemu_img("convert -c -f raw -O qcow2 " + path("src.img") + " " + path("z.qcow2"));
  auto z = open("z.qcow2");
  ASSERT_TRUE(z) << z.error().message();
  EXPECT_EQ(read_all(*z), expected);
  qemu_img("convert -c -f raw -O qcow2 -o compression_type=zstd " + path("src.img") + " " +
           path("zstd.qcow2"));
  auto zs = open("zstd.qcow2");
  ASSERT_TRUE(zs) << zs.error().message();
  EXPECT_EQ(read_all(*zs), expected);
}

// Random writes (partial clusters, spanning clusters) through tern over each layout, mirrored
// into a raw file: qemu-img check clean, qemu-img compare equal.
TEST_F(Qcow2ImageTest, WritesAreCheckedCleanAndCompareEqualByQemuImg) {
  const size_t size = 8u << 20;
  auto base = make_raw("base.img", size, 11);
  struct Case {
    const char* name;
    std::string create;
  };
  std::vector<Case> cases = {
      {"v2", "create -q -f qcow2 -o compat=0.10 IMG 8M"},
      {"v3", "create -q -f qcow2 IMG 8M"},
      {"c512", "create -q -f qcow2 -o cluster_size=512 IMG 8M"},
      {"c2M", "create -q -f qcow2 -o cluster_size=2M IMG 8M"},
      {"rc1", "create -q -f qcow2 -o refcount_bits=1 IMG 8M"},
      {"rc2", "create -q -f qcow2 -o refcount_bits=2 IMG 8M"},
      {"rc4-c4k", "create -q -f qcow2 -o refcount_bits=4,cluster_size=4096 IMG 8M"},
      {"rc8", "create -q -f qcow2 -o refcount_bits=8 IMG 8M"},
      {"rc32", "create -q -f qcow2 -o refcount_bits=32 IMG 8M"},
      {"rc64-c512", "create -q -f qcow2 -o refcount_bits=64,cluster_size=512 IMG 8M"},
      {"backing", "create -q -f qcow2 -b " + path("base.img") + " -F raw IMG"},
      {"compressed", "convert -c -f raw -O qcow2 " + path("base.img") + " IMG"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.name);
    std::string img = std::string(c.name) + ".qcow2";
    std::string cmd = c.create;
    cmd.replace(cmd.find("IMG"), 3, path(img));
    qemu_img(cmd);
    const bool has_base = c.name == std::string("backing") || c.name == std::string("compressed");
    std::vector<uint8_t> expected = has_base ? base : std::vector<uint8_t>(size, 0);
    {
      auto d = open(img, DiskFormat::kQcow2, /*backing=*/true);
      ASSERT_TRUE(d) << d.error().message();
      std::mt19937 g(42);
      for (int i = 0; i < 60; ++i) {
        uint64_t len = 1 + g() % (200 * 1024);
        uint64_t off = g() % (size - len);
        auto data = pattern(len, static_cast<uint32_t>(i));
        auto ok = d->qcow2()->write_sync(off, data.data(), len);
        ASSERT_TRUE(ok) << ok.error().message();
        std::copy(data.begin(), data.end(), expected.begin() + static_cast<long>(off));
      }
      // Zeroing, whole clusters and pieces.
      auto z = d->qcow2()->write_zeroes(3u << 20, (1u << 20) + 4096);
      ASSERT_TRUE(z) << z.error().message();
      std::fill_n(expected.begin() + (3 << 20), (1 << 20) + 4096, 0);
      EXPECT_EQ(read_all(*d), expected);
      ASSERT_TRUE(d->qcow2()->flush());
    }
    testing::write_file(path("expected.img"), expected);
    expect_check_and_compare(img, "expected.img");
  }
}

// Internal snapshots stay intact: a write to a cluster the snapshot shares gets a new cluster (its
// L2 entry lacks QCOW_OFLAG_COPIED), and the snapshot still reads its old bytes.
TEST_F(Qcow2ImageTest, WritesLeaveInternalSnapshotsIntact) {
  auto before = make_raw("src.img", 2 << 20, 21);
  qemu_img("convert -f raw -O qcow2 " + path("src.img") + " " + path("s.qcow2"));
  qemu_img("snapshot -c s1 " + path("s.qcow2"));
  auto after = before;
  {
    auto d = open("s.qcow2");
    ASSERT_TRUE(d) << d.error().message();
    auto data = pattern(200000, 77);
    ASSERT_TRUE(d->qcow2()->write_sync(12345, data.data(), data.size()));
    std::copy(data.begin(), data.end(), after.begin() + 12345);
    ASSERT_TRUE(d->qcow2()->write_zeroes(1 << 20, 65536));
    std::fill_n(after.begin() + (1 << 20), 65536, 0);
    EXPECT_EQ(read_all(*d), after);
  }
  testing::write_file(path("after.img"), after);
  expect_check_and_compare("s.qcow2", "after.img");
  qemu_img("convert -f qcow2 -O raw -l snapshot.name=s1 " + path("s.qcow2") + " " + path("s1.raw"));
  EXPECT_EQ(testing::read_file(path("s1.raw")), before);
}

}  // namespace
}  // namespace tern
