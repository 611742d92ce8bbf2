// PRP walking (NVMe base spec 1.4 §4.3): turns a command's PRP Entry 1 / PRP Entry 2 and its
// transfer length into host iovecs through the bounds-checked guest-memory accessor, without
// trusting any pointer the guest wrote.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <vector>

#include "memory/guest_memory.h"
#include "nvme/nvme_spec.h"
#include "tl/expected.hpp"

namespace tern::nvme {

/// Bounds for one transfer. The controller advertises MDTS from max_transfer_bytes.
struct PrpLimits {
  uint32_t page_size = 4096;                ///< CC.MPS page size in bytes (a power of two ≥ 4096).
  uint64_t max_transfer_bytes = 512 * 1024;  ///< 2^MDTS pages (MDTS 7 at 4 KiB pages).
};

/// Maps `len` bytes (> 0, ≤ limits.max_transfer_bytes — else kInvalidField) described by
/// `prp1`/`prp2` onto host memory, appending to `out` (cleared first; adjacent guest pages that
/// are adjacent in host memory merge into one iovec). Rules (§4.3):
/// - PRP1 may carry a page offset, which must be dword aligned (else kPrpOffsetInvalid);
/// - a transfer ending within PRP1's page ignores PRP2; one ending in the next page uses PRP2 as
///   that page's address (offset 0, else kPrpOffsetInvalid); a longer one uses PRP2 as a PRP
///   list pointer (dword-aligned offset allowed, else kPrpOffsetInvalid);
/// - every list entry is a page address with offset 0 (else kPrpOffsetInvalid); the last entry
///   of a list page, when more entries are needed, points to the next list page (offset 0);
/// - a page or list page outside guest RAM, or straddling two regions, is kDataTransferError.
/// The walk reads at most len / page_size + 2 list entries and list pages (bounded by the
/// transfer length: a list that points back at itself just re-reads pages until the length is
/// covered, which is what the spec allows a controller to do). `out` holds at most
/// ceil(max_transfer_bytes / page_size) + 1 iovecs. Never touches memory outside `mem`'s regions.
[[nodiscard]] tl::expected<void, Status> map_prps(const GuestMemory& mem, uint64_t prp1,
                                                  uint64_t prp2, uint64_t len,
                                                  const PrpLimits& limits,
                                                  std::vector<iovec>& out);

/// Copies `data` into the guest buffer described by prp1/prp2 (Identify, Get Log Page, Get
/// Features data): `data.size()` bytes, same rules and errors as map_prps().
[[nodiscard]] tl::expected<void, Status> write_prps(const GuestMemory& mem, uint64_t prp1,
                                                    uint64_t prp2, std::span<const uint8_t> data,
                                                    const PrpLimits& limits);
/// Copies `out.size()` bytes from the guest buffer described by prp1/prp2 (Dataset Management
/// ranges). Same rules and errors as map_prps().
[[nodiscard]] tl::expected<void, Status> read_prps(const GuestMemory& mem, uint64_t prp1,
                                                   uint64_t prp2, std::span<uint8_t> out,
                                                   const PrpLimits& limits);

}  // namespace tern::nvme
