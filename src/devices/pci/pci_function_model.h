// PciFunctionModel: a device opened from the user's configuration before the VM exists (its
// files checked, so bad input fails before anything runs) whose PCI function is built once the
// VM has guest memory and a PCI platform — the NVMe controller's disk. (A virtio device is the
// other kind of device the registry makes: PciDevices wraps it in a virtio-pci transport.)
#pragma once

#include <memory>
#include <string_view>

#include "base/result.h"
#include "devices/device_activator.h"
#include "devices/pci/pci_function.h"
#include "devices/pci/pci_platform.h"
#include "memory/guest_memory.h"

namespace tern {

/// What a PCI function runs on; every member outlives the function.
struct PciFunctionServices {
  const GuestMemory* memory = nullptr;
  PciPlatform* platform = nullptr;
  DeviceActivator* activator = nullptr;  ///< May be null (inline work: unit tests).
};

/// See the file comment.
class PciFunctionModel {
 public:
  virtual ~PciFunctionModel() = default;
  /// The device name ("nvme0").
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// Builds the PCI function (once; PciDevices then places it). Errors: platform failures
  /// (eventfds, MSI-X GSIs).
  [[nodiscard]] virtual Result<std::shared_ptr<PciFunction>> make_function(
      const PciFunctionServices& services) = 0;
};

}  // namespace tern
