// VhostNetFd: one open /dev/vhost-net instance (drivers/vhost/net.c) and its ioctls
// (include/uapi/linux/vhost.h), each returning a Result whose message names the device and the
// ioctl ("virtio-net0: VHOST_SET_MEM_TABLE: Invalid argument"). Plus the pure translations
// tern → vhost that the ioctls take: the memory table, a vring's host-virtual addresses and the
// feature bits, kept apart from the fd so they are unit-tested without /dev/vhost-net.
//
// linux/vhost.h pulls in linux/virtio_config.h, whose VIRTIO_F_* macros clash with
// virtio_spec.h's constants: it is included by the .cc files only, after tern's headers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "virtio/virtio_device.h"

namespace tern::net {

/// The vhost-net character device.
inline constexpr const char* kVhostNetPath = "/dev/vhost-net";

/// The ring features tern lets vhost-net serve (the contract's list): VIRTIO_F_VERSION_1,
/// VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC, VIRTIO_NET_F_MRG_RXBUF. Not
/// VHOST_NET_F_VIRTIO_NET_HDR: the tap (IFF_VNET_HDR, TUNSETVNETHDRSZ 12) carries the header,
/// so vhost passes it through (its sock_hlen = 12, vhost_hlen = 0). Not VHOST_F_LOG_ALL (no
/// dirty logging: snapshots pause the queues instead).
[[nodiscard]] uint64_t vhost_net_ring_feature_mask();

/// The bits for VHOST_SET_FEATURES: `acked` (the driver's features) restricted to the ring
/// feature mask. Fails if the driver acked a ring feature that `offered` (VHOST_GET_FEATURES)
/// lacks — vhost would then run the rings differently from what the driver expects — or if
/// VIRTIO_F_VERSION_1 is missing (tern is a modern device only).
[[nodiscard]] Result<uint64_t> vhost_net_features_to_set(uint64_t acked, uint64_t offered);

/// struct vhost_memory_region without the padding.
struct VhostMemoryRegion {
  uint64_t guest_phys_addr = 0;
  uint64_t memory_size = 0;     ///< Bytes.
  uint64_t userspace_addr = 0;  ///< Host-virtual address of guest_phys_addr in tern.
  bool operator==(const VhostMemoryRegion&) const = default;
};

/// VHOST_SET_MEM_TABLE's regions: every region of guest RAM (GuestMemory::regions()).
[[nodiscard]] std::vector<VhostMemoryRegion> vhost_memory_table(const GuestMemory& mem);

/// The host-virtual ring addresses of struct vhost_vring_addr.
struct VhostVringAddr {
  uint64_t desc_user_addr = 0;
  uint64_t avail_user_addr = 0;
  uint64_t used_user_addr = 0;
  bool operator==(const VhostVringAddr&) const = default;
};

/// Translates `queue`'s guest-physical rings through GuestMemory's checked translation (each
/// ring wholly inside one RAM region). Fails, naming the ring, for a size that is not a power
/// of two in 1..32768, a ring not in RAM, or a ring misaligned (virtio 1.2 §2.7: descriptor
/// table 16, available ring 2, used ring 4 bytes; the kernel refuses the last two with EINVAL).
[[nodiscard]] Result<VhostVringAddr> vring_host_addresses(const GuestMemory& mem,
                                                          const VirtqueueConfig& queue);

/// See the file comment. Vring calls take the vring index of this instance (VHOST_NET_VQ_RX =
/// 0, VHOST_NET_VQ_TX = 1); errors name queue `2 * pair + vring` of the device.
class VhostNetFd {
 public:
  /// Opens `path` (O_RDWR | O_CLOEXEC). Errors: "open: /dev/vhost-net: <errno>" prefixed by
  /// `name` (ENOENT: the vhost_net module is not loaded; EACCES: no permission).
  [[nodiscard]] static Result<VhostNetFd> open(std::string name, uint16_t pair,
                                               const std::string& path = kVhostNetPath);

  /// Makes the calling process the owner (the vhost worker thread uses its mm): first.
  [[nodiscard]] Result<void> set_owner();
  [[nodiscard]] Result<uint64_t> get_features();
  [[nodiscard]] Result<void> set_features(uint64_t features);
  [[nodiscard]] Result<void> set_mem_table(std::span<const VhostMemoryRegion> regions);
  [[nodiscard]] Result<void> set_vring_num(unsigned vring, unsigned num);
  [[nodiscard]] Result<void> set_vring_addr(unsigned vring, const VhostVringAddr& addr);
  /// The next available index vhost will read (only while the vring has no backend: EBUSY).
  [[nodiscard]] Result<void> set_vring_base(unsigned vring, uint16_t next_avail);
  [[nodiscard]] Result<uint16_t> get_vring_base(unsigned vring);
  [[nodiscard]] Result<void> set_vring_kick(unsigned vring, BorrowedFd kick);
  [[nodiscard]] Result<void> set_vring_call(unsigned vring, BorrowedFd call);
  /// VHOST_SET_VRING_ERR: the eventfd vhost signals on a driver error it will not complete
  /// (a malformed chain: vq_err in drivers/vhost/vhost.c); nothing else tells of it.
  [[nodiscard]] Result<void> set_vring_err(unsigned vring, BorrowedFd err);
  /// VHOST_NET_SET_BACKEND: the tap fd, or -1 to stop the vring (returns after vhost's worker
  /// finished with it).
  [[nodiscard]] Result<void> set_backend(unsigned vring, BorrowedFd tap);

 private:
  VhostNetFd(std::string name, uint16_t pair, UniqueFd fd)
      : name_(std::move(name)), pair_(pair), fd_(std::move(fd)) {}
  [[nodiscard]] std::string vring_context(const char* ioctl, unsigned vring) const;
  [[nodiscard]] Result<void> vring_state(unsigned long request, const char* ioctl,
                                         unsigned vring, unsigned num);
  [[nodiscard]] Result<void> vring_file(unsigned long request, const char* ioctl,
                                        unsigned vring, BorrowedFd fd);

  std::string name_;
  uint16_t pair_ = 0;
  UniqueFd fd_;
};

}  // namespace tern::net
