// vhost-net as a virtio-net device's external queue backend (virtio_device_base.h): the RX/TX
// virtqueues served by the kernel (drivers/vhost/net.c) through /dev/vhost-net, one vhost-net
// instance per queue pair, with its tap fd as the backend. tern keeps the control queue, the
// configuration space (link status, MAC) and snapshots; the data path never enters tern.
//
// Per instance, in the order the kernel needs (Documentation/virt/kvm + include/uapi/linux/
// vhost.h): VHOST_SET_OWNER, VHOST_GET_FEATURES / VHOST_SET_FEATURES (the acked ring features),
// VHOST_SET_MEM_TABLE (every guest RAM region: guest-physical → host-virtual), then per vring
// VHOST_SET_VRING_NUM, _ADDR (host-virtual ring addresses), _BASE (next available index),
// _KICK (the queue's ioeventfd), _CALL (the MSI-X vector's irqfd, or a relayed eventfd), and
// VHOST_NET_SET_BACKEND (the tap fd) last.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "virtio/virtio_device.h"
#include "virtio/virtio_device_base.h"

namespace tern::net {

/// Whether /dev/vhost-net can be opened here; the error says why not (ENOENT: module not
/// loaded, EACCES, ...). Checked when the device is built, to fall back (saying so) in time.
[[nodiscard]] Result<void> vhost_net_available();

/// Features vhost-net serves that tern may offer with vhost=on (VIRTIO_F_VERSION_1,
/// VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC, VIRTIO_NET_F_MRG_RXBUF), as
/// VHOST_GET_FEATURES reports them; 0 if /dev/vhost-net cannot be opened.
[[nodiscard]] uint64_t vhost_net_ring_features();

/// Starts vhost-net for `queues`: the enabled RX/TX queues of pairs 0..taps.size()-1 (queue 2k
/// = receiveq k, 2k+1 = transmitq k, in index order), with `taps[k]` the tap fd of pair k (the
/// device keeps owning it). `acked` are the driver's features (the ring and net header bits go
/// to VHOST_SET_FEATURES). Calls come through interrupt->queue_irqfd(i) when valid, else a relay
/// thread reads the call eventfds and calls interrupt->signal_used_queue(i). pause() stops the
/// backends (VHOST_NET_SET_BACKEND -1) and reads VHOST_GET_VRING_BASE (next_avail; next_used from
/// the used ring's idx); resume() sets the backends again. Errors name `name` and the ioctl.
[[nodiscard]] Result<std::unique_ptr<virtio::ExternalQueues>> start_vhost_net(
    const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
    std::vector<BorrowedFd> taps, std::shared_ptr<VirtioInterrupt> interrupt, std::string name);

}  // namespace tern::net
