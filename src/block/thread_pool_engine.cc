#include "block/thread_pool_engine.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "base/cpu_affinity.h"
#include "block/io_uring_engine.h"

namespace tern {

Result<std::unique_ptr<ThreadPoolEngine>> ThreadPoolEngine::create(BorrowedFd fd, unsigned threads) {
  std::unique_ptr<ThreadPoolEngine> e(new ThreadPoolEngine());
  e->fd_ = fd.get();
  ASSIGN_OR_RETURN(e->event_, make_eventfd(0, EFD_NONBLOCK));
  for (unsigned i = 0; i < std::max(threads, 1u); ++i)
    e->threads_.emplace_back([p = e.get()] { p->run(); });
  return e;
}

ThreadPoolEngine::~ThreadPoolEngine() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPoolEngine::enqueue(const IoOp& op) {
  pending_.push_back(op);
  ++in_flight_;
}

void ThreadPoolEngine::submit() {
  if (pending_.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (auto& op : pending_) queue_.push_back(op);
  }
  pending_.clear();
  cv_.notify_all();
}

void ThreadPoolEngine::reap(std::vector<IoCompletion>& out) {
  uint64_t v = 0;
  [[maybe_unused]] ssize_t n = ::read(event_.get(), &v, sizeof v);
  std::lock_guard lock(mu_);
  in_flight_ -= done_.size();
  out.insert(out.end(), done_.begin(), done_.end());
  done_.clear();
}

int64_t ThreadPoolEngine::execute(const IoOp& op) const {
  switch (op.kind) {
    case IoOp::Kind::kRead:
    case IoOp::Kind::kWrite: {
      // One syscall normally; loop on short transfers (advancing through the iovec array).
      std::vector<iovec> iov(op.iov, op.iov + op.iovcnt);
      size_t first = 0;
      uint64_t done = 0;
      while (first < iov.size()) {
        ssize_t r = retry_eintr([&] {
          return op.kind == IoOp::Kind::kRead
                     ? ::preadv(fd_, iov.data() + first, static_cast<int>(iov.size() - first),
                                static_cast<off_t>(op.offset + done))
                     : ::pwritev(fd_, iov.data() + first, static_cast<int>(iov.size() - first),
                                 static_cast<off_t>(op.offset + done));
        });
        if (r < 0) return -errno;
        if (r == 0) break;  // EOF
        done += static_cast<uint64_t>(r);
        auto left = static_cast<size_t>(r);
        while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
        if (first < iov.size()) {
          iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + left;
          iov[first].iov_len -= left;
        }
      }
      return static_cast<int64_t>(done);
    }
    case IoOp::Kind::kFdatasync:
      return ::fdatasync(fd_) == 0 ? 0 : -errno;
    case IoOp::Kind::kFallocate:
      return ::fallocate(fd_, op.fallocate_mode, static_cast<off_t>(op.offset),
                         static_cast<off_t>(op.len)) == 0
                 ? 0
                 : -errno;
  }
  return -EINVAL;
}

void ThreadPoolEngine::run() {
  // Named as a device worker ("io-" prefix: tern stat --all counts it in the io class).
  pthread_setname_np(pthread_self(), "io-exec");
  pin_this_thread(ThreadClass::kIo);  // --cpu-affinity io
  for (;;) {
    IoOp op;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      op = queue_.front();
      queue_.pop_front();
    }
    int64_t r = execute(op);
    {
      std::lock_guard lock(mu_);
      done_.push_back(IoCompletion{op.user_data, r});
    }
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(event_.get(), &one, sizeof one);
  }
}

Result<std::unique_ptr<IoEngine>> make_io_engine(IoEngineKind kind, BorrowedFd fd, unsigned depth) {
  if (kind == IoEngineKind::kIoUring) {
    if (io_uring_usable()) {
      auto e = IoUringEngine::create(fd, depth);
      if (e) return std::unique_ptr<IoEngine>(std::move(*e));
      spdlog::warn("io_uring setup failed ({}); using the thread-pool I/O engine",
                   e.error().message());
    } else {
      static std::once_flag once;
      std::call_once(once, [] {
        spdlog::warn("io_uring is not usable on this host; using the thread-pool I/O engine");
      });
    }
  }
  ASSIGN_OR_RETURN(auto e, ThreadPoolEngine::create(fd, 4));
  return std::unique_ptr<IoEngine>(std::move(e));
}

}  // namespace tern
