#include "vhost_user/frontend/blk_features.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstring>

#include "virtio/block/virtio_blk_spec.h"

namespace tern::vhost_user {

using namespace tern::virtio;

static_assert(kBlkConfigBytes == offsetof(VirtioBlkConfig, max_secure_erase_sectors));

uint64_t blk_passthrough_features() {
  return feature(VIRTIO_BLK_F_SIZE_MAX) | feature(VIRTIO_BLK_F_SEG_MAX) |
         feature(VIRTIO_BLK_F_GEOMETRY) | feature(VIRTIO_BLK_F_RO) |
         feature(VIRTIO_BLK_F_BLK_SIZE) | feature(VIRTIO_BLK_F_FLUSH) |
         feature(VIRTIO_BLK_F_TOPOLOGY) | feature(VIRTIO_BLK_F_MQ) | feature(VIRTIO_BLK_F_DISCARD) |
         feature(VIRTIO_BLK_F_WRITE_ZEROES) | feature(VIRTIO_F_INDIRECT_DESC) |
         feature(VIRTIO_F_EVENT_IDX) | feature(VIRTIO_F_VERSION_1);
}

Result<uint64_t> blk_guest_features(uint64_t backend, uint16_t queues, const std::string& what) {
  if (!(backend & feature(VIRTIO_F_VERSION_1)))
    return fail(
        what,
        fmt::format("GET_FEATURES {:#x}: the back-end does not offer VIRTIO_F_VERSION_1", backend));
  if (queues > 1 && !(backend & feature(VIRTIO_BLK_F_MQ)))
    return fail(what,
                fmt::format("queues={}: the back-end does not offer VIRTIO_BLK_F_MQ", queues));
  uint64_t f = backend & blk_passthrough_features();
  if (queues <= 1) f &= ~feature(VIRTIO_BLK_F_MQ);
  return f;
}

std::vector<uint8_t> blk_patch_config(std::span<const uint8_t> config, uint16_t queues) {
  std::vector<uint8_t> out(config.begin(), config.end());
  constexpr size_t off = offsetof(VirtioBlkConfig, num_queues);
  if (out.size() >= off + sizeof(uint16_t)) std::memcpy(out.data() + off, &queues, sizeof queues);
  return out;
}

}  // namespace tern::vhost_user
