// Split-virtqueue layout and generic feature bits from the virtio 1.2 spec (§2.7, §6).
// Little-endian on the wire; tern only runs on x86-64, so the structs are read as host order.
#pragma once

#include <cstdint>
#include <string_view>

namespace tern::virtio {

// Device IDs (§5).
inline constexpr uint32_t VIRTIO_ID_NET = 1;
inline constexpr uint32_t VIRTIO_ID_BLOCK = 2;
inline constexpr uint32_t VIRTIO_ID_CONSOLE = 3;
inline constexpr uint32_t VIRTIO_ID_ENTROPY = 4;

/// The kind name tern uses for a device ID: "virtio-net", "virtio-blk", "virtio-console",
/// "virtio-rng"; "virtio" for any other ID.
constexpr std::string_view device_kind_name(uint32_t device_id) {
  switch (device_id) {
    case VIRTIO_ID_NET: return "virtio-net";
    case VIRTIO_ID_BLOCK: return "virtio-blk";
    case VIRTIO_ID_CONSOLE: return "virtio-console";
    case VIRTIO_ID_ENTROPY: return "virtio-rng";
    default: return "virtio";
  }
}

// Generic feature bits (§6).
inline constexpr unsigned VIRTIO_F_INDIRECT_DESC = 28;
inline constexpr unsigned VIRTIO_F_EVENT_IDX = 29;
inline constexpr unsigned VIRTIO_F_VERSION_1 = 32;

/// Bit mask of feature `bit`.
constexpr uint64_t feature(unsigned bit) { return uint64_t{1} << bit; }

// struct virtq_desc flags (§2.7.5).
inline constexpr uint16_t VIRTQ_DESC_F_NEXT = 1;
inline constexpr uint16_t VIRTQ_DESC_F_WRITE = 2;
inline constexpr uint16_t VIRTQ_DESC_F_INDIRECT = 4;

// struct virtq_avail flags (§2.7.6) and struct virtq_used flags (§2.7.8).
inline constexpr uint16_t VIRTQ_AVAIL_F_NO_INTERRUPT = 1;
inline constexpr uint16_t VIRTQ_USED_F_NO_NOTIFY = 1;

/// One descriptor table entry (§2.7.5): 16 bytes.
struct VirtqDesc {
  uint64_t addr;   ///< Guest-physical address of the buffer.
  uint32_t len;    ///< Buffer length in bytes.
  uint16_t flags;  ///< VIRTQ_DESC_F_*.
  uint16_t next;   ///< Next descriptor index when VIRTQ_DESC_F_NEXT.
};
static_assert(sizeof(VirtqDesc) == 16);

/// One used ring element (§2.7.8): 8 bytes.
struct VirtqUsedElem {
  uint32_t id;   ///< Head descriptor index of the chain.
  uint32_t len;  ///< Bytes written into the chain's device-writable buffers.
};
static_assert(sizeof(VirtqUsedElem) == 8);

// Byte offsets inside the rings for a queue of `size` entries (§2.7.6, §2.7.8).
constexpr uint64_t avail_idx_offset() { return 2; }
constexpr uint64_t avail_ring_offset(uint64_t i) { return 4 + 2 * i; }
constexpr uint64_t used_event_offset(uint64_t size) { return 4 + 2 * size; }
constexpr uint64_t avail_ring_bytes(uint64_t size) { return 6 + 2 * size; }
constexpr uint64_t used_idx_offset() { return 2; }
constexpr uint64_t used_ring_offset(uint64_t i) { return 4 + 8 * i; }
constexpr uint64_t avail_event_offset(uint64_t size) { return 4 + 8 * size; }
constexpr uint64_t used_ring_bytes(uint64_t size) { return 6 + 8 * size; }

/// vring_need_event (§2.7.7.2): true if moving the used index from `old_idx` to `new_idx` crosses
/// the driver's `event_idx` (used_event).
constexpr bool vring_need_event(uint16_t event_idx, uint16_t new_idx, uint16_t old_idx) {
  return static_cast<uint16_t>(new_idx - event_idx - 1) < static_cast<uint16_t>(new_idx - old_idx);
}

}  // namespace tern::virtio
