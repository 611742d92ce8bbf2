// VhostUserBlk: a virtio-blk device whose virtqueues are served by another process over
// vhost-user (QEMU's vhost-user-blk-pci, Cloud Hypervisor's vhost_user_blk): qemu-storage-daemon
// --export type=vhost-user-blk, or `tern vhost-user-blk`. tern keeps the PCI transport and the
// configuration space; the data path never enters tern: the guest's kicks are the queues' KVM
// ioeventfds handed to the back-end (SET_VRING_KICK), the back-end's calls are the MSI-X
// vectors' irqfds (SET_VRING_CALL; a relay thread only for a queue without a vector).
//
// Life cycle:
//  - create() (before the guest boots): connect, GET_FEATURES, GET/SET_PROTOCOL_FEATURES (the
//    intersection with kTernProtocolFeatures), GET_QUEUE_NUM (queues ≤ the back-end's), SET_OWNER,
//    GET_CONFIG at offset 0 (kBlkConfigBytes = 60: QEMU 7.2 refuses more; num_queues patched).
//    A back-end that is missing, refuses, times out or answers garbage fails the start, naming
//    the socket and the request. Guest features = the back-end's & what tern's transport supports
//    (no PROTOCOL_FEATURES bit, no packed ring, no ACCESS_PLATFORM).
//  - activation (DRIVER_OK, control thread): SET_FEATURES, the memory table (SET_MEM_TABLE, or
//    ADD_MEM_REG per region with CONFIGURE_MEM_SLOTS), GET/SET_INFLIGHT_FD where offered, then per
//    enabled queue SET_VRING_NUM/ADDR/BASE/KICK/CALL and SET_VRING_ENABLE 1. Guest RAM must be
//    shareable (memfd/hugetlbfs: GuestMemory regions with fds): else the activation fails.
//  - the back-end dies (socket HUP) or fails a request: counted, one event, rate-limited log; a
//    monitor thread reconnects when the socket accepts again and replays the activation with
//    SET_INFLIGHT_FD (the kept inflight fd) and each vring's base = the used ring's idx read from
//    guest memory, so the back-end resubmits what was in flight from the inflight region rather
//    than skipping it. Never blocks a vCPU; never ends tern.
//  - pause (snapshot): GET_VRING_BASE per queue (stops the vrings), next_used from the used ring;
//    resume: the vring set-up again from those positions. A restore activates from the saved
//    positions (the back-end's own state is the back-end's).
//
// Thread-safety: as VirtioDeviceBase; read_config serves a cached copy (never asks the back-end
// on a vCPU thread).
#pragma once

#include <memory>
#include <string>

#include "block/disk_config.h"
#include "virtio/virtio_device_base.h"

namespace tern {

/// See the file comment.
class VhostUserBlk;

/// Connects to `config.vhost_user_socket` and negotiates (see the file comment); `config.queues`
/// and `config.queue_size` are the front-end's (the other DiskConfig fields are the back-end's and
/// must be defaults). `name` is the device's name in logs and stats ("virtio-blk1").
[[nodiscard]] Result<std::shared_ptr<virtio::VirtioDeviceBase>> make_vhost_user_blk(
    const DiskConfig& config, std::string name);

}  // namespace tern
