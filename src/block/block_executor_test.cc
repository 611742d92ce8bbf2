// BlockExecutor without any frontend: byte-addressed ops on a temporary image through the
// thread-pool engine.
#include "block/block_executor.h"

#include <poll.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "base/testing/temp_dir.h"
#include "block/thread_pool_engine.h"

namespace tern {
namespace {

class BlockExecutorTest : public ::testing::Test {
 protected:
  void open(CacheMode cache, DiskFormat format = DiskFormat::kAuto) {
    ASSERT_FALSE(dir_.path().empty());
    std::string path = dir_.path() + "/disk.img";
    std::ofstream(path, std::ios::binary) << std::string(64 * 1024, 'x');
    DiskConfig c;
    c.path = path;
    c.cache = cache;
    c.format = format;
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d) << d.error().message();
    disk_.emplace(std::move(*d));
    auto e = ThreadPoolEngine::create(disk_->fd(), 8);
    ASSERT_TRUE(e) << e.error().message();
    auto x = BlockExecutor::create(*disk_, 8, std::move(*e), &counters_, &limit_, "test");
    ASSERT_TRUE(x) << x.error().message();
    exec_ = std::move(*x);
  }
  /// Submits `op` and waits for its completion.
  BlockCompletion run(BlockOp op) {
    uint64_t tag = op.tag;
    if (auto now = exec_->submit(std::move(op))) return BlockCompletion{tag, *now};
    exec_->flush();
    std::vector<BlockCompletion> out;
    exec_->drain(out);
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? BlockCompletion{~0ull, BlockStatus::kIoError} : out[0];
  }
  BlockOp rw(BlockOp::Kind k, uint64_t offset, std::vector<uint8_t>& buf, uint64_t tag) {
    BlockOp op;
    op.kind = k;
    op.offset = offset;
    op.len = buf.size();
    op.iov = {iovec{buf.data(), buf.size()}};
    op.tag = tag;
    return op;
  }

  testing::TempDir dir_;
  std::optional<DiskImage> disk_;
  BlockExecutorCounters counters_;
  RateLimit limit_;
  std::unique_ptr<BlockExecutor> exec_;
};

TEST_F(BlockExecutorTest, WriteReadRoundTripKeepsTags) {
  open(CacheMode::kWriteback);
  std::vector<uint8_t> data(4096, 0xAB);
  auto w = run(rw(BlockOp::Kind::kWrite, 8192, data, 7));
  EXPECT_EQ(w.tag, 7u);
  EXPECT_EQ(w.status, BlockStatus::kOk);
  std::vector<uint8_t> back(4096, 0);
  auto r = run(rw(BlockOp::Kind::kRead, 8192, back, 9));
  EXPECT_EQ(r.tag, 9u);
  EXPECT_EQ(r.status, BlockStatus::kOk);
  EXPECT_EQ(back, data);
  EXPECT_TRUE(exec_->has_free_slot());
}

TEST_F(BlockExecutorTest, ReadPastTheEndIsAHostError) {
  open(CacheMode::kWriteback);
  std::vector<uint8_t> buf(4096);
  EXPECT_EQ(run(rw(BlockOp::Kind::kRead, 64 * 1024, buf, 1)).status, BlockStatus::kHostError);
}

TEST_F(BlockExecutorTest, NothingToDoCompletesAtOnce) {
  open(CacheMode::kUnsafe);
  BlockOp flush;
  flush.kind = BlockOp::Kind::kFlush;
  EXPECT_EQ(exec_->submit(flush), std::optional<BlockStatus>(BlockStatus::kOk));
  BlockOp discard;
  discard.kind = BlockOp::Kind::kDiscard;
  EXPECT_EQ(exec_->submit(discard), std::optional<BlockStatus>(BlockStatus::kOk));
}

TEST_F(BlockExecutorTest, WriteZeroesReadsBackZeroes) {
  open(CacheMode::kWriteback);
  BlockOp z;
  z.kind = BlockOp::Kind::kWriteZeroes;
  z.ranges = {BlockRange{4096, 8192, false}};
  EXPECT_EQ(run(z).status, BlockStatus::kOk);  // ZERO_RANGE, or the punch-hole fallback
  std::vector<uint8_t> back(8192, 1);
  EXPECT_EQ(run(rw(BlockOp::Kind::kRead, 4096, back, 2)).status, BlockStatus::kOk);
  EXPECT_EQ(back, std::vector<uint8_t>(8192, 0));
  std::vector<uint8_t> around(4096, 0);
  EXPECT_EQ(run(rw(BlockOp::Kind::kRead, 0, around, 3)).status, BlockStatus::kOk);
  EXPECT_EQ(around, std::vector<uint8_t>(4096, 'x'));
}

// drain() returns only when nothing is in flight, even when poll() fails: a request it gave up on
// would stay taken from the ring and never completed (issue 31 item 14d). poll() is made to fail
// (EINVAL: more fds asked for than RLIMIT_NOFILE) by lowering the limit to 0 around the drain.
TEST_F(BlockExecutorTest, DrainCompletesEverythingWhenPollFails) {
  open(CacheMode::kWriteback);
  std::vector<uint8_t> data(4096, 0x5A);
  ASSERT_FALSE(exec_->submit(rw(BlockOp::Kind::kWrite, 4096, data, 11)));
  exec_->flush();
  rlimit saved{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &saved), 0);
  rlimit none = saved;
  none.rlim_cur = 0;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &none), 0);
  pollfd probe{exec_->completion_fd().get(), POLLIN, 0};
  const int poll_result = ::poll(&probe, 1, 0);
  const int poll_errno = errno;
  std::vector<BlockCompletion> out;
  exec_->drain(out);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_EQ(poll_result, -1) << "the test's premise: poll() fails under RLIMIT_NOFILE 0";
  EXPECT_EQ(poll_errno, EINVAL);
  ASSERT_EQ(out.size(), 1u) << "drain() returned with the write still in flight";
  EXPECT_EQ(out[0].tag, 11u);
  EXPECT_EQ(out[0].status, BlockStatus::kOk);
  std::vector<uint8_t> back(4096, 0);
  EXPECT_EQ(run(rw(BlockOp::Kind::kRead, 4096, back, 12)).status, BlockStatus::kOk);
  EXPECT_EQ(back, data);
}

// Before: a guest of a raw disk opened without format= could write a qcow2 header at offset 0,
// and the next start (or a restore) probed the file as qcow2 — its backing file name, L1 and
// refcount tables the guest's (with backing_files=on, a host path of the guest's choosing
// opened). A probed raw disk refuses writes that leave the magic in bytes 0..3, whole or in
// pieces; format=raw allows them; the disk reopens raw.
TEST_F(BlockExecutorTest, ProbedRawDiskRefusesAQcow2HeaderWrite) {
  open(CacheMode::kWriteback);
  ASSERT_TRUE(disk_->format_probed());
  std::vector<uint8_t> hdr(512, 0);
  const uint8_t magic[4] = {'Q', 'F', 'I', 0xfb};
  std::memcpy(hdr.data(), magic, 4);
  EXPECT_EQ(run(rw(BlockOp::Kind::kWrite, 0, hdr, 1)).status, BlockStatus::kIoError);
  std::vector<uint8_t> two = {'Q', 'F'}, rest = {'I', 0xfb};
  EXPECT_EQ(run(rw(BlockOp::Kind::kWrite, 0, two, 2)).status, BlockStatus::kOk);
  EXPECT_EQ(run(rw(BlockOp::Kind::kWrite, 2, rest, 3)).status, BlockStatus::kIoError);
  std::vector<uint8_t> other(512, 'y');  // any other first sector is written
  EXPECT_EQ(run(rw(BlockOp::Kind::kWrite, 512, hdr, 4)).status, BlockStatus::kOk);
  EXPECT_EQ(run(rw(BlockOp::Kind::kWrite, 0, other, 5)).status, BlockStatus::kOk);
  exec_.reset();
  disk_.reset();
  {
    DiskConfig c;
    c.path = dir_.path() + "/disk.img";
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d) << d.error().message();
    EXPECT_EQ(d->format(), DiskFormat::kRaw);
    EXPECT_EQ(d->size_bytes(), 64u * 1024);
  }
  open(CacheMode::kWriteback, DiskFormat::kRaw);
  EXPECT_FALSE(disk_->format_probed());
  EXPECT_EQ(run(rw(BlockOp::Kind::kWrite, 0, hdr, 6)).status, BlockStatus::kOk);
}

}  // namespace
}  // namespace tern
