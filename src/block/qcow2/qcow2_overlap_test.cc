// Overlapping metadata (Qcow2MetadataMap): tables that overlap the header or each other are
// refused at open, naming both; an L2 entry or an allocation that would put data over metadata
// fails that request, and the metadata's bytes are unchanged. Each case edits a valid image
// (cluster_size 512, 1 MiB, one data cluster written by qemu-io) held in memory, whose layout is:
// header 0x0, refcount table 0x200, refcount block 0x400, L1 table 0x600, L2 table 0x800,
// data 0xa00.
#include "block/qcow2/qcow2_overlap.h"

#include <endian.h>
#include <gtest/gtest.h>

#include <cstring>

#include "base/testing/temp_dir.h"
#include "block/qcow2/qcow2_image.h"
#include "block/qcow2/testing/qemu_img.h"

namespace tern {
namespace {

constexpr uint64_t kCopied = uint64_t{1} << 63;

class Qcow2OverlapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    std::string p = dir_.path() + "/o.qcow2";
    auto r = testing::run_command("qemu-img create -q -f qcow2 -o cluster_size=512 " + p +
                                  " 1M && qemu-io -f qcow2 -c 'write -P 0x11 0 512' " + p);
    ASSERT_EQ(r.status, 0) << r.output;
    image_ = testing::read_file(p);
    ASSERT_EQ(image_.size(), 3072u);
    // The layout the cases rely on.
    ASSERT_EQ(get64(48), kRefTable);
    ASSERT_EQ(get64(kRefTable), kRefBlock);
    ASSERT_EQ(get64(40), kL1);
    ASSERT_EQ(get64(kL1), kCopied | kL2);
    ASSERT_EQ(get64(kL2), kCopied | kData);
  }
  uint64_t get64(size_t off) const {
    uint64_t v = 0;
    std::memcpy(&v, image_.data() + off, 8);
    return be64toh(v);
  }
  void put64(size_t off, uint64_t v) {
    v = htobe64(v);
    std::memcpy(image_.data() + off, &v, 8);
  }
  /// Opens image_ (writable); `mem` is set to the file so a test can look at its bytes.
  Result<std::unique_ptr<Qcow2Image>> open(bool block_device = false) {
    auto f = std::make_unique<MemQcow2File>(image_);
    mem_ = f.get();
    Qcow2OpenOptions o;
    o.what = "img";
    o.writable = true;
    o.block_device = block_device;
    return Qcow2Image::open(std::move(f), "/", o);
  }
  std::string open_error() {
    auto img = open();
    return img ? "(opened)" : img.error().message();
  }
  std::vector<uint8_t> bytes(uint64_t off, uint64_t len) const {
    return {mem_->bytes().begin() + static_cast<long>(off),
            mem_->bytes().begin() + static_cast<long>(off + len)};
  }

  static constexpr uint64_t kRefTable = 0x200, kRefBlock = 0x400, kL1 = 0x600, kL2 = 0x800,
                            kData = 0xa00;
  testing::TempDir dir_{"tern-qcow2-overlap"};
  std::vector<uint8_t> image_;
  const MemQcow2File* mem_ = nullptr;
};

TEST_F(Qcow2OverlapTest, ValidImageOpens) {
  EXPECT_EQ(open_error(), "(opened)");
}

// Before: an L1 table at offset 0 opened, and the first allocating write wrote the new L2
// table's L1 entry over the header's magic.
TEST_F(Qcow2OverlapTest, TablesOverTheHeaderOrEachOtherAreRefusedAtOpen) {
  auto orig = image_;
  put64(40, 0);
  EXPECT_EQ(open_error(),
            "img: qcow2 metadata: the L1 table (0x0, 256 bytes) overlaps the header; run "
            "qemu-img check");
  image_ = orig;
  put64(48, 0);
  EXPECT_EQ(open_error(),
            "img: qcow2 metadata: the refcount table (0x0, 512 bytes) overlaps the header; run "
            "qemu-img check");
  image_ = orig;
  put64(40, kRefTable);
  EXPECT_EQ(open_error(),
            "img: qcow2 metadata: the L1 table (0x200, 256 bytes) overlaps the refcount table; "
            "run qemu-img check");
}

TEST_F(Qcow2OverlapTest, TablesNamedByTheL1AndRefcountTableMayNotOverlapAnything) {
  auto orig = image_;
  put64(kRefTable, kL1);  // the refcount block is the L1 table
  EXPECT_EQ(open_error(),
            "img: qcow2 metadata: a refcount block (0x600, 512 bytes) overlaps the L1 table; run "
            "qemu-img check");
  image_ = orig;
  put64(kRefTable + 8, kRefBlock);  // two refcount table entries, one block
  EXPECT_EQ(open_error(),
            "img: qcow2 metadata: a refcount block (0x400, 512 bytes) overlaps a refcount "
            "block; run qemu-img check");
  image_ = orig;
  put64(kL1 + 8, kCopied | kRefBlock);  // an L2 table that is the refcount block
  EXPECT_EQ(open_error(),
            "img: qcow2 metadata: an L2 table (0x400, 512 bytes) overlaps a refcount block; run "
            "qemu-img check");
  image_ = orig;
  put64(kL1 + 8, kCopied | kRefTable);
  EXPECT_NE(open_error().find("an L2 table (0x200, 512 bytes) overlaps the refcount table"),
            std::string::npos)
      << open_error();
  image_ = orig;
  put64(kL1 + 8, kCopied | kL2);  // two L1 entries sharing one L2 table: allowed (refcount 2)
  EXPECT_EQ(open_error(), "(opened)");
}

// Before: an L2 entry naming the refcount block (or an L2 table) as a data cluster was written
// in place: the guest's bytes replaced the image's refcounts.
TEST_F(Qcow2OverlapTest, DataClusterOverMetadataFailsTheRequestAndWritesNothing) {
  for (uint64_t victim : {kRefBlock, kL2}) {
    SCOPED_TRACE(victim);
    put64(kL2, kCopied | victim);
    auto img = open();
    ASSERT_TRUE(img) << img.error().message();
    const auto before = bytes(0, mem_->bytes().size());
    std::vector<uint8_t> data(512, 0xee);
    auto w = (*img)->write_sync(0, data.data(), data.size());
    ASSERT_FALSE(w);
    EXPECT_NE(
        w.error().message().find("names data cluster " +
                                 std::string(victim == kL2 ? "0x800" : "0x400") + " overlaps"),
        std::string::npos)
        << w.error().message();
    std::vector<Qcow2Extent> ext;
    EXPECT_FALSE((*img)->map(0, 512, /*write=*/true, ext));  // never a direct write either
    EXPECT_FALSE((*img)->write_zeroes(0, 100));
    EXPECT_EQ(bytes(0, mem_->bytes().size()), before);
    // The rest of the disk still works.
    ASSERT_TRUE((*img)->write_sync(4096, data.data(), data.size()));
    std::vector<uint8_t> back(512);
    ASSERT_TRUE((*img)->read_sync(4096, back.data(), back.size()));
    EXPECT_EQ(back, data);
  }
}

// Before: with refcounts claiming the L2 table free (refcount 0), allocation on a block device
// (which starts after the last counted cluster) handed out the L2 table's cluster for data and
// the guest's bytes replaced the L2 table.
TEST_F(Qcow2OverlapTest, AllocationNeverHandsOutAMetadataCluster) {
  // 16-bit refcounts; clusters 4 (L2) and 5 (data) set to 0: next allocation is cluster 4.
  put64(kRefBlock + 8, get64(kRefBlock + 8) & 0x00000000ffffffffull);
  auto img = open(/*block_device=*/true);
  ASSERT_TRUE(img) << img.error().message();
  const auto l2_before = bytes(kL2, 512);
  std::vector<uint8_t> data(512, 0x5a);
  auto w = (*img)->write_sync(1024, data.data(), data.size());
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message().find("free cluster 0x800 overlaps an L2 table"), std::string::npos)
      << w.error().message();
  EXPECT_EQ(bytes(kL2, 512), l2_before);
  // The next allocation moves on (the data cluster's refcount is 0 too, and it is not metadata:
  // it is reused, as QEMU would).
  ASSERT_TRUE((*img)->write_sync(1024, data.data(), data.size()));
  std::vector<uint8_t> back(512);
  ASSERT_TRUE((*img)->read_sync(1024, back.data(), back.size()));
  EXPECT_EQ(back, data);
  auto l2_after = bytes(kL2, 512);
  std::fill_n(l2_after.begin() + 16, 8, 0);  // only L2 entry 2 (guest offset 1024) changed
  EXPECT_EQ(l2_after, l2_before);
}

TEST(Qcow2MetadataMapTest, FindNamesTheKindAndSkipsSelf) {
  Qcow2Header h;
  h.cluster_bits = 9;
  h.cluster_size = 512;
  h.l1_size = 2;
  h.l1_table_offset = 0x600;
  h.refcount_table_offset = 0x200;
  h.refcount_table_clusters = 1;
  auto m = Qcow2MetadataMap::build(h, {0x800 | kCopied, 0}, {0x400, 0}, "x");
  ASSERT_TRUE(m) << m.error().message();
  using K = Qcow2MetadataMap::Kind;
  EXPECT_EQ(m->find(0, 1), K::kHeader);
  EXPECT_EQ(m->find(0x200, 512), K::kRefTable);
  EXPECT_EQ(m->find(0x400, 512), K::kRefBlock);
  EXPECT_EQ(m->find(0x400, 512, K::kRefBlock), K::kNone);
  EXPECT_EQ(m->find(0x600, 512), K::kL1);
  EXPECT_EQ(m->find(0x800, 512), K::kL2);
  EXPECT_EQ(m->find(0xa00, 512), K::kNone);
  EXPECT_EQ(m->find(0x9ff, 2), K::kL2);  // a range straddling two clusters
  m->add_l2(0xc00);
  m->add_refblock(0xe00);
  EXPECT_EQ(m->find(0xc00, 512), K::kL2);
  EXPECT_EQ(m->find(0xe00, 512), K::kRefBlock);
  m->move_reftable(0x1000, 2);
  EXPECT_EQ(m->find(0x200, 512), K::kNone);
  EXPECT_EQ(m->find(0x1200, 512), K::kRefTable);
}

}  // namespace
}  // namespace tern
