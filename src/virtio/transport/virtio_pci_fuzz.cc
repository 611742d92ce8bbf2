// libFuzzer target: the virtio-pci transport as a guest driver reaches it — BAR0 (common
// configuration, ISR, device configuration, notifications), BAR1 (MSI-X table and PBA), the
// function's config space (BARs, command, MSI-X control, the PCI_CFG capability window), the
// MMIO window of the root, whole Linux-style probes up to DRIVER_OK, status writes (reset
// included) and the device raising interrupts — over a FakeVirtioDevice without KVM. Each input
// byte picks an operation; the following bytes are its operands.
//
// Invariants after every operation: the status read through BAR0 is the transport's; activation
// matches the device's (never activated twice); acked features are offered and include
// VERSION_1; queue sizes and vectors read back in range; ioeventfds sit exactly at the decoded
// BAR0's notify area; every unmasked MSI-X vector is routed to its current message; a
// notification reaches the device's kick eventfd; unimplemented BAR offsets read 0, window
// addresses outside every BAR read all-ones; an ISR read clears ISR and lowers INTx.
#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "base/testing/fuzz_input.h"
#include "devices/pci/pci_registers.h"
#include "virtio/transport/testing/virtio_pci_checks.h"
#include "virtio/transport/testing/virtio_pci_test_driver.h"

namespace {

using namespace tern;
using namespace tern::testing;
namespace vp = virtio_pci;

constexpr uint16_t kQueues = 2;
constexpr uint16_t kVectors = kQueues + 1;

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}
void drain(int fd) {
  uint64_t v;
  [[maybe_unused]] ssize_t n = ::read(fd, &v, sizeof v);
}

/// A BAR0 offset, biased to the structures tern puts there; offset + width stays in the BAR.
uint64_t bar0_offset(FuzzInput& in, size_t width) {
  uint64_t off = 0;
  switch (in.u8() % 6) {
    case 0:
      off = vp::kCommonCfgOffset + in.u8() % (vp::kCommonCfgSize + 8);
      break;
    case 1:
      off = vp::kIsrOffset - 2 + in.u8() % 5;
      break;
    case 2:
      off = vp::kDeviceCfgOffset + in.u8() % 32;
      break;
    case 3:
      off = vp::kNotifyOffset + in.u8() % (4 * vp::kNotifyOffMultiplier);
      break;
    default:
      off = in.u16() % vp::kVirtioBarSize;
      break;
  }
  return off + width > vp::kVirtioBarSize ? vp::kVirtioBarSize - width : off;
}

/// True where BAR0 holds nothing: such bytes must read 0.
bool bar0_hole(uint64_t off) {
  if (off < vp::kCommonCfgOffset + vp::kCommonCfgSize) return false;
  if (off == vp::kIsrOffset) return false;
  return !(off >= vp::kDeviceCfgOffset && off < vp::kDeviceCfgOffset + vp::kDeviceCfgSize);
}

struct Fuzz {
  VirtioPciRig rig{1};
  VirtioPciTransport& t = *rig.transports[0];
  FakeVirtioDevice& dev = *rig.devices[0];
  VirtioPciTestDriver drv{rig.root, rig.slots[0]};

  void bar0_read(FuzzInput& in) {
    size_t w = in.width();
    uint64_t off = bar0_offset(in, w);
    uint8_t b[8];
    t.bar_read(vp::kVirtioBar, off, std::span<uint8_t>(b, w));
    for (size_t i = 0; i < w; ++i)
      if (bar0_hole(off + i)) FUZZ_CHECK(b[i] == 0);
    if (off == vp::kIsrOffset) {
      // Read and clear: a second read finds nothing, and INTx is low.
      uint8_t again = 0xFF;
      t.bar_read(vp::kVirtioBar, off, std::span<uint8_t>(&again, 1));
      FUZZ_CHECK(again == 0);
      FUZZ_CHECK(!rig.platform.levels[VirtioPciRig::kIntxIrqs[0]]);
    }
  }

  void bar0_write(FuzzInput& in) {
    size_t w = in.width();
    uint64_t off = bar0_offset(in, w);
    uint64_t v = in.u64();
    t.bar_write(vp::kVirtioBar, off, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), w));
    if (off >= vp::kNotifyOffset && off < vp::kNotifyOffset + kQueues * vp::kNotifyOffMultiplier &&
        dev.active) {
      size_t q = (off - vp::kNotifyOffset) / vp::kNotifyOffMultiplier;
      FUZZ_CHECK(q < dev.kicks.size() && readable(dev.kicks[q].get()));
      drain(dev.kicks[q].get());
    }
  }

  void bar1_access(FuzzInput& in, bool write) {
    size_t w = in.width();
    uint64_t off = in.u8() % 4 == 0 ? vp::kMsixPbaOffset + in.u8() % 16 : in.u16() % 80;
    if (off + w > vp::kMsixBarSize) off = vp::kMsixBarSize - w;
    uint64_t v = in.u64();
    auto* p = reinterpret_cast<uint8_t*>(&v);
    if (write) return t.bar_write(vp::kMsixBar, off, std::span<const uint8_t>(p, w));
    v = 0;
    t.bar_read(vp::kMsixBar, off, std::span<uint8_t>(p, w));
    const uint64_t table_end = kVectors * pci::kMsixEntrySize;
    const bool in_table = off + w <= table_end;
    const bool in_pba = off >= vp::kMsixPbaOffset && off + w <= vp::kMsixPbaOffset + 8;
    if (!in_table && !in_pba) FUZZ_CHECK(v == 0);
    for (size_t i = 0; in_pba && i < w; ++i) {
      uint64_t byte = off - vp::kMsixPbaOffset + i;  // pending bits of vectors 8 * byte + 0..7
      uint8_t valid = byte == 0 ? (1u << kVectors) - 1 : 0;
      FUZZ_CHECK((p[i] & ~valid) == 0);
    }
  }

  void config_access(FuzzInput& in, bool write) {
    // What the 0xCFC data port can produce: 1, 2 or 4 bytes inside one dword.
    size_t w = in.width(4);
    uint32_t off = in.u8();
    if (off % 4 + w > 4) off &= ~3u;
    uint32_t v = in.u32();
    auto* p = reinterpret_cast<uint8_t*>(&v);
    if (write)
      rig.root.config_write(rig.slots[0], 0, off, std::span<const uint8_t>(p, w));
    else
      rig.root.config_read(rig.slots[0], 0, off, std::span<uint8_t>(p, w));
  }

  void probe(FuzzInput& in) {
    uint64_t features = 0;
    switch (in.u8() % 4) {
      case 0:
        features = dev.device_features();
        break;
      case 1:
        features = virtio::feature(virtio::VIRTIO_F_VERSION_1);
        break;
      case 2:
        features = FakeVirtioDevice::kExtraFeature;
        break;
      default:
        features = in.u64();
        break;
    }
    std::vector<VirtqueueConfig> qs(kQueues);
    for (auto& q : qs) {
      uint8_t b = in.u8();
      q.size = static_cast<uint16_t>(1u << ((b & 0xF) % 10));  // up to 512: too big sometimes
      q.enabled = (b & 0x80) == 0;
      uint64_t base = uint64_t{in.u16()} << 12;
      q.desc_gpa = base;
      q.avail_gpa = base + 0x1000 + (b & 0x40 ? 1 : 0);  // misaligned sometimes
      q.used_gpa = base + 0x2000;
    }
    drv.probe(features, qs);
  }

  void window_access(FuzzInput& in, bool write) {
    size_t w = in.width();
    auto windows = t.memory_windows();
    uint64_t gpa = VirtioPciRig::kWindow + (in.u32() % 0x20000);
    if (!windows.empty() && in.u8() % 2) {
      const auto& win = windows[in.u8() % windows.size()];
      gpa = win.gpa + in.u16() % (win.size + 16);
    }
    if (gpa < VirtioPciRig::kWindow || gpa + w > VirtioPciRig::kWindow + VirtioPciRig::kWindowSize)
      return;
    uint64_t v = in.u64();
    auto* p = reinterpret_cast<uint8_t*>(&v);
    auto bus = rig.root.mmio_window();
    if (write) return bus->write(gpa - VirtioPciRig::kWindow, std::span<const uint8_t>(p, w));
    v = 0;
    bus->read(gpa - VirtioPciRig::kWindow, std::span<uint8_t>(p, w));
    bool inside = false;
    for (const auto& win : windows) inside |= gpa >= win.gpa && gpa + w <= win.gpa + win.size;
    if (!inside) FUZZ_CHECK(v == ~uint64_t{0} >> (64 - 8 * w));
  }

  void device_event(FuzzInput& in) {
    uint8_t b = in.u8();
    switch (b % 3) {
      case 0:
        t.interrupt().signal_used_queue(static_cast<uint16_t>(b >> 2));
        break;
      case 1:
        t.interrupt().signal_config_change();
        break;
      default:
        t.interrupt().set_needs_reset();
        break;
    }
  }

  void check() {
    check_virtio_pci(rig, 0);
    if (t.device_status() == 0) FUZZ_CHECK(t.driver_features() == 0 && !dev.active);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  Fuzz f;
  for (int n = 0; n < 256 && !in.empty(); ++n) {
    switch (in.u8() % 12) {
      case 0:
        f.bar0_read(in);
        break;
      case 1:
        f.bar0_write(in);
        break;
      case 2:
        f.bar1_access(in, false);
        break;
      case 3:
        f.bar1_access(in, true);
        break;
      case 4:
        f.config_access(in, false);
        break;
      case 5:
        f.config_access(in, true);
        break;
      case 6:
        f.probe(in);
        break;
      case 7: {
        uint8_t s = in.u8();
        f.t.bar_write(vp::kVirtioBar, vp::kDeviceStatus, std::span<const uint8_t>(&s, 1));
        if (s == 0) FUZZ_CHECK(f.t.device_status() == 0);
        break;
      }
      case 8:
        f.device_event(in);
        break;
      case 9:
        f.window_access(in, false);
        break;
      case 10:
        f.window_access(in, true);
        break;
      default: {
        // A common-config register written with its own width (the common case for drivers).
        static constexpr std::pair<uint32_t, uint8_t> kRegs[] = {
            {vp::kDeviceFeatureSelect, 4}, {vp::kDriverFeatureSelect, 4}, {vp::kDriverFeature, 4},
            {vp::kConfigMsixVector, 2},    {vp::kQueueSelect, 2},         {vp::kQueueSize, 2},
            {vp::kQueueMsixVector, 2},     {vp::kQueueEnable, 2},         {vp::kQueueDesc, 8},
            {vp::kQueueDriver, 8},         {vp::kQueueDevice, 8},         {vp::kQueueDesc + 4, 4}};
        auto [off, w] = kRegs[in.u8() % std::size(kRegs)];
        uint64_t v = in.u8() % 2 ? in.u8() % 4 : in.u64();
        f.t.bar_write(vp::kVirtioBar, off,
                      std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), w));
        break;
      }
    }
    f.check();
  }
  return 0;
}
