// SubmissionRing / CompletionRing / ShadowDoorbells over a plain buffer as guest RAM.
#include "nvme/nvme_queue.h"

#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace tern::nvme {
namespace {

class NvmeQueueTest : public ::testing::Test {
 protected:
  NvmeQueueTest()
      : ram_(64 * 1024, 0), mem_(GuestMemory::wrap({MemoryRegion{0, ram_.size(), ram_.data(), 0}})) {}
  template <class T>
  T at(uint64_t gpa) {
    T v;
    std::memcpy(&v, ram_.data() + gpa, sizeof v);
    return v;
  }
  template <class T>
  void put(uint64_t gpa, const T& v) {
    std::memcpy(ram_.data() + gpa, &v, sizeof v);
  }

  std::vector<uint8_t> ram_;
  GuestMemory mem_;
};

TEST_F(NvmeQueueTest, RingInRamChecksAlignmentAndBounds) {
  EXPECT_TRUE(ring_in_ram(mem_, 0x1000, 64, kSqEntryShift, 4096));
  EXPECT_TRUE(ring_in_ram(mem_, 0xF000, 256, kCqEntryShift, 4096));  // ends exactly at the end
  EXPECT_FALSE(ring_in_ram(mem_, 0xF000, 257, kCqEntryShift, 4096));
  EXPECT_FALSE(ring_in_ram(mem_, 0x1080, 2, kSqEntryShift, 4096));   // not page aligned
  EXPECT_FALSE(ring_in_ram(mem_, 0x10000, 2, kSqEntryShift, 4096));  // not RAM
  EXPECT_FALSE(ring_in_ram(mem_, 0x1000, 65536, kSqEntryShift, 4096));
  EXPECT_FALSE(ring_in_ram(mem_, ~uint64_t{0} & ~uint64_t{0xFFF}, 64, kSqEntryShift, 4096));
}

TEST_F(NvmeQueueTest, RingInRamRefusesARingStraddlingTwoRegions) {
  std::vector<uint8_t> a(8192), b(8192);
  auto mem = GuestMemory::wrap(
      {MemoryRegion{0, a.size(), a.data(), 0}, MemoryRegion{8192, b.size(), b.data(), 8192}});
  EXPECT_TRUE(ring_in_ram(mem, 4096, 64, kSqEntryShift, 4096));
  EXPECT_FALSE(ring_in_ram(mem, 4096, 128, kSqEntryShift, 4096));
}

TEST_F(NvmeQueueTest, SubmissionRingFetchesInOrderAndWraps) {
  SubmissionRing sq(mem_, SqConfig{1, 0x1000, 4, 1});
  for (uint16_t i = 0; i < 4; ++i) {
    SubmissionEntry e{};
    e.opcode = kIoRead;
    e.cid = static_cast<uint16_t>(100 + i);
    put(0x1000 + i * 64u, e);
  }
  SubmissionEntry out{};
  EXPECT_FALSE(sq.fetch(out));
  EXPECT_FALSE(sq.set_tail(4));  // ≥ entries: ignored
  EXPECT_EQ(sq.tail(), 0u);
  ASSERT_TRUE(sq.set_tail(3));
  EXPECT_EQ(sq.pending(), 3u);
  for (uint16_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(sq.fetch(out));
    EXPECT_EQ(out.cid, 100 + i);
  }
  EXPECT_FALSE(sq.fetch(out));
  ASSERT_TRUE(sq.set_tail(1));  // wraps: entries 3, 0
  EXPECT_EQ(sq.pending(), 2u);
  ASSERT_TRUE(sq.fetch(out));
  EXPECT_EQ(out.cid, 103);
  ASSERT_TRUE(sq.fetch(out));
  EXPECT_EQ(out.cid, 100);
  EXPECT_EQ(sq.head(), 1u);
}

TEST_F(NvmeQueueTest, CompletionRingPostsWithPhaseAndFlipsItOnWrap) {
  CompletionRing cq(mem_, CqConfig{1, 0x2000, 3, 1, true});
  EXPECT_EQ(cq.free(), 2u);
  EXPECT_TRUE(cq.phase());
  CompletionEntry e{};
  e.cid = 7;
  e.sq_id = 1;
  e.sq_head = 5;
  e.status = kLbaOutOfRange.field(false);
  cq.post(e);
  auto got = at<CompletionEntry>(0x2000);
  EXPECT_EQ(got.cid, 7);
  EXPECT_EQ(got.sq_id, 1);
  EXPECT_EQ(got.sq_head, 5);
  EXPECT_EQ(got.status, kLbaOutOfRange.field(true));
  EXPECT_EQ(cq.free(), 1u);
  cq.post(e);
  EXPECT_EQ(cq.free(), 0u);
  EXPECT_FALSE(cq.set_head(3));
  ASSERT_TRUE(cq.set_head(2));
  cq.post(e);  // slot 2, then tail wraps to 0 and the phase flips
  EXPECT_EQ(cq.tail(), 0u);
  EXPECT_FALSE(cq.phase());
  e.status = kSuccess.field(true);  // the caller's phase bit is replaced by the ring's
  cq.post(e);
  EXPECT_EQ(at<CompletionEntry>(0x2000).status, 0);
  EXPECT_EQ(at<CompletionEntry>(0x2020).status & 1, 1);
}

TEST_F(NvmeQueueTest, RingsSaveAndRestorePositions) {
  SubmissionRing sq(mem_, SqConfig{2, 0x1000, 8, 2});
  ASSERT_TRUE(sq.set_tail(5));
  SubmissionEntry out{};
  ASSERT_TRUE(sq.fetch(out));
  CompletionRing cq(mem_, CqConfig{2, 0x2000, 4, 2, true});
  for (int i = 0; i < 3; ++i) cq.post(CompletionEntry{});
  ASSERT_TRUE(cq.set_head(3));
  cq.post(CompletionEntry{});
  snap::ByteWriter w;
  sq.save(w);
  cq.save(w);

  SubmissionRing sq2(mem_, SqConfig{2, 0x1000, 8, 2});
  CompletionRing cq2(mem_, CqConfig{2, 0x2000, 4, 2, true});
  snap::ByteReader r(w.data(), "test");
  ASSERT_TRUE(sq2.restore(r));
  ASSERT_TRUE(cq2.restore(r));
  EXPECT_TRUE(r.expect_end());
  EXPECT_EQ(sq2.head(), 1u);
  EXPECT_EQ(sq2.tail(), 5u);
  EXPECT_EQ(cq2.head(), 3u);
  EXPECT_EQ(cq2.tail(), 0u);
  EXPECT_FALSE(cq2.phase());

  // A smaller queue cannot take these positions.
  SubmissionRing small(mem_, SqConfig{2, 0x1000, 4, 2});
  snap::ByteReader r2(w.data(), "test");
  auto bad = small.restore(r2);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("outside a queue of 4 entries"), std::string::npos);
  snap::ByteReader truncated(std::span<const uint8_t>(w.data().data(), 3), "test");
  EXPECT_FALSE(sq2.restore(truncated));
}

TEST_F(NvmeQueueTest, ShadowDoorbellsUseTheDoorbellLayout) {
  ShadowDoorbells none;
  EXPECT_FALSE(none.enabled());
  EXPECT_FALSE(none.read_shadow(mem_, 1, false));
  none.write_eventidx(mem_, 1, false, 9);  // nothing configured: nothing written

  ShadowDoorbells s{0x4000, 0x5000};
  ASSERT_TRUE(s.enabled());
  put<uint32_t>(0x4000 + shadow_offset(3, false), 17);
  put<uint32_t>(0x4000 + shadow_offset(3, true), 4);
  EXPECT_EQ(s.read_shadow(mem_, 3, false), 17u);
  EXPECT_EQ(s.read_shadow(mem_, 3, true), 4u);
  s.write_eventidx(mem_, 3, false, 21);
  s.write_eventidx(mem_, 3, true, 2);
  EXPECT_EQ(at<uint32_t>(0x5000 + 3 * 8), 21u);
  EXPECT_EQ(at<uint32_t>(0x5000 + 3 * 8 + 4), 2u);

  // A page that is not RAM (possible only after a hostile remap) reads as "no new value".
  ShadowDoorbells outside{0x100000, 0x101000};
  EXPECT_FALSE(outside.read_shadow(mem_, 1, false));
  outside.write_eventidx(mem_, 1, false, 1);
}

}  // namespace
}  // namespace tern::nvme
