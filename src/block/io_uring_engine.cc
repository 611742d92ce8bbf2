#include "block/io_uring_engine.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <mutex>

#include <spdlog/spdlog.h>

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

Result<std::unique_ptr<IoUringEngine>> IoUringEngine::create(BorrowedFd fd, unsigned depth) {
  std::unique_ptr<IoUringEngine> e(new IoUringEngine());
  e->fd_ = fd.get();
  io_uring_params params{};
  params.flags = IORING_SETUP_CQSIZE;
  params.cq_entries = depth * 2;
  int r = io_uring_queue_init_params(depth, &e->ring_, &params);
  if (r < 0) return fail_code(-r, "io_uring_queue_init");
  e->ring_ok_ = true;
  ASSIGN_OR_RETURN(e->event_, make_eventfd(0, EFD_NONBLOCK));
  r = io_uring_register_eventfd(&e->ring_, e->event_.get());
  if (r < 0) return fail_code(-r, "io_uring_register_eventfd");
  return e;
}

IoUringEngine::~IoUringEngine() {
  if (!ring_ok_) return;
  // Wait for everything the kernel still owns: the buffers belong to the caller.
  while (in_flight_ > failed_.size()) {
    io_uring_cqe* cqe = nullptr;
    if (io_uring_wait_cqe(&ring_, &cqe) != 0) break;
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
  }
  io_uring_queue_exit(&ring_);
}

void IoUringEngine::enqueue(const IoOp& op) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  ++in_flight_;
  if (sqe == nullptr) {
    failed_.push_back(IoCompletion{op.user_data, -EAGAIN});
    return;
  }
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

void IoUringEngine::submit() {
  int r = io_uring_submit(&ring_);
  if (r < 0 && r != -EBUSY && r != -EAGAIN) spdlog::warn("io_uring_submit: {}", std::strerror(-r));
  if (!failed_.empty()) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_.get(), &one, sizeof one);
  }
}

void IoUringEngine::reap(std::vector<IoCompletion>& out) {
  uint64_t v = 0;
  [[maybe_unused]] ssize_t n = ::read(event_.get(), &v, sizeof v);
  for (auto& f : failed_) out.push_back(f);
  in_flight_ -= failed_.size();
  failed_.clear();
  io_uring_cqe* cqe = nullptr;
  while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
    out.push_back(IoCompletion{io_uring_cqe_get_data64(cqe), cqe->res});
    io_uring_cqe_seen(&ring_, cqe);
    --in_flight_;
  }
  // Ops left in the SQ by a failed/partial submit must not be stranded.
  if (io_uring_sq_ready(&ring_) > 0) io_uring_submit(&ring_);
}

}  // namespace tern
