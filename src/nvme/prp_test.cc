#include "nvme/prp.h"

#include <gtest/gtest.h>

#include <numeric>

#include "base/checked.h"
#include "nvme/testing/nvme_test_memory.h"

namespace tern::nvme {
namespace {

using testing::NvmeTestMemory;
constexpr uint64_t kPage = NvmeTestMemory::kPage;

class NvmePrpTest : public ::testing::Test {
 protected:
  NvmeTestMemory m;
  PrpLimits limits;
  std::vector<iovec> out;

  tl::expected<void, Status> map(uint64_t prp1, uint64_t prp2, uint64_t len) {
    return map_prps(m.mem(), prp1, prp2, len, limits, out);
  }
  uint64_t total() const {
    return std::accumulate(out.begin(), out.end(), uint64_t{0},
                           [](uint64_t s, const iovec& v) { return s + v.iov_len; });
  }
  void expect_iov(size_t i, uint64_t gpa, size_t len) {
    ASSERT_LT(i, out.size());
    EXPECT_EQ(out[i].iov_base, m.host(gpa)) << "iovec " << i;
    EXPECT_EQ(out[i].iov_len, len) << "iovec " << i;
  }
  void expect_error(Status s, uint64_t prp1, uint64_t prp2, uint64_t len) {
    out.push_back(iovec{nullptr, 1});  // cleared by the call, success or not
    auto r = map(prp1, prp2, len);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), s);
    EXPECT_TRUE(out.empty());
  }
};

TEST_F(NvmePrpTest, Prp1OnlyIgnoresPrp2) {
  ASSERT_TRUE(map(m.a(0) + 0x100, 0xdead0001, 512));
  ASSERT_EQ(out.size(), 1u);
  expect_iov(0, m.a(0) + 0x100, 512);
}

TEST_F(NvmePrpTest, Prp1FillsItsPageExactly) {
  ASSERT_TRUE(map(m.a(3) + 0x800, 0xdead0001, 2048));
  ASSERT_EQ(out.size(), 1u);
  expect_iov(0, m.a(3) + 0x800, 2048);
}

TEST_F(NvmePrpTest, Prp1OffsetMustBeDwordAligned) {
  expect_error(kPrpOffsetInvalid, m.a(0) + 2, 0, 512);
}

TEST_F(NvmePrpTest, Prp2IsTheSecondPage) {
  ASSERT_TRUE(map(m.a(0) + 0x800, m.a(5), 4096));
  ASSERT_EQ(out.size(), 2u);
  expect_iov(0, m.a(0) + 0x800, 2048);
  expect_iov(1, m.a(5), 2048);
}

TEST_F(NvmePrpTest, Prp2PageMustHaveNoOffset) {
  expect_error(kPrpOffsetInvalid, m.a(0), m.a(5) + 8, 8192);
}

TEST_F(NvmePrpTest, AdjacentPagesMerge) {
  ASSERT_TRUE(map(m.a(1), m.a(2), 8192));
  ASSERT_EQ(out.size(), 1u);
  expect_iov(0, m.a(1), 8192);
}

TEST_F(NvmePrpTest, HostAdjacentRegionsMerge) {
  // The last page of region A and the first of B are far apart in guest-physical space but
  // contiguous in the host buffer: one iovec.
  ASSERT_TRUE(map(m.a(NvmeTestMemory::kAPages - 1), m.b(0), 8192));
  ASSERT_EQ(out.size(), 1u);
  expect_iov(0, m.a(NvmeTestMemory::kAPages - 1), 8192);
}

TEST_F(NvmePrpTest, OnePageList) {
  m.put_list(m.a(10), {m.a(2), m.a(4), m.a(3), m.a(6)});
  ASSERT_TRUE(map(m.a(0), m.a(10), 4 * kPage + 100));
  ASSERT_EQ(out.size(), 5u);
  expect_iov(0, m.a(0), 4096);
  expect_iov(1, m.a(2), 4096);
  expect_iov(2, m.a(4), 4096);
  expect_iov(3, m.a(3), 4096);
  expect_iov(4, m.a(6), 100);
}

TEST_F(NvmePrpTest, ListEntriesPastTheLengthAreNotRead) {
  // Garbage (a misaligned address) after the two entries the transfer needs is never looked at.
  m.put_list(m.a(10), {m.a(1), m.a(2), m.a(4) + 1, 0xFFFFFFFFFFFFFFFF});
  ASSERT_TRUE(map(m.a(0) + 0x200, m.a(10), 3 * kPage - 0x200));
  ASSERT_EQ(out.size(), 1u);  // a(0)+0x200 .. the end of a(2), all adjacent
  EXPECT_EQ(total(), 3 * kPage - 0x200);
}

TEST_F(NvmePrpTest, ListPointerMayHaveDwordOffset) {
  m.put_list(m.a(10) + 0x204, {m.a(4), m.a(2)});
  ASSERT_TRUE(map(m.a(0), m.a(10) + 0x204, 3 * kPage));
  ASSERT_EQ(out.size(), 3u);
  expect_iov(1, m.a(4), 4096);
  expect_iov(2, m.a(2), 4096);
}

TEST_F(NvmePrpTest, ListPointerMustBeDwordAligned) {
  m.put_list(m.a(10) + 0x202, {m.a(4), m.a(2)});
  expect_error(kPrpOffsetInvalid, m.a(0), m.a(10) + 0x202, 3 * kPage);
}

TEST_F(NvmePrpTest, ListPointerWhoseEntryWouldStraddleAPage) {
  expect_error(kPrpOffsetInvalid, m.a(0), m.a(10) + kPage - 4, 3 * kPage);
}

TEST_F(NvmePrpTest, MisalignedListEntry) {
  m.put_list(m.a(10), {m.a(4), m.a(2) + 0x200});
  expect_error(kPrpOffsetInvalid, m.a(0), m.a(10), 3 * kPage);
}

TEST_F(NvmePrpTest, ListEntryOutsideRam) {
  m.put_list(m.a(10), {m.a(4), NvmeTestMemory::kOutside});
  expect_error(kDataTransferError, m.a(0), m.a(10), 3 * kPage);
}

TEST_F(NvmePrpTest, ListPageOutsideRam) {
  expect_error(kDataTransferError, m.a(0), NvmeTestMemory::kOutside, 3 * kPage);
}

TEST_F(NvmePrpTest, PagesOutsideRam) {
  expect_error(kDataTransferError, NvmeTestMemory::kOutside, 0, 512);
  expect_error(kDataTransferError, m.a(0), NvmeTestMemory::kOutside, 8192);
  // Past the end of region A (the next guest page is not RAM).
  expect_error(kDataTransferError, m.a(NvmeTestMemory::kAPages), 0, 512);
}

TEST_F(NvmePrpTest, PageStraddlingTwoRegions) {
  // C and D are guest-adjacent halves of one page, but separate regions.
  expect_error(kDataTransferError, NvmeTestMemory::kC, 0, 4096);
  ASSERT_TRUE(map(NvmeTestMemory::kC, 0, 2048));
  ASSERT_TRUE(map(NvmeTestMemory::kD, 0, 2048));
}

TEST_F(NvmePrpTest, AddressesNearTheTopOfTheAddressSpace) {
  expect_error(kDataTransferError, 0xFFFFFFFFFFFFF000, 0, 4096);
  expect_error(kDataTransferError, 0xFFFFFFFFFFFFFFFC, 0, 4);
  expect_error(kDataTransferError, m.a(0), 0xFFFFFFFFFFFFF000, 8192);
  expect_error(kDataTransferError, m.a(0), 0xFFFFFFFFFFFFFFF8, 3 * kPage);
}

TEST_F(NvmePrpTest, ChainedList) {
  // 600 list entries: 511 in the first list page, its last entry chains to a second page.
  limits.max_transfer_bytes = 4 * MiB;
  std::vector<uint64_t> first(511, m.a(2));
  first.push_back(m.b(0));
  m.put_list(m.a(10), first);
  m.put_list(m.b(0), std::vector<uint64_t>(89, m.a(4)));
  ASSERT_TRUE(map(m.a(0), m.a(10), 601 * kPage));
  ASSERT_EQ(out.size(), 601u);
  EXPECT_EQ(total(), 601 * kPage);
  expect_iov(511, m.a(2), 4096);
  expect_iov(512, m.a(4), 4096);
  expect_iov(600, m.a(4), 4096);
}

TEST_F(NvmePrpTest, ChainedListPointerMustHaveNoOffset) {
  limits.max_transfer_bytes = 4 * MiB;
  std::vector<uint64_t> first(511, m.a(2));
  first.push_back(m.b(0) + 8);
  m.put_list(m.a(10), first);
  expect_error(kPrpOffsetInvalid, m.a(0), m.a(10), 601 * kPage);
}

TEST_F(NvmePrpTest, ListPointerAtThePagesLastEntryChainsAtOnce) {
  // PRP2 points at the last entry of a page: that entry is the next list's address.
  m.put_u64(m.a(10) + kPage - 8, m.a(11));
  m.put_list(m.a(11), {m.a(4), m.a(6)});
  ASSERT_TRUE(map(m.a(0), m.a(10) + kPage - 8, 3 * kPage));
  ASSERT_EQ(out.size(), 3u);
  expect_iov(1, m.a(4), 4096);
  expect_iov(2, m.a(6), 4096);
}

TEST_F(NvmePrpTest, SelfReferencingListEndsByLength) {
  // A list page whose last entry points back at itself: the walk re-reads it until the length
  // is covered, then stops (16 MiB = 4096 pages, 9 trips round the loop).
  limits.max_transfer_bytes = 16 * MiB;
  std::vector<uint64_t> list(511, m.a(2));
  list.push_back(m.a(10));
  m.put_list(m.a(10), list);
  ASSERT_TRUE(map(m.a(0), m.a(10), 16 * MiB));
  EXPECT_EQ(total(), 16 * MiB);
  EXPECT_EQ(out.size(), 4096u);
  EXPECT_LE(out.size(), limits.max_transfer_bytes / kPage + 1);
}

TEST_F(NvmePrpTest, MaximumTransferWithOffsetPrp1) {
  // 512 KiB starting 4 bytes into a page: 129 pages, no two adjacent (at most MDTS/page + 1).
  std::vector<uint64_t> list;
  for (int i = 0; i < 128; ++i) list.push_back(i % 2 ? m.a(2) : m.a(4));
  m.put_list(m.a(10), list);
  ASSERT_TRUE(map(m.a(0) + 4, m.a(10), limits.max_transfer_bytes));
  EXPECT_EQ(out.size(), 129u);
  EXPECT_EQ(out.size(), limits.max_transfer_bytes / kPage + 1);
  EXPECT_EQ(total(), limits.max_transfer_bytes);
  expect_iov(0, m.a(0) + 4, 4092);
  expect_iov(128, m.a(2), 4);
}

TEST_F(NvmePrpTest, OverMaximumOrEmptyIsInvalidField) {
  expect_error(kInvalidField, m.a(0), m.a(10), limits.max_transfer_bytes + 1);
  expect_error(kInvalidField, m.a(0), m.a(10), 0);
}

TEST_F(NvmePrpTest, LargerMemoryPageSize) {
  limits.page_size = 8192;
  m.put_list(m.a(10), {m.a(4), m.a(8)});
  ASSERT_TRUE(map(m.a(0) + 4096, m.a(10), 4096 + 2 * 8192));
  ASSERT_EQ(out.size(), 3u);
  expect_iov(0, m.a(0) + 4096, 4096);
  expect_iov(1, m.a(4), 8192);
  expect_iov(2, m.a(8), 8192);
  // List entries must be aligned to the memory page size, not just 4 KiB.
  m.put_list(m.a(10), {m.a(5), m.a(8)});
  expect_error(kPrpOffsetInvalid, m.a(0), m.a(10), 3 * 8192);
}

TEST_F(NvmePrpTest, InvalidPageSizeIsRefused) {
  limits.page_size = 3000;
  expect_error(kInternalError, m.a(0), 0, 512);
}

TEST_F(NvmePrpTest, WriteAndReadThroughAList) {
  m.put_list(m.a(10), {m.a(5), m.a(3)});
  std::vector<uint8_t> data(2 * kPage + 1000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  ASSERT_TRUE(write_prps(m.mem(), m.a(0) + 3096, m.a(10), data, limits));
  EXPECT_EQ(std::memcmp(m.host(m.a(0) + 3096), data.data(), 1000), 0);
  EXPECT_EQ(std::memcmp(m.host(m.a(5)), data.data() + 1000, kPage), 0);
  EXPECT_EQ(std::memcmp(m.host(m.a(3)), data.data() + 1000 + kPage, kPage), 0);
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(read_prps(m.mem(), m.a(0) + 3096, m.a(10), back, limits));
  EXPECT_EQ(back, data);
}

TEST_F(NvmePrpTest, WriteFailureLeavesTheGuestUntouched) {
  m.put_list(m.a(10), {m.a(5), NvmeTestMemory::kOutside});
  std::vector<uint8_t> data(3 * kPage, 0xAB);
  auto r = write_prps(m.mem(), m.a(0), m.a(10), data, limits);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), kDataTransferError);
  EXPECT_EQ(*m.host(m.a(0)), 0);
  EXPECT_EQ(*m.host(m.a(5)), 0);
}

}  // namespace
}  // namespace tern::nvme
