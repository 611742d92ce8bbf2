// IoUringEngine under pressure and refusal: more ops than the rings hold complete without
// spurious errors; io_uring_submit() returning -EAGAIN/-EBUSY never strands an op (the
// completion eventfd still fires), and a submit that keeps failing fails the ops instead of
// leaving the caller waiting forever.
#include "block/io_uring_engine.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace tern {
namespace {

int g_fail_left = 0;  // submits still to fail
int g_fail_code = 0;  // with this -errno
int failing_submit(io_uring* ring) {
  if (g_fail_left > 0) {
    --g_fail_left;
    return g_fail_code;
  }
  return io_uring_submit(ring);
}

class IoUringEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!io_uring_usable()) GTEST_SKIP() << "io_uring not usable here";
    char tmpl[] = "/tmp/tern-uring-XXXXXX";
    int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    path_ = tmpl;
    fd_.reset(fd);
    ASSERT_EQ(::ftruncate(fd, 1 << 20), 0);
    g_fail_left = 0;
  }
  void TearDown() override {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  /// Reaps until `n` completions arrived; every wait is on the completion eventfd, as the queue
  /// worker waits. The poll timeout only turns a hang (the old behaviour) into a failure.
  std::vector<IoCompletion> reap_n(IoEngine& e, size_t n) {
    std::vector<IoCompletion> out;
    while (out.size() < n) {
      pollfd p{e.completion_fd().get(), POLLIN, 0};
      int r = ::poll(&p, 1, 20000);
      if (r <= 0) {
        ADD_FAILURE() << "no completion wakeup; got " << out.size() << " of " << n;
        break;
      }
      e.reap(out);
      e.submit();
    }
    return out;
  }
  std::string path_;
  UniqueFd fd_;
};

TEST_F(IoUringEngineTest, ManyMoreOpsThanTheRingsCompleteOk) {
  auto e = IoUringEngine::create(fd_.borrow(), 2);  // SQ 2, CQ 4
  ASSERT_TRUE(e) << e.error().message();
  for (uint32_t i = 0; i < 200; ++i) {
    IoOp op;
    op.kind = IoOp::Kind::kFallocate;
    op.fallocate_mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
    op.offset = i * 4096;
    op.len = 4096;
    op.user_data = i;
    (*e)->enqueue(op);
  }
  (*e)->submit();
  auto got = reap_n(**e, 200);
  ASSERT_EQ(got.size(), 200u);
  for (const auto& c : got) EXPECT_EQ(c.result, 0) << c.user_data;
  EXPECT_EQ((*e)->in_flight(), 0u);
}

TEST_F(IoUringEngineTest, TransientSubmitFailuresStillComplete) {
  for (int code : {-EAGAIN, -EBUSY}) {
    auto e = IoUringEngine::create(fd_.borrow(), 4, failing_submit);
    ASSERT_TRUE(e) << e.error().message();
    std::vector<uint8_t> buf(4096, 0x5a);
    iovec iov{buf.data(), buf.size()};
    IoOp op;
    op.kind = IoOp::Kind::kWrite;
    op.iov = &iov;
    op.iovcnt = 1;
    op.len = buf.size();
    op.user_data = 7;
    g_fail_code = code;
    g_fail_left = 3;
    (*e)->enqueue(op);
    (*e)->submit();  // fails; nothing in the kernel — the old engine then never woke anyone
    auto got = reap_n(**e, 1);
    ASSERT_EQ(got.size(), 1u) << code;
    EXPECT_EQ(got[0].user_data, 7u);
    EXPECT_EQ(got[0].result, 4096);
    EXPECT_EQ((*e)->in_flight(), 0u);
  }
}

TEST_F(IoUringEngineTest, PersistentSubmitFailureFailsTheOps) {
  auto e = IoUringEngine::create(fd_.borrow(), 4, failing_submit);
  ASSERT_TRUE(e) << e.error().message();
  g_fail_code = -EAGAIN;
  g_fail_left = 1 << 30;
  IoOp op;
  op.kind = IoOp::Kind::kFdatasync;
  for (uint64_t i = 0; i < 6; ++i) {  // 4 in the SQ, 2 in the backlog
    op.user_data = i;
    (*e)->enqueue(op);
  }
  (*e)->submit();
  auto got = reap_n(**e, 6);
  ASSERT_EQ(got.size(), 6u);
  for (const auto& c : got) EXPECT_EQ(c.result, -EAGAIN);
  EXPECT_EQ((*e)->in_flight(), 0u);
  // The kernel works again: the engine goes on (the abandoned SQEs turn into dropped NOPs).
  g_fail_left = 0;
  op.user_data = 42;
  (*e)->enqueue(op);
  (*e)->submit();
  got = reap_n(**e, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].user_data, 42u);
  EXPECT_EQ(got[0].result, 0);
  // Destruction returns (it waits only for what the kernel took).
}

}  // namespace
}  // namespace tern
