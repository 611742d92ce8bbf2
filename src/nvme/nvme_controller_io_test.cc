// NvmeController end to end through its BAR: I/O on a temporary image over MMIO and over shadow
// doorbells + ioeventfds, BAR moves, and snapshot save → restore into a new controller.
#include <gtest/gtest.h>

#include <algorithm>

#include "nvme/nvme_controller.h"
#include "nvme/testing/nvme_test_driver.h"

namespace tern::nvme {
namespace {

using testing::kNvmeBarGpa;
using testing::NvmeTestDriver;
using testing::NvmeTestMachine;

void fill(uint8_t* p, size_t n, uint8_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(seed + i * 7);
}

TEST(NvmeControllerIo, WriteReadAndTheImage) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  d.enable_msix(3);
  ASSERT_TRUE(d.enable());
  ASSERT_EQ(
      d.admin_cmd(
          {.opcode = kAdminSetFeatures, .cdw10 = kFeatNumberOfQueues, .cdw11 = 1 | (1u << 16)}),
      kSuccess);
  auto q1 = d.create_pair(1, 32, 1);
  auto q2 = d.create_pair(2, 8, 2);
  // 64 KiB through a PRP list, on queue 1; 4 KiB on queue 2.
  fill(d.data(), 65536, 3);
  ASSERT_EQ(d.rw(q1, true, 16, 128), kSuccess);
  EXPECT_EQ(m.image_bytes(16 * 512, 65536), std::vector<uint8_t>(d.data(), d.data() + 65536));
  std::vector<uint8_t> want(d.data(), d.data() + 4096);
  std::memset(d.data(), 0, 65536);
  ASSERT_EQ(d.rw(q2, false, 16, 8), kSuccess);
  EXPECT_EQ(std::vector<uint8_t>(d.data(), d.data() + 4096), want);
  // Wrap queue 2 a few times (8 entries).
  for (int i = 0; i < 20; ++i) ASSERT_EQ(d.rw(q2, false, i, 1), kSuccess);
  EXPECT_EQ(d.rw(q2, false, (4u << 20) / 512, 1), kLbaOutOfRange);
  EXPECT_EQ(d.counter("reads"), 21u);
  EXPECT_EQ(d.counter("writes"), 1u);
  EXPECT_EQ(d.counter("written_bytes"), 65536u);
  EXPECT_EQ(d.counter("invalid_commands"), 1u);
  auto c = d.fn().counters();
  bool q1_seen = false;
  for (auto& q : c.queues)
    if (q.index == 1) {
      q1_seen = true;
      EXPECT_EQ(q.requests, 1u);
    }
  EXPECT_TRUE(q1_seen);
  // Bad I/O doorbell values are the worker's to report; the controller survives them.
  d.bar_write32(doorbell_offset(1, false), 5000);
  EXPECT_EQ(d.rw(q1, false, 0, 1), kSuccess);
}

TEST(NvmeControllerIo, ShadowDoorbellsAndBarMove) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  auto q = d.create_pair(1, 16, 0);
  std::memset(m.ram + 0x60000, 0, 8192);
  d.set_shadow_gpa(0x60000);
  ASSERT_EQ(d.admin_cmd({.opcode = kAdminDoorbellBufferConfig, .prp1 = 0x60000, .prp2 = 0x61000}),
            kSuccess);
  {
    std::lock_guard lock(m.platform.mu);
    ASSERT_EQ(m.platform.ioeventfds.count(kNvmeBarGpa + doorbell_offset(1, false)), 1u);
    EXPECT_EQ(m.platform.ioeventfds[kNvmeBarGpa + doorbell_offset(1, false)].len, 4u);
    EXPECT_EQ(m.platform.ioeventfds.count(kNvmeBarGpa + doorbell_offset(0, false)), 0u);
  }
  q.shadow = true;
  fill(d.data(), 4096, 9);
  ASSERT_EQ(d.rw(q, true, 100, 8), kSuccess);
  EXPECT_EQ(m.image_bytes(100 * 512, 4096), std::vector<uint8_t>(d.data(), d.data() + 4096));
  // A queue created afterwards gets its ioeventfd too.
  auto q2 = d.create_pair(2, 16, 0);
  q2.shadow = true;
  ASSERT_EQ(d.rw(q2, false, 100, 8), kSuccess);
  // The guest moves BAR0: the ioeventfds follow.
  const uint64_t moved = 0xD0000000;
  d.cfg_write32(0x10, static_cast<uint32_t>(moved) | 0x4);
  d.cfg_write32(0x14, 0);
  {
    std::lock_guard lock(m.platform.mu);
    EXPECT_EQ(m.platform.ioeventfds.count(kNvmeBarGpa + doorbell_offset(1, false)), 0u);
    EXPECT_EQ(m.platform.ioeventfds.count(moved + doorbell_offset(1, false)), 1u);
    EXPECT_EQ(m.platform.ioeventfds.count(moved + doorbell_offset(2, false)), 1u);
  }
  // Memory decoding off: none registered.
  d.cfg_write16(0x04, 0);
  {
    std::lock_guard lock(m.platform.mu);
    EXPECT_TRUE(m.platform.ioeventfds.empty());
  }
}

TEST(NvmeControllerSnapshot, SaveRestoreIntoANewControllerAndContinue) {
  NvmeTestMachine m;
  snap::ByteWriter w;
  testing::NvmeHostQueue admin, q;
  {
    NvmeTestDriver d(m);
    d.enable_msix(2);
    ASSERT_TRUE(d.enable(8));
    q = d.create_pair(1, 8, 1);
    fill(d.data(), 4096, 1);
    for (int i = 0; i < 5; ++i) ASSERT_EQ(d.rw(q, true, i * 8, 8), kSuccess);  // positions ≠ 0
    d.submit(d.admin(), {.opcode = kAdminAsyncEventRequest, .cid = 4242});
    ASSERT_EQ(d.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
    d.fn().quiesce();
    d.fn().save_state(w);
    d.fn().unquiesce();
    admin = d.admin();
    // Destroyed here: its threads stop, its ioeventfds go.
  }
  NvmeTestDriver d2(m);
  snap::ByteReader r(w.data(), "test");
  auto restored = d2.fn().restore_state(r);
  ASSERT_TRUE(restored) << restored.error().message();
  EXPECT_EQ(d2.reg32(kRegCsts), kCstsRdy);
  d2.admin() = admin;
  std::memset(d2.data(), 0, 4096);
  ASSERT_EQ(d2.rw(q, false, 8, 8), kSuccess);
  std::vector<uint8_t> want(4096);
  fill(want.data(), 4096, 1);
  EXPECT_EQ(std::vector<uint8_t>(d2.data(), d2.data() + 4096), want);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(d2.rw(q, false, 0, 1), kSuccess);  // wraps the rings
  EXPECT_EQ(d2.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
  // The held AER survived: an event completes it.
  d2.bar_write32(doorbell_offset(40, false), 0);
  auto e = d2.reap(d2.admin());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->cid, 4242);
}

TEST(NvmeControllerSnapshot, RestoreRefusesBadState) {
  NvmeTestMachine m;
  snap::ByteWriter w;
  {
    NvmeTestDriver d(m);
    ASSERT_TRUE(d.enable(8));
    d.create_pair(1, 8, 0);
    d.fn().quiesce();
    d.fn().save_state(w);
    d.fn().unquiesce();
  }
  auto try_restore = [&](std::vector<uint8_t> bytes) {
    NvmeTestDriver d(m);
    snap::ByteReader r(bytes, "test");
    auto res = d.fn().restore_state(r);
    return res ? std::string() : res.error().message();
  };
  std::vector<uint8_t> good = w.data();
  EXPECT_EQ(try_restore(good), "");
  auto bad_version = good;
  bad_version[0] = 9;
  EXPECT_NE(try_restore(bad_version).find("version"), std::string::npos);
  auto truncated = good;
  truncated.resize(good.size() - 3);
  std::string t = try_restore(truncated);
  EXPECT_NE(t.find("nvme0"), std::string::npos) << t;
  auto trailing = good;
  trailing.push_back(0);
  EXPECT_FALSE(try_restore(trailing).empty());
  // The I/O CQ's record: qid 1, then its base address.
  std::vector<uint8_t> key = {1, 0};
  const uint64_t cq_gpa = testing::nvme_io_cq_gpa(1);
  for (int i = 0; i < 8; ++i) key.push_back(static_cast<uint8_t>(cq_gpa >> (8 * i)));
  auto it = std::search(good.begin(), good.end(), key.begin(), key.end());
  ASSERT_NE(it, good.end());
  const size_t cq = static_cast<size_t>(it - good.begin());
  auto bad_size = good;
  bad_size[cq + 10 + 1] = 0x40;  // 16384 entries
  EXPECT_NE(try_restore(bad_size).find("CQ 1 size"), std::string::npos) << try_restore(bad_size);
  auto bad_vector = good;
  bad_vector[cq + 14] = 99;
  EXPECT_NE(try_restore(bad_vector).find("CQ 1 vector"), std::string::npos);
  auto bad_base = good;
  bad_base[cq + 2 + 5] = 0x7F;  // far outside RAM
  EXPECT_NE(try_restore(bad_base).find("CQ 1 base"), std::string::npos);
  auto bad_sq = good;
  bad_sq[cq + 18] = 70;  // the SQ's id: above Number of Queues
  EXPECT_NE(try_restore(bad_sq).find("SQ 70"), std::string::npos);
}

TEST(NvmeControllerSnapshot, RestoreIntoAUsedControllerIsRefused) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  snap::ByteWriter w;
  d.fn().quiesce();
  d.fn().save_state(w);
  d.fn().unquiesce();
  snap::ByteReader r(w.data(), "test");
  auto res = d.fn().restore_state(r);
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message().find("already used"), std::string::npos);
}

}  // namespace
}  // namespace tern::nvme
