// vhost-net as a virtio-net device's external queue backend (virtio_device_base.h): the RX/TX
// virtqueues served by the kernel (drivers/vhost/net.c) through /dev/vhost-net, one vhost-net
// instance per queue pair, with its tap fd as the backend. tern keeps the control queue, the
// configuration space (link status, MAC) and snapshots; the data path never enters tern.
//
// Per instance, in the order the kernel needs (Documentation/virt/kvm + include/uapi/linux/
// vhost.h): VHOST_SET_OWNER, VHOST_GET_FEATURES / VHOST_SET_FEATURES (the acked ring features),
// VHOST_SET_MEM_TABLE (every guest RAM region: guest-physical → host-virtual), then per vring
// VHOST_SET_VRING_NUM, _ADDR (host-virtual ring addresses), _BASE (next available index),
// _KICK (the queue's ioeventfd), _CALL (tern's eventfd, relayed: see below), _ERR (tern's
// eventfd, watched), and VHOST_NET_SET_BACKEND (the tap fd) last.
//
// Calls (QEMU's "guest notifier mask"): while a queue's MSI-X vector is deliverable (MSI-X
// enabled, function and vector unmasked: its MSI route exists), vhost's call fd is the vector's
// KVM irqfd (VirtioInterrupt::watch_queue_irqfd), so the interrupt does not wake tern. While it
// is masked (or MSI-X disabled) the call fd is tern's eventfd, read by VhostCallRelay and raised
// through signal_used_queue(): the vector's Pending bit (PCI 3.0 §6.8.2), sent at unmask, or
// INTx. The switch happens on the vCPU that changes the mask; its ordering rules are next to
// VhostNetQueues::switch_call(). Interrupts KVM injects from the irqfd are not counted.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "memory/guest_memory.h"
#include "virtio/queue_counters.h"
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

/// What the vhost-net glue reports to its device (each part optional).
struct VhostNetObserver {
  /// By device queue index (shorter, or null entries: not counted): the queue's live counters.
  /// The relay adds one `interrupts` per call that went through tern (not the direct irqfd ones)
  /// and the used ring's progress to `requests` (also brought up to date by sync_counters()).
  std::vector<virtio::QueueCounters*> queue_counters;
  /// Called on the relay thread each time vhost signals queue `queue`'s error eventfd (it
  /// refused a malformed chain and will not return it), after the device was marked NEEDS_RESET.
  std::function<void(uint16_t queue)> on_vring_error;
};

/// Starts vhost-net for `queues`: the enabled RX/TX queues of pairs 0..taps.size()-1 (queue 2k
/// = receiveq k, 2k+1 = transmitq k, in index order), with `taps[k]` the tap fd of pair k (the
/// device keeps owning it). `acked` are the driver's features (the ring and net header bits go
/// to VHOST_SET_FEATURES). A vring's calls go to its vector's irqfd while that is deliverable,
/// else a relay thread reads its call eventfd and calls interrupt->signal_used_queue(i) (see
/// the file comment); the relay also watches every vring's error
/// eventfd: vhost refused a malformed chain on that vring (and never returns it), so the device is
/// marked DEVICE_NEEDS_RESET (interrupt->set_needs_reset(): virtio 1.2 §2.1.2, the driver resets
/// it), logged once at warn (then rate-limited) and reported to `observer`. pause() stops the
/// backends (VHOST_NET_SET_BACKEND -1) and reads VHOST_GET_VRING_BASE (next_avail; next_used from
/// the used ring's idx); resume() sets the backends again. Errors name `name` and the ioctl.
[[nodiscard]] Result<std::unique_ptr<virtio::ExternalQueues>> start_vhost_net(
    const GuestMemory& mem, uint64_t acked, std::vector<virtio::ExternalQueue> queues,
    std::vector<BorrowedFd> taps, std::shared_ptr<VirtioInterrupt> interrupt, std::string name,
    VhostNetObserver observer = {});

}  // namespace tern::net
