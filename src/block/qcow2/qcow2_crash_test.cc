// Crash safety and the executor path of a qcow2 disk. A child process writes through the qcow2
// layer and is SIGKILLed at a deterministic step of an allocating write (Qcow2Image's step hook:
// after the refcount, after the data, after the L2 entry); then `qemu-img check` must report no
// corruption (leaks allowed) and everything the child flushed must read back. Then reads and
// writes through BlockExecutor (thread-pool engine; cache=none with unaligned buffers too) land
// where qemu-img sees them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "base/testing/temp_dir.h"
#include "block/block_executor.h"
#include "block/disk_image.h"
#include "block/qcow2/testing/qemu_img.h"
#include "block/thread_pool_engine.h"

namespace tern {
namespace {

using testing::check_clean;
using testing::pattern;
using testing::run_command;

int g_steps_left = 0;
void kill_at_step(const char*) {
  if (--g_steps_left == 0) ::raise(SIGKILL);
}

class Qcow2CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_EQ(run_command("qemu-img --version").status, 0) << "qemu-img missing (qemu-utils)";
  }
  std::string path(const std::string& n) const { return dir_.path() + "/" + n; }
  testing::TempDir dir_{"tern-qcow2-crash"};
};

TEST_F(Qcow2CrashTest, SigkillDuringAllocatingWritesLeavesACleanImageWithFlushedData) {
  const auto flushed = pattern(300 * 1024, 1);
  for (int kill_at : {1, 2, 3, 4, 5, 7, 10, 16, 25, 40, 64}) {
    SCOPED_TRACE(kill_at);
    const std::string img = path("crash.qcow2");
    ::unlink(img.c_str());
    ASSERT_EQ(run_command("qemu-img create -q -f qcow2 -o cluster_size=4096 " + img + " 8M").status,
              0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      DiskConfig c;
      c.path = img;
      auto d = DiskImage::open(c);
      if (!d || !d->qcow2()) ::_exit(10);
      Qcow2Image& q = *d->qcow2();
      if (!q.write_sync(4096 + 100, flushed.data(), flushed.size()) || !q.flush()) ::_exit(11);
      g_steps_left = kill_at;
      q.set_step_hook(kill_at_step);
      for (uint32_t i = 0; i < 40; ++i) {
        auto more = pattern(10000 + i * 777, 100 + i);
        if (!q.write_sync((1u << 20) + i * 150000, more.data(), more.size())) ::_exit(12);
      }
      ::_exit(0);
    }
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "child status " << st;
    auto check = run_command("qemu-img check " + img);
    EXPECT_TRUE(check_clean(check)) << check.status << ": " << check.output;
    // The flushed bytes, as qemu-img reads them.
    ASSERT_EQ(run_command("qemu-img convert -f qcow2 -O raw " + img + " " + path("out.raw")).status,
              0);
    auto out = testing::read_file(path("out.raw"));
    ASSERT_GE(out.size(), 4096 + 100 + flushed.size());
    EXPECT_TRUE(std::equal(flushed.begin(), flushed.end(), out.begin() + 4096 + 100));
  }
}

// The file cannot grow (RLIMIT_FSIZE: what a full filesystem does to a growing image, EFBIG for
// ENOSPC) while writes allocate: they fail, the image is closed and reopened; qemu-img check
// finds no corruption (leaks allowed), the flushed bytes read back, and once the file may grow
// again the same writes succeed and read back.
TEST_F(Qcow2CrashTest, AllocatingWritesOnAFileThatCannotGrowFailWithoutCorruption) {
  const std::string img = path("full.qcow2");
  ASSERT_EQ(run_command("qemu-img create -q -f qcow2 -o cluster_size=4096 " + img + " 8M").status,
            0);
  const auto flushed = pattern(64 * 1024, 3);
  const auto more = pattern(2 << 20, 4);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    DiskConfig c;
    c.path = img;
    {
      auto d = DiskImage::open(c);
      if (!d || !d->qcow2()) ::_exit(10);
      if (!d->qcow2()->write_sync(0, flushed.data(), flushed.size()) || !d->qcow2()->flush())
        ::_exit(11);
      struct stat st {};
      if (::stat(img.c_str(), &st) != 0) ::_exit(12);
      rlimit lim{static_cast<rlim_t>(st.st_size) + 64 * 1024, RLIM_INFINITY};
      if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(13);
      bool failed = false;
      for (size_t off = 0; off < more.size(); off += 64 * 1024)
        failed |= !d->qcow2()->write_sync((4 << 20) + off, more.data() + off, 64 * 1024);
      if (!failed) ::_exit(14);
    }  // closed with the limit on
    for (int cycle = 0; cycle < 3; ++cycle) {  // reopened, still full: reads fine, writes fail
      auto d = DiskImage::open(c);
      if (!d || !d->qcow2()) ::_exit(20 + cycle);
      std::vector<uint8_t> back(flushed.size());
      if (!d->qcow2()->read_sync(0, back.data(), back.size()) || back != flushed) ::_exit(30 + cycle);
      (void)d->qcow2()->write_sync(6 << 20, more.data(), 1 << 20);
    }
    ::_exit(0);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st)) << st;
  ASSERT_EQ(WEXITSTATUS(st), 0);
  auto check = run_command("qemu-img check " + img);
  EXPECT_TRUE(check_clean(check)) << check.status << ": " << check.output;
  {
    DiskConfig c;
    c.path = img;
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d && d->qcow2()) << (d ? "" : d.error().message());
    ASSERT_TRUE(d->qcow2()->write_sync(4 << 20, more.data(), more.size()));
    ASSERT_TRUE(d->qcow2()->flush());
  }
  check = run_command("qemu-img check " + img);
  EXPECT_TRUE(check_clean(check)) << check.status << ": " << check.output;
  ASSERT_EQ(run_command("qemu-img convert -f qcow2 -O raw " + img + " " + path("full.raw")).status,
            0);
  auto out = testing::read_file(path("full.raw"));
  ASSERT_GE(out.size(), (4u << 20) + more.size());
  EXPECT_TRUE(std::equal(flushed.begin(), flushed.end(), out.begin()));
  EXPECT_TRUE(std::equal(more.begin(), more.end(), out.begin() + (4 << 20)));
}

// Four threads (four queues of one disk) allocate at once, each writing every fourth 512-byte
// sector of the same clusters in its own random order: no cluster is handed out twice (qemu-img
// check clean) and no write is lost to a concurrent allocation of its cluster (compare equal).
TEST_F(Qcow2CrashTest, ConcurrentAllocatingWritersNeverShareOrLoseAClusterWrite) {
  const std::string img = path("mt.qcow2");
  ASSERT_EQ(run_command("qemu-img create -q -f qcow2 -o cluster_size=4096 " + img + " 2M").status,
            0);
  constexpr unsigned kThreads = 4, kSectors = (2u << 20) / 512;
  std::vector<uint8_t> expected(2u << 20);
  for (unsigned s = 0; s < kSectors; ++s)
    std::fill_n(expected.begin() + s * 512, 512, uint8_t(s % 251 + s % kThreads));
  {
    DiskConfig c;
    c.path = img;
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d) << d.error().message();
    Qcow2Image& q = *d->qcow2();
    std::vector<std::thread> threads;
    std::vector<int> failures(kThreads, 0);
    for (unsigned t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::vector<unsigned> mine;
        for (unsigned s = t; s < kSectors; s += kThreads) mine.push_back(s);
        std::shuffle(mine.begin(), mine.end(), std::mt19937(t));
        for (unsigned s : mine)
          if (!q.write_sync(uint64_t{s} * 512, expected.data() + s * 512, 512)) ++failures[t];
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(failures, std::vector<int>(kThreads, 0));
    ASSERT_TRUE(q.flush());
  }
  testing::write_file(path("mt.raw"), expected);
  auto check = run_command("qemu-img check " + img);
  EXPECT_EQ(check.status, 0) << check.output;  // no leaks either: nothing crashed
  auto cmp = run_command("qemu-img compare -f qcow2 -F raw " + img + " " + path("mt.raw"));
  EXPECT_EQ(cmp.status, 0) << cmp.output;
}

class Qcow2ExecutorTest : public Qcow2CrashTest {
 protected:
  void open(CacheMode cache) {
    DiskConfig c;
    c.path = path("exec.qcow2");
    c.cache = cache;
    c.backing_files = true;
    auto d = DiskImage::open(c);
    ASSERT_TRUE(d) << d.error().message();
    ASSERT_NE(d->qcow2(), nullptr);
    disk_.emplace(std::move(*d));
    auto e = ThreadPoolEngine::create(disk_->fd(), 8);
    ASSERT_TRUE(e) << e.error().message();
    auto x = BlockExecutor::create(*disk_, 8, std::move(*e), &counters_, &limit_, "test");
    ASSERT_TRUE(x) << x.error().message();
    exec_ = std::move(*x);
  }
  BlockStatus run(BlockOp::Kind k, uint64_t off, uint8_t* buf, uint64_t len) {
    BlockOp op;
    op.kind = k;
    op.offset = off;
    op.len = len;
    if (len > 0) op.iov = {iovec{buf, len / 2}, iovec{buf + len / 2, len - len / 2}};
    if (k == BlockOp::Kind::kWriteZeroes || k == BlockOp::Kind::kDiscard)
      op.ranges = {BlockRange{off, len, false}};
    op.tag = 1;
    if (auto now = exec_->submit(std::move(op))) return *now;
    exec_->flush();
    std::vector<BlockCompletion> out;
    exec_->drain(out);
    return out.size() == 1 ? out[0].status : BlockStatus::kHostError;
  }

  std::optional<DiskImage> disk_;
  BlockExecutorCounters counters_;
  RateLimit limit_;
  std::unique_ptr<BlockExecutor> exec_;
};

TEST_F(Qcow2ExecutorTest, ReadsAndWritesThroughTheExecutorMatchQemuImg) {
  auto base = pattern(4u << 20, 5);
  testing::write_file(path("base.raw"), base);
  for (CacheMode cache : {CacheMode::kWriteback, CacheMode::kNone}) {
    SCOPED_TRACE(std::string(cache_mode_name(cache)));
    ::unlink(path("exec.qcow2").c_str());
    ASSERT_EQ(run_command("qemu-img create -q -f qcow2 -b " + path("base.raw") + " -F raw " +
                          path("exec.qcow2"))
                  .status,
              0);
    open(cache);
    if (::testing::Test::HasFatalFailure()) return;
    auto expected = base;
    // Aligned and (for cache=none) unaligned buffers: 1 byte past an aligned allocation.
    std::vector<uint8_t> mem(300 * 1024 + 4096 * 2);
    uint8_t* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(mem.data()) + 4095) &
                                                  ~uintptr_t{4095});
    for (int i = 0; i < 20; ++i) {
      uint64_t off = (static_cast<uint64_t>(i) * 197 * 1024) % (3u << 20) & ~uint64_t{511};
      uint64_t len = 512 * (1 + (i * 37) % 400);
      uint8_t* buf = i % 2 ? aligned : aligned + 1;
      auto data = pattern(len, static_cast<uint32_t>(i));
      std::copy(data.begin(), data.end(), buf);
      ASSERT_EQ(run(BlockOp::Kind::kWrite, off, buf, len), BlockStatus::kOk);
      std::copy(data.begin(), data.end(), expected.begin() + static_cast<long>(off));
      // Read back a range around it, through the executor.
      uint64_t roff = off >= 4096 ? off - 4096 : 0,
               rlen = std::min<uint64_t>(len + 8192, (4u << 20) - roff);
      rlen = std::min<uint64_t>(rlen, 300 * 1024);
      ASSERT_EQ(run(BlockOp::Kind::kRead, roff, buf, rlen), BlockStatus::kOk);
      EXPECT_TRUE(std::equal(buf, buf + rlen, expected.begin() + static_cast<long>(roff))) << i;
    }
    ASSERT_EQ(run(BlockOp::Kind::kWriteZeroes, 1u << 20, nullptr, 256 * 1024), BlockStatus::kOk);
    std::fill_n(expected.begin() + (1 << 20), 256 * 1024, 0);
    // The zero clusters read back as zeros (map()'s zero extents), the bytes around them as written.
    ASSERT_EQ(run(BlockOp::Kind::kRead, (1u << 20) - 4096, aligned, 264 * 1024), BlockStatus::kOk);
    EXPECT_TRUE(std::equal(aligned, aligned + 264 * 1024, expected.begin() + (1 << 20) - 4096));
    ASSERT_EQ(run(BlockOp::Kind::kFlush, 0, nullptr, 0), BlockStatus::kOk);
    // tern stat's view: the L2 cache was used and clusters were allocated.
    std::vector<std::pair<std::string, uint64_t>> counters;
    disk_->append_counters(counters);
    ASSERT_EQ(counters.size(), 3u);
    EXPECT_EQ(counters[0].first, "qcow2_l2_cache_hits");
    EXPECT_GT(counters[0].second, 0u);
    EXPECT_GT(counters[1].second, 0u);   // misses: the first look at each L2 table
    EXPECT_GT(counters[2].second, 20u);  // allocations: at least one per write
    exec_.reset();
    disk_.reset();
    testing::write_file(path("expected.raw"), expected);
    auto check = run_command("qemu-img check " + path("exec.qcow2"));
    EXPECT_TRUE(check_clean(check)) << check.output;
    auto cmp = run_command("qemu-img compare -f qcow2 -F raw " + path("exec.qcow2") + " " +
                           path("expected.raw"));
    EXPECT_EQ(cmp.status, 0) << cmp.output;
  }
}

}  // namespace
}  // namespace tern
