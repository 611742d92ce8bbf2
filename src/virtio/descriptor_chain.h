// The descriptor chain walker (virtio 1.2 §2.7.5, §2.7.5.3): turns a head index into a validated
// list of guest buffers. It is the only code that follows `next` links or indirect tables, and it
// is shared by every device. A walk is bounded by the queue size (no chain may be longer, §2.7.5.2),
// so loops, nested indirect tables and wild indices end in an error, never in a hang or a crash.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "memory/guest_memory.h"

namespace tern::virtio {

/// One guest buffer of a chain, already checked to lie inside one guest RAM region.
struct ChainSegment {
  uint64_t gpa = 0;                ///< Guest-physical start.
  std::span<uint8_t> host;         ///< Host view of [gpa, gpa + len) (len may be 0).
  bool writable = false;           ///< VIRTQ_DESC_F_WRITE: device-writable ("in" buffer).
};

/// A validated chain: device-readable segments first, then device-writable ones (§2.7.4.2).
struct DescriptorChain {
  uint16_t head = 0;                  ///< Index the device returns in the used ring.
  std::vector<ChainSegment> segments;
  uint64_t readable_bytes = 0;        ///< Sum of readable segment lengths.
  uint64_t writable_bytes = 0;        ///< Sum of writable segment lengths.
  size_t descriptors = 0;             ///< Descriptors visited (direct + indirect).
};

/// Why a chain was refused. The head is still returned to the driver (unless kHeadOutOfRange).
enum class ChainError {
  kHeadOutOfRange,        ///< Head index >= queue size: cannot even be returned.
  kNextOutOfRange,        ///< A `next` index >= the table size.
  kTooLong,               ///< More descriptors than the queue size: a loop or an oversize chain.
  kBadBuffer,             ///< A buffer outside guest RAM, in a hole, or wrapping 2^64.
  kBadDescriptorTable,    ///< The descriptor table itself is not in guest RAM.
  kIndirectNotNegotiated, ///< VIRTQ_DESC_F_INDIRECT without VIRTIO_F_INDIRECT_DESC.
  kIndirectNested,        ///< An indirect descriptor inside an indirect table.
  kIndirectWithNext,      ///< VIRTQ_DESC_F_INDIRECT together with VIRTQ_DESC_F_NEXT.
  kIndirectBadLength,     ///< Indirect table length 0, not a multiple of 16, or too long.
  kReadableAfterWritable, ///< A device-readable descriptor after a device-writable one.
};

/// Human-readable name of `e` for logs.
[[nodiscard]] std::string_view chain_error_name(ChainError e);

/// Walks the chain starting at `head` in the descriptor table at `desc_table_gpa` of a queue with
/// `queue_size` entries. `indirect_ok` = VIRTIO_F_INDIRECT_DESC was negotiated. At most
/// `queue_size` descriptors are visited in total. Never writes guest memory.
[[nodiscard]] tl::expected<DescriptorChain, ChainError> walk_descriptor_chain(
    const GuestMemory& mem, uint64_t desc_table_gpa, uint16_t queue_size, uint16_t head,
    bool indirect_ok);

}  // namespace tern::virtio
