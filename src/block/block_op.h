// BlockOp / BlockCompletion: one storage request as any frontend (virtio-blk, NVMe, vhost-user)
// hands it to the BlockExecutor, in bytes, without any transport's framing.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <vector>

namespace tern {

/// One DISCARD / WRITE_ZEROES range in bytes.
struct BlockRange {
  uint64_t offset = 0;  ///< Bytes from the start of the disk.
  uint64_t len = 0;     ///< Bytes.
  bool unmap = false;   ///< WRITE_ZEROES may deallocate (punch a hole).
};

/// One request for the BlockExecutor.
struct BlockOp {
  enum class Kind : uint8_t {
    kRead,         ///< Read `len` bytes at `offset` into `iov`.
    kWrite,        ///< Write `iov` (`len` bytes) at `offset`.
    kFlush,        ///< Make completed writes durable (fdatasync; nothing with cache=unsafe).
    kDiscard,      ///< Deallocate `ranges` (punch holes).
    kWriteZeroes,  ///< Zero `ranges` (ZERO_RANGE, or a punched hole where unmap or unsupported).
  };
  Kind kind = Kind::kRead;
  uint64_t offset = 0;             ///< kRead/kWrite: bytes.
  uint64_t len = 0;                ///< kRead/kWrite: bytes, = the iovec total.
  std::vector<iovec> iov;          ///< kRead/kWrite: host buffers, valid until completion.
  std::vector<BlockRange> ranges;  ///< kDiscard / kWriteZeroes.
  uint64_t tag = 0;                ///< The frontend's id, returned in the completion.
};

/// How a BlockOp ended.
enum class BlockStatus : uint8_t {
  kOk,
  kIoError,    ///< Refused for the request's own sake (e.g. unaligned O_DIRECT offset).
  kHostError,  ///< The host's I/O failed (not the guest's fault); logged rate-limited.
};

struct BlockCompletion {
  uint64_t tag = 0;
  BlockStatus status = BlockStatus::kOk;
};

}  // namespace tern
