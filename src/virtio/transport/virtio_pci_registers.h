// Virtio over PCI, modern interface (virtio 1.2 §4.1): capability structures, common
// configuration layout, device status bits, and where tern puts each structure in its BARs.
#pragma once

#include <cstdint>

namespace tern::virtio_pci {

inline constexpr uint16_t kVendorId = 0x1AF4;        ///< §4.1.2: PCI vendor of virtio devices.
inline constexpr uint16_t kModernDeviceBase = 0x1040;  ///< Device ID = 0x1040 + virtio device ID.
inline constexpr uint8_t kRevision = 1;              ///< Modern-only (non-transitional) device.

// struct virtio_pci_cap cfg_type (§4.1.4).
inline constexpr uint8_t VIRTIO_PCI_CAP_COMMON_CFG = 1;
inline constexpr uint8_t VIRTIO_PCI_CAP_NOTIFY_CFG = 2;
inline constexpr uint8_t VIRTIO_PCI_CAP_ISR_CFG = 3;
inline constexpr uint8_t VIRTIO_PCI_CAP_DEVICE_CFG = 4;
inline constexpr uint8_t VIRTIO_PCI_CAP_PCI_CFG = 5;

// struct virtio_pci_cap, offsets from the capability start (cap_vndr at 0).
inline constexpr uint32_t kCapLen = 2;
inline constexpr uint32_t kCapCfgType = 3;
inline constexpr uint32_t kCapBar = 4;
inline constexpr uint32_t kCapOffset = 8;
inline constexpr uint32_t kCapLength = 12;
inline constexpr uint32_t kCapSize = 16;
inline constexpr uint32_t kNotifyCapSize = 20;   ///< + le32 notify_off_multiplier.
inline constexpr uint32_t kPciCfgCapSize = 20;   ///< + u8 pci_cfg_data[4].
inline constexpr uint32_t kPciCfgData = 16;

// struct virtio_pci_common_cfg (§4.1.4.3), byte offsets.
inline constexpr uint32_t kDeviceFeatureSelect = 0x00;
inline constexpr uint32_t kDeviceFeature = 0x04;
inline constexpr uint32_t kDriverFeatureSelect = 0x08;
inline constexpr uint32_t kDriverFeature = 0x0C;
inline constexpr uint32_t kConfigMsixVector = 0x10;
inline constexpr uint32_t kNumQueues = 0x12;
inline constexpr uint32_t kDeviceStatus = 0x14;
inline constexpr uint32_t kConfigGeneration = 0x15;
inline constexpr uint32_t kQueueSelect = 0x16;
inline constexpr uint32_t kQueueSize = 0x18;
inline constexpr uint32_t kQueueMsixVector = 0x1A;
inline constexpr uint32_t kQueueEnable = 0x1C;
inline constexpr uint32_t kQueueNotifyOff = 0x1E;
inline constexpr uint32_t kQueueDesc = 0x20;
inline constexpr uint32_t kQueueDriver = 0x28;
inline constexpr uint32_t kQueueDevice = 0x30;
inline constexpr uint32_t kCommonCfgSize = 0x38;

inline constexpr uint16_t VIRTIO_MSI_NO_VECTOR = 0xFFFF;

// Device status (§2.1).
inline constexpr uint8_t ACKNOWLEDGE = 1;
inline constexpr uint8_t DRIVER = 2;
inline constexpr uint8_t DRIVER_OK = 4;
inline constexpr uint8_t FEATURES_OK = 8;
inline constexpr uint8_t DEVICE_NEEDS_RESET = 64;
inline constexpr uint8_t FAILED = 128;

// ISR status bits (§4.1.4.5).
inline constexpr uint8_t kIsrQueue = 1;
inline constexpr uint8_t kIsrConfig = 2;

// tern's BAR layout: BAR0 holds the virtio structures, BAR1 the MSI-X table and PBA.
inline constexpr uint8_t kVirtioBar = 0;
inline constexpr uint32_t kVirtioBarSize = 0x4000;
inline constexpr uint32_t kCommonCfgOffset = 0x0000;
inline constexpr uint32_t kIsrOffset = 0x1000;
inline constexpr uint32_t kIsrSize = 1;
inline constexpr uint32_t kDeviceCfgOffset = 0x2000;
inline constexpr uint32_t kDeviceCfgSize = 0x1000;
inline constexpr uint32_t kNotifyOffset = 0x3000;
inline constexpr uint32_t kNotifyOffMultiplier = 4;  ///< Queue q notifies at kNotifyOffset + 4q.
inline constexpr uint32_t kNotifyAccessBytes = 2;    ///< Linux writes the 16-bit queue index.
inline constexpr uint8_t kMsixBar = 1;
inline constexpr uint32_t kMsixBarSize = 0x1000;
inline constexpr uint32_t kMsixTableOffset = 0x000;
inline constexpr uint32_t kMsixPbaOffset = 0x800;
inline constexpr uint16_t kMaxQueues = 127;  ///< + 1 config vector fits the 2 KiB table.

}  // namespace tern::virtio_pci
