// NvmeController: PCI identity, registers, enable/disable/reset, shutdown, doorbells, INTx.
#include "nvme/nvme_controller.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include "base/testing/temp_dir.h"
#include "nvme/testing/nvme_test_driver.h"

namespace tern::nvme {
namespace {

using testing::kNvmeBarGpa;
using testing::NvmeTestDriver;
using testing::NvmeTestMachine;

TEST(NvmeControllerPci, IdentityBarAndMsix) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  EXPECT_EQ(d.fn().kind(), "nvme");
  EXPECT_EQ(d.fn().name(), "nvme0");
  EXPECT_EQ(d.cfg_read32(0x00), (uint32_t{kPciDeviceNvme} << 16) | kPciVendorRedHat);
  EXPECT_EQ(d.cfg_read32(0x08) >> 8, kPciClassNvme);
  EXPECT_EQ((d.cfg_read32(0x3C) >> 8) & 0xFF, 1u);  // Interrupt Pin INTA#
  auto bars = d.fn().bars();
  ASSERT_EQ(bars.size(), 1u);
  EXPECT_EQ(bars[0].size, kBar0Bytes);
  EXPECT_TRUE(bars[0].is_64bit);
  EXPECT_EQ(d.cfg_read32(0x10) & ~0xFu, static_cast<uint32_t>(kNvmeBarGpa));
  EXPECT_EQ(d.cfg_read32(0x10) & 0x6u, 0x4u);  // 64-bit memory BAR
  auto w = d.fn().memory_windows();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].gpa, kNvmeBarGpa);
  uint8_t cap = d.msix_cap();
  ASSERT_NE(cap, 0);
  uint32_t h = d.cfg_read32(cap);
  EXPECT_EQ(((h >> 16) & 0x7FF) + 1, kMsixVectors);
  EXPECT_EQ(d.cfg_read32(cap + 4), kMsixTableOffset);  // BIR 0
  EXPECT_EQ(d.cfg_read32(cap + 8), kMsixPbaOffset);
}

TEST(NvmeControllerRegisters, CapVersionAndWidths) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  const uint64_t cap = d.reg64(kRegCap);
  EXPECT_EQ(cap & kCapMqesMask, kMaxQueueEntries - 1);
  EXPECT_TRUE(cap & kCapCqr);
  EXPECT_EQ((cap >> kCapToShift) & 0xFF, 30u);
  EXPECT_EQ((cap >> kCapDstrdShift) & 0xF, 0u);
  EXPECT_TRUE(cap & kCapCssNvm);
  EXPECT_EQ((cap >> kCapMpsminShift) & 0xF, 0u);
  EXPECT_EQ((cap >> kCapMpsmaxShift) & 0xF, 0u);
  EXPECT_EQ(d.reg32(kRegCap), static_cast<uint32_t>(cap));
  EXPECT_EQ(d.reg32(kRegCap + 4), static_cast<uint32_t>(cap >> 32));
  EXPECT_EQ(d.reg32(kRegVs), kVersion14);
  EXPECT_EQ(d.reg32(kRegCsts), 0u);
  // ASQ/ACQ as one 8-byte write or two 4-byte halves.
  d.bar_write64(kRegAsq, 0x123456789000ull);
  EXPECT_EQ(d.reg64(kRegAsq), 0x123456789000ull);
  d.bar_write32(kRegAcq, 0xABC000);
  d.bar_write32(kRegAcq + 4, 0x12);
  EXPECT_EQ(d.reg64(kRegAcq), 0x12'00ABC000ull);
  // Unknown registers read 0; writes to read-only ones are ignored and counted.
  EXPECT_EQ(d.reg32(0x40), 0u);
  EXPECT_EQ(d.reg32(0xE00), 0u);
  const uint64_t ignored = d.counter("ignored_register_writes");
  d.bar_write32(kRegVs, 0);
  d.bar_write64(kRegCap, 0);
  d.bar_write32(0x44, 1);
  d.bar_write32(kRegNssr, 0x4E564D65);
  EXPECT_EQ(d.counter("ignored_register_writes"), ignored + 4);
  EXPECT_EQ(d.reg32(kRegVs), kVersion14);
  EXPECT_EQ(d.reg64(kRegCap), cap);
}

TEST(NvmeControllerEnable, ReadyThenDisableAndReenable) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  EXPECT_EQ(d.reg32(kRegCsts), kCstsRdy);
  testing::NvmeSqe keep{.opcode = kAdminKeepAlive};
  EXPECT_EQ(d.admin_cmd(keep), kSuccess);
  ASSERT_TRUE(d.disable());
  EXPECT_EQ(d.counter("controller_resets"), 1u);
  ASSERT_TRUE(d.enable());
  EXPECT_EQ(d.admin_cmd(keep), kSuccess);
  EXPECT_EQ(d.counter("admin_commands"), 2u);
}

TEST(NvmeControllerEnable, BadAdminQueueIsControllerFatal) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  d.start_enable(32, /*asq=*/0x7FFFF000000ull);  // not RAM
  ASSERT_TRUE(d.wait_csts(kCstsCfs | kCstsRdy, kCstsCfs));
  EXPECT_EQ(d.counter("controller_fatal"), 1u);
  ASSERT_TRUE(d.disable());                              // a reset clears CFS
  d.start_enable(32, /*asq=*/testing::kNvmeAsqGpa + 8);  // not page aligned
  ASSERT_TRUE(d.wait_csts(kCstsCfs | kCstsRdy, kCstsCfs));
  ASSERT_TRUE(d.disable());
  d.start_enable(32, testing::kNvmeAsqGpa, testing::kNvmeAcqGpa,
                 7u << kCcMpsShift);  // 512 KiB pages
  ASSERT_TRUE(d.wait_csts(kCstsCfs | kCstsRdy, kCstsCfs));
  ASSERT_TRUE(d.disable());
  d.start_enable(32, testing::kNvmeAsqGpa, testing::kNvmeAcqGpa, 5u << kCcIosqesShift);
  ASSERT_TRUE(d.wait_csts(kCstsCfs | kCstsRdy, kCstsCfs));
  ASSERT_TRUE(d.disable());
  d.start_enable(1);  // AQA: one entry
  ASSERT_TRUE(d.wait_csts(kCstsCfs | kCstsRdy, kCstsCfs));
  ASSERT_TRUE(d.disable());
  ASSERT_TRUE(d.enable());
  EXPECT_EQ(d.counter("controller_fatal"), 5u);
}

TEST(NvmeControllerShutdown, ShutdownStatusCompletes) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  auto q = d.create_pair(1, 16, 0);
  std::memset(d.data(), 0x5A, 4096);
  ASSERT_EQ(d.rw(q, true, 0, 8), kSuccess);
  d.bar_write32(kRegCc, d.reg32(kRegCc) | (kShnNormal << kCcShnShift));
  ASSERT_TRUE(d.wait_csts(3u << kCstsShstShift, kShstComplete << kCstsShstShift));
  EXPECT_EQ(m.image_bytes(0, 4096), std::vector<uint8_t>(4096, 0x5A));
  ASSERT_TRUE(d.disable());
  EXPECT_EQ(d.reg32(kRegCsts), 0u);  // SHST cleared by the reset
  ASSERT_TRUE(d.enable());
  auto q2 = d.create_pair(1, 16, 0);
  std::memset(d.data(), 0, 4096);
  ASSERT_EQ(d.rw(q2, false, 0, 8), kSuccess);
  EXPECT_EQ(d.data()[100], 0x5A);
}

TEST(NvmeControllerReset, DropsQueuesAersAndIoeventfds) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  d.set_shadow_gpa(0x60000);
  ASSERT_EQ(d.admin_cmd({.opcode = kAdminDoorbellBufferConfig, .prp1 = 0x60000, .prp2 = 0x61000}),
            kSuccess);
  d.create_pair(1, 16, 0);
  {
    std::lock_guard lock(m.platform.mu);
    EXPECT_EQ(m.platform.ioeventfds.count(kNvmeBarGpa + doorbell_offset(1, false)), 1u);
  }
  d.submit(d.admin(), {.opcode = kAdminAsyncEventRequest});
  ASSERT_TRUE(d.disable());
  {
    std::lock_guard lock(m.platform.mu);
    EXPECT_TRUE(m.platform.ioeventfds.empty());
  }
  EXPECT_EQ(d.counter("shadow_doorbell_enabled"), 0u);
  ASSERT_TRUE(d.enable());
  // The AER was dropped, never completed: the next completion is the Keep Alive's.
  auto e = d.run(d.admin(), {.opcode = kAdminKeepAlive, .cid = 77});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->cid, 77);
  // Queue 1 is gone: its doorbell is invalid now.
  const uint64_t bad = d.counter("invalid_doorbells");
  d.bar_write32(doorbell_offset(1, false), 1);
  EXPECT_EQ(d.counter("invalid_doorbells"), bad + 1);
}

TEST(NvmeControllerDoorbells, InvalidDoorbellsAreCountedAndReported) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  d.submit(d.admin(), {.opcode = kAdminAsyncEventRequest, .cid = 500});
  d.bar_write32(doorbell_offset(9, false), 3);  // no such queue
  auto e = d.reap(d.admin());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->cid, 500);
  EXPECT_EQ(e->dw0, async_event_dw0(0, 0, kLogError));
  EXPECT_EQ(d.counter("invalid_doorbells"), 1u);
  // Events of the type stay masked until the host reads the Error log (RAE clear).
  d.bar_write32(doorbell_offset(70, true), 0);  // past the doorbell array
  EXPECT_EQ(d.counter("invalid_doorbells"), 2u);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminGetLogPage,
                         .prp1 = testing::kNvmeDataGpa,
                         .cdw10 = kLogError | (15u << 16)}),
            kSuccess);
  d.submit(d.admin(), {.opcode = kAdminAsyncEventRequest, .cid = 501});
  d.bar_write32(doorbell_offset(0, false), 1000);  // admin SQ tail past its 32 entries
  e = d.reap(d.admin());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->cid, 501);
  EXPECT_EQ(e->dw0, async_event_dw0(0, 1, kLogError));
  // Odd widths are ignored.
  uint8_t two[2] = {1, 0};
  d.fn().bar_write(0, doorbell_offset(0, false), two);
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
}

TEST(NvmeControllerInterrupts, IntxFollowsTheAdminCqAndIntms) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  auto level = [&] { return m.intx_level(); };
  d.submit(d.admin(), {.opcode = kAdminKeepAlive});
  ASSERT_TRUE(tern::testing::eventually(level));
  auto e = d.reap(d.admin());  // consumes the CQE and rings the CQ head doorbell
  ASSERT_TRUE(e);
  EXPECT_FALSE(level());
  d.bar_write32(kRegIntms, 1);
  EXPECT_EQ(d.reg32(kRegIntms), 1u);
  d.submit(d.admin(), {.opcode = kAdminKeepAlive});
  ASSERT_TRUE(tern::testing::eventually([&] { return !d.cq_empty(d.admin()); }));
  EXPECT_FALSE(level());  // masked
  d.bar_write32(kRegIntmc, 1);
  // The pending interrupt comes up once unmasked (the CQE may be visible just before the
  // controller signals it: wait for the line, no further host action).
  EXPECT_TRUE(tern::testing::eventually(level));
  ASSERT_TRUE(d.reap(d.admin()));
  EXPECT_FALSE(level());
}

// INTx (MSI-X off, as with the guest's pci=nomsi) and shadow doorbells: the host gives its I/O
// CQ head back through the shadow page and rings the doorbell only when EventIdx asks (Linux's
// nvme_ring_cq_doorbell). The line must drop after every batch the host consumes, or the guest's
// handler sees a line that stays up with nothing to do until the kernel disables the IRQ.
TEST(NvmeControllerInterrupts, IntxDropsWhenTheHostConsumesThroughShadowDoorbells) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable());
  auto level = [&] { return m.intx_level(); };
  auto q = d.create_pair(1, 8, 0);
  ASSERT_EQ(d.doorbell_buffer_config(0x60000), kSuccess);
  EXPECT_FALSE(level());
  q.shadow = true;
  std::memset(d.data(), 0x6B, 4096);
  for (uint32_t i = 0; i < 12; ++i) {  // past the ring's end: the head wraps
    SCOPED_TRACE("command " + std::to_string(i));
    d.submit(q, {.opcode = kIoWrite, .nsid = 1, .prp1 = testing::kNvmeDataGpa, .cdw10 = i});
    ASSERT_TRUE(tern::testing::eventually(level));
    auto e = d.reap_shadow(q);
    ASSERT_TRUE(e);
    EXPECT_EQ(testing::nvme_cqe_status(*e), kSuccess);
    ASSERT_TRUE(tern::testing::eventually([&] { return !level(); }));
  }
  EXPECT_EQ(m.image_bytes(11 * 512, 512), std::vector<uint8_t>(512, 0x6B));
}

TEST(NvmeControllerInterrupts, MsixVectorZeroForTheAdminQueue) {
  NvmeTestMachine m;
  NvmeTestDriver d(m);
  d.enable_msix(2);
  ASSERT_TRUE(d.enable());
  const uint64_t before = d.counter("interrupts_sent");
  EXPECT_EQ(d.admin_cmd({.opcode = kAdminKeepAlive}), kSuccess);
  EXPECT_TRUE(tern::testing::eventually([&] { return d.counter("interrupts_sent") > before; }));
  std::lock_guard lock(m.platform.mu);
  EXPECT_TRUE(m.platform.levels.empty() || !m.platform.levels[testing::kNvmeIntxIrq]);
}

TEST(NvmeDiskCreate, RefusesVhostUserAndMissingImages) {
  DiskConfig c;
  c.interface = DiskInterface::kNvme;
  c.vhost_user_socket = "/tmp/x.sock";
  auto r = NvmeDisk::create(c, "nvme0");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("vhost-user"), std::string::npos);
  DiskConfig missing;
  missing.interface = DiskInterface::kNvme;
  missing.path = "/nonexistent/disk.img";
  auto r2 = NvmeDisk::create(missing, "nvme0");
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message().find("--disk path="), std::string::npos);
}

TEST(NvmeDiskCreate, RefusesAnImageSmallerThanOneBlock) {
  ::tern::testing::TempDir dir;
  for (int bytes : {0, 511}) {
    const std::string path = dir.path() + "/small" + std::to_string(bytes) + ".img";
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
    ASSERT_EQ(::truncate(path.c_str(), bytes), 0);
    DiskConfig c;
    c.interface = DiskInterface::kNvme;
    c.path = path;
    auto r = NvmeDisk::create(c, "nvme0");
    ASSERT_FALSE(r) << bytes;
    EXPECT_NE(r.error().message().find("at least one 512-byte block"), std::string::npos)
        << r.error().message();
  }
}

}  // namespace
}  // namespace tern::nvme
