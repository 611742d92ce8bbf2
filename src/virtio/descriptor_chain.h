// The descriptor chain walker (virtio 1.2 §2.7.5, §2.7.5.3): turns a head index into a validated
// list of guest buffers. It is the only code that follows `next` links or indirect tables, and it
// is shared by every device. A walk is bounded: at most the queue size descriptors in the queue's
// table, and at most kMaxIndirectDescriptors in one indirect table, so loops, nested indirect
// tables and wild indices end in an error, never in a hang, a crash or unbounded memory.
//
// Indirect tables may be longer than the ring. §2.7.5.3.1 says a driver MUST NOT create a chain
// longer than the Queue Size, but drivers size their requests from the device's seg_max, which a
// vhost-user back-end must advertise before the front-end picks the ring size; so peers are
// liberal: QEMU's device model and libvhost-user accept up to VIRTQUEUE_MAX_SIZE (1024) segments
// per request, Linux's vhost up to UIO_MAXIOV (1024). tern accepts the same.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "memory/guest_memory.h"

namespace tern::virtio {

/// The most descriptors one indirect table may hold (QEMU's VIRTQUEUE_MAX_SIZE, Linux's UIO_MAXIOV).
inline constexpr uint32_t kMaxIndirectDescriptors = 1024;

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
  size_t descriptors = 0;             ///< Buffer descriptors (direct + indirect table entries).
};

/// Why a chain was refused. The head is still returned to the driver (unless kHeadOutOfRange).
enum class ChainError {
  kHeadOutOfRange,        ///< Head index >= queue size: cannot even be returned.
  kNextOutOfRange,        ///< A `next` index >= the table size.
  kTooLong,               ///< A loop: more descriptors than the table holds.
  kBadBuffer,             ///< A buffer outside guest RAM, in a hole, or wrapping 2^64.
  kBadDescriptorTable,    ///< The descriptor table itself is not in guest RAM.
  kIndirectNotNegotiated, ///< VIRTQ_DESC_F_INDIRECT without VIRTIO_F_INDIRECT_DESC.
  kIndirectNested,        ///< An indirect descriptor inside an indirect table.
  kIndirectWithNext,      ///< VIRTQ_DESC_F_INDIRECT together with VIRTQ_DESC_F_NEXT.
  kIndirectBadLength,     ///< Indirect table length 0, not a multiple of 16, or over
                          ///< kMaxIndirectDescriptors entries.
  kReadableAfterWritable, ///< A device-readable descriptor after a device-writable one.
};

/// Human-readable name of `e` for logs.
[[nodiscard]] std::string_view chain_error_name(ChainError e);

/// Walks the chain starting at `head` in the descriptor table at `desc_table_gpa` of a queue with
/// `queue_size` entries. `indirect_ok` = VIRTIO_F_INDIRECT_DESC was negotiated. At most
/// `queue_size` descriptors of the queue's table and kMaxIndirectDescriptors of an indirect
/// table are visited. Never writes guest memory.
[[nodiscard]] tl::expected<DescriptorChain, ChainError> walk_descriptor_chain(
    const GuestMemory& mem, uint64_t desc_table_gpa, uint16_t queue_size, uint16_t head,
    bool indirect_ok);

/// For a chain walk_descriptor_chain() refused: the buffer of its last descriptor, found by
/// following `next` links and at most one indirect table with the same bounds (lengths, order
/// and the other buffers are not checked), when it is device-writable, non-empty and in guest
/// RAM. That is where a device whose requests end in a status byte (virtio-blk's status §5.2.6,
/// virtio-net's controlq ack §5.1.6.5) answers a request it refuses, so the driver never reads
/// a stale status as success. nullopt when there is no such buffer (the device then sets
/// DEVICE_NEEDS_RESET). Never writes guest memory.
[[nodiscard]] std::optional<ChainSegment> refused_chain_tail(const GuestMemory& mem,
                                                             uint64_t desc_table_gpa,
                                                             uint16_t queue_size, uint16_t head,
                                                             bool indirect_ok);

}  // namespace tern::virtio
