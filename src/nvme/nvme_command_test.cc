#include "nvme/nvme_command.h"

#include <gtest/gtest.h>

#include "nvme/testing/nvme_test_memory.h"

namespace tern::nvme {
namespace {

using Kind = BlockOp::Kind;
using testing::NvmeTestMemory;
constexpr uint64_t kPage = NvmeTestMemory::kPage;

class NvmeCommandTest : public ::testing::Test {
 protected:
  NvmeTestMemory m;
  NamespaceInfo ns{.size_lbas = 1024, .lba_shift = 9, .read_only = false, .discard = true};
  PrpLimits limits;

  static SubmissionEntry sqe(uint8_t opcode, uint64_t slba = 0, uint32_t nlb0 = 0) {
    SubmissionEntry e{};
    e.opcode = opcode;
    e.cid = 0x1234;
    e.nsid = 1;
    e.cdw10 = static_cast<uint32_t>(slba);
    e.cdw11 = static_cast<uint32_t>(slba >> 32);
    e.cdw12 = nlb0;
    e.prp1 = NvmeTestMemory::a(0);
    e.prp2 = NvmeTestMemory::a(1);
    return e;
  }
  static SubmissionEntry dsm(uint32_t nr0, bool deallocate) {
    SubmissionEntry e = sqe(kIoDatasetManagement);
    e.cdw10 = nr0;
    e.cdw11 = deallocate ? kDsmAttrDeallocate : 0;
    return e;
  }
  tl::expected<IoRequest, Status> parse(const SubmissionEntry& e) {
    return parse_io_command(m.mem(), e, ns, limits);
  }
  void expect_status(const SubmissionEntry& e, Status s) {
    auto r = parse(e);
    ASSERT_FALSE(r.has_value()) << "opcode " << int{e.opcode};
    EXPECT_EQ(r.error(), s) << "opcode " << int{e.opcode};
  }
};

TEST_F(NvmeCommandTest, ReadInBytes) {
  auto r = parse(sqe(kIoRead, 10, 7));  // 8 blocks
  ASSERT_TRUE(r) << r.error().value;
  EXPECT_EQ(r->op.kind, Kind::kRead);
  EXPECT_EQ(r->op.offset, 10u * 512);
  EXPECT_EQ(r->op.len, 4096u);
  ASSERT_EQ(r->op.iov.size(), 1u);
  EXPECT_EQ(r->op.iov[0].iov_base, m.host(NvmeTestMemory::a(0)));
  EXPECT_EQ(r->op.iov[0].iov_len, 4096u);
  EXPECT_EQ(r->cid, 0x1234);
  EXPECT_FALSE(r->fua);
  EXPECT_FALSE(r->nop);
}

TEST_F(NvmeCommandTest, WriteWithFuaSpanningTwoPages) {
  auto e = sqe(kIoWrite, 0, 15);  // 8 KiB
  e.cdw12 |= kCdw12Fua;
  auto r = parse(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op.kind, Kind::kWrite);
  EXPECT_EQ(r->op.len, 8192u);
  EXPECT_TRUE(r->fua);
  // A Read's FUA asks nothing of the queue.
  auto rd = sqe(kIoRead, 0, 0);
  rd.cdw12 |= kCdw12Fua;
  EXPECT_FALSE(parse(rd)->fua);
}

TEST_F(NvmeCommandTest, FourKiBLogicalBlocks) {
  ns.lba_shift = 12;
  ns.size_lbas = 128;
  auto r = parse(sqe(kIoRead, 3, 1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op.offset, 3u * 4096);
  EXPECT_EQ(r->op.len, 8192u);
}

TEST_F(NvmeCommandTest, LastBlocksOfTheNamespace) {
  EXPECT_TRUE(parse(sqe(kIoRead, 1016, 7)));
  expect_status(sqe(kIoRead, 1017, 7), kLbaOutOfRange);
  expect_status(sqe(kIoRead, 1024, 0), kLbaOutOfRange);
  expect_status(sqe(kIoWrite, 1024, 0), kLbaOutOfRange);
}

TEST_F(NvmeCommandTest, LbaNearTheTopOfTheAddressSpace) {
  expect_status(sqe(kIoRead, ~uint64_t{0}, 0), kLbaOutOfRange);
  expect_status(sqe(kIoRead, ~uint64_t{0} - 3, 7), kLbaOutOfRange);
  expect_status(sqe(kIoWriteZeroes, ~uint64_t{0}, 0xFFFF), kLbaOutOfRange);
  // A namespace description whose byte offsets would not fit 64 bits.
  ns.size_lbas = ~uint64_t{0};
  expect_status(sqe(kIoRead, uint64_t{1} << 60, 0), kLbaOutOfRange);
  expect_status(sqe(kIoWriteZeroes, uint64_t{1} << 60, 0), kLbaOutOfRange);
}

TEST_F(NvmeCommandTest, TransferLargerThanMdtsIsInvalidField) {
  // 1024 blocks = 512 KiB = MDTS: accepted (through a PRP list of 127 entries).
  std::vector<uint64_t> list(127, NvmeTestMemory::a(4));
  m.put_list(NvmeTestMemory::a(10), list);
  auto e = sqe(kIoRead, 0, 1023);
  e.prp2 = NvmeTestMemory::a(10);
  auto r = parse(e);
  ASSERT_TRUE(r) << r.error().value;
  EXPECT_EQ(r->op.len, 512u * 1024);
  EXPECT_EQ(r->op.iov.size(), 128u);
  ns.size_lbas = 1u << 20;
  expect_status(sqe(kIoRead, 0, 1024), kInvalidField);
  expect_status(sqe(kIoWrite, 0, 0xFFFF), kInvalidField);
}

TEST_F(NvmeCommandTest, PrpErrorsAreTheCommandsStatus) {
  auto e = sqe(kIoRead, 0, 7);
  e.prp1 = NvmeTestMemory::kOutside;
  expect_status(e, kDataTransferError);
  e.prp1 = NvmeTestMemory::a(0) + 1;
  expect_status(e, kPrpOffsetInvalid);
  e = sqe(kIoWrite, 0, 15);
  e.prp2 = NvmeTestMemory::a(1) + 512;
  expect_status(e, kPrpOffsetInvalid);
}

TEST_F(NvmeCommandTest, NamespaceIds) {
  for (uint32_t nsid : {0u, 2u, 0xFFFFFFFEu, 0xFFFFFFFFu}) {
    for (uint8_t op : {kIoRead, kIoWrite, kIoWriteZeroes, kIoDatasetManagement}) {
      auto e = sqe(op);
      e.nsid = nsid;
      expect_status(e, kInvalidNamespace);
    }
  }
  auto f = sqe(kIoFlush);
  f.nsid = 0xFFFFFFFF;
  EXPECT_TRUE(parse(f));
  f.nsid = 0;
  expect_status(f, kInvalidNamespace);
  f.nsid = 2;
  expect_status(f, kInvalidNamespace);
}

TEST_F(NvmeCommandTest, FusedAndSglCommandsAreInvalidField) {
  for (uint8_t op : {kIoFlush, kIoRead, kIoWrite, kIoWriteZeroes, kIoDatasetManagement}) {
    for (uint8_t flags : {0x01, 0x02, 0x40, 0x80, 0xC0}) {
      auto e = sqe(op);
      e.flags = flags;
      expect_status(e, kInvalidField);
    }
  }
}

TEST_F(NvmeCommandTest, UnknownOpcodes) {
  for (uint8_t op : {0x04, 0x05, 0x0C, 0x0D, 0x11, 0x7F, 0x80, 0xFF})
    expect_status(sqe(op), kInvalidOpcode);
  ns.discard = false;  // ONCS.DSM clear: Dataset Management is not a command tern knows
  expect_status(dsm(0, true), kInvalidOpcode);
  expect_status(dsm(0, false), kInvalidOpcode);
}

TEST_F(NvmeCommandTest, Flush) {
  auto r = parse(sqe(kIoFlush));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op.kind, Kind::kFlush);
  EXPECT_TRUE(r->op.iov.empty());
}

TEST_F(NvmeCommandTest, ReadOnlyNamespace) {
  ns.read_only = true;
  EXPECT_TRUE(parse(sqe(kIoRead, 0, 7)));
  EXPECT_TRUE(parse(sqe(kIoFlush)));
  expect_status(sqe(kIoWrite, 0, 7), kWriteToReadOnly);
  expect_status(sqe(kIoWriteZeroes, 0, 7), kWriteToReadOnly);
  expect_status(dsm(0, true), kWriteToReadOnly);
  auto hint = parse(dsm(0, false));  // attributes without deallocate change nothing
  ASSERT_TRUE(hint);
  EXPECT_TRUE(hint->nop);
}

TEST_F(NvmeCommandTest, WriteZeroes) {
  auto e = sqe(kIoWriteZeroes, 100, 899);  // 900 blocks
  auto r = parse(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op.kind, Kind::kWriteZeroes);
  ASSERT_EQ(r->op.ranges.size(), 1u);
  EXPECT_EQ(r->op.ranges[0].offset, 100u * 512);
  EXPECT_EQ(r->op.ranges[0].len, 900u * 512);
  EXPECT_FALSE(r->op.ranges[0].unmap);
  EXPECT_TRUE(r->op.iov.empty());
  e.cdw12 |= kCdw12Deac;
  r = parse(e);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->op.ranges[0].unmap);
  expect_status(sqe(kIoWriteZeroes, 125, 899), kLbaOutOfRange);
}

TEST_F(NvmeCommandTest, WriteZeroesIsNotBoundByMdts) {
  ns.size_lbas = 1u << 20;
  auto r = parse(sqe(kIoWriteZeroes, 0, 0xFFFF));  // 32 MiB, no data buffer
  ASSERT_TRUE(r);
  EXPECT_EQ(r->op.ranges[0].len, 65536u * 512);
}

TEST_F(NvmeCommandTest, DatasetManagementDeallocate) {
  m.put(NvmeTestMemory::a(0), DsmRange{0, 8, 0});
  m.put(NvmeTestMemory::a(0) + 16, DsmRange{0, 0, 100});  // zero length: skipped
  m.put(NvmeTestMemory::a(0) + 32, DsmRange{0xFFFFFFFF, 24, 1000});
  auto r = parse(dsm(2, true));
  ASSERT_TRUE(r) << r.error().value;
  EXPECT_EQ(r->op.kind, Kind::kDiscard);
  EXPECT_FALSE(r->nop);
  ASSERT_EQ(r->op.ranges.size(), 2u);
  EXPECT_EQ(r->op.ranges[0].offset, 0u);
  EXPECT_EQ(r->op.ranges[0].len, 8u * 512);
  EXPECT_EQ(r->op.ranges[1].offset, 1000u * 512);
  EXPECT_EQ(r->op.ranges[1].len, 24u * 512);
  EXPECT_FALSE(r->op.ranges[1].unmap);
}

TEST_F(NvmeCommandTest, DatasetManagementWithoutDeallocateIsNop) {
  auto e = dsm(255, false);
  e.cdw11 = 0x3;  // integral read + write hints
  e.prp1 = NvmeTestMemory::kOutside;  // never read
  auto r = parse(e);
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->nop);
  EXPECT_EQ(r->op.kind, Kind::kDiscard);
  EXPECT_TRUE(r->op.ranges.empty());
}

TEST_F(NvmeCommandTest, DatasetManagementOfNothingIsNop) {
  auto r = parse(dsm(0, true));  // the range at a(0) is all zeros: 0 blocks
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->nop);
}

TEST_F(NvmeCommandTest, DatasetManagementRangePastTheNamespace) {
  m.put(NvmeTestMemory::a(0), DsmRange{0, 8, 0});
  m.put(NvmeTestMemory::a(0) + 16, DsmRange{0, 2, 1023});
  expect_status(dsm(1, true), kLbaOutOfRange);
  m.put(NvmeTestMemory::a(0) + 16, DsmRange{0, 0xFFFFFFFF, ~uint64_t{0} - 5});
  expect_status(dsm(1, true), kLbaOutOfRange);
}

TEST_F(NvmeCommandTest, DatasetManagementAllRangesAcrossTwoPages) {
  // 256 ranges (4 KiB) starting half-way into PRP1's page: the rest comes from PRP2.
  uint64_t at = NvmeTestMemory::a(0) + 2048;
  for (uint64_t i = 0; i < kDsmMaxRanges; ++i)
    m.put(i < 128 ? at + 16 * i : NvmeTestMemory::b(3) + 16 * (i - 128),
          DsmRange{0, 1, static_cast<uint64_t>(i * 4)});
  auto e = dsm(255, true);
  e.prp1 = at;
  e.prp2 = NvmeTestMemory::b(3);
  auto r = parse(e);
  ASSERT_TRUE(r) << r.error().value;
  ASSERT_EQ(r->op.ranges.size(), kDsmMaxRanges);
  EXPECT_EQ(r->op.ranges[255].offset, 255u * 4 * 512);
  EXPECT_EQ(r->op.ranges[255].len, 512u);
}

TEST_F(NvmeCommandTest, DatasetManagementRangesOutsideRam) {
  auto e = dsm(0, true);
  e.prp1 = NvmeTestMemory::kOutside;
  expect_status(e, kDataTransferError);
  e.prp1 = NvmeTestMemory::a(0) + kPage - 16;  // 32 bytes: the second range is PRP2's
  e.cdw10 = 1;
  e.prp2 = NvmeTestMemory::kOutside;
  expect_status(e, kDataTransferError);
}

TEST_F(NvmeCommandTest, BlockStatusToNvme) {
  for (Kind k : {Kind::kRead, Kind::kWrite, Kind::kFlush, Kind::kDiscard, Kind::kWriteZeroes}) {
    EXPECT_EQ(block_status_to_nvme(k, BlockStatus::kOk), kSuccess);
    EXPECT_EQ(block_status_to_nvme(k, BlockStatus::kIoError), kInternalError);
    EXPECT_EQ(block_status_to_nvme(k, BlockStatus::kHostError),
              k == Kind::kRead ? kUnrecoveredReadError : kWriteFault);
  }
}

}  // namespace
}  // namespace tern::nvme
