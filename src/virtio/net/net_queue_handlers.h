// The virtio-net device's queue handlers (VirtioNet::make_queue_handler): one per receiveq
// (net_rx.cc), transmitq (net_tx.cc) and the controlq (net_ctrl.cc). Internal to the device.
#pragma once

#include <cstdint>
#include <memory>

#include "virtio/net/net_header.h"
#include "virtio/net/virtio_net_device.h"
#include "virtio/virtio_spec.h"
#include "virtio/queue_worker.h"

namespace tern::net {

/// receiveq of pair `pair` (virtio 1.2 §5.1.6.3-4): holds the driver's buffers in an RxBuffers
/// and reads frames from the pair's tap fd while they are sure to fit. With no (big enough)
/// buffer it stops watching the readable tap until the driver posts more (no spinning).
[[nodiscard]] std::unique_ptr<virtio::QueueHandler> make_rx_handler(VirtioNet& dev, uint16_t pair,
                                                                   uint16_t queue_size,
                                                                   uint64_t acked);
/// transmitq of pair `pair` (§5.1.6.2): each chain checked by parse_tx_chain() and written to
/// the pair's tap fd with one writev(2); used length 0 always.
[[nodiscard]] std::unique_ptr<virtio::QueueHandler> make_tx_handler(VirtioNet& dev, uint16_t pair,
                                                                   uint64_t acked);
/// controlq (§5.1.6.5): VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET; every other command answers ERR.
[[nodiscard]] std::unique_ptr<virtio::QueueHandler> make_ctrl_handler(VirtioNet& dev,
                                                                     uint64_t acked);

}  // namespace tern::net
