// libFuzzer target: the snapshot decoders of the devices — the legacy section's 8250, i8042,
// ACPI PM and CMOS RTC, the PCI section's root (CONFIG_ADDRESS, host bridge), MSI-X table
// and virtio-pci transport (config space, MSI-X, ISR and vectors, common configuration, queues,
// activation, device state), and a firmware boot's sections: the PC chipset (i440FX, PIIX3,
// PIIX4 PM, ELCR, RC, PM1, PM timer), the INTx router and fw_cfg. (The pflash section needs a
// variable store file: pflash_device_test.cc covers its refusals; its command state machine is
// the cfi_flash target's.) The first input byte picks the decoder; the rest is its input,
// decoded into a freshly built device. (The sections' own framing — version, function count,
// names — lives in LegacyDevices and PciDevices, which need a console and KVM; the state-file
// container is the snapshot_state target's.)
//
// A refused input must say why. An accepted one must re-encode to exactly the bytes consumed;
// then the bytes after them drive a few guest accesses on the restored device, which must keep
// the device's invariants (virtio_pci_checks.h for PCI) and leave a state that saves and
// restores again into another fresh device.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "arch/x86/layout.h"
#include "base/testing/fuzz_input.h"
#include "devices/legacy/acpi_pm.h"
#include "devices/legacy/cmos_rtc.h"
#include "devices/legacy/i8042.h"
#include "devices/legacy/i8042_port.h"
#include "devices/legacy/serial8250.h"
#include "devices/legacy/serial_registers.h"
#include "devices/pci/intx_router.h"
#include "devices/pci/pci_registers.h"
#include "devices/pci/testing/pc_chipset_rig.h"
#include "devices/testing/fake_pci_platform.h"
#include "firmware/fw_cfg/fw_cfg_contents.h"
#include "firmware/fw_cfg/testing/fw_cfg_rig.h"
#include "virtio/transport/testing/virtio_pci_checks.h"

namespace {

using namespace tern;
using namespace tern::testing;

template <class D>
std::vector<uint8_t> save(const D& d) {
  snap::ByteWriter w;
  d.save_state(w);
  return w.take();
}

/// Decodes `in` with `restore`; if accepted, checks that `save` gives back the consumed prefix
/// (after `canonical`, where restoring legitimately normalises the state) and returns how many
/// bytes that was.
std::optional<size_t> round_trip(std::span<const uint8_t> in,
                                 const std::function<Result<void>(snap::ByteReader&)>& restore,
                                 const std::function<std::vector<uint8_t>()>& save_now,
                                 const std::function<void(std::vector<uint8_t>&)>& canonical = {}) {
  snap::ByteReader r(in, "fuzz section");
  auto ok = restore(r);
  if (!ok) {
    FUZZ_CHECK(!ok.error().message().empty());
    return std::nullopt;
  }
  const size_t used = in.size() - r.remaining();
  const auto again = save_now();
  std::vector<uint8_t> want(in.begin(), in.begin() + static_cast<ptrdiff_t>(used));
  if (canonical) canonical(want);
  FUZZ_CHECK(again == want);
  return used;
}

/// A restored state, after guest accesses, still saves bytes that restore into a fresh device.
template <class D>
void resaves(const D& d, D& fresh) {
  const auto bytes = save(d);
  snap::ByteReader r(bytes, "fuzz resave");
  auto ok = fresh.restore_state(r);
  FUZZ_CHECK(ok.has_value() && r.remaining() == 0);
  FUZZ_CHECK(save(fresh) == bytes);
}

/// Up to 16 byte-wide guest accesses on `dev` from the input.
void poke(BusDevice& dev, FuzzInput& in, uint64_t size,
          const std::function<void(uint64_t, uint8_t)>& on_read = {}) {
  for (int i = 0; i < 16 && !in.empty(); ++i) {
    uint8_t op = in.u8();
    uint64_t off = op % size;
    uint8_t v = in.u8();
    if (op & 0x80) {
      dev.write(off, std::span<const uint8_t>(&v, 1));
    } else {
      dev.read(off, std::span<uint8_t>(&v, 1));
      if (on_read) on_read(off, v);
    }
  }
}

void serial(std::span<const uint8_t> in) {
  auto make = [] { return std::make_unique<Serial8250>(IrqLine{}, ByteSink{}); };
  auto d = make();
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return d->restore_state(r); }, [&] { return save(*d); });
  if (!used) return;
  FuzzInput rest(in.data() + *used, in.size() - *used);
  poke(*d, rest, Serial8250::kRegisterCount, [](uint64_t off, uint8_t v) {
    if (off == uart::kLsr) FUZZ_CHECK(v & uart::kLsrThre);
  });
  resaves(*d, *make());
}

void i8042(std::span<const uint8_t> in) {
  auto make = [] { return std::make_unique<I8042>(IrqLine{}, I8042::Callback{}); };
  std::shared_ptr<I8042> d = make();
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return d->restore_state(r); }, [&] { return save(*d); });
  if (!used) return;
  FuzzInput rest(in.data() + *used, in.size() - *used);
  I8042Port data(d, I8042Port::Kind::kData), cmd(d, I8042Port::Kind::kCommand);
  for (int i = 0; i < 8 && !rest.empty(); ++i) poke(rest.u8() & 1 ? data : cmd, rest, 1);
  resaves(*d, *make());
}

void acpi_pm(std::span<const uint8_t> in) {
  auto make = [] { return std::make_unique<AcpiPm>(AcpiPm::Callback{}, AcpiPm::Callback{}); };
  auto d = make();
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return d->restore_state(r); }, [&] { return save(*d); });
  if (!used) return;
  FuzzInput rest(in.data() + *used, in.size() - *used);
  poke(*d, rest, AcpiPm::kRegisterCount);
  resaves(*d, *make());
}

void cmos(std::span<const uint8_t> in) {
  auto make = [] { return std::make_unique<CmosRtc>([] { return int64_t{1'700'000'000}; }); };
  auto d = make();
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return d->restore_state(r); }, [&] { return save(*d); });
  if (!used) return;
  FuzzInput rest(in.data() + *used, in.size() - *used);
  poke(*d, rest, CmosRtc::kPortCount);
  resaves(*d, *make());
}

void pci_root(std::span<const uint8_t> in) {
  VirtioPciRig rig(0);
  // The section ends with the host bridge's 256-byte config space; its device-specific part
  // (40h-FFh) is the bridge owner's state (PcChipset saves it), so restore leaves it as it is.
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return rig.root.restore_state(r); },
      [&] { return save(rig.root); },
      [&](std::vector<uint8_t>& want) {
        const auto now = save(rig.root);
        const size_t dev_specific = pci::kConfigSpaceSize - pci::kFirstCapability;
        if (now.size() == want.size() && want.size() >= dev_specific)
          std::copy(now.end() - static_cast<ptrdiff_t>(dev_specific), now.end(),
                    want.end() - static_cast<ptrdiff_t>(dev_specific));
      });
  if (!used) return;
  // CONFIG_ADDRESS reads back as restored; the host bridge still identifies itself.
  uint8_t b[4];
  rig.root.config_port()->read(0, b);
  FUZZ_CHECK(std::equal(b, b + 4, in.begin() + 4));
  rig.root.config_read(0, 0, 0, b);
  FUZZ_CHECK(load_le(b) == 0x00081b36);
}

void msix(std::span<const uint8_t> in) {
  if (in.size() < 2) return;
  uint16_t n = static_cast<uint16_t>(in[0] | in[1] << 8);
  if (n == 0 || n > 256) n = 1 + n % 256;  // mostly matching the saved size
  FakePciPlatform platform;
  auto t = MsixTable::create(n, platform).value();
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return t->restore_state(r, "fuzz"); },
      [&] { return save(*t); });
  if (!used) return;
  check_msix_routes(*t, platform);
  FuzzInput rest(in.data() + *used, in.size() - *used);
  for (int i = 0; i < 8 && !rest.empty(); ++i) {
    uint8_t op = rest.u8();
    uint32_t v = rest.u8() % 2;
    if (op & 1) {  // a vector-control or message dword: mask, unmask, or a new message
      t->table_write((op >> 1) * 4u, std::span<const uint8_t>(reinterpret_cast<uint8_t*>(&v), 4));
    } else {
      t->set_control(op & 2, op & 4);
      (void)t->fire(static_cast<uint16_t>(op % n));
    }
  }
  check_msix_routes(*t, platform);
  auto fresh = MsixTable::create(n, platform).value();
  const auto bytes = save(*t);
  snap::ByteReader r(bytes, "fuzz resave");
  FUZZ_CHECK(fresh->restore_state(r, "fuzz").has_value() && save(*fresh) == bytes);
}

/// A transport section with MSI-X enabled and the function unmasked may hold pending vectors
/// that are unmasked (tern never saves one: pending bits are flushed as soon as they are
/// deliverable). Restoring delivers them, as the live table would, so they save as not pending.
void deliver_pending(std::vector<uint8_t>& s) {
  constexpr size_t kConfig = 4, kTable = kConfig + 256 + 2, kEntry = 17;
  const size_t mc = kConfig + pci::kFirstCapability + pci::kMsixMessageControl;
  const uint16_t control = static_cast<uint16_t>(s[mc] | s[mc + 1] << 8);
  if (!(control & pci::kMsixControlEnable) || (control & pci::kMsixControlFunctionMask)) return;
  const uint16_t n = static_cast<uint16_t>(s[kTable - 2] | s[kTable - 1] << 8);
  for (size_t v = 0; v < n; ++v) {
    const size_t e = kTable + kEntry * v;
    if (!(s[e + 12] & pci::kMsixVectorMasked)) s[e + 16] = 0;
  }
}

void virtio_pci_transport(std::span<const uint8_t> in) {
  VirtioPciRig rig(1);
  VirtioPciTransport& t = *rig.transports[0];
  auto used = round_trip(
      in,
      [&](snap::ByteReader& r) -> Result<void> {
        TRY(t.restore_state(r));
        rig.root.refresh_bar_mappings();
        return {};
      },
      [&] { return save(t); }, deliver_pending);
  if (!used) return;
  check_virtio_pci(rig, 0);
  // Guest accesses on the restored function: common configuration, status, ISR, MSI-X.
  FuzzInput rest(in.data() + *used, in.size() - *used);
  for (int i = 0; i < 8 && !rest.empty(); ++i) {
    uint8_t op = rest.u8();
    uint64_t v = rest.u8();
    auto* p = reinterpret_cast<uint8_t*>(&v);
    if (op & 1)
      t.bar_write(op & 2 ? virtio_pci::kMsixBar : virtio_pci::kVirtioBar, op >> 2,
                  std::span<const uint8_t>(p, 1));
    else
      t.bar_read(op & 2 ? virtio_pci::kMsixBar : virtio_pci::kVirtioBar, op >> 2,
                 std::span<uint8_t>(p, 1));
    check_virtio_pci(rig, 0);
  }
  // Ring positions are only consistent while quiesced; the fake device has no threads.
  VirtioPciRig again(1);
  const auto bytes = save(t);
  snap::ByteReader r(bytes, "fuzz resave");
  FUZZ_CHECK(again.transports[0]->restore_state(r).has_value() && r.remaining() == 0);
  FUZZ_CHECK(save(*again.transports[0]) == bytes);
}

/// The chipset section: after a restore, guest config writes (through 0xCF8/0xCFC) to the three
/// functions, ELCR and the PM block keep every function's identity; the state saves and restores
/// into a fresh chipset.
void pc_chipset(std::span<const uint8_t> in) {
  PcChipsetRig rig;
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return rig.chipset->restore_state(r); },
      [&] { return save(*rig.chipset); });
  if (!used) return;
  const uint32_t ids[] = {rig.cfg_read(0, 0, 0, 4), rig.cfg_read(1, 0, 0, 4),
                          rig.cfg_read(1, 3, 0, 4)};
  FUZZ_CHECK(ids[0] == 0x12378086 && ids[1] == 0x70008086 && ids[2] == 0x71138086);
  FuzzInput rest(in.data() + *used, in.size() - *used);
  for (int i = 0; i < 12 && !rest.empty(); ++i) {
    const uint8_t op = rest.u8();
    const uint8_t reg = rest.u8();
    const uint8_t v = rest.u8();
    switch (op % 4) {
      case 0:
        rig.cfg_write(0, 0, reg, v, 1);
        break;
      case 1:
        rig.cfg_write(1, 0, reg, v, 1);
        break;
      case 2:
        rig.cfg_write(1, 3, reg, v, 1);
        break;
      default:
        rig.out(
            static_cast<uint16_t>(op & 0x80 ? 0x4D0 + (reg & 1) : x86::kPiix4PmBase + (reg & 63)),
            v, 1);
    }
  }
  FUZZ_CHECK(rig.cfg_read(0, 0, 0, 4) == ids[0] && rig.cfg_read(1, 0, 0, 4) == ids[1] &&
             rig.cfg_read(1, 3, 0, 4) == ids[2]);
  PcChipsetRig fresh;
  resaves(*rig.chipset, *fresh.chipset);
}

/// The INTx router section, into a router with 0..4 sources (the first byte): after a restore a
/// line is high exactly while some source asserts it, as sources raise and lower it.
void intx_router(std::span<const uint8_t> all) {
  if (all.empty()) return;
  const unsigned n = all[0] % 5;
  std::span<const uint8_t> in = all.subspan(1);
  FakePciPlatform platform;
  IntxRouter router(platform);
  std::vector<std::unique_ptr<PciPlatform>> sources;
  for (unsigned i = 0; i < n; ++i) sources.push_back(router.source());
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return router.restore_state(r); },
      [&] { return save(router); });
  if (!used) return;
  std::array<std::vector<bool>, IntxRouter::kIrqs> levels{};
  const auto saved = save(router);
  for (unsigned irq = 0; irq < IntxRouter::kIrqs; ++irq) {
    uint64_t a = 0;
    std::memcpy(&a, saved.data() + 8 + 8 * irq, 8);
    for (unsigned s = 0; s < n; ++s) levels[irq].push_back((a >> s) & 1);
  }
  FuzzInput rest(in.data() + *used, in.size() - *used);
  for (int i = 0; i < 16 && !rest.empty() && n > 0; ++i) {
    const uint8_t op = rest.u8();
    const unsigned s = op % n;
    const unsigned irq = rest.u8() % IntxRouter::kIrqs;
    const bool level = op & 0x80;
    sources[s]->set_irq_level(irq, level);
    levels[irq][s] = level;
    bool any = false;
    for (bool l : levels[irq]) any = any || l;
    FUZZ_CHECK(router.level(irq) == any);
  }
  IntxRouter fresh(platform);
  std::vector<std::unique_ptr<PciPlatform>> fresh_sources;
  for (unsigned i = 0; i < n; ++i) fresh_sources.push_back(fresh.source());
  resaves(router, fresh);
}

const fw_cfg::FwCfgItems& fw_cfg_items() {
  static const fw_cfg::FwCfgItems built = [] {
    fw_cfg::FwCfgMachine m;
    m.num_vcpus = 2;
    m.ram_bytes = 64 << 20;
    return *fw_cfg::build_fw_cfg_items(m);
  }();
  return built;
}

/// The fw_cfg section: after a restore, data-port reads and selector writes keep the offset
/// within the selected item; the state saves and restores into a fresh device.
void fw_cfg_state(std::span<const uint8_t> in) {
  fw_cfg::testing::FwCfgRig rig(fw_cfg_items());
  auto used = round_trip(
      in, [&](snap::ByteReader& r) { return rig.dev().restore_state(r); },
      [&] { return save(rig.dev()); });
  if (!used) return;
  FuzzInput rest(in.data() + *used, in.size() - *used);
  for (int i = 0; i < 16 && !rest.empty(); ++i) {
    const uint8_t op = rest.u8();
    if (op & 1) {
      rig.select(
          static_cast<uint16_t>(rest.u8() | (op & 0x80 ? 0x8000 : 0) | (op & 0x40 ? 0x20 : 0)));
    } else {
      (void)rig.data_bytes(op >> 1);
    }
  }
  fw_cfg::testing::FwCfgRig fresh(fw_cfg_items());
  resaves(rig.dev(), fresh.dev());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  if (size < 1) return 0;
  std::span<const uint8_t> in(data + 1, size - 1);
  switch (data[0] % 10) {
    case 0:
      serial(in);
      break;
    case 1:
      i8042(in);
      break;
    case 2:
      acpi_pm(in);
      break;
    case 3:
      cmos(in);
      break;
    case 4:
      pci_root(in);
      break;
    case 5:
      msix(in);
      break;
    case 6:
      virtio_pci_transport(in);
      break;
    case 7:
      pc_chipset(in);
      break;
    case 8:
      intx_router(in);
      break;
    default:
      fw_cfg_state(in);
      break;
  }
  return 0;
}
