// libFuzzer target: an NvmeController driven by a hostile host through its BAR, config space
// and guest RAM (the disk's cache mode and read-only from the first byte): register writes of any width, doorbells, admin and I/O submission entries
// written into the rings (PRPs pointing into the small RAM), the standard enable sequence, and
// sync points (quiesce + unquiesce: the admin thread idle, every worker drained), so an input
// replays the same way each time. Bounded: at most 48 operations, 1 MiB of RAM, a 1 MiB image,
// queues of ≤ 16 entries in RAM. Nothing may crash or hang, and a snapshot of whatever state the
// host reached must restore into a fresh controller (save_state and restore_state agree).
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "base/testing/fuzz_input.h"
#include "devices/testing/fake_pci_platform.h"
#include "nvme/nvme_controller.h"
#include "nvme/nvme_spec.h"

namespace {

using namespace tern;
using namespace tern::nvme;
using tern::testing::FuzzInput;

constexpr uint64_t kRam = 1 << 20;
constexpr uint64_t kAsq = 0x10000, kAcq = 0x11000;
constexpr uint64_t kBar = 0xE0000000;
/// I/O queue `q` (1..4) rings: SQ at 0x20000 + q * 0x4000, CQ 0x2000 after it.
constexpr uint64_t io_sq(unsigned q) { return 0x20000 + q * 0x4000ull; }

uint8_t* ram() {
  static uint8_t* p = static_cast<uint8_t*>(std::aligned_alloc(4096, kRam));
  return p;
}

const std::string& image() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/tern-nvme-fuzz-XXXXXX";
    int fd = ::mkstemp(tmpl);
    FUZZ_CHECK(fd >= 0 && ::ftruncate(fd, kRam) == 0);
    ::close(fd);
    return std::string(tmpl);
  }();
  return path;
}

struct Machine {
  GuestMemory mem = GuestMemory::wrap({MemoryRegion{0, kRam, ram(), 0}});
  FakePciPlatform platform;
  DiskConfig c;
  std::shared_ptr<PciFunction> make() {
    c.path = image();
    c.interface = DiskInterface::kNvme;
    auto disk = NvmeDisk::create(c, "nvme0");
    FUZZ_CHECK(disk.has_value());
    auto fn = (*disk)->make_function(PciFunctionServices{&mem, &platform, nullptr});
    FUZZ_CHECK(fn.has_value());
    PciPlacement p;
    p.bar_gpa[0] = kBar;
    p.intx_irq = 11;
    FUZZ_CHECK((*fn)->place(p).has_value());
    uint8_t cmd[2] = {0x06, 0};  // memory decoding, bus mastering
    (*fn)->config_write(0x04, cmd);
    return *fn;
  }
};

void write_bar(PciFunction& f, uint64_t off, uint64_t v, size_t width) {
  uint8_t b[8];
  std::memcpy(b, &v, 8);
  f.bar_write(0, off, std::span<const uint8_t>(b, width));
}

/// A submission entry from the input, its opcode from `opcodes` most of the time and its PRPs
/// mostly inside the RAM (page aligned or not).
void put_sqe(FuzzInput& in, uint64_t gpa, std::span<const uint8_t> opcodes) {
  uint8_t e[64];
  for (uint8_t& b : e) b = in.u8();
  if (e[0] < 0xF0) e[0] = opcodes[e[0] % opcodes.size()];
  e[1] = e[1] < 0xF0 ? 0 : e[1];  // flags 0 (no fused / SGL) most of the time
  for (size_t at : {24u, 32u}) {  // PRP1, PRP2
    uint64_t v;
    std::memcpy(&v, e + at, 8);
    if ((v >> 56) != 0xFF) v = (v % kRam) & ((v >> 55) & 1 ? ~uint64_t{3} : ~uint64_t{0xFFF});
    std::memcpy(e + at, &v, 8);
  }
  std::memcpy(ram() + gpa, e, 64);
}

constexpr uint8_t kAdminOps[] = {kAdminIdentify,    kAdminCreateIoCq,  kAdminCreateIoSq,
                                 kAdminDeleteIoCq,  kAdminDeleteIoSq,  kAdminSetFeatures,
                                 kAdminGetFeatures, kAdminGetLogPage,  kAdminAsyncEventRequest,
                                 kAdminAbort,       kAdminKeepAlive,   kAdminDoorbellBufferConfig};
constexpr uint8_t kIoOps[] = {kIoFlush, kIoWrite, kIoRead, kIoWriteZeroes, kIoDatasetManagement};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tern::testing::quiet_logs();
  FuzzInput in(data, size);
  std::memset(ram(), 0, kRam);
  Machine m;
  // The disk: its cache mode (directsync: Identify VWC 0) and read-only, from the first byte.
  const uint8_t disk = in.u8();
  m.c.cache = static_cast<CacheMode>(disk % (static_cast<int>(CacheMode::kDirectSync) + 1));
  m.c.read_only = disk & 0x80;
  std::shared_ptr<PciFunction> fn = m.make();
  for (int ops = 0; ops < 48 && !in.empty(); ++ops) {
    const uint8_t op = in.u8();
    switch (op % 9) {
      case 0: {  // any register write
        size_t w = in.width();
        uint64_t off = in.u16() % 0x1000;
        write_bar(*fn, off, in.u64(), w);
        break;
      }
      case 1: {  // a doorbell: queue 0..5, SQ tail or CQ head, a small value (or any)
        const uint8_t q = in.u8();
        const uint32_t v = in.u8();
        write_bar(*fn, 0x1000 + (q % 12) * 4u, v < 0xF0 ? v % 20 : in.u32(), 4);
        break;
      }
      case 2: {  // an admin command at slot s, then the SQ tail doorbell s + 1
        const unsigned s = in.u8() % 8;
        put_sqe(in, kAsq + s * 64u, kAdminOps);
        // Create queue: point it at its area, sizes ≤ 16 (QSIZE 0's based in CDW10 31:16).
        uint8_t* e = ram() + kAsq + s * 64u;
        if (e[0] == kAdminCreateIoCq || e[0] == kAdminCreateIoSq) {
          const unsigned q = 1 + e[40] % 4;
          const uint64_t base = io_sq(q) + (e[0] == kAdminCreateIoCq ? 0x2000 : 0);
          std::memcpy(e + 24, &base, 8);
          e[40] = static_cast<uint8_t>(q);
          e[41] = 0;
          e[42] = e[42] % 16;
          e[43] = 0;
        }
        write_bar(*fn, 0x1000, (s + 1) % 8, 4);
        break;
      }
      case 3: {  // an I/O command in SQ q's slot s, then its tail doorbell
        const unsigned q = 1 + in.u8() % 4, s = in.u8() % 16;
        put_sqe(in, io_sq(q) + s * 64u, kIoOps);
        write_bar(*fn, 0x1000 + q * 8u, (s + 1) % 16, 4);
        break;
      }
      case 4: {  // the standard enable: AQA 8/8, ASQ, ACQ, CC.EN with IOSQES 6, IOCQES 4
        write_bar(*fn, kRegAqa, 7 | (7u << 16), 4);
        write_bar(*fn, kRegAsq, kAsq, 8);
        write_bar(*fn, kRegAcq, kAcq, 8);
        write_bar(*fn, kRegCc, kCcEn | (6u << kCcIosqesShift) | (4u << kCcIocqesShift), 4);
        break;
      }
      case 5:  // sync point
        fn->quiesce();
        fn->unquiesce();
        break;
      case 6: {  // config space: command register, MSI-X enable, BAR moves
        uint32_t off = in.u8();
        size_t w = in.width(4);
        uint32_t v = in.u32();
        uint8_t b[4];
        std::memcpy(b, &v, 4);
        fn->config_write(off, std::span<const uint8_t>(b, w));
        break;
      }
      case 7: {  // snapshot: what was saved restores into a fresh controller, which carries on
        fn->quiesce();
        if (std::getenv("NVME_FUZZ_DEBUG")) {
          uint8_t b[4];
          fn->bar_read(0, kRegCc, b);
          uint32_t cc = tern::testing::load_le(b);
          fn->bar_read(0, kRegCsts, b);
          std::fprintf(stderr, "snapshot: CC %#x CSTS %#x\n", cc, unsigned(tern::testing::load_le(b)));
        }
        snap::ByteWriter w;
        fn->save_state(w);
        fn.reset();  // the old one's threads stop first (as a restore into a new VM)
        fn = m.make();
        snap::ByteReader r(w.data(), "fuzz");
        auto ok = fn->restore_state(r);
        if (!ok) std::fprintf(stderr, "restore: %s\n", ok.error().message().c_str());
        FUZZ_CHECK(ok.has_value());
        break;
      }
      case 8: {  // MSI-X table entry (vectors 0..4), unmasked with a message
        const unsigned v = in.u8() % 5;
        write_bar(*fn, kMsixTableOffset + v * 16u, 0xFEE00000, 4);
        write_bar(*fn, kMsixTableOffset + v * 16u + 12, in.u8() & 1, 4);
        break;
      }
    }
  }
  fn->quiesce();  // destroyed quiesced (as when the VM stops)
  return 0;
}
