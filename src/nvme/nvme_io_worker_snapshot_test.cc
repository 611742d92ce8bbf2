// NvmeIoWorker pause / save / restore / resume: positions survive into a fresh worker, nothing is
// fetched twice or lost, doorbells rung while paused are served on resume.
#include "nvme/nvme_io_worker.h"

#include <set>

#include "nvme/testing/nvme_io_worker_fixture.h"

namespace tern::nvme {
namespace {

class NvmeIoWorkerSnapshotTest : public testing::NvmeIoWorkerFixture {
 protected:
  /// Saves the paused worker, destroys it and restores a fresh one from the save (paused).
  void restore_into_a_fresh_worker() {
    snap::ByteWriter w;
    worker_->save(w);
    worker_.reset();
    make_worker();
    snap::ByteReader r(w.data(), "nvme worker");
    ASSERT_TRUE(worker_->restore(r));
    EXPECT_TRUE(r.expect_end());
  }
};

TEST_F(NvmeIoWorkerSnapshotTest, PauseSaveRestoreResumeIntoAFreshWorker) {
  start(IoEngineKind::kThreads, 16, 4);
  std::memset(data(0), 0x31, 4096);
  submit(rw(kIoWrite, 1, 0, 8, 0));
  ASSERT_TRUE(complete());
  // Five more flushes against 3 free CQ slots: 3 posted, 2 left unfetched in the SQ.
  for (uint16_t i = 2; i < 7; ++i) queue(flush(i));
  ring();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(next());
  worker_->pause();
  // The host frees the CQ slots it consumed before the snapshot: the doorbell reaches the parked
  // worker, which has not read it (as a vCPU's write just before the VM paused).
  worker_->cq_doorbell(cq_head_);
  restore_into_a_fresh_worker();
  EXPECT_EQ(worker_->sqs().size(), 1u);
  worker_->resume();
  // No doorbell after the restore: the fresh worker knows the head and posts the rest where they
  // belong.
  std::set<uint16_t> cids;
  for (uint16_t i = 5; i < 7; ++i) {
    auto c = next();
    ASSERT_TRUE(c);
    cids.insert(c->cid);
    EXPECT_GE(c->sq_head, c->cid);  // the SQ head when posted: past the command itself
    EXPECT_LE(c->sq_head, 6);
  }
  EXPECT_EQ(cids, (std::set<uint16_t>{5, 6}));
  // And it takes new commands after them.
  submit(rw(kIoRead, 9, 0, 8, 1));
  auto c = complete();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 9);
  EXPECT_EQ(std::vector<uint8_t>(data(1), data(1) + 4096), std::vector<uint8_t>(4096, 0x31));
}

// An SQ tail doorbell written just before the snapshot, which the worker has not read when it
// parks: the restored worker fetches the command without another doorbell (the host will not
// ring again; its fsync would wait for the I/O timeout).
TEST_F(NvmeIoWorkerSnapshotTest, SqTailWrittenBeforeTheSnapshotIsFetchedAfterRestore) {
  start(IoEngineKind::kThreads, 16, 16);
  submit(flush(1));
  ASSERT_TRUE(complete());
  worker_->pause();
  std::memset(data(0), 0x5C, 4096);
  submit(rw(kIoWrite, 2, 16, 8, 0));
  EXPECT_EQ(q().commands.load(), 1u);
  restore_into_a_fresh_worker();
  worker_->resume();
  auto c = complete();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 2);
  EXPECT_EQ(status_of(*c), kSuccess);
  EXPECT_EQ(disk_bytes(16 * 512, 4096), std::vector<uint8_t>(4096, 0x5C));
}

TEST_F(NvmeIoWorkerSnapshotTest, RestoreWithShadowDoorbellsFetchesNothingTwice) {
  start(IoEngineKind::kThreads, 16, 16, CacheMode::kWriteback,
        ShadowDoorbells{kShadowGpa, kEventIdxGpa});
  queue(flush(0));
  queue(flush(1));
  shadow(false, sq_tail_);
  worker_->sq_doorbell(kQid, sq_tail_);
  ASSERT_TRUE(next());
  ASSERT_TRUE(next());
  shadow(true, cq_head_);
  worker_->pause();
  // Written while the VM is being saved: the restored worker must pick it up, and only it.
  queue(flush(2));
  shadow(false, sq_tail_);
  // The fresh worker has shadow doorbells on from the start; shadow tail 3, SQ head 0 until
  // restored.
  restore_into_a_fresh_worker();
  EXPECT_EQ(q().commands.load(), 2u);
  worker_->resume();
  auto c = next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 2);
  EXPECT_EQ(c->sq_head, 3);
  worker_->pause();
  EXPECT_EQ(q().commands.load(), 3u);
  EXPECT_FALSE(cqe_ready());
}

TEST_F(NvmeIoWorkerSnapshotTest, DoorbellsRungWhilePausedAreServedOnResume) {
  start();
  worker_->pause();
  submit(flush(4));
  EXPECT_EQ(q().commands.load(), 0u);
  worker_->resume();
  auto c = complete();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 4);
}

TEST_F(NvmeIoWorkerSnapshotTest, RestoreRefusesAnotherQueueLayout) {
  start(IoEngineKind::kThreads, 16, 4);
  snap::ByteWriter w;
  worker_->pause();
  worker_->save(w);
  worker_.reset();
  sq_config_.qid = 2;
  counters_[2].commands = 0;
  make_worker();
  snap::ByteReader r(w.data(), "nvme worker");
  auto res = worker_->restore(r);
  ASSERT_FALSE(res);
  EXPECT_NE(res.error().message().find("SQ 1 saved, SQ 2 created"), std::string::npos)
      << res.error().message();
}

}  // namespace
}  // namespace tern::nvme
