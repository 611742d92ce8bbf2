#include "block/io_uring_engine.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

namespace tern {

bool io_uring_usable() {
  static std::once_flag once;
  static bool usable = false;
  std::call_once(once, [] {
    io_uring ring{};
    if (io_uring_queue_init(4, &ring, 0) != 0) return;
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    if (probe != nullptr) {
      usable = io_uring_opcode_supported(probe, IORING_OP_READV) &&
               io_uring_opcode_supported(probe, IORING_OP_WRITEV) &&
               io_uring_opcode_supported(probe, IORING_OP_FSYNC) &&
               io_uring_opcode_supported(probe, IORING_OP_FALLOCATE);
      io_uring_free_probe(probe);
    }
    io_uring_queue_exit(&ring);
  });
  return usable;
}

namespace {
constexpr uint64_t kAbandonedUserData = ~uint64_t{0};
}  // namespace

Result<std::unique_ptr<IoUringEngine>> IoUringEngine::create(BorrowedFd fd, unsigned depth,
                                                             SubmitFn submit) {
  std::unique_ptr<IoUringEngine> e(new IoUringEngine());
  e->fd_ = fd.get();
  e->submit_ = submit != nullptr ? submit : io_uring_submit;
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE;
  params.cq_entries = depth * 2;
  int r = io_uring_queue_init_params(depth, &e->ring_, &params);
  if (r < 0) return fail_code(-r, "io_uring_queue_init");
  e->ring_ok_ = true;
  e->cap_ = params.cq_entries;
  ASSIGN_OR_RETURN(e->event_, make_eventfd(0, EFD_NONBLOCK));
  r = io_uring_register_eventfd(&e->ring_, e->event_.get());
  if (r < 0) return fail_code(-r, "io_uring_register_eventfd");
  return e;
}

IoUringEngine::~IoUringEngine() {
  if (!ring_ok_) return;
  // Wait for everything the kernel took: the buffers belong to the caller. SQEs it never consumed
  // are dropped by io_uring_queue_exit() unexecuted.
  while (in_ring_ > io_uring_sq_ready(&ring_)) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) != 0) break;
    io_uring_cqe_seen(&ring_, cqe);
    --in_ring_;
  }
  io_uring_queue_exit(&ring_);
}

void IoUringEngine::prep(io_uring_sqe* sqe, const IoOp& op) {
  switch (op.kind) {
    case IoOp::Kind::kRead:
      io_uring_prep_readv(sqe, fd_, op.iov, static_cast<unsigned>(op.iovcnt), op.offset);
      break;
    case IoOp::Kind::kWrite:
      io_uring_prep_writev(sqe, fd_, op.iov, static_cast<unsigned>(op.iovcnt), op.offset);
      break;
    case IoOp::Kind::kFdatasync:
      io_uring_prep_fsync(sqe, fd_, IORING_FSYNC_DATASYNC);
      break;
    case IoOp::Kind::kFallocate:
      io_uring_prep_fallocate(sqe, fd_, op.fallocate_mode, static_cast<off_t>(op.offset),
                              static_cast<off_t>(op.len));
      break;
  }
  io_uring_sqe_set_data64(sqe, op.user_data);
}

void IoUringEngine::enqueue(const IoOp& op) {
  backlog_.push_back(op);
  fill();
}

void IoUringEngine::fill() {
  while (!backlog_.empty() && in_ring_ < cap_) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) {
      // The SQ is full: hand it to the kernel now (the CQ has room: in_ring_ < cap_).
      unsigned before = io_uring_sq_ready(&ring_);
      do_submit();
      if (io_uring_sq_ready(&ring_) >= before) return;  // not taken; retried after a wakeup
      continue;
    }
    prep(sqe, backlog_.front());
    backlog_.pop_front();
    ++in_ring_;
  }
}

void IoUringEngine::submit() {
  fill();
  do_submit();
}

void IoUringEngine::wake() const {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(event_.get(), &one, sizeof one);
}

void IoUringEngine::do_submit() {
  if (io_uring_sq_ready(&ring_) == 0) return;
  int r = submit_(&ring_);
  if (r >= 0) {
    submit_failures_ = 0;
    return;
  }
  bool transient = r == -EAGAIN || r == -EBUSY || r == -EINTR;
  if (!transient) spdlog::warn("io_uring_submit: {}", std::strerror(-r));
  // Ops the kernel holds will complete and wake the worker, which submits again after reaping.
  if (in_ring_ > io_uring_sq_ready(&ring_)) return;
  // Nothing would wake it: retry on the next loop, and give up after a while.
  if (transient && ++submit_failures_ < kMaxSubmitRetries) {
    wake();
    return;
  }
  abandon_unsubmitted(-r);
}

void IoUringEngine::abandon_unsubmitted(int err) {
  // SQEs in [khead, sqe_tail) were never read by the kernel: report them failed, and turn them
  // into NOPs whose completions reap() drops (the kernel may still consume them later).
  unsigned head = *ring_.sq.khead;
  for (unsigned i = head; i != ring_.sq.sqe_tail; ++i) {
    io_uring_sqe* sqe = &ring_.sq.sqes[i & ring_.sq.ring_mask];
    if (sqe->user_data == kAbandonedUserData) continue;
    failed_.push_back(IoCompletion{sqe->user_data, -err});
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, kAbandonedUserData);
    ++abandoned_;
  }
  for (const auto& op : backlog_) failed_.push_back(IoCompletion{op.user_data, -err});
  backlog_.clear();
  submit_failures_ = 0;
  spdlog::warn("io_uring_submit failed {} times in a row ({}): failing the queued I/O",
               kMaxSubmitRetries, std::strerror(err));
  wake();
}

void IoUringEngine::reap(std::vector<IoCompletion>& out) {
  uint64_t v = 0;
  [[maybe_unused]] ssize_t n = ::read(event_.get(), &v, sizeof v);
  for (auto& f : failed_) out.push_back(f);
  failed_.clear();
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    uint64_t ud = io_uring_cqe_get_data64(cqe);
    if (ud == kAbandonedUserData)
      --abandoned_;
    else
      out.push_back(IoCompletion{ud, cqe->res});
    io_uring_cqe_seen(&ring_, cqe);
    --in_ring_;
  }
  // Room freed: move the backlog in; ops left by a failed/partial submit must not be stranded.
  submit();
}

}  // namespace tern
