// What the vhost-user-blk front-end offers the guest, from what the back-end offers: pure
// functions of the back-end's GET_FEATURES and GET_CONFIG answers, unit-tested on their own.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"

namespace tern::vhost_user {

/// The virtio feature bits tern's front-end may pass from a vhost-user-blk back-end to the guest:
/// the virtio-blk device bits whose config fields fit virtio::VirtioBlkConfig (SIZE_MAX, SEG_MAX,
/// GEOMETRY, RO, BLK_SIZE, FLUSH, TOPOLOGY, MQ, DISCARD, WRITE_ZEROES) and the ring bits tern's
/// split-ring transport implements (INDIRECT_DESC, EVENT_IDX, VERSION_1). Not offered: PROTOCOL_
/// FEATURES (30, a vhost-user bit), RING_PACKED (34), ACCESS_PLATFORM (33), IN_ORDER (35),
/// NOTIFICATION_DATA (38), RING_RESET (40), ORDER_PLATFORM (36): the transport implements none of
/// them; CONFIG_WCE (11): tern ignores config writes (write_config), so the cache mode the
/// guest sees is the back-end's.
[[nodiscard]] uint64_t blk_passthrough_features();

/// Bytes of config space the front-end reads with GET_CONFIG: virtio::VirtioBlkConfig up to the
/// write-zeroes fields (60), not its secure-erase tail. QEMU 7.2's back-end (qemu-storage-daemon,
/// vu_blk_get_config) refuses any size above its sizeof(struct virtio_blk_config), which is 60
/// there; the secure-erase fields mean nothing without VIRTIO_BLK_F_SECURE_ERASE, which tern does
/// not pass through. read_config() returns zeros past them.
inline constexpr uint32_t kBlkConfigBytes = 60;

/// The guest's features: `backend` (GET_FEATURES) & blk_passthrough_features(), VIRTIO_BLK_F_MQ
/// only when `queues` > 1. Fails, naming `what` (the socket), when VERSION_1 is missing (tern is a
/// modern device only) or `queues` > 1 without the back-end's VIRTIO_BLK_F_MQ.
[[nodiscard]] Result<uint64_t> blk_guest_features(uint64_t backend, uint16_t queues,
                                                  const std::string& what);

/// The back-end's config space (GET_CONFIG, kBlkConfigBytes) with num_queues set
/// to `queues` (the front-end's count, which the guest sizes its queues from).
[[nodiscard]] std::vector<uint8_t> blk_patch_config(std::span<const uint8_t> config,
                                                    uint16_t queues);

}  // namespace tern::vhost_user
