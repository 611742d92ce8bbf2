// The virtio-net device's factory, for the device registry (src/vmm/devices/net_kind.cc).
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "virtio/net/net_config.h"

namespace tern {

class VirtioDevice;

/// Builds a virtio-net device (virtio 1.2 §5.1) over the tap `config.host_dev_name`, opened now
/// with one fd per queue pair (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR, IFF_MULTI_QUEUE when
/// queue_pairs > 1). `config` must have passed check_net_config(). With `vhost` the RX/TX
/// queues go to /dev/vhost-net at activation; when it cannot be opened the device says so
/// (one warning) and serves them itself. Errors name the field: "host_dev_name: tap0: ...
/// (EBUSY: the tap is attached to another process)", "host_dev_name: /dev/net/tun: ...".
[[nodiscard]] Result<std::shared_ptr<VirtioDevice>> make_virtio_net(const NetConfig& config,
                                                                    std::string name);

}  // namespace tern
