// Invariants of a virtio-pci function that hold after any guest access or any accepted snapshot
// restore (fuzzers only; a broken one aborts through FUZZ_CHECK, naming it).
#pragma once

#include <cstdint>
#include <optional>

#include "base/testing/fuzz_input.h"
#include "devices/pci/pci_registers.h"
#include "virtio/transport/testing/virtio_pci_rig.h"

namespace tern::testing {

/// Every unmasked MSI-X vector is routed to the message in its table entry; reserved
/// vector-control bits read 0.
inline void check_msix_routes(const MsixTable& m, const FakePciPlatform& platform) {
  for (uint16_t v = 0; v < m.size(); ++v) {
    uint8_t e[16];
    m.table_read(v * pci::kMsixEntrySize, e);
    const uint64_t addr = load_le(std::span<const uint8_t>(e, 8));
    const auto data = static_cast<uint32_t>(load_le(std::span<const uint8_t>(e + 8, 4)));
    const auto control = static_cast<uint32_t>(load_le(std::span<const uint8_t>(e + 12, 4)));
    FUZZ_CHECK((control & ~pci::kMsixVectorMasked) == 0);
    if (control & pci::kMsixVectorMasked) continue;
    auto r = platform.routes.find(m.gsi(v));
    FUZZ_CHECK(r != platform.routes.end());
    FUZZ_CHECK(r->second.address == addr && r->second.data == data);
  }
}

/// Function `i` of `rig` (the only one with ioeventfds when `sole` is set): status, activation,
/// negotiated features, queue registers, ioeventfd placement and MSI-X routes are consistent.
inline void check_virtio_pci(VirtioPciRig& rig, size_t i, bool sole = true) {
  namespace vp = virtio_pci;
  VirtioPciTransport& t = *rig.transports[i];
  FakeVirtioDevice& dev = *rig.devices[i];
  auto common = [&t](uint32_t off, size_t width) {
    uint8_t b[8] = {};
    t.bar_read(vp::kVirtioBar, vp::kCommonCfgOffset + off, std::span<uint8_t>(b, width));
    return load_le(std::span<const uint8_t>(b, width));
  };
  const uint8_t status = t.device_status();
  FUZZ_CHECK(common(vp::kDeviceStatus, 1) == status);
  FUZZ_CHECK(dev.activations_while_active == 0);
  FUZZ_CHECK(t.activated() == dev.active);
  const uint64_t v1 = virtio::feature(virtio::VIRTIO_F_VERSION_1);
  if (status & vp::FEATURES_OK) {
    FUZZ_CHECK((t.driver_features() & ~dev.device_features()) == 0 && (t.driver_features() & v1));
    FUZZ_CHECK(status & vp::DRIVER);
  }
  if (dev.active) {
    FUZZ_CHECK((status & vp::DRIVER_OK) && (status & vp::FEATURES_OK));
    FUZZ_CHECK(dev.acked == t.driver_features());
  }
  const uint16_t nq = dev.num_queues();
  const uint16_t vectors = t.interrupt().msix().size();
  FUZZ_CHECK(vectors == nq + 1);
  FUZZ_CHECK(common(vp::kNumQueues, 2) == nq);
  const uint64_t cv = common(vp::kConfigMsixVector, 2);
  FUZZ_CHECK(cv == vp::VIRTIO_MSI_NO_VECTOR || cv < vectors);
  const uint64_t sel = common(vp::kQueueSelect, 2);
  const uint64_t qsize = common(vp::kQueueSize, 2);
  if (sel < nq) {
    FUZZ_CHECK(qsize != 0 && (qsize & (qsize - 1)) == 0 && qsize <= dev.max_queue_size());
    const uint64_t qv = common(vp::kQueueMsixVector, 2);
    FUZZ_CHECK(qv == vp::VIRTIO_MSI_NO_VECTOR || qv < vectors);
    FUZZ_CHECK(common(vp::kQueueNotifyOff, 2) == sel);
  } else {
    FUZZ_CHECK(qsize == 0);
  }

  // The kick ioeventfds follow BAR0: at its notify area while memory decode is on and BAR0 is
  // programmed, nowhere otherwise.
  uint8_t b[4];
  rig.root.config_read(rig.slots[i], 0, pci::kBar0, b);
  const uint32_t bar0 = static_cast<uint32_t>(load_le(b)) & pci::kBarMemoryMask;
  rig.root.config_read(rig.slots[i], 0, pci::kCommand, std::span<uint8_t>(b, 2));
  const bool decode = (load_le(std::span<const uint8_t>(b, 2)) & pci::kCommandMemory) != 0;
  std::optional<uint64_t> want;
  if (decode && bar0 != 0) want = uint64_t{bar0} + vp::kNotifyOffset;
  FUZZ_CHECK(t.notify_gpa() == want);
  if (sole) FUZZ_CHECK(rig.platform.ioeventfds.size() == (want ? nq : 0u));
  for (uint16_t q = 0; want && q < nq; ++q)
    FUZZ_CHECK(rig.platform.ioeventfds.count(*want + q * vp::kNotifyOffMultiplier) == 1);

  check_msix_routes(t.interrupt().msix(), rig.platform);
}

}  // namespace tern::testing
