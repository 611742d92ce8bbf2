#include "virtio/block/block_request.h"

#include <gtest/gtest.h>

#include <cstring>

#include "virtio/block/virtio_blk_spec.h"

namespace tern::virtio {
namespace {

using Op = BlockRequest::Op;

// A chain over a local buffer: (offset, len, writable) pieces.
class RequestTest : public ::testing::Test {
 protected:
  std::vector<uint8_t> ram = std::vector<uint8_t>(8192);
  BlockLimits limits = [] {
    BlockLimits l;
    l.capacity_sectors = 16;
    l.discard = l.write_zeroes = true;
    l.max_discard_sectors = l.max_write_zeroes_sectors = 8;
    l.max_discard_seg = l.max_write_zeroes_seg = 2;
    return l;
  }();
  DescriptorChain chain(std::initializer_list<std::tuple<size_t, size_t, bool>> segs) {
    DescriptorChain c;
    for (auto [off, len, w] : segs) {
      c.segments.push_back(ChainSegment{off, std::span<uint8_t>(ram.data() + off, len), w});
      (w ? c.writable_bytes : c.readable_bytes) += len;
    }
    return c;
  }
  void header(uint32_t type, uint64_t sector, size_t at = 0) {
    VirtioBlkOuthdr h{type, 0, sector};
    std::memcpy(ram.data() + at, &h, sizeof h);
  }
};

TEST_F(RequestTest, ReadParsesDataAndStatus) {
  header(VIRTIO_BLK_T_IN, 3);
  auto r = parse_block_request(chain({{0, 16, false}, {1024, 512, true}, {2048, 1024, true},
                                      {4000, 1, true}}),
                               limits);
  EXPECT_EQ(r.op, Op::kIn);
  EXPECT_EQ(r.offset, 3 * 512u);
  EXPECT_EQ(r.len, 1536u);
  ASSERT_EQ(r.data.size(), 2u);
  EXPECT_EQ(r.status, ram.data() + 4000);
  EXPECT_EQ(r.success_used_len(), 1537u);
}

TEST_F(RequestTest, StatusSharesTheLastDataDescriptor) {
  header(VIRTIO_BLK_T_IN, 0);
  auto r = parse_block_request(chain({{0, 16, false}, {1024, 513, true}}), limits);
  EXPECT_EQ(r.op, Op::kIn);
  EXPECT_EQ(r.len, 512u);
  EXPECT_EQ(r.status, ram.data() + 1024 + 512);
  ASSERT_EQ(r.data.size(), 1u);
  EXPECT_EQ(r.data[0].iov_len, 512u);
}

TEST_F(RequestTest, HeaderSplitAndDataInHeaderDescriptor) {
  header(VIRTIO_BLK_T_OUT, 1, 100);
  auto r = parse_block_request(chain({{100, 1, false}, {101, 15, false}, {3000, 0, false},
                                      {2000, 512, false}, {4000, 1, true}}),
                               limits);
  EXPECT_EQ(r.op, Op::kOut);
  EXPECT_EQ(r.offset, 512u);
  // Header and data in one readable descriptor.
  header(VIRTIO_BLK_T_OUT, 2, 0);
  r = parse_block_request(chain({{0, 16 + 512, false}, {4000, 1, true}}), limits);
  EXPECT_EQ(r.op, Op::kOut);
  ASSERT_EQ(r.data.size(), 1u);
  EXPECT_EQ(r.data[0].iov_base, ram.data() + 16);
}

TEST_F(RequestTest, Refusals) {
  header(VIRTIO_BLK_T_IN, 0);
  auto expect = [&](uint32_t type, uint64_t sector, DescriptorChain c, uint8_t status) {
    header(type, sector);
    auto r = parse_block_request(c, limits);
    EXPECT_EQ(r.op, Op::kNone) << type << " " << sector;
    EXPECT_EQ(r.status_value, status) << (r.problem ? r.problem : "");
    EXPECT_TRUE(r.data.empty());
  };
  expect(VIRTIO_BLK_T_IN, 16, chain({{0, 16, false}, {1024, 512, true}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);
  expect(VIRTIO_BLK_T_IN, 15, chain({{0, 16, false}, {1024, 1024, true}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);
  expect(VIRTIO_BLK_T_IN, UINT64_MAX, chain({{0, 16, false}, {1024, 512, true}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);
  expect(VIRTIO_BLK_T_IN, 0, chain({{0, 16, false}, {1024, 100, true}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);
  expect(VIRTIO_BLK_T_OUT, 0, chain({{0, 16, false}, {1024, 512, true}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);  // data in the wrong direction
  expect(VIRTIO_BLK_T_GET_ID, 0, chain({{0, 16, false}, {1024, 19, true}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);
  expect(VIRTIO_BLK_T_GET_LIFETIME, 0, chain({{0, 16, false}, {4000, 1, true}}),
         VIRTIO_BLK_S_UNSUPP);
  expect(VIRTIO_BLK_T_OUT, 0, chain({{0, 8, false}, {4000, 1, true}}), VIRTIO_BLK_S_IOERR);
  limits.read_only = true;
  expect(VIRTIO_BLK_T_OUT, 0, chain({{0, 16, false}, {1024, 512, false}, {4000, 1, true}}),
         VIRTIO_BLK_S_IOERR);
  expect(VIRTIO_BLK_T_DISCARD, 0, chain({{0, 32, false}, {4000, 1, true}}), VIRTIO_BLK_S_IOERR);
  limits.read_only = false;
  limits.discard = false;
  std::memset(ram.data() + 16, 0, 16);
  expect(VIRTIO_BLK_T_DISCARD, 0, chain({{0, 32, false}, {4000, 1, true}}), VIRTIO_BLK_S_UNSUPP);
}

TEST_F(RequestTest, MissingStatus) {
  header(VIRTIO_BLK_T_FLUSH, 0);
  auto r = parse_block_request(chain({{0, 16, false}}), limits);
  EXPECT_EQ(r.op, Op::kNone);
  EXPECT_EQ(r.status, nullptr);
  EXPECT_EQ(r.success_used_len(), 0u);
  r = parse_block_request(chain({{0, 16, false}, {4000, 0, true}}), limits);
  EXPECT_EQ(r.status, nullptr);
}

TEST_F(RequestTest, DiscardSegments) {
  header(VIRTIO_BLK_T_DISCARD, 0);
  VirtioBlkDiscardWriteZeroes segs[2] = {{2, 4, 0}, {10, 0, 0}};
  std::memcpy(ram.data() + 16, segs, sizeof segs);
  auto r = parse_block_request(chain({{0, 48, false}, {4000, 1, true}}), limits);
  ASSERT_EQ(r.op, Op::kDiscard);
  ASSERT_EQ(r.ranges.size(), 1u);  // zero-sector segment dropped
  EXPECT_EQ(r.ranges[0].offset, 1024u);
  EXPECT_EQ(r.ranges[0].len, 2048u);
  segs[1] = {14, 4, 0};  // past the end (16 sectors)
  std::memcpy(ram.data() + 16, segs, sizeof segs);
  EXPECT_EQ(parse_block_request(chain({{0, 48, false}, {4000, 1, true}}), limits).status_value,
            VIRTIO_BLK_S_IOERR);
  segs[1] = {0, 9, 0};  // larger than max_discard_sectors
  std::memcpy(ram.data() + 16, segs, sizeof segs);
  EXPECT_EQ(parse_block_request(chain({{0, 48, false}, {4000, 1, true}}), limits).status_value,
            VIRTIO_BLK_S_IOERR);
  header(VIRTIO_BLK_T_WRITE_ZEROES, 0);
  segs[0] = {0, 8, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP};
  std::memcpy(ram.data() + 16, segs, 16);
  r = parse_block_request(chain({{0, 32, false}, {4000, 1, true}}), limits);
  ASSERT_EQ(r.op, Op::kWriteZeroes);
  EXPECT_TRUE(r.ranges[0].unmap);
}

TEST_F(RequestTest, SizeMaxAndSegMaxAreEnforced) {
  // The advertised limits (§5.2.4): the old parser only stopped at UINT32_MAX bytes / IOV_MAX.
  limits.size_max = 1024;
  limits.seg_max = 2;
  header(VIRTIO_BLK_T_OUT, 0);
  auto r =
      parse_block_request(chain({{0, 16, false}, {1024, 1536, false}, {4000, 1, true}}), limits);
  EXPECT_EQ(r.op, Op::kNone);
  EXPECT_EQ(r.status_value, VIRTIO_BLK_S_IOERR);
  EXPECT_TRUE(r.over_limits);
  r = parse_block_request(chain({{0, 16, false},
                                 {1024, 512, false},
                                 {1024, 512, false},
                                 {1024, 512, false},
                                 {4000, 1, true}}),
                          limits);
  EXPECT_EQ(r.op, Op::kNone);
  EXPECT_TRUE(r.over_limits);
  header(VIRTIO_BLK_T_IN, 0);
  r = parse_block_request(
      chain({{0, 16, false}, {1024, 1024, true}, {2048, 1024, true}, {4000, 1, true}}), limits);
  EXPECT_EQ(r.op, Op::kIn);  // at both limits exactly
  EXPECT_FALSE(r.over_limits);
  // A request over the limits that is refused for another reason first is not counted as one.
  header(VIRTIO_BLK_T_OUT, 100);
  r = parse_block_request(chain({{0, 16, false}, {1024, 2048, false}, {4000, 1, true}}), limits);
  EXPECT_EQ(r.op, Op::kNone);
  EXPECT_FALSE(r.over_limits);
}

}  // namespace
}  // namespace tern::virtio
