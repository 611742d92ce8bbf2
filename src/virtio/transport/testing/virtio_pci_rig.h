// VirtioPciRig (tests and fuzzers only): PCI bus 0 with `functions` virtio-pci transports over
// FakeVirtioDevices, on a FakePciPlatform (no KVM), BARs placed in the MMIO window the way
// PciDevices places them (PciRoot::allocate_bars: BAR0 then BAR1 per function, INTx on IRQs 10
// and 11 alternately).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "devices/pci/pci_root.h"
#include "devices/testing/fake_pci_platform.h"
#include "memory/guest_memory.h"
#include "virtio/testing/fake_virtio_device.h"
#include "virtio/transport/virtio_pci_registers.h"
#include "virtio/transport/virtio_pci_transport.h"

namespace tern::testing {

struct VirtioPciRig {
  static constexpr uint64_t kWindow = 0xC0000000;
  static constexpr uint64_t kWindowSize = 0x10000000;
  static constexpr uint8_t kIntxIrqs[] = {10, 11};

  explicit VirtioPciRig(size_t functions = 1) {
    for (size_t i = 0; i < functions; ++i) {
      auto dev = std::make_shared<FakeVirtioDevice>();
      auto t = VirtioPciTransport::create(dev, mem, platform).value();
      PciPlacement p = root.allocate_bars(t->bars()).value();
      p.intx_irq = kIntxIrqs[i % 2];
      TERN_CHECK(t->place(p).has_value());
      slots.push_back(root.add(t).value());
      devices.push_back(std::move(dev));
      transports.push_back(std::move(t));
    }
  }

  // Declaration order matters: the transports deregister their ioeventfds from `platform` when
  // they go (with `root`, which holds them too).
  FakePciPlatform platform;
  GuestMemory mem = GuestMemory::wrap({});
  PciRoot root{kWindow, kWindowSize};
  std::vector<std::shared_ptr<FakeVirtioDevice>> devices;
  std::vector<std::shared_ptr<VirtioPciTransport>> transports;
  std::vector<uint8_t> slots;
};

}  // namespace tern::testing
