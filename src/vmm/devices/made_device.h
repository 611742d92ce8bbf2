// MadeDevice: what the device registry makes for one DeviceSpec — a virtio device (PciDevices
// wraps it in a virtio-pci transport) or a PciFunctionModel (PciDevices builds its PCI function
// with make_function() once the VM has guest memory and a PCI platform: an NVMe disk).
#pragma once

#include <memory>
#include <string_view>
#include <variant>

#include "devices/pci/pci_function_model.h"
#include "virtio/virtio_device.h"

namespace tern {

/// See the file comment. Never holds a null pointer once made.
using MadeDevice = std::variant<std::shared_ptr<VirtioDevice>, std::shared_ptr<PciFunctionModel>>;

/// The device's name ("virtio-blk0", "nvme0").
[[nodiscard]] inline std::string_view made_device_name(const MadeDevice& d) {
  return std::visit([](const auto& p) { return p->name(); }, d);
}

}  // namespace tern
