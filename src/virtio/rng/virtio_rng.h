// VirtioRng: the virtio entropy device (virtio 1.2 §5.4), Firecracker's "entropy" device. One
// request queue; every device-writable buffer of a chain is filled from getrandom(2), within the
// configured rate limit.
#pragma once

#include <memory>
#include <string>

#include "base/result.h"
#include "virtio/rng/rng_config.h"
#include "virtio/virtio_device.h"

namespace tern {

/// Creates the device. Errors (a bucket with size 0 or refill_time_ms 0) name the --rng /
/// rate_limiter field. `name` is used in logs and statistics ("virtio-rng0").
[[nodiscard]] Result<std::shared_ptr<VirtioDevice>> make_virtio_rng(const RngConfig& config,
                                                                    std::string name = "virtio-rng0");

}  // namespace tern
