// Writes the virtio-pci transport seeds of the device_state fuzzer (tests/fuzz/corpus/
// device_state/seed-virtio-pci-*): the saved state of a fresh transport and of one a Linux-style
// driver took to DRIVER_OK (MSI-X on, BAR0 moved, ISR config bit set). Not part of the build;
// after a format change, rebuild the library and run, from the repository root:
//   g++ -std=c++20 -O1 -Isrc -DSPDLOG_FMT_EXTERNAL -DFMT_HEADER_ONLY
//   tests/fuzz/device_state_seeds.cc \
//       build/libtern_core.a -l:libz.a -l:liburing.a -pthread -o /tmp/seeds && /tmp/seeds
#include <cstdio>
#include <string>
#include <vector>

#include "virtio/transport/testing/virtio_pci_rig.h"
#include "virtio/transport/testing/virtio_pci_test_driver.h"

using namespace tern;
using namespace tern::testing;

namespace {
constexpr uint8_t kVirtioPciDecoder = 6;  // device_state_fuzz.cc's selector

void put(const std::string& tag, const VirtioPciTransport& t) {
  snap::ByteWriter w;
  w.u8(kVirtioPciDecoder);
  t.save_state(w);
  for (uint8_t b : {0x51, 0x00, 0x52, 0x14, 0x01, 0x07}) w.u8(b);  // a few accesses after it
  std::string path = "tests/fuzz/corpus/device_state/seed-virtio-pci-" + tag;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(w.data().data(), 1, w.data().size(), f) != w.data().size()) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fclose(f);
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
  return 0;
}
