// libFuzzer target: parse_io_command and the PRP walker over a small guest memory whose content
// (PRP lists, DSM ranges) comes from the input. Input: a namespace/limits byte pair, the namespace
// size, one 64-byte submission entry, a direct map_prps() call (PRP1, PRP2, length), then RAM.
// Guest RAM is three regions: two far apart in guest-physical space but adjacent in the host
// buffer, and a half-page one guest-adjacent to the second, so pages straddle and iovecs merge.
// Nothing may crash, and what is accepted must hold: iovecs inside the RAM buffer and summing to
// the length, at most max_transfer_bytes / page_size + 1 of them, LBA ranges inside the
// namespace, no write to a read-only namespace.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "nvme/nvme_command.h"

namespace {

using namespace tern;
using namespace tern::nvme;

constexpr size_t kR0 = 0x8000, kR1 = 0x4000, kR2 = 0x800;
constexpr size_t kRam = kR0 + kR1 + 0x1000 + kR2;  // R2's host bytes apart from R1's

std::vector<uint8_t>& ram() {
  static std::vector<uint8_t> buf(kRam);
  return buf;
}

bool inside(const iovec& v) {
  auto* b = static_cast<const uint8_t*>(v.iov_base);
  return b >= ram().data() && v.iov_len <= kRam && b - ram().data() <= long(kRam - v.iov_len);
}

void check_iov(const std::vector<iovec>& iov, uint64_t len, const PrpLimits& limits) {
  uint64_t total = 0;
  for (const auto& v : iov) {
    FUZZ_CHECK(inside(v));
    FUZZ_CHECK(v.iov_len > 0);
    total += v.iov_len;
  }
  FUZZ_CHECK(total == len);
  // A transfer of up to max bytes starting anywhere in a page touches at most
  // ceil(max / page) + 1 pages (max may be smaller than a page).
  FUZZ_CHECK(iov.size() <=
             (limits.max_transfer_bytes + limits.page_size - 1) / limits.page_size + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  tern::testing::FuzzInput in(data, size);
  uint8_t flags = in.u8();
  uint8_t sel = in.u8();
  NamespaceInfo ns;
  ns.read_only = flags & 1;
  ns.discard = (flags & 2) != 0;
  ns.lba_shift = (flags & 4) ? 12 : 9;
  ns.size_lbas = in.u16();
  if (flags & 0x10) ns.size_lbas = ~uint64_t{0} >> (ns.lba_shift + (flags >> 5));  // huge disks
  PrpLimits limits;
  limits.page_size = (flags & 8) ? 8192 : 4096;
  static constexpr uint64_t kMax[] = {4096, 64 * 1024, 512 * 1024, 2 * 1024 * 1024};
  limits.max_transfer_bytes = kMax[sel % 4];

  SubmissionEntry sqe;
  uint8_t raw[sizeof sqe];
  for (auto& b : raw) b = in.u8();
  std::memcpy(&sqe, raw, sizeof sqe);
  uint64_t prp1 = in.u64(), prp2 = in.u64();
  uint32_t len = in.u32() % (limits.max_transfer_bytes + 2);

  auto& buf = ram();
  std::memset(buf.data(), 0, kRam);
  auto rest = in.rest();
  if (!rest.empty()) std::memcpy(buf.data(), rest.data(), rest.size() < kRam ? rest.size() : kRam);
  GuestMemory mem = GuestMemory::wrap({
      MemoryRegion{0, kR0, buf.data(), 0},
      MemoryRegion{0x10000, kR1, buf.data() + kR0, 0},
      MemoryRegion{0x10000 + kR1, kR2, buf.data() + kR0 + kR1 + 0x1000, 0},
  });

  auto r = parse_io_command(mem, sqe, ns, limits);
  if (r) {
    const BlockOp& op = r->op;
    uint64_t disk = ns.size_lbas << ns.lba_shift;  // flag 0x10 sizes keep this in range
    FUZZ_CHECK(r->cid == sqe.cid);
    if (r->nop) FUZZ_CHECK(op.kind == BlockOp::Kind::kDiscard && op.iov.empty() &&
                           op.ranges.empty());
    switch (op.kind) {
      case BlockOp::Kind::kRead:
      case BlockOp::Kind::kWrite:
        FUZZ_CHECK(!(ns.read_only && op.kind == BlockOp::Kind::kWrite));
        FUZZ_CHECK(op.len > 0 && op.len <= limits.max_transfer_bytes);
        FUZZ_CHECK(op.len % (uint64_t{1} << ns.lba_shift) == 0);
        FUZZ_CHECK(op.offset <= disk && op.len <= disk - op.offset);
        check_iov(op.iov, op.len, limits);
        break;
      case BlockOp::Kind::kDiscard:
      case BlockOp::Kind::kWriteZeroes:
        FUZZ_CHECK(!ns.read_only || r->nop);  // DSM hints without deallocate
        FUZZ_CHECK(op.ranges.size() <= kDsmMaxRanges);
        FUZZ_CHECK(r->nop == op.ranges.empty());
        for (const auto& g : op.ranges)
          FUZZ_CHECK(g.len > 0 && g.offset <= disk && g.len <= disk - g.offset);
        break;
      case BlockOp::Kind::kFlush:
        FUZZ_CHECK(op.iov.empty() && op.ranges.empty());
        break;
    }
  } else {
    FUZZ_CHECK(!r.error().ok());
  }

  std::vector<iovec> iov;
  if (map_prps(mem, prp1, prp2, len, limits, iov)) {
    check_iov(iov, len, limits);
    // The copies go through the same walk: they succeed where the mapping did (writing back
    // what was read changes nothing, not even a PRP list the data overlaps).
    if (len <= 64 * 1024) {
      std::vector<uint8_t> bytes(len);
      FUZZ_CHECK(read_prps(mem, prp1, prp2, bytes, limits).has_value());
      FUZZ_CHECK(write_prps(mem, prp1, prp2, bytes, limits).has_value());
    }
  } else {
    FUZZ_CHECK(iov.empty());
  }
  return 0;
}
