// NvmeIoWorker end to end: SQEs built by hand in a buffer as guest RAM, doorbells rung, CQEs
// polled by phase tag, bytes checked on a temporary disk image and in "guest RAM".
#include "nvme/nvme_io_worker.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "nvme/testing/nvme_io_worker_fixture.h"

namespace tern::nvme {
namespace {

using tern::testing::eventually;
using testing::NvmeIoWorkerFixture;

class NvmeIoWorkerEngineTest : public NvmeIoWorkerFixture,
                               public ::testing::WithParamInterface<IoEngineKind> {};

TEST_P(NvmeIoWorkerEngineTest, WriteReadFlushRoundTrip) {
  start(GetParam());
  std::memset(data(0), 0x5A, 4096);
  submit(rw(kIoWrite, 11, 8, 8, 0));  // 4 KiB at byte 4096
  auto w = complete();
  ASSERT_TRUE(w);
  EXPECT_EQ(w->cid, 11);
  EXPECT_EQ(w->sq_id, kQid);
  EXPECT_EQ(w->sq_head, 1);
  EXPECT_EQ(status_of(*w), kSuccess);
  EXPECT_EQ(disk_bytes(4096, 4096), std::vector<uint8_t>(4096, 0x5A));

  submit(rw(kIoRead, 12, 8, 8, 1));
  auto r = complete();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->cid, 12);
  EXPECT_EQ(status_of(*r), kSuccess);
  EXPECT_EQ(std::vector<uint8_t>(data(1), data(1) + 4096), std::vector<uint8_t>(4096, 0x5A));

  submit(flush(13));
  auto f = complete();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->cid, 13);
  EXPECT_EQ(status_of(*f), kSuccess);

  EXPECT_EQ(q().commands.load(), 3u);
  EXPECT_EQ(q().bytes.load(), 8192u);
  EXPECT_EQ(q().errors.load(), 0u);
  EXPECT_TRUE(eventually([&] { return sink_.count.load() == 3; }));
  EXPECT_EQ(sink_.last_vector.load(), 3);
  EXPECT_TRUE(eventually([&] { return q().doorbell_writes.load() == 6; }));  // 3 SQ + 3 CQ
  EXPECT_EQ(q().interrupts.load(), 3u);
}

TEST_P(NvmeIoWorkerEngineTest, ManyCommandsInOneBatch) {
  start(GetParam());
  constexpr uint16_t kCommands = 40;
  for (uint16_t i = 0; i < kCommands; ++i) {
    std::memset(data(i), 0x10 + i, 4096);
    queue(rw(kIoWrite, static_cast<uint16_t>(1000 + i), i * 8u, 8, i));
  }
  ring();  // one doorbell for all of them
  std::set<uint16_t> cids;
  for (uint16_t i = 0; i < kCommands; ++i) {
    auto c = next();
    ASSERT_TRUE(c) << "completion " << i;
    EXPECT_EQ(status_of(*c), kSuccess);
    cids.insert(c->cid);
  }
  worker_->cq_doorbell(cq_head_);
  EXPECT_EQ(cids.size(), kCommands);
  EXPECT_EQ(*cids.begin(), 1000);
  EXPECT_EQ(*cids.rbegin(), 1000 + kCommands - 1);
  for (uint16_t i = 0; i < kCommands; ++i)
    EXPECT_EQ(disk_bytes(i * 4096u, 4096), std::vector<uint8_t>(4096, 0x10 + i)) << i;
  EXPECT_EQ(q().commands.load(), kCommands);
  EXPECT_EQ(q().bytes.load(), kCommands * 4096u);
  // One interrupt per batch of posts, at least one, never more than one per completion.
  EXPECT_TRUE(eventually([&] { return sink_.count.load() >= 1; }));
  EXPECT_LE(sink_.count.load(), kCommands);
}

INSTANTIATE_TEST_SUITE_P(Engines, NvmeIoWorkerEngineTest,
                         ::testing::Values(IoEngineKind::kThreads, IoEngineKind::kIoUring),
                         [](const auto& info) {
                           return info.param == IoEngineKind::kThreads ? "threads" : "io_uring";
                         });

using NvmeIoWorkerTest = NvmeIoWorkerFixture;

TEST_F(NvmeIoWorkerTest, FullCompletionQueueStopsFetchingUntilTheHeadMoves) {
  start(IoEngineKind::kThreads, 16, 4);  // 3 usable CQ slots
  for (uint16_t i = 0; i < 8; ++i) queue(flush(static_cast<uint16_t>(i)));
  ring();
  std::set<uint16_t> cids;  // flushes in flight together may complete in any order
  for (uint16_t i = 0; i < 3; ++i) {
    auto c = next();
    ASSERT_TRUE(c);
    cids.insert(c->cid);
  }
  EXPECT_EQ(cids, (std::set<uint16_t>{0, 1, 2}));
  // Parked, the worker has nothing in flight: what it fetched is exactly what it could post.
  worker_->pause();
  EXPECT_EQ(q().commands.load(), 3u);
  EXPECT_EQ(cqe_at(3).status, 0) << "slot 3 written while the host had not freed it";
  worker_->resume();
  worker_->cq_doorbell(cq_head_);  // head 3: three slots free again
  for (uint16_t i = 3; i < 8; ++i) {
    auto c = next();
    ASSERT_TRUE(c) << i;
    cids.insert(c->cid);
    EXPECT_EQ(status_of(*c), kSuccess);
    if (i == 5) worker_->cq_doorbell(cq_head_);
  }
  EXPECT_EQ(cids.size(), 8u);
  EXPECT_EQ(*cids.rbegin(), 7);
  EXPECT_EQ(q().commands.load(), 8u);
}

TEST_F(NvmeIoWorkerTest, InvalidDoorbellValuesAreCountedReportedAndIgnored) {
  start(IoEngineKind::kThreads, 16, 16);
  worker_->sq_doorbell(kQid, 16);  // ≥ entries
  worker_->cq_doorbell(99);
  EXPECT_EQ(q().invalid_doorbells.load(), 2u);
  auto ev = events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0], async_event_dw0(0, 1, 1));
  EXPECT_EQ(ev[0], 0x00010100u);
  // The queue still works.
  submit(flush(5));
  auto c = complete();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 5);
  EXPECT_EQ(c->sq_head, 1);
  EXPECT_EQ(q().commands.load(), 1u);
}

TEST_F(NvmeIoWorkerTest, MalformedCommandsGetTheirStatusAndTheQueueKeepsWorking) {
  start();
  SubmissionEntry bad_opcode = flush(1);
  bad_opcode.opcode = 0x7F;
  SubmissionEntry bad_ns = rw(kIoRead, 2, 0, 8, 0);
  bad_ns.nsid = 2;
  SubmissionEntry past_end = rw(kIoRead, 3, kDiskBytes / 512 - 4, 8, 0);
  SubmissionEntry not_ram = rw(kIoWrite, 4, 0, 8, 0);
  not_ram.prp1 = 0x40000000;
  SubmissionEntry sgl = rw(kIoRead, 5, 0, 8, 0);
  sgl.flags = 1u << 6;
  for (const auto& e : {bad_opcode, bad_ns, past_end, not_ram, sgl}) queue(e);
  std::memset(data(2), 0xC3, 4096);
  queue(rw(kIoWrite, 6, 16, 8, 2));
  ring();
  const Status want[] = {kInvalidOpcode, kInvalidNamespace, kLbaOutOfRange, kDataTransferError,
                         kInvalidField, kSuccess};
  for (uint16_t i = 0; i < 6; ++i) {
    auto c = next();
    ASSERT_TRUE(c);
    EXPECT_EQ(c->cid, i + 1);
    EXPECT_EQ(status_of(*c), want[i]) << "cid " << c->cid;
  }
  EXPECT_EQ(disk_bytes(16 * 512, 4096), std::vector<uint8_t>(4096, 0xC3));
  EXPECT_EQ(q().errors.load(), 5u);
  EXPECT_EQ(q().commands.load(), 6u);
  EXPECT_EQ(q().bytes.load(), 4096u);
}

TEST_F(NvmeIoWorkerTest, ReadErrorFromTheHostIsAnUnrecoveredReadError) {
  start();
  // The namespace claims more blocks than the image holds: the host's read comes back short.
  ctx_.ns.size_lbas = 2 * kDiskBytes / 512;
  make_worker();
  submit(rw(kIoRead, 9, kDiskBytes / 512 + 8, 8, 0));
  auto c = complete();
  ASSERT_TRUE(c);
  EXPECT_EQ(status_of(*c), kUnrecoveredReadError);
  EXPECT_EQ(q().errors.load(), 1u);
}

TEST_F(NvmeIoWorkerTest, FuaWriteAndUnsafeFlushComplete) {
  for (CacheMode cache : {CacheMode::kWriteback, CacheMode::kUnsafe}) {
    SCOPED_TRACE(std::string(cache_mode_name(cache)));
    worker_.reset();
    sq_tail_ = cq_head_ = 0;
    cq_phase_ = true;
    std::memset(ram_.data() + kCqGpa, 0, 4096);
    start(IoEngineKind::kThreads, 64, 64, cache);
    std::memset(data(0), 0x77, 4096);
    SubmissionEntry fua = rw(kIoWrite, 1, 40, 8, 0);
    fua.cdw12 |= kCdw12Fua;
    submit(fua);
    submit(flush(2));
    auto a = complete();
    auto b = complete();
    ASSERT_TRUE(a && b);
    EXPECT_EQ(status_of(*a), kSuccess);
    EXPECT_EQ(status_of(*b), kSuccess);
    EXPECT_EQ(disk_bytes(40 * 512, 4096), std::vector<uint8_t>(4096, 0x77));
  }
}

TEST_F(NvmeIoWorkerTest, ShadowDoorbellsAndEventIdx) {
  start(IoEngineKind::kThreads, 16, 16, CacheMode::kWriteback, {});
  worker_->set_shadow(ShadowDoorbells{kShadowGpa, kEventIdxGpa});
  // The host rings through the ioeventfd (no MMIO value): the tail comes from the shadow page.
  auto kick = [&] {
    uint64_t one = 1;
    ASSERT_EQ(::write(worker_->sq_doorbell_fd(kQid).get(), &one, 8), 8);
  };
  std::memset(data(0), 0xE1, 4096);
  queue(rw(kIoWrite, 1, 0, 8, 0));
  shadow(false, sq_tail_);
  kick();
  auto c = next();
  ASSERT_TRUE(c);
  EXPECT_EQ(status_of(*c), kSuccess);
  EXPECT_TRUE(eventually([&] { return eventidx(false) == 1; }));
  EXPECT_EQ(disk_bytes(0, 4096), std::vector<uint8_t>(4096, 0xE1));

  // An MMIO tail is not where a shadow-doorbell host keeps its tail.
  queue(flush(2));
  worker_->sq_doorbell(kQid, sq_tail_);
  worker_->pause();
  EXPECT_EQ(q().commands.load(), 1u);
  worker_->resume();
  shadow(false, sq_tail_);
  kick();
  c = next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 2);
  EXPECT_TRUE(eventually([&] { return eventidx(false) == 2; }));
  EXPECT_EQ(q().shadow_updates.load(), 2u);

  // A shadow tail ≥ entries: counted and reported once, ignored; the next valid one works.
  shadow(false, 16);
  kick();
  EXPECT_TRUE(eventually([&] { return events().size() == 1; }));
  EXPECT_EQ(q().invalid_doorbells.load(), 1u);
  queue(flush(3));
  shadow(false, sq_tail_);
  kick();
  c = next();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->cid, 3);
  EXPECT_EQ(q().invalid_doorbells.load(), 1u);
}

TEST_F(NvmeIoWorkerTest, ShadowCompletionHeadAndCqEventIdxWhenFull) {
  start(IoEngineKind::kThreads, 16, 4, CacheMode::kWriteback, ShadowDoorbells{kShadowGpa, kEventIdxGpa});
  queue(flush(100));
  shadow(false, sq_tail_);
  worker_->sq_doorbell(kQid, sq_tail_);  // the eventfd rings either way
  ASSERT_TRUE(next());
  shadow(true, cq_head_);  // head 1, in the shadow page only
  for (uint16_t i = 0; i < 6; ++i) queue(flush(i));
  shadow(false, sq_tail_);
  worker_->sq_doorbell(kQid, sq_tail_);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(next());
  worker_->pause();
  EXPECT_EQ(q().commands.load(), 4u);  // the shadow head freed slot 0: 3 more fetched, no more
  EXPECT_EQ(eventidx(true), 1u);  // waiting for room at head 1
  worker_->resume();
  // The host moves its head in the shadow page and, EventIdx 0 being crossed, rings the doorbell.
  shadow(true, cq_head_);
  worker_->cq_doorbell(cq_head_);
  std::set<uint16_t> cids;
  for (uint16_t i = 3; i < 6; ++i) {
    auto c = next();
    ASSERT_TRUE(c);
    cids.insert(c->cid);
  }
  EXPECT_EQ(cids, (std::set<uint16_t>{3, 4, 5}));
  EXPECT_EQ(q().commands.load(), 7u);
}

TEST_F(NvmeIoWorkerTest, RemoveSqCompletesWhatIsInFlightAndDropsTheRest) {
  start(IoEngineKind::kThreads, 64, 64);
  for (uint16_t i = 0; i < 48; ++i) {
    std::memset(data(i), i, 4096);
    queue(rw(kIoWrite, i, i * 8u, 8, i));
  }
  ring();
  worker_->remove_sq(kQid);
  EXPECT_EQ(worker_->sq_count(), 0u);
  uint64_t fetched = q().commands.load();
  // Every fetched command has its completion posted by now; nothing else is.
  for (uint64_t i = 0; i < fetched; ++i) {
    ASSERT_TRUE(cqe_ready()) << i;
    auto c = next();
    EXPECT_EQ(status_of(*c), kSuccess);
  }
  EXPECT_FALSE(cqe_ready());
  // Doorbells for the removed queue are ignored.
  worker_->sq_doorbell(kQid, 1);
  EXPECT_EQ(worker_->sqs().size(), 0u);
}

TEST_F(NvmeIoWorkerTest, NoInterruptWhenTheCqHasThemDisabled) {
  cq_config_.interrupts_enabled = false;
  start();
  cq_config_.interrupts_enabled = false;
  make_worker();
  submit(flush(1));
  ASSERT_TRUE(complete());
  worker_->pause();
  EXPECT_EQ(sink_.count.load(), 0u);
  EXPECT_EQ(q().interrupts.load(), 0u);
}

TEST_F(NvmeIoWorkerTest, ThreadIsNamedAfterTheQueue) {
  start();
  auto named = [] {
    bool found = false;
    if (DIR* d = ::opendir("/proc/self/task")) {
      while (dirent* e = ::readdir(d)) {
        std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/comm");
        std::string comm;
        if (std::getline(f, comm) && comm == "nvme0/cq1") found = true;
      }
      ::closedir(d);
    }
    return found;
  };
  EXPECT_TRUE(eventually(named));  // the thread names itself once it runs
}

}  // namespace
}  // namespace tern::nvme
