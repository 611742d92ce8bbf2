// NvmeController under hostile CC sequences: shutdown and reset requests the admin thread sees
// together, queues created after a shutdown, destruction of a shut-down controller with I/O
// submitted.
#include <gtest/gtest.h>

#include "nvme/nvme_controller.h"
#include "nvme/testing/nvme_test_driver.h"

namespace tern::nvme {
namespace {

using testing::NvmeTestDriver;
using testing::NvmeTestMachine;

constexpr uint32_t kShst = 3u << kCstsShstShift;

// CC.SHN then CC.EN 0 before the admin thread acted on either (it is parked here, as a busy
// admin thread would be): the reset wins, and the controller enabled again afterwards is not
// "shut down" — its queues survive a snapshot and serve I/O after the restore.
TEST(NvmeControllerAttack, ShutdownThenResetSeenTogetherLeavesNoShutdownBehind) {
  NvmeTestMachine m;
  snap::ByteWriter w;
  testing::NvmeHostQueue admin, q;
  {
    NvmeTestDriver d(m);
    ASSERT_TRUE(d.enable(8));
    const uint32_t cc = d.reg32(kRegCc);
    d.fn().quiesce();  // parks the admin thread: both requests are seen at once
    d.bar_write32(kRegCc, cc | (kShnNormal << kCcShnShift));
    d.bar_write32(kRegCc, 0);
    d.fn().unquiesce();
    ASSERT_TRUE(d.wait_csts(kCstsRdy | kShst, 0));
    ASSERT_TRUE(d.enable(8));
    q = d.create_pair(1, 8, 0);
    std::memset(d.data(), 0x33, 4096);
    ASSERT_EQ(d.rw(q, true, 0, 8), kSuccess);
    d.fn().quiesce();
    d.fn().save_state(w);
    d.fn().unquiesce();
    admin = d.admin();
  }
  NvmeTestDriver d2(m);
  snap::ByteReader r(w.data(), "test");
  auto restored = d2.fn().restore_state(r);
  ASSERT_TRUE(restored) << restored.error().message();
  d2.admin() = admin;
  std::memset(d2.data(), 0, 4096);
  ASSERT_EQ(d2.rw(q, false, 0, 8), kSuccess);
  EXPECT_EQ(d2.data()[7], 0x33);
}

// After a completed shutdown I/O stays stopped until a reset (§7.6.2): new I/O queues are
// refused (a worker created then would run while quiesce() skips the shut-down workers).
TEST(NvmeControllerAttack, QueuesCreatedAfterShutdownAreRefused) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable(8));
  d.bar_write32(kRegCc, d.reg32(kRegCc) | (kShnNormal << kCcShnShift));
  ASSERT_TRUE(d.wait_csts(kShst, kShstComplete << kCstsShstShift));
  EXPECT_EQ(d.create_cq(1, 8), kCommandSequenceError);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
  // A reset brings I/O back.
  ASSERT_TRUE(d.disable());
  ASSERT_TRUE(d.enable(8));
  auto q = d.create_pair(1, 8, 0);
  EXPECT_EQ(d.rw(q, false, 0, 1), kSuccess);
}

// The guest powers off right after a shutdown with commands still in its SQ (and a full CQ):
// the controller is destroyed, shut down and quiesced or not, without hanging. The writes it
// completed before the shutdown are on the image; the flush rung after it was never executed.
TEST(NvmeControllerAttack, DestroyedAfterShutdownWithIoSubmitted) {
  for (bool quiesced : {false, true}) {
    SCOPED_TRACE(quiesced ? "quiesced" : "running");
    NvmeTestMachine m;
    {
      NvmeTestDriver d(m);
      ASSERT_TRUE(d.enable(8));
      auto q = d.create_pair(1, 4, 0);
      for (uint32_t i = 0; i < 3; ++i) {
        std::memset(d.data(i * 4096), 0x50 + i, 512);
        const uint64_t buf = testing::kNvmeDataGpa + i * 4096;
        d.submit(q, {.opcode = kIoWrite, .nsid = 1, .prp1 = buf, .cdw10 = i});  // LBA i
      }
      // The 3 completions fill the 4-entry CQ; the host never consumes them.
      testing::NvmeHostQueue host = q;
      for (int i = 0; i < 3; ++i) {
        auto e = d.consume(host);
        ASSERT_TRUE(e);
        EXPECT_EQ(testing::nvme_cqe_status(*e), kSuccess);
      }
      d.bar_write32(kRegCc, d.reg32(kRegCc) | (kShnNormal << kCcShnShift));
      ASSERT_TRUE(d.wait_csts(kShst, kShstComplete << kCstsShstShift));
      // More doorbells after the shutdown (ignored work for a paused worker).
      d.submit(q, {.opcode = kIoFlush, .nsid = 1});
      if (quiesced) d.fn().quiesce();
      EXPECT_EQ(d.counter("writes"), 3u);
      EXPECT_EQ(d.counter("flushes"), 0u);
      EXPECT_TRUE(d.cq_empty(host));  // nothing posted past the 3 (the CQ is full)
      // The controller is destroyed here.
    }
    for (uint32_t i = 0; i < 3; ++i)
      EXPECT_EQ(m.image_bytes(i * 512, 512), std::vector<uint8_t>(512, 0x50 + i)) << "LBA " << i;
  }
}

// quiesce() right after unquiesce() and a CC write in between (vCPUs resumed, the register
// written, the VM paused again before the admin thread woke): the quiesce must wait for the
// admin thread to act on the CC write, or the snapshot holds CC.EN 0 with CSTS.RDY 1 (which
// restore_state refuses). Found by the nvme_controller fuzzer.
TEST(NvmeControllerAttack, QuiesceRightAfterUnquiesceWaitsForPendingRequests) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  for (int i = 0; i < 200; ++i) {
    const bool enable = i % 2 == 0;
    if (enable) d.start_enable(8); else d.bar_write32(kRegCc, 0);
    d.fn().quiesce();
    ASSERT_EQ(d.reg32(kRegCsts) & kCstsRdy, enable ? kCstsRdy : 0u) << "round " << i;
    d.fn().unquiesce();
  }
}

// cache=directsync (Identify VWC 0): the Volatile Write Cache feature's stored default must not
// make every snapshot of the disk unrestorable.
TEST(NvmeControllerAttack, DirectsyncDiskSnapshotRestores) {
  NvmeTestMachine m;
  DiskConfig c;
  c.cache = CacheMode::kDirectSync;
  snap::ByteWriter w;
  {
    NvmeTestDriver d(m, c);
    ASSERT_TRUE(d.enable(8));
    d.fn().quiesce();
    d.fn().save_state(w);
    d.fn().unquiesce();
  }
  NvmeTestDriver d2(m, c);
  snap::ByteReader r(w.data(), "test");
  auto restored = d2.fn().restore_state(r);
  EXPECT_TRUE(restored) << restored.error().message();
}

}  // namespace
}  // namespace tern::nvme
