// The vhost-user front-end's request sequences, as free functions over one FrontendClient: the
// connection handshake, the memory table, one vring's set-up, and the translations they need
// (guest RAM → VhostUserMemoryRegion, a queue's rings → host-virtual VhostVringAddr). Every
// function validates what it can before sending anything; any request's error is returned as is
// (it names the socket and the request) and leaves the client unusable.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "vhost_user/frontend_client.h"
#include "virtio/virtio_device.h"

namespace tern::vhost_user {

/// What one connection's handshake established.
struct Negotiated {
  uint64_t features = 0;           ///< GET_FEATURES, as the back-end offered them.
  uint64_t protocol_features = 0;  ///< Offered ∩ kTernProtocolFeatures (sent with SET_...).
  uint64_t max_queues = 1;         ///< GET_QUEUE_NUM with MQ, else 1.
};

/// GET_FEATURES; with VHOST_USER_F_PROTOCOL_FEATURES GET_PROTOCOL_FEATURES and SET_PROTOCOL_
/// FEATURES (the intersection with kTernProtocolFeatures); GET_QUEUE_NUM with MQ; SET_OWNER.
/// Fails when `queues` exceeds the back-end's queue count, naming both.
[[nodiscard]] Result<Negotiated> negotiate(FrontendClient& client, uint16_t queues);

/// The features for SET_FEATURES: the driver's `acked` plus VHOST_USER_F_PROTOCOL_FEATURES when
/// the back-end offered it (spec: "the front-end must set it back"; it also makes rings start
/// disabled until SET_VRING_ENABLE).
[[nodiscard]] uint64_t features_to_set(uint64_t acked, const Negotiated& n);

/// Guest RAM as vhost-user regions: {gpa, size, userspace_addr = tern's host pointer,
/// mmap_offset = 0}, with each region's fd (MemoryRegion::fd) in `fds`. Fails when a region has
/// no fd (anonymous RAM: the back-end could not map it; --memory-backend memfd or hugetlbfs).
struct MemTableMsg {
  std::vector<VhostUserMemoryRegion> regions;
  std::vector<int> fds;  ///< Borrowed from the GuestMemory.
};
[[nodiscard]] Result<MemTableMsg> memory_table(const GuestMemory& mem);

/// Sends the memory table: SET_MEM_TABLE (≤ 8 regions), or with CONFIGURE_MEM_SLOTS
/// GET_MAX_MEM_SLOTS then ADD_MEM_REG per region (refused when there are more regions than slots).
[[nodiscard]] Result<void> send_memory_table(FrontendClient& client, const MemTableMsg& table);

/// Host-virtual ring addresses of queue `index` (VhostVringAddr, flags 0), each ring wholly inside
/// one RAM region and aligned as virtio 1.2 §2.7 requires (descriptors 16, available ring 2, used
/// ring 4 bytes). Errors name the queue and the ring.
[[nodiscard]] Result<VhostVringAddr> vring_user_addresses(const GuestMemory& mem, uint16_t index,
                                                          const VirtqueueConfig& q);

/// The used ring's idx as guest memory holds it now (what the back-end has completed).
[[nodiscard]] Result<uint16_t> read_used_idx(const GuestMemory& mem, const VirtqueueConfig& q);
/// The available ring's idx as guest memory holds it now (what the driver has made available).
[[nodiscard]] Result<uint16_t> read_avail_idx(const GuestMemory& mem, const VirtqueueConfig& q);

/// GET_VRING_BASE's answer `num` for split vring `index` of `size` entries, checked against the
/// ring as guest memory holds it after the answer: the back-end's next available index lies in
/// the 16-bit index space (virtio 1.2 §2.7.6: the upper bits are a packed ring's, which tern
/// never negotiates) and between `used_idx` (it cannot have taken fewer requests than it
/// completed) and `avail_idx` (nor more than the driver made available), at most `size` ahead
/// of `used_idx` (modulo 2^16). Anything else is refused naming GET_VRING_BASE, the vring and
/// the value: the caller then falls back to the used ring's idx, as for a failed request.
[[nodiscard]] Result<uint16_t> check_vring_base(uint32_t num, uint32_t index, uint16_t size,
                                                uint16_t used_idx, uint16_t avail_idx);

/// One vring's start: SET_VRING_NUM, SET_VRING_BASE (`base` = the next available index the
/// back-end reads), SET_VRING_ADDR, SET_VRING_CALL, SET_VRING_KICK, then SET_VRING_ENABLE 1 when
/// `enable` (PROTOCOL_FEATURES negotiated: rings start disabled; without it the kick starts the
/// ring). CALL before KICK as QEMU ends up sending them (its guest notifiers are set before
/// vhost_dev_start): libvhost-user starts the ring at SET_VRING_KICK and resubmits inflight
/// requests there, and a completion with no call fd yet is a vu_panic ("Error writing eventfd")
/// in qemu-storage-daemon 7.2 — found by vhost_user_blk_qsd_test.
struct VringStart {
  uint32_t index = 0;
  uint16_t size = 0;
  uint16_t base = 0;
  VhostVringAddr addr;
  int kick = -1;
  int call = -1;
};
[[nodiscard]] Result<void> start_vring(FrontendClient& client, const VringStart& v, bool enable);

}  // namespace tern::vhost_user
