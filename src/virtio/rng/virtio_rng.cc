#include "virtio/rng/virtio_rng.h"

namespace tern {

// Placeholder until the device lands (issue 9): callers can already be written against it.
Result<std::shared_ptr<VirtioDevice>> make_virtio_rng(const RngConfig&, std::string) {
  return fail("--rng", "the virtio-rng device is not built yet");
}

}  // namespace tern
