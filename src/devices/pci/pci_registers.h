// PCI configuration-space register offsets and bits (PCI Local Bus Specification 3.0, chapter 6;
// MSI-X: §6.8.2) used by tern's host bridge, config space and MSI-X code.
#pragma once

#include <cstdint>

namespace tern::pci {

// Type 0 header (§6.1).
inline constexpr uint32_t kVendorId = 0x00;
inline constexpr uint32_t kDeviceId = 0x02;
inline constexpr uint32_t kCommand = 0x04;
inline constexpr uint32_t kStatus = 0x06;
inline constexpr uint32_t kRevisionId = 0x08;
inline constexpr uint32_t kClassCode = 0x09;  ///< prog-if, subclass, base class (3 bytes).
inline constexpr uint32_t kHeaderType = 0x0E;
inline constexpr uint8_t kHeaderTypeMultiFunction = 0x80;  ///< Bit 7 of the header type.
inline constexpr uint32_t kBar0 = 0x10;       ///< BARs 0-5 at 0x10..0x27.
inline constexpr uint32_t kSubsystemVendorId = 0x2C;
inline constexpr uint32_t kSubsystemId = 0x2E;
inline constexpr uint32_t kCapabilitiesPointer = 0x34;
inline constexpr uint32_t kInterruptLine = 0x3C;
inline constexpr uint32_t kInterruptPin = 0x3D;
inline constexpr uint32_t kConfigSpaceSize = 256;
inline constexpr uint32_t kFirstCapability = 0x40;
inline constexpr int kNumBars = 6;

inline constexpr uint16_t kCommandIo = 1 << 0;
inline constexpr uint16_t kCommandMemory = 1 << 1;
inline constexpr uint16_t kCommandBusMaster = 1 << 2;
inline constexpr uint16_t kCommandIntxDisable = 1 << 10;
inline constexpr uint16_t kStatusInterrupt = 1 << 3;
inline constexpr uint16_t kStatusCapabilities = 1 << 4;

// BAR low bits (§6.2.5.1).
inline constexpr uint32_t kBarMemory32 = 0x0;
inline constexpr uint32_t kBarMemory64 = 0x4;      ///< Type 10b: 64-bit, upper half in BAR n+1.
inline constexpr uint32_t kBarPrefetchable = 0x8;
inline constexpr uint32_t kBarMemoryMask = ~uint32_t{0xF};

// Capability IDs.
inline constexpr uint8_t kCapVendorSpecific = 0x09;
inline constexpr uint8_t kCapMsix = 0x11;

// MSI-X (§6.8.2): capability layout relative to its start, message control bits, table entry.
inline constexpr uint32_t kMsixMessageControl = 2;
inline constexpr uint32_t kMsixTableOffsetBir = 4;
inline constexpr uint32_t kMsixPbaOffsetBir = 8;
inline constexpr uint32_t kMsixCapSize = 12;
inline constexpr uint16_t kMsixControlEnable = 1 << 15;
inline constexpr uint16_t kMsixControlFunctionMask = 1 << 14;
inline constexpr uint32_t kMsixEntrySize = 16;  ///< addr lo, addr hi, data, vector control.
inline constexpr uint32_t kMsixEntryVectorControl = 12;
inline constexpr uint32_t kMsixVectorMasked = 1;
inline constexpr uint16_t kMsixMaxVectors = 2048;

// Configuration mechanism #1 (§3.2.2.3.2): address port 0xCF8, data ports 0xCFC-0xCFF.
inline constexpr uint16_t kConfigAddressPort = 0xCF8;
inline constexpr uint16_t kConfigPortCount = 8;  ///< 0xCF8..0xCFF.
inline constexpr uint32_t kConfigDataOffset = 4;  ///< 0xCFC relative to 0xCF8.
inline constexpr uint32_t kConfigAddressEnable = 1u << 31;

}  // namespace tern::pci
