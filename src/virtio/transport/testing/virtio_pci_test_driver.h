// Test helper (unit tests only): a guest driver that reaches a VirtioPciTransport through a
// PciRoot the way Linux's virtio_pci_modern does — config cycles, BAR0 common configuration,
// MSI-X table writes, notifications — without KVM.
#pragma once

#include <poll.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "devices/pci/pci_registers.h"
#include "devices/pci/pci_root.h"
#include "virtio/transport/virtio_pci_registers.h"
#include "virtio/transport/virtio_pci_transport.h"

namespace tern::testing {

class VirtioPciTestDriver {
 public:
  VirtioPciTestDriver(PciRoot& root, uint8_t slot) : root_(root), slot_(slot) {}

  uint32_t cfg(uint32_t off, size_t width = 4) {
    uint8_t b[4] = {};
    root_.config_read(slot_, 0, off, std::span<uint8_t>(b, width));
    uint32_t v = 0;
    std::memcpy(&v, b, width);
    return v;
  }
  void set_cfg(uint32_t off, uint32_t v, size_t width = 4) {
    root_.config_write(slot_, 0, off,
                       std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), width));
  }
  uint64_t rd(uint64_t gpa, size_t width) {
    uint8_t b[8] = {};
    root_.mmio_window()->read(gpa - root_.mmio_base(), std::span<uint8_t>(b, width));
    uint64_t v = 0;
    std::memcpy(&v, b, width);
    return v;
  }
  void wr(uint64_t gpa, uint64_t v, size_t width) {
    root_.mmio_window()->write(gpa - root_.mmio_base(),
                               std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), width));
  }
  uint64_t bar(int i) { return cfg(pci::kBar0 + 4 * i) & ~0xFu; }
  uint64_t common(uint32_t off) { return bar(0) + virtio_pci::kCommonCfgOffset + off; }
  uint8_t msix_cap() {
    uint8_t p = static_cast<uint8_t>(cfg(pci::kCapabilitiesPointer, 1));
    for (int guard = 0; p && guard < 48; ++guard) {
      if (cfg(p, 1) == pci::kCapMsix) return p;
      p = static_cast<uint8_t>(cfg(p + 1, 1));
    }
    return 0;
  }
  /// Programs MSI-X table entry `v` (address 0xFEE00000, data `data`) and unmasks it.
  void program_vector(uint16_t v, uint32_t data) {
    uint64_t e = bar(1) + virtio_pci::kMsixTableOffset + 16ull * v;
    wr(e, 0xFEE00000, 4);
    wr(e + 4, 0, 4);
    wr(e + 8, data, 4);
    wr(e + 12, 0, 4);
  }
  /// Memory decode + bus master + MSI-X on, reset, ACK, DRIVER, features, FEATURES_OK, vectors
  /// (config -> 0, queue q -> q + 1), `queues`, DRIVER_OK. Returns the status read back.
  uint8_t probe(uint64_t features, const std::vector<VirtqueueConfig>& queues) {
    namespace vp = virtio_pci;
    set_cfg(pci::kCommand, pci::kCommandMemory | pci::kCommandBusMaster, 2);
    set_cfg(msix_cap() + 2, pci::kMsixControlEnable, 2);
    wr(common(vp::kDeviceStatus), 0, 1);
    wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER, 1);
    for (uint32_t half = 0; half < 2; ++half) {
      wr(common(vp::kDriverFeatureSelect), half, 4);
      wr(common(vp::kDriverFeature), (features >> (32 * half)) & 0xFFFFFFFF, 4);
    }
    wr(common(vp::kDeviceStatus), vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK, 1);
    program_vector(0, 0x40);
    wr(common(vp::kConfigMsixVector), 0, 2);
    for (uint16_t q = 0; q < queues.size(); ++q) {
      program_vector(q + 1, 0x41 + q);
      wr(common(vp::kQueueSelect), q, 2);
      wr(common(vp::kQueueSize), queues[q].size, 2);
      wr(common(vp::kQueueMsixVector), q + 1, 2);
      wr(common(vp::kQueueDesc), queues[q].desc_gpa, 8);
      wr(common(vp::kQueueDriver), queues[q].avail_gpa, 8);
      wr(common(vp::kQueueDevice), queues[q].used_gpa, 8);
      if (queues[q].enabled) wr(common(vp::kQueueEnable), 1, 2);
    }
    wr(common(vp::kDeviceStatus),
       vp::ACKNOWLEDGE | vp::DRIVER | vp::FEATURES_OK | vp::DRIVER_OK, 1);
    return static_cast<uint8_t>(rd(common(vp::kDeviceStatus), 1));
  }
  /// The queue notification, as a userspace MMIO exit delivers it.
  void notify(uint16_t q) {
    wr(bar(0) + virtio_pci::kNotifyOffset + virtio_pci::kNotifyOffMultiplier * q, q, 2);
  }
  /// Every byte of the common configuration for each queue_select value (queue_select restored).
  std::vector<uint8_t> common_snapshot(uint16_t queues) {
    namespace vp = virtio_pci;
    uint16_t sel = static_cast<uint16_t>(rd(common(vp::kQueueSelect), 2));
    std::vector<uint8_t> out;
    for (uint16_t q = 0; q <= queues; ++q) {
      wr(common(vp::kQueueSelect), q, 2);
      for (uint32_t off = 0; off < vp::kCommonCfgSize; ++off)
        out.push_back(static_cast<uint8_t>(rd(common(off), 1)));
    }
    wr(common(vp::kQueueSelect), sel, 2);
    return out;
  }

 private:
  PciRoot& root_;
  uint8_t slot_;
};

/// Waits (poll, 20 s timeout) for the eventfd `fd` to be signalled and drains it.
inline bool wait_eventfd(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 20000) != 1) return false;
  uint64_t v;
  return ::read(fd, &v, sizeof v) == sizeof v;
}

}  // namespace tern::testing
