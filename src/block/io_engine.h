// IoEngine: asynchronous I/O on one disk fd for one queue worker. Two implementations: io_uring
// (liburing, batched submission; the default) and a thread pool (preadv/pwritev in helper
// threads), chosen by make_io_engine(). Completions are announced on an eventfd so the worker's
// epoll covers kicks and completions alike.
//
// Not thread-safe: one worker thread calls enqueue/submit/reap. Buffers and iovec arrays passed in
// must stay valid until the op's completion is reaped.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "block/disk_config.h"

namespace tern {

/// One I/O operation. Offsets and lengths in bytes.
struct IoOp {
  enum class Kind : uint8_t {
    kRead,       ///< preadv(iov, iovcnt, offset)
    kWrite,      ///< pwritev(iov, iovcnt, offset)
    kFdatasync,  ///< fdatasync()
    kFallocate,  ///< fallocate(mode, offset, len): discard / write zeroes
  };
  Kind kind = Kind::kRead;
  int fallocate_mode = 0;
  uint64_t offset = 0;
  uint64_t len = 0;             ///< kFallocate; for kRead/kWrite the iovec total.
  const iovec* iov = nullptr;
  int iovcnt = 0;               ///< <= IOV_MAX
  uint64_t user_data = 0;       ///< Returned in the completion.
};

/// A finished op: `result` is bytes transferred (kRead/kWrite), 0, or -errno.
struct IoCompletion {
  uint64_t user_data = 0;
  int64_t result = 0;
};

class IoEngine {
 public:
  virtual ~IoEngine() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Queues `op`; nothing reaches the kernel before submit() unless the queue is full.
  virtual void enqueue(const IoOp& op) = 0;
  /// Hands every queued op to the kernel / the helper threads (one io_uring_submit).
  virtual void submit() = 0;
  /// Readable (eventfd) when completions may be waiting.
  [[nodiscard]] virtual BorrowedFd completion_fd() const = 0;
  /// Appends the completions available now and clears the eventfd.
  virtual void reap(std::vector<IoCompletion>& out) = 0;
  /// Ops enqueued and not yet reaped.
  [[nodiscard]] virtual size_t in_flight() const = 0;
};

/// True if this host's io_uring supports READV, WRITEV, FSYNC and FALLOCATE (probed once).
[[nodiscard]] bool io_uring_usable();

/// Creates an engine for `fd` with room for `depth` concurrent ops. kIoUring falls back to the
/// thread pool (logging one line) when io_uring_usable() is false.
[[nodiscard]] Result<std::unique_ptr<IoEngine>> make_io_engine(IoEngineKind kind, BorrowedFd fd,
                                                               unsigned depth);

/// Makes an engine for `fd` with room for `depth` concurrent ops (make_io_engine's shape; tests
/// use it to inject engines).
using IoEngineFactory =
    std::function<Result<std::unique_ptr<IoEngine>>(BorrowedFd fd, unsigned depth)>;

}  // namespace tern
