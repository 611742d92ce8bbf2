#include "nvme/nvme_command.h"

#include <array>
#include <cstring>

#include "base/checked.h"

namespace tern::nvme {

namespace {

constexpr uint32_t kNsid = 1;
constexpr uint32_t kNsidBroadcast = 0xFFFFFFFF;

tl::unexpected<Status> refuse(Status s) { return tl::unexpected(s); }

/// [slba, slba + nlb) inside the namespace, without overflow.
bool in_namespace(uint64_t slba, uint64_t nlb, const NamespaceInfo& ns) {
  return slba <= ns.size_lbas && nlb <= ns.size_lbas - slba;
}

/// Blocks to bytes; nullopt when the byte count does not fit in 64 bits (a namespace description
/// no real disk has, but the value is not trusted here).
std::optional<uint64_t> to_bytes(uint64_t lbas, const NamespaceInfo& ns) {
  if (ns.lba_shift >= 64) return std::nullopt;
  return checked_mul(lbas, uint64_t{1} << ns.lba_shift);
}

uint64_t slba_of(const SubmissionEntry& sqe) {
  return uint64_t{sqe.cdw10} | (uint64_t{sqe.cdw11} << 32);
}

/// Read and Write (§6.9, §6.15): SLBA, NLB, FUA, data through PRP1/PRP2.
tl::expected<IoRequest, Status> parse_rw(const GuestMemory& mem, const SubmissionEntry& sqe,
                                         const NamespaceInfo& ns, const PrpLimits& limits,
                                         bool write, IoRequest r) {
  if (write && ns.read_only) return refuse(kWriteToReadOnly);
  uint64_t slba = slba_of(sqe);
  uint64_t nlb = uint64_t{sqe.cdw12 & kCdw12NlbMask} + 1;
  auto len = to_bytes(nlb, ns);
  if (!len || *len > limits.max_transfer_bytes) return refuse(kInvalidField);
  if (!in_namespace(slba, nlb, ns)) return refuse(kLbaOutOfRange);
  auto offset = to_bytes(slba, ns);
  if (!offset) return refuse(kLbaOutOfRange);
  r.op.kind = write ? BlockOp::Kind::kWrite : BlockOp::Kind::kRead;
  r.op.offset = *offset;
  r.op.len = *len;
  r.fua = write && (sqe.cdw12 & kCdw12Fua) != 0;
  TRY(map_prps(mem, sqe.prp1, sqe.prp2, *len, limits, r.op.iov));
  return r;
}

/// Write Zeroes (§6.16): one range; DEAC lets the executor deallocate it.
tl::expected<IoRequest, Status> parse_write_zeroes(const SubmissionEntry& sqe,
                                                   const NamespaceInfo& ns, IoRequest r) {
  if (ns.read_only) return refuse(kWriteToReadOnly);
  uint64_t slba = slba_of(sqe);
  uint64_t nlb = uint64_t{sqe.cdw12 & kCdw12NlbMask} + 1;
  if (!in_namespace(slba, nlb, ns)) return refuse(kLbaOutOfRange);
  auto offset = to_bytes(slba, ns);
  auto len = to_bytes(nlb, ns);
  if (!offset || !len) return refuse(kLbaOutOfRange);
  r.op.kind = BlockOp::Kind::kWriteZeroes;
  r.op.ranges.push_back(BlockRange{*offset, *len, (sqe.cdw12 & kCdw12Deac) != 0});
  r.fua = (sqe.cdw12 & kCdw12Fua) != 0;
  return r;
}

/// Dataset Management (§6.7): NR + 1 ranges read through PRP1/PRP2; only the Deallocate
/// attribute does anything (the others are hints tern ignores).
tl::expected<IoRequest, Status> parse_dsm(const GuestMemory& mem, const SubmissionEntry& sqe,
                                          const NamespaceInfo& ns, const PrpLimits& limits,
                                          IoRequest r) {
  r.op.kind = BlockOp::Kind::kDiscard;  // also for a nop: never a Read of nothing
  if ((sqe.cdw11 & kDsmAttrDeallocate) == 0) {
    r.nop = true;
    return r;
  }
  if (ns.read_only) return refuse(kWriteToReadOnly);
  size_t nr = (sqe.cdw10 & 0xFF) + 1;  // ≤ kDsmMaxRanges by encoding
  std::array<DsmRange, kDsmMaxRanges> ranges;
  TRY(read_prps(mem, sqe.prp1, sqe.prp2,
                std::span<uint8_t>(reinterpret_cast<uint8_t*>(ranges.data()),
                                   nr * sizeof(DsmRange)),
                limits));
  for (size_t i = 0; i < nr; ++i) {
    const DsmRange& d = ranges[i];
    if (d.nlb == 0) continue;
    if (!in_namespace(d.slba, d.nlb, ns)) {
      r.op.ranges.clear();
      return refuse(kLbaOutOfRange);
    }
    auto offset = to_bytes(d.slba, ns);
    auto len = to_bytes(d.nlb, ns);
    if (!offset || !len) return refuse(kLbaOutOfRange);
    r.op.ranges.push_back(BlockRange{*offset, *len, false});
  }
  r.nop = r.op.ranges.empty();
  return r;
}

}  // namespace

tl::expected<IoRequest, Status> parse_io_command(const GuestMemory& mem,
                                                 const SubmissionEntry& sqe,
                                                 const NamespaceInfo& ns,
                                                 const PrpLimits& limits) {
  switch (sqe.opcode) {
    case kIoFlush:
    case kIoWrite:
    case kIoRead:
    case kIoWriteZeroes:
      break;
    case kIoDatasetManagement:
      if (!ns.discard) return refuse(kInvalidOpcode);  // ONCS.DSM clear: optional command absent
      break;
    default:
      return refuse(kInvalidOpcode);
  }
  // FUSE (bits 1:0): fused operations are not supported (FUSES 0). PSDT (bits 7:6): PRPs only.
  if ((sqe.flags & 0x3) != 0 || (sqe.flags >> 6) != 0) return refuse(kInvalidField);
  if (sqe.nsid != kNsid && !(sqe.opcode == kIoFlush && sqe.nsid == kNsidBroadcast))
    return refuse(kInvalidNamespace);

  IoRequest r;
  r.cid = sqe.cid;
  switch (sqe.opcode) {
    case kIoFlush:
      r.op.kind = BlockOp::Kind::kFlush;
      return r;
    case kIoWrite:
      return parse_rw(mem, sqe, ns, limits, true, std::move(r));
    case kIoRead:
      return parse_rw(mem, sqe, ns, limits, false, std::move(r));
    case kIoWriteZeroes:
      return parse_write_zeroes(sqe, ns, std::move(r));
    default:
      return parse_dsm(mem, sqe, ns, limits, std::move(r));
  }
}

Status block_status_to_nvme(BlockOp::Kind kind, BlockStatus status) {
  switch (status) {
    case BlockStatus::kOk:
      return kSuccess;
    case BlockStatus::kIoError:
      return kInternalError;
    case BlockStatus::kHostError:
      break;
  }
  return kind == BlockOp::Kind::kRead ? kUnrecoveredReadError : kWriteFault;
}

}  // namespace tern::nvme
