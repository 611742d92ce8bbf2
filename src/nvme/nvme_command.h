// I/O commands of the NVM command set (NVMe base spec 1.4 §6) parsed into validated values, then
// mapped onto the shared block executor's BlockOps. Parsing reads the guest (PRPs, DSM ranges)
// through the bounds-checked accessor only; nothing executes until the value is complete.
#pragma once

#include <cstdint>
#include <vector>

#include "block/block_op.h"
#include "memory/guest_memory.h"
#include "nvme/nvme_spec.h"
#include "nvme/prp.h"
#include "tl/expected.hpp"

namespace tern::nvme {

/// The one namespace (NSID 1) a tern controller exposes: the disk image.
struct NamespaceInfo {
  uint64_t size_lbas = 0;      ///< NSZE: the image size / lba_bytes (a trailing partial block is
                               ///< not exposed).
  uint32_t lba_shift = 9;      ///< LBADS: 512-byte logical blocks (4096 for a 4Kn host disk).
  bool read_only = false;      ///< Writes, Write Zeroes and deallocation: kWriteToReadOnly.
  bool discard = true;         ///< Dataset Management deallocate supported (ONCS.DSM).
};

/// A validated I/O command: what to do, in bytes, with its host buffers.
struct IoRequest {
  BlockOp op;              ///< kind/offset/len/iov/ranges filled; `tag` is the caller's.
  uint16_t cid = 0;
  bool fua = false;        ///< Force Unit Access (Write, Write Zeroes): the queue follows the
                           ///< write with a kFlush before completing it (cache=directsync writes
                           ///< are durable anyway).
  bool nop = false;        ///< Completes successfully without I/O (DSM without deallocate,
                           ///< deallocate of 0 blocks).
};

/// Parses SQE `sqe` of an I/O queue: Read, Write, Flush, Write Zeroes, Dataset Management.
/// Errors are the completion status (§6): unknown opcode kInvalidOpcode; NSID not 1 (Flush also
/// accepts 0xFFFFFFFF) kInvalidNamespace; PSDT not 0 (SGLs) kInvalidField; SLBA+NLB past the
/// namespace (overflow-safe) kLbaOutOfRange; a transfer larger than limits.max_transfer_bytes
/// kInvalidField; a write to a read-only namespace kWriteToReadOnly; PRP errors as map_prps();
/// more than kDsmMaxRanges ranges impossible by encoding; a DSM range past the namespace
/// kLbaOutOfRange.
[[nodiscard]] tl::expected<IoRequest, Status> parse_io_command(const GuestMemory& mem,
                                                               const SubmissionEntry& sqe,
                                                               const NamespaceInfo& ns,
                                                               const PrpLimits& limits);

/// The completion status of an executed request: kOk → kSuccess, kIoError → kInternalError for
/// a refusal tern made, kHostError → kWriteFault (writes, Write Zeroes, deallocation, flush) or
/// kUnrecoveredReadError (reads).
[[nodiscard]] Status block_status_to_nvme(BlockOp::Kind kind, BlockStatus status);

}  // namespace tern::nvme
