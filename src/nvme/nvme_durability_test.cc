// NVMe durability promises, asserted on the ops the I/O engine is given: a Write or Write Zeroes
// with FUA, and every write while the host has turned the volatile write cache off (Set Features
// WCE 0, which tells its driver to stop sending flushes), is followed by an fdatasync before its
// completion is posted; with the cache on, a write without FUA is not. On an NvmeIoWorker, and
// through a controller's admin queue.
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "block/testing/recording_io_engine.h"
#include "nvme/nvme_io_worker.h"
#include "nvme/testing/nvme_io_worker_fixture.h"
#include "nvme/testing/nvme_test_driver.h"

namespace tern::nvme {
namespace {

using Kind = IoOp::Kind;

using tern::testing::recording_thread_pool_engines;

class NvmeIoWorkerDurabilityTest : public testing::NvmeIoWorkerFixture {
 protected:
  /// A worker whose engine records its ops (running `hook` as each is given), reading WCE from
  /// wce_.
  void start_recording(std::function<void(const IoOp&)> hook = {}) {
    start(IoEngineKind::kThreads, 16, 16);
    ctx_.volatile_write_cache = &wce_;
    ctx_.engine_factory = recording_thread_pool_engines(log_, mu_, std::move(hook));
    make_worker();
  }
  /// Runs `e` to its completion (expected successful); the engine ops it took, in order.
  std::vector<Kind> run(const SubmissionEntry& e) {
    {
      std::lock_guard lock(*mu_);
      log_->clear();
    }
    submit(e);
    auto c = complete();
    EXPECT_TRUE(c);
    if (c) {
      EXPECT_EQ(status_of(*c), kSuccess);
    }
    std::lock_guard lock(*mu_);
    return *log_;
  }
  static SubmissionEntry write_zeroes(uint16_t cid, uint64_t slba, uint32_t blocks, bool fua) {
    SubmissionEntry e{};
    e.opcode = kIoWriteZeroes;
    e.cid = cid;
    e.nsid = 1;
    e.cdw10 = static_cast<uint32_t>(slba);
    e.cdw12 = (blocks - 1) | (fua ? kCdw12Fua : 0);
    return e;
  }
  static SubmissionEntry with_fua(SubmissionEntry e) {
    e.cdw12 |= kCdw12Fua;
    return e;
  }
  static bool ends_synced(const std::vector<Kind>& ops) {
    return !ops.empty() && ops.back() == Kind::kFdatasync &&
           std::count(ops.begin(), ops.end(), Kind::kFdatasync) == 1;
  }
  static bool synced(const std::vector<Kind>& ops) {
    return std::count(ops.begin(), ops.end(), Kind::kFdatasync) != 0;
  }

  std::shared_ptr<std::vector<Kind>> log_ = std::make_shared<std::vector<Kind>>();
  std::shared_ptr<std::mutex> mu_ = std::make_shared<std::mutex>();
  std::atomic<bool> wce_{true};
};

TEST_F(NvmeIoWorkerDurabilityTest, WriteZeroesWithFuaIsSyncedBeforeItCompletes) {
  start_recording();
  write_disk(64 * 512, std::vector<uint8_t>(8192, 0xEE));
  auto ops = run(write_zeroes(1, 64, 8, /*fua=*/true));
  EXPECT_TRUE(ends_synced(ops)) << ops.size() << " op(s)";
  EXPECT_EQ(disk_bytes(64 * 512, 4096), std::vector<uint8_t>(4096, 0));
  EXPECT_FALSE(synced(run(write_zeroes(2, 72, 8, /*fua=*/false))));
  // A Write with FUA, as before.
  std::memset(data(0), 0x21, 4096);
  EXPECT_EQ(run(with_fua(rw(kIoWrite, 3, 0, 8, 0))),
            (std::vector<Kind>{Kind::kWrite, Kind::kFdatasync}));
}

TEST_F(NvmeIoWorkerDurabilityTest, VolatileWriteCacheOffSyncsEveryWrite) {
  start_recording();
  std::memset(data(0), 0x42, 4096);
  EXPECT_EQ(run(rw(kIoWrite, 1, 0, 8, 0)), (std::vector<Kind>{Kind::kWrite}));
  wce_ = false;  // what Set Features Volatile Write Cache WCE 0 stores
  EXPECT_EQ(run(rw(kIoWrite, 2, 8, 8, 0)), (std::vector<Kind>{Kind::kWrite, Kind::kFdatasync}));
  EXPECT_TRUE(ends_synced(run(write_zeroes(3, 16, 8, /*fua=*/false))));
  EXPECT_EQ(run(rw(kIoRead, 4, 8, 8, 1)), (std::vector<Kind>{Kind::kRead}));
  EXPECT_EQ(disk_bytes(8 * 512, 4096), std::vector<uint8_t>(4096, 0x42));
  wce_ = true;
  EXPECT_EQ(run(rw(kIoWrite, 5, 24, 8, 0)), (std::vector<Kind>{Kind::kWrite}));
}

// The host turns the volatile write cache off (Set Features WCE 0 completes) while a write it
// sent with the cache on is still in flight: that write completes after the host was told the
// cache is off, and the host sends no flush for it. It must be durable when it completes.
TEST_F(NvmeIoWorkerDurabilityTest, WriteInFlightWhenTheCacheIsTurnedOffIsSynced) {
  start_recording([this](const IoOp& op) {
    if (op.kind == Kind::kWrite) wce_ = false;  // Set Features WCE 0, the write being in flight
  });
  std::memset(data(0), 0x77, 4096);
  EXPECT_EQ(run(rw(kIoWrite, 1, 0, 8, 0)), (std::vector<Kind>{Kind::kWrite, Kind::kFdatasync}));
  EXPECT_EQ(disk_bytes(0, 4096), std::vector<uint8_t>(4096, 0x77));
  // The other way round: a write sent with the cache off that completes after it was turned on
  // may be synced or not (the host flushes it if it cares); turned on, writes are not.
  wce_ = true;
  EXPECT_EQ(run(rw(kIoRead, 2, 0, 8, 1)), (std::vector<Kind>{Kind::kRead}));
}

// Set Features Volatile Write Cache WCE 0 through the admin queue reaches the I/O workers; a
// controller reset brings WCE back to its default, 1.
TEST(NvmeControllerDurability, SetFeaturesWceZeroFlushesEveryWrite) {
  auto log = std::make_shared<std::vector<Kind>>();
  auto mu = std::make_shared<std::mutex>();
  testing::NvmeTestMachine m;
  testing::NvmeTestDriver d(m, {}, recording_thread_pool_engines(log, mu));
  ASSERT_TRUE(d.enable(8));
  auto q = d.create_pair(1, 8, 0);
  std::memset(d.data(), 0x3D, 4096);
  auto write_ops = [&] {
    {
      std::lock_guard lock(*mu);
      log->clear();
    }
    EXPECT_EQ(d.rw(q, true, 0, 8), kSuccess);
    std::lock_guard lock(*mu);
    return *log;
  };
  EXPECT_EQ(write_ops(), (std::vector<Kind>{Kind::kWrite}));
  ASSERT_EQ(
      d.admin_cmd({.opcode = kAdminSetFeatures, .cdw10 = kFeatVolatileWriteCache, .cdw11 = 0}),
      kSuccess);
  uint32_t wce = 1;
  ASSERT_EQ(d.admin_cmd({.opcode = kAdminGetFeatures, .cdw10 = kFeatVolatileWriteCache}, &wce),
            kSuccess);
  EXPECT_EQ(wce, 0u);
  EXPECT_EQ(write_ops(), (std::vector<Kind>{Kind::kWrite, Kind::kFdatasync}));
  EXPECT_EQ(m.image_bytes(0, 4096), std::vector<uint8_t>(4096, 0x3D));
  ASSERT_TRUE(d.disable());
  ASSERT_TRUE(d.enable(8));
  q = d.create_pair(1, 8, 0);
  EXPECT_EQ(write_ops(), (std::vector<Kind>{Kind::kWrite}));
}

// Writes the host completed with the volatile write cache on sit in it (the image's page cache)
// until a flush; once the host turns the cache off it sends no flush, ever. Set Features WCE 0
// flushes before it completes, once per turning off.
TEST(NvmeControllerDurability, TurningTheCacheOffFlushesWhatItHolds) {
  testing::NvmeTestMachine m;
  testing::NvmeTestDriver d(m);
  ASSERT_TRUE(d.enable(8));
  auto q = d.create_pair(1, 8, 0);
  std::memset(d.data(), 0x4E, 4096);
  ASSERT_EQ(d.rw(q, true, 0, 8), kSuccess);  // completed with the cache on: no flush
  EXPECT_EQ(d.counter("flushes"), 0u);
  auto set_wce = [&](uint32_t wce) {
    return d.admin_cmd(
        {.opcode = kAdminSetFeatures, .cdw10 = kFeatVolatileWriteCache, .cdw11 = wce});
  };
  ASSERT_EQ(set_wce(0), kSuccess);
  EXPECT_EQ(d.counter("flushes"), 1u);
  EXPECT_EQ(m.image_bytes(0, 4096), std::vector<uint8_t>(4096, 0x4E));
  ASSERT_EQ(set_wce(0), kSuccess);  // off already: nothing cached
  EXPECT_EQ(d.counter("flushes"), 1u);
  ASSERT_EQ(set_wce(1), kSuccess);
  EXPECT_EQ(d.counter("flushes"), 1u);
  ASSERT_EQ(set_wce(0), kSuccess);
  EXPECT_EQ(d.counter("flushes"), 2u);
}

}  // namespace
}  // namespace tern::nvme
