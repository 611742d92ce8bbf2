// NvmeController snapshots taken while a hostile guest rings doorbells: out-of-range shadow and
// MMIO values written just before the save, INTx with shadow doorbells, Volatile Write Cache off
// across the restore.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "block/testing/recording_io_engine.h"
#include "nvme/nvme_controller.h"
#include "nvme/testing/nvme_test_driver.h"

namespace tern::nvme {
namespace {

using testing::NvmeTestDriver;
using testing::NvmeTestMachine;
using Kind = IoOp::Kind;

constexpr uint64_t kShadowGpa = 0x60000;

void write_u32(NvmeTestMachine& m, uint64_t gpa, uint32_t v) {
  std::memcpy(m.ram + gpa, &v, 4);
}

// INTx, shadow doorbells, WCE 0. Just before the save the guest writes an SQ tail past the ring
// into the shadow page (and rings its ioeventfd), a CQ head past the ring into the shadow page,
// and MMIO CQ/SQ doorbells past the ring. The restored controller flags them as on the live
// path, reads nothing outside the rings, keeps WCE 0 (writes flushed) and serves I/O once the
// guest writes sane values again.
TEST(NvmeSnapshotAttack, OutOfRangeDoorbellsJustBeforeTheSave) {
  NvmeTestMachine m;
  snap::ByteWriter w;
  testing::NvmeHostQueue admin, q;
  {
    NvmeTestDriver d(m);
    ASSERT_TRUE(d.enable(8));
    q = d.create_pair(1, 8, 0);
    ASSERT_EQ(d.doorbell_buffer_config(kShadowGpa), kSuccess);
    q.shadow = true;
    ASSERT_EQ(
        d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = kFeatVolatileWriteCache, .cdw11 = 0}),
        kSuccess);
    std::memset(d.data(), 0x19, 4096);
    for (uint32_t i = 0; i < 5; ++i) {
      d.submit(q, {.opcode = kIoWrite, .nsid = 1, .prp1 = testing::kNvmeDataGpa, .cdw10 = i});
      ASSERT_TRUE(tern::testing::eventually([&] { return m.intx_level(); }));
      auto e = d.reap_shadow(q);
      ASSERT_TRUE(e);
      ASSERT_EQ(testing::nvme_cqe_status(*e), kSuccess);
    }
    d.fn().quiesce();
    write_u32(m, kShadowGpa + shadow_offset(1, false), 0xFFFF);
    write_u32(m, kShadowGpa + shadow_offset(1, true), 1000);
    d.signal_ioeventfd(doorbell_offset(1, false));
    d.bar_write32(doorbell_offset(1, true), 77);
    d.bar_write32(doorbell_offset(1, false), 9);
    d.fn().save_state(w);
    d.fn().unquiesce();
    admin = d.admin();
  }
  auto log = std::make_shared<std::vector<Kind>>();
  auto mu = std::make_shared<std::mutex>();
  NvmeTestDriver d2(m, {}, tern::testing::recording_thread_pool_engines(log, mu));
  d2.set_shadow_gpa(kShadowGpa);
  snap::ByteReader r(w.data(), "test");
  auto restored = d2.fn().restore_state(r);
  ASSERT_TRUE(restored) << restored.error().message();
  d2.admin() = admin;
  EXPECT_TRUE(tern::testing::eventually([&] { return d2.counter("invalid_doorbells") >= 2; }))
      << d2.counter("invalid_doorbells");
  // The guest repairs its shadow values.
  write_u32(m, kShadowGpa + shadow_offset(1, true), q.cq_head);
  std::memset(d2.data(), 0x2A, 4096);
  {
    std::lock_guard lock(*mu);
    log->clear();
  }
  d2.submit(q, {.opcode = kIoWrite, .nsid = 1, .prp1 = testing::kNvmeDataGpa, .cdw10 = 20});
  ASSERT_TRUE(tern::testing::eventually([&] { return m.intx_level(); }));
  auto e = d2.reap_shadow(q);
  ASSERT_TRUE(e);
  EXPECT_EQ(testing::nvme_cqe_status(*e), kSuccess);
  EXPECT_TRUE(tern::testing::eventually([&] { return !m.intx_level(); }));
  {
    std::lock_guard lock(*mu);
    EXPECT_EQ(*log, (std::vector<Kind>{Kind::kWrite, Kind::kFdatasync}));
  }
  EXPECT_EQ(m.image_bytes(20 * 512, 512), std::vector<uint8_t>(512, 0x2A));
}

// INTx and shadow doorbells, three CQs on the one line: the admin CQ, CQ 1 (IEN 1) and CQ 2
// (IEN 0, polled; the host leaves its entries there). The polled CQ never holds the line up; CQ 1
// raises it and drops it after each batch the host consumes, whatever the other queues hold.
TEST(NvmeSnapshotAttack, IntxSharedLineWithAPolledQueue) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable(8));
  auto level = [&] { return m.intx_level(); };
  auto q1 = d.create_pair(1, 8, 0);
  ASSERT_EQ(d.create_cq(2, 8, 0, /*flags=*/1), kSuccess);  // PC 1, IEN 0
  ASSERT_EQ(d.create_sq(2, 8, 2), kSuccess);
  testing::NvmeHostQueue q2{.qid = 2,
                            .sq_gpa = testing::nvme_io_sq_gpa(2),
                            .cq_gpa = testing::nvme_io_cq_gpa(2),
                            .entries = 8};
  ASSERT_EQ(d.doorbell_buffer_config(kShadowGpa), kSuccess);
  EXPECT_FALSE(level());
  q1.shadow = q2.shadow = true;
  for (uint32_t i = 0; i < 3; ++i) d.submit(q2, {.opcode = kIoFlush, .nsid = 1});
  testing::NvmeHostQueue peek = q2;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(d.consume(peek));  // posted, left unconsumed
  EXPECT_FALSE(level());
  for (uint32_t i = 0; i < 20; ++i) {
    SCOPED_TRACE("command " + std::to_string(i));
    d.submit(q1, {.opcode = kIoFlush, .nsid = 1});
    ASSERT_TRUE(tern::testing::eventually(level));
    auto e = d.reap_shadow(q1);
    ASSERT_TRUE(e);
    ASSERT_TRUE(tern::testing::eventually([&] { return !level(); }));
    if (i % 5 == 0) {
      ASSERT_EQ(d.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
    }
    EXPECT_FALSE(level());
  }
}

// A snapshot taken before save() took the MMIO doorbells into the rings (an older tern): the
// host consumed a full CQ and rang its head doorbell just before the VM paused, after the worker
// last read it. The worker's saved CQ head is the old one; the controller's INTx copy of the
// head (saved too) has the doorbell. Restored, the worker must not wait for room the host gave
// already: the host has nothing left to consume and will not ring again.
TEST(NvmeSnapshotAttack, OlderSnapshotWithAStaleCqHeadDoesNotStall) {
  NvmeTestMachine m;
  snap::ByteWriter w;
  testing::NvmeHostQueue admin, q;
  {
    NvmeTestDriver d(m);
    ASSERT_TRUE(d.enable(8));
    ASSERT_EQ(d.create_cq(1, 4, 0), kSuccess);
    ASSERT_EQ(d.create_sq(1, 8, 1), kSuccess);
    q = testing::NvmeHostQueue{.qid = 1,
                               .sq_gpa = testing::nvme_io_sq_gpa(1),
                               .cq_gpa = testing::nvme_io_cq_gpa(1),
                               .entries = 4};
    testing::NvmeHostQueue sq = q;
    sq.entries = 8;
    for (int i = 0; i < 4; ++i) d.submit(sq, {.opcode = kIoFlush, .nsid = 1});
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(d.consume(q));  // the CQ is full: the 4th waits
    d.fn().quiesce();
    d.bar_write32(doorbell_offset(1, true), q.cq_head);  // rung just before the pause
    d.fn().save_state(w);
    admin = d.admin();
  }  // destroyed quiesced: it posts nothing more into the RAM the restored one shares
  // What an older tern saved: the worker's CQ head as it last read it (0).
  std::vector<uint8_t> bytes(w.data().begin(), w.data().end());
  uint8_t cq_record[10];
  const uint16_t qid = 1;
  const uint64_t gpa = testing::nvme_io_cq_gpa(1);
  std::memcpy(cq_record, &qid, 2);
  std::memcpy(cq_record + 2, &gpa, 8);
  auto at = std::search(bytes.begin(), bytes.end(), cq_record, cq_record + 10);
  ASSERT_NE(at, bytes.end());
  // qid, gpa, entries, vector, IEN, SQ count, one SQ (qid, gpa, entries), blob length: CQ head.
  const size_t head_at = (at - bytes.begin()) + 2 + 8 + 4 + 2 + 1 + 1 + (2 + 8 + 4) + 4;
  uint32_t saved_head;
  std::memcpy(&saved_head, bytes.data() + head_at, 4);
  ASSERT_EQ(saved_head, 3u);
  const uint32_t stale = 0;
  std::memcpy(bytes.data() + head_at, &stale, 4);

  NvmeTestDriver d2(m);
  snap::ByteReader r(bytes, "test");
  auto restored = d2.fn().restore_state(r);
  ASSERT_TRUE(restored) << restored.error().message();
  d2.admin() = admin;
  auto e = d2.consume(q);  // the 4th completion, with no further doorbell from the host
  ASSERT_TRUE(e);
  EXPECT_EQ(testing::nvme_cqe_status(*e), kSuccess);
}

// With MSI-X on and shadow doorbells the host rings the MMIO CQ head doorbell only when EventIdx
// asks, and the worker reported shadow heads only while INTx is in use: the controller's INTx
// copy of the CQ's phase went stale after a lap. A guest that then turns MSI-X off without a
// controller reset (Linux resets first; another guest may not) got no INTx for its next
// completion. The worker now hands the controller its head and phase at each INTx signal.
TEST(NvmeSnapshotAttack, MsixOffWithoutResetAfterShadowLapsKeepsIntx) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  d.enable_msix(2);
  ASSERT_TRUE(d.enable(8));
  auto q = d.create_pair(1, 8, 1);
  ASSERT_EQ(d.doorbell_buffer_config(kShadowGpa), kSuccess);
  q.shadow = true;
  for (uint32_t i = 0; i < 9; ++i) {  // one lap and one entry
    d.submit(q, {.opcode = kIoFlush, .nsid = 1});
    ASSERT_TRUE(d.reap_shadow(q));
  }
  const uint8_t cap = d.msix_cap();
  d.cfg_write16(cap + 2, static_cast<uint16_t>((d.cfg_read32(cap) >> 16) & ~0x8000u));
  EXPECT_FALSE(m.intx_level());
  d.submit(q, {.opcode = kIoFlush, .nsid = 1});
  EXPECT_TRUE(tern::testing::eventually([&] { return m.intx_level(); }));
  EXPECT_TRUE(d.reap_shadow(q));
}

}  // namespace
}  // namespace tern::nvme
