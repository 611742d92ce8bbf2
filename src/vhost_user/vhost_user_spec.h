// The vhost-user protocol's wire format (QEMU docs/interop/vhost-user.rst, "vhost-user protocol"),
// names as the spec writes them. A message is a 12-byte header (request, flags, size) followed by
// `size` bytes of payload; file descriptors travel as SCM_RIGHTS ancillary data with the header.
// All integers are little-endian (x86-64 native). "Front-end" is tern's VMM side (the spec's
// former "master"), "back-end" the process serving the virtqueues.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::vhost_user {

// ---- header ----

/// Message header (spec "Header"): request code, flags, payload size in bytes.
struct VhostUserHeader {
  uint32_t request = 0;
  uint32_t flags = 0;
  uint32_t size = 0;
};
static_assert(sizeof(VhostUserHeader) == 12);

inline constexpr uint32_t VHOST_USER_VERSION = 0x1;           ///< flags bits 0..1
inline constexpr uint32_t VHOST_USER_VERSION_MASK = 0x3;
inline constexpr uint32_t VHOST_USER_REPLY_MASK = 1u << 2;    ///< this message is a reply
inline constexpr uint32_t VHOST_USER_NEED_REPLY_MASK = 1u << 3;  ///< REPLY_ACK asked for

/// Largest payload tern sends or accepts (the biggest message it knows: SET_MEM_TABLE with
/// VHOST_MEMORY_BASELINE_NREGIONS regions, 8 + 8 × 32 bytes; GET_CONFIG is 12 + 256). Anything
/// bigger is a protocol error, so a peer cannot make tern allocate more.
inline constexpr uint32_t kMaxPayload = 4096;
/// Most fds one message carries (SET_MEM_TABLE: one per region).
inline constexpr size_t kMaxFds = 8;

// ---- front-end requests (spec "Front-end message types") ----

enum VhostUserRequest : uint32_t {
  VHOST_USER_GET_FEATURES = 1,
  VHOST_USER_SET_FEATURES = 2,
  VHOST_USER_SET_OWNER = 3,
  VHOST_USER_RESET_OWNER = 4,
  VHOST_USER_SET_MEM_TABLE = 5,
  VHOST_USER_SET_LOG_BASE = 6,
  VHOST_USER_SET_LOG_FD = 7,
  VHOST_USER_SET_VRING_NUM = 8,
  VHOST_USER_SET_VRING_ADDR = 9,
  VHOST_USER_SET_VRING_BASE = 10,
  VHOST_USER_GET_VRING_BASE = 11,
  VHOST_USER_SET_VRING_KICK = 12,
  VHOST_USER_SET_VRING_CALL = 13,
  VHOST_USER_SET_VRING_ERR = 14,
  VHOST_USER_GET_PROTOCOL_FEATURES = 15,
  VHOST_USER_SET_PROTOCOL_FEATURES = 16,
  VHOST_USER_GET_QUEUE_NUM = 17,
  VHOST_USER_SET_VRING_ENABLE = 18,
  VHOST_USER_SEND_RARP = 19,
  VHOST_USER_NET_SET_MTU = 20,
  VHOST_USER_SET_BACKEND_REQ_FD = 21,
  VHOST_USER_IOTLB_MSG = 22,
  VHOST_USER_SET_VRING_ENDIAN = 23,
  VHOST_USER_GET_CONFIG = 24,
  VHOST_USER_SET_CONFIG = 25,
  VHOST_USER_GET_INFLIGHT_FD = 31,
  VHOST_USER_SET_INFLIGHT_FD = 32,
  VHOST_USER_RESET_DEVICE = 34,
  VHOST_USER_GET_MAX_MEM_SLOTS = 36,
  VHOST_USER_ADD_MEM_REG = 37,
  VHOST_USER_REM_MEM_REG = 38,
  VHOST_USER_SET_STATUS = 39,
  VHOST_USER_GET_STATUS = 40,
};

/// The request's name as the spec spells it ("VHOST_USER_GET_FEATURES"); "request N" if unknown.
/// For logs and errors ("vhost-user GET_CONFIG: ..."). Defined in vhost_user_message.cc; the
/// "request N" text lives in a thread-local buffer until the thread's next unknown code.
const char* request_name(uint32_t request);

// ---- feature bits ----

/// Virtio feature bit 30 in GET_FEATURES/SET_FEATURES: the back-end speaks protocol features
/// (VHOST_USER_GET/SET_PROTOCOL_FEATURES). Never offered to the guest.
inline constexpr unsigned VHOST_USER_F_PROTOCOL_FEATURES = 30;

/// Protocol feature bits (spec "Protocol features").
enum VhostUserProtocolFeature : unsigned {
  VHOST_USER_PROTOCOL_F_MQ = 0,
  VHOST_USER_PROTOCOL_F_LOG_SHMFD = 1,
  VHOST_USER_PROTOCOL_F_RARP = 2,
  VHOST_USER_PROTOCOL_F_REPLY_ACK = 3,
  VHOST_USER_PROTOCOL_F_NET_MTU = 4,
  VHOST_USER_PROTOCOL_F_BACKEND_REQ = 5,
  VHOST_USER_PROTOCOL_F_CROSS_ENDIAN = 6,
  VHOST_USER_PROTOCOL_F_CRYPTO_SESSION = 7,
  VHOST_USER_PROTOCOL_F_PAGEFAULT = 8,
  VHOST_USER_PROTOCOL_F_CONFIG = 9,
  VHOST_USER_PROTOCOL_F_BACKEND_SEND_FD = 10,
  VHOST_USER_PROTOCOL_F_HOST_NOTIFIER = 11,
  VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD = 12,
  VHOST_USER_PROTOCOL_F_RESET_DEVICE = 13,
  VHOST_USER_PROTOCOL_F_INBAND_NOTIFICATIONS = 14,
  VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS = 15,
  VHOST_USER_PROTOCOL_F_STATUS = 16,
};

constexpr uint64_t protocol_feature(unsigned bit) { return uint64_t{1} << bit; }

/// The protocol features tern's front-end and back-end implement (and so may negotiate): MQ,
/// REPLY_ACK, CONFIG, INFLIGHT_SHMFD, CONFIGURE_MEM_SLOTS.
inline constexpr uint64_t kTernProtocolFeatures =
    protocol_feature(VHOST_USER_PROTOCOL_F_MQ) | protocol_feature(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
    protocol_feature(VHOST_USER_PROTOCOL_F_CONFIG) |
    protocol_feature(VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD) |
    protocol_feature(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS);

// ---- payloads (spec "Message types" / payload structs); packed as on the wire ----

#pragma pack(push, 1)

/// "A single 64-bit integer" (features, protocol features, queue num, max mem slots, the
/// SET_VRING_KICK/CALL/ERR index + flag word, a REPLY_ACK status: 0 = success).
using VhostUserU64 = uint64_t;

/// SET_VRING_KICK/CALL/ERR u64: bits 0..7 the vring index; this bit set = no fd attached
/// (polling mode / no notification).
inline constexpr uint64_t VHOST_USER_VRING_IDX_MASK = 0xff;
inline constexpr uint64_t VHOST_USER_VRING_NOFD_MASK = uint64_t{1} << 8;

/// "Vring state description": SET_VRING_NUM, SET_VRING_BASE, GET_VRING_BASE (request and
/// reply), SET_VRING_ENABLE (num = 0/1).
struct VhostVringState {
  uint32_t index = 0;
  uint32_t num = 0;
};
static_assert(sizeof(VhostVringState) == 8);

/// "Vring address description" (SET_VRING_ADDR). Ring addresses are FRONT-END USER (host-
/// virtual) addresses, translated through the memory table's userspace_addr.
struct VhostVringAddr {
  uint32_t index = 0;
  uint32_t flags = 0;  ///< bit 0: VHOST_VRING_F_LOG (log_guest_addr valid)
  uint64_t desc_user_addr = 0;
  uint64_t used_user_addr = 0;
  uint64_t avail_user_addr = 0;
  uint64_t log_guest_addr = 0;
};
static_assert(sizeof(VhostVringAddr) == 40);

/// "Memory region description": one region of guest RAM, its fd sent alongside.
struct VhostUserMemoryRegion {
  uint64_t guest_phys_addr = 0;
  uint64_t memory_size = 0;     ///< bytes
  uint64_t userspace_addr = 0;  ///< front-end host-virtual address of guest_phys_addr
  uint64_t mmap_offset = 0;     ///< offset of the region in its fd
};
static_assert(sizeof(VhostUserMemoryRegion) == 32);

/// VHOST_MEMORY_BASELINE_NREGIONS: the most regions SET_MEM_TABLE carries.
inline constexpr uint32_t VHOST_MEMORY_BASELINE_NREGIONS = 8;

/// "Multiple Memory regions description" (SET_MEM_TABLE): nregions ≤ 8 regions, one fd each in
/// region order. On the wire only 8 + 32 × nregions bytes are sent.
struct VhostUserMemory {
  uint32_t nregions = 0;
  uint32_t padding = 0;
  VhostUserMemoryRegion regions[VHOST_MEMORY_BASELINE_NREGIONS];
};

/// "Single memory region description" (ADD_MEM_REG / REM_MEM_REG): one region, one fd.
struct VhostUserMemRegMsg {
  uint64_t padding = 0;
  VhostUserMemoryRegion region;
};
static_assert(sizeof(VhostUserMemRegMsg) == 40);

/// VHOST_USER_MAX_CONFIG_SIZE: the largest device config space GET/SET_CONFIG moves.
inline constexpr uint32_t VHOST_USER_MAX_CONFIG_SIZE = 256;

/// "Device config space" (GET_CONFIG / SET_CONFIG) header; `size` payload bytes follow. `offset`
/// is the offset INTO the device config space: tern always asks from offset 0 (Cloud Hypervisor
/// #7615 sent 0x100, the PCI capability offset, and QEMU's back-end answered garbage/failed).
struct VhostUserConfigHeader {
  uint32_t offset = 0;
  uint32_t size = 0;
  uint32_t flags = 0;  ///< 0 = VHOST_SET_CONFIG_TYPE_FRONTEND, 1 = ..._MIGRATION
};
static_assert(sizeof(VhostUserConfigHeader) == 12);

/// "Inflight description" (GET_INFLIGHT_FD request: num_queues, queue_size; reply: mmap_size,
/// mmap_offset + the shared memory fd; SET_INFLIGHT_FD: all four + the fd).
struct VhostUserInflight {
  uint64_t mmap_size = 0;
  uint64_t mmap_offset = 0;
  uint16_t num_queues = 0;
  uint16_t queue_size = 0;
  /// Not in the spec's table, but on the wire: QEMU and libvhost-user declare this struct
  /// unpacked, so it is padded to 24 bytes and hdr.size is 24 (a 20-byte GET_INFLIGHT_FD is
  /// refused by QEMU, and QEMU's 24-byte one was refused by a 20-byte parser).
  uint32_t padding = 0;
};
static_assert(sizeof(VhostUserInflight) == 24);

/// Inflight region layout for split virtqueues (spec "Inflight I/O tracking"): one QueueRegion
/// per queue, each followed by queue_size DescStateSplit entries, every queue region padded up to
/// a multiple of 64 bytes (libvhost-user: ALIGN_UP(sizeof(QueueRegionSplit) + 16 * size, 64)).
struct DescStateSplit {
  uint8_t inflight = 0;   ///< 1 while the descriptor chain with this head is being processed
  uint8_t padding[5] = {};
  uint16_t next = 0;      ///< for the back-end's own free list
  uint64_t counter = 0;   ///< fetch order: resubmit inflight heads by ascending counter
};
static_assert(sizeof(DescStateSplit) == 16);

struct QueueRegionSplit {
  uint64_t features = 0;       ///< feature flags of this region (0)
  uint16_t version = 0;        ///< 1
  uint16_t desc_num = 0;       ///< queue size
  uint16_t last_batch_head = 0;
  uint16_t used_idx = 0;       ///< used->idx as the back-end last stored it
  // DescStateSplit desc[desc_num] follows
};
static_assert(sizeof(QueueRegionSplit) == 16);

#pragma pack(pop)

/// Bytes of one split queue's inflight region (16 + 16 × queue_size, rounded up to 64).
constexpr uint64_t inflight_queue_region_bytes(uint16_t queue_size) {
  return (sizeof(QueueRegionSplit) + sizeof(DescStateSplit) * uint64_t{queue_size} + 63) & ~uint64_t{63};
}

}  // namespace tern::vhost_user
