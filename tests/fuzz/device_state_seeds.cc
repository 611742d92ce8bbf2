// Writes the virtio-pci transport seeds of the device_state fuzzer (tests/fuzz/corpus/
// device_state/seed-virtio-pci-*): the saved state of a fresh transport and of one a Linux-style
// driver took to DRIVER_OK (MSI-X on, BAR0 moved, ISR config bit set); and the firmware-boot
// seeds (seed-chipset-*, seed-intx-router, seed-fw-cfg): a chipset fresh and as SeaBIOS programs
// it (PAM unlocked, PIRQ routes, ELCR, PMBA 0x600 + PMIOSE), a router with one line asserted by
// the second of two sources, fw_cfg mid-read of the file directory with a DMA high half latched.
// Not part of the build; after a format change, rebuild the library and run, from the repository
// root:
//   g++ -std=c++20 -O1 -Isrc -DSPDLOG_FMT_EXTERNAL -DFMT_HEADER_ONLY
//   tests/fuzz/device_state_seeds.cc \
//       build/libtern_core.a -l:libz.a -l:liburing.a -pthread -o /tmp/seeds && /tmp/seeds
#include <cstdio>
#include <string>
#include <vector>

#include "devices/pci/intx_router.h"
#include "devices/pci/testing/pc_chipset_rig.h"
#include "devices/testing/fake_pci_platform.h"
#include "firmware/fw_cfg/fw_cfg_contents.h"
#include "firmware/fw_cfg/testing/fw_cfg_rig.h"
#include "virtio/transport/testing/virtio_pci_rig.h"
#include "virtio/transport/testing/virtio_pci_test_driver.h"

using namespace tern;
using namespace tern::testing;

namespace {
constexpr uint8_t kVirtioPciDecoder = 6;  // device_state_fuzz.cc's selector

template <class D>
void put_as(uint8_t decoder, const std::string& name, const D& d, std::vector<uint8_t> head = {}) {
  snap::ByteWriter w;
  w.u8(decoder);
  for (uint8_t b : head) w.u8(b);
  d.save_state(w);
  for (uint8_t b : {0x51, 0x00, 0x52, 0x14, 0x01, 0x07}) w.u8(b);  // a few accesses after it
  std::string path = "tests/fuzz/corpus/device_state/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(w.data().data(), 1, w.data().size(), f) != w.data().size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
}

void put(const std::string& tag, const VirtioPciTransport& t) {
  put_as(kVirtioPciDecoder, "seed-virtio-pci-" + tag, t);
}

// device_state_fuzz.cc's selectors of the firmware sections.
constexpr uint8_t kChipsetDecoder = 7, kIntxDecoder = 8, kFwCfgDecoder = 9;

void firmware_seeds() {
  {
    PcChipsetRig rig;
    put_as(kChipsetDecoder, "seed-chipset-fresh", *rig.chipset);
    for (uint8_t i = 0; i < 7; ++i) rig.cfg_write(0, 0, static_cast<uint8_t>(0x59 + i), 0x33, 1);
    for (uint8_t i = 0; i < 4; ++i)
      rig.cfg_write(1, 0, static_cast<uint8_t>(0x60 + i), i < 2 ? 10 : 11, 1);
    rig.out(0x4D1, 0x0C, 1);
    rig.cfg_write(1, 3, 0x40, 0x601, 4);
    rig.cfg_write(1, 3, 0x80, 1, 1);
    put_as(kChipsetDecoder, "seed-chipset-seabios", *rig.chipset);
  }
  {
    FakePciPlatform platform;
    IntxRouter router(platform);
    auto a = router.source();
    auto b = router.source();
    b->set_irq_level(11, true);
    put_as(kIntxDecoder, "seed-intx-router", router, {2});
  }
  {
    fw_cfg::FwCfgMachine m;
    m.num_vcpus = 2;
    m.ram_bytes = 64 << 20;
    fw_cfg::testing::FwCfgRig rig(*fw_cfg::build_fw_cfg_items(m));
    rig.select(0x19);
    (void)rig.data_bytes(6);
    const uint8_t hi[4] = {0, 0, 0, 1};
    rig.dev().write(FwCfgDevice::kDmaOffset, hi);
    put_as(kFwCfgDecoder, "seed-fw-cfg", rig.dev());
  }
}
}  // namespace

int main() {
  {
    VirtioPciRig rig(1);
    put("fresh", *rig.transports[0]);
  }
  VirtioPciRig rig(1);
  VirtioPciTestDriver d(rig.root, rig.slots[0]);
  VirtqueueConfig q0{
      .size = 128, .desc_gpa = 0x10000, .avail_gpa = 0x11000, .used_gpa = 0x12000, .enabled = true};
  VirtqueueConfig q1{.size = 64, .desc_gpa = 0x20000, .enabled = false};
  d.probe(rig.devices[0]->device_features(), {q0, q1});
  rig.devices[0]->queues[0].position = {7, 5};  // requests taken and completed before the save
  d.set_cfg(pci::kCommand, pci::kCommandBusMaster, 2);
  d.set_cfg(pci::kBar0, static_cast<uint32_t>(VirtioPciRig::kWindow + 0x100000));
  d.set_cfg(pci::kCommand, pci::kCommandMemory | pci::kCommandBusMaster, 2);
  rig.transports[0]->interrupt().signal_config_change();
  put("active", *rig.transports[0]);
  firmware_seeds();
  return 0;
}
