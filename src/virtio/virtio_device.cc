#include "virtio/virtio_device.h"

#include "virtio/virtio_spec.h"

namespace tern {

std::string_view VirtioDevice::kind() const { return virtio::device_kind_name(device_type()); }

DeviceCounters VirtioDevice::counters() const {
  DeviceCounters c;
  c.name = std::string(name());
  c.kind = std::string(kind());
  return c;
}

}  // namespace tern
