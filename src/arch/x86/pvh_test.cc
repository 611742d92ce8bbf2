#include "arch/x86/pvh.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "arch/x86/bzimage_fake.h"
#include "arch/x86/elf_fake.h"
#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

using ::testing::HasSubstr;
using testing::FakeElf;
using testing::make_fake_elf;

struct FlatRam {
  explicit FlatRam(uint64_t size) : bytes(size, 0) {}
  GuestMemory mem() { return GuestMemory::wrap({MemoryRegion{0, bytes.size(), bytes.data(), 0}}); }
  bool all_zero() const {
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
  }
  template <class T>
  T at(uint64_t gpa) const {
    T v;
    std::memcpy(&v, bytes.data() + gpa, sizeof v);
    return v;
  }
  std::vector<uint8_t> bytes;
};

ElfKernel parsed(const std::vector<uint8_t>& f) {
  auto k = parse_elf_kernel(f);
  TERN_CHECK(k.has_value());
  return std::move(*k);
}

TEST(StartInfo, LayoutMatchesXen) {
  // start_info.h's offsets, as the kernel reads them (arch/x86/platform/pvh/head.S uses only
  // EBX; enlighten.c the fields).
  HvmStartInfo si;
  EXPECT_EQ(si.magic, 0x336ec578u);
  EXPECT_EQ(si.version, 1u);
  EXPECT_EQ(offsetof(HvmStartInfo, flags), 8u);
  EXPECT_EQ(offsetof(HvmStartInfo, memmap_entries), 48u);
  EXPECT_EQ(sizeof(HvmStartInfo), 56u);
  EXPECT_EQ(sizeof(HvmModlistEntry), 32u);
  EXPECT_EQ(sizeof(HvmMemmapTableEntry), 24u);
  EXPECT_LE(kPvhMemmapAddr + kPvhMemmapMaxEntries * sizeof(HvmMemmapTableEntry),
            kPvhStartInfoAddr + 0x1000);
  EXPECT_GE(kPvhModlistAddr, kPvhStartInfoAddr + sizeof(HvmStartInfo));
  EXPECT_GE(kPvhMemmapAddr, kPvhModlistAddr + sizeof(HvmModlistEntry));
}

TEST(LoadPvh, WritesSegmentsBssCmdlineInitrdAndStartInfo) {
  FakeElf e;
  e.segments = {{0x1000000, 0x3000, 0x5000}, {0x2000000, 0x100, 0x2000}};
  const auto file = make_fake_elf(e);
  const ElfKernel k = parsed(file);
  FlatRam ram(64 * MiB);
  std::fill(ram.bytes.begin() + 0x1000000, ram.bytes.begin() + 0x1006000, 0xEE);  // stale: bss
  std::vector<uint8_t> initrd(3 * MiB + 5, 0x42);
  auto boot = load_pvh(ram.mem(), ram.bytes.size(), k, file, "console=ttyS0", initrd);
  ASSERT_TRUE(boot) << boot.error().message();

  EXPECT_EQ(boot->entry, 0x1000100u);
  EXPECT_EQ(boot->start_info_gpa, kPvhStartInfoAddr);
  EXPECT_EQ(boot->initrd_gpa, 64 * MiB - 3 * MiB - 4 * KiB);  // highest page that fits
  for (size_t s = 0; s < 2; ++s) {
    const auto& seg = k.segments[s];
    for (size_t i = 0; i < seg.filesz; i += 97)
      ASSERT_EQ(ram.bytes[seg.paddr + i], testing::fake_segment_byte(s, i)) << s << " " << i;
    for (size_t i = seg.filesz; i < seg.memsz; ++i) ASSERT_EQ(ram.bytes[seg.paddr + i], 0) << i;
  }
  EXPECT_EQ(ram.bytes[0x1005000], 0xEE);  // past memsz: untouched
  EXPECT_STREQ(reinterpret_cast<const char*>(&ram.bytes[kCmdlineAddr]), "console=ttyS0");
  EXPECT_TRUE(std::equal(initrd.begin(), initrd.end(), ram.bytes.begin() + boot->initrd_gpa));

  const auto si = ram.at<HvmStartInfo>(kPvhStartInfoAddr);
  EXPECT_EQ(si.magic, kHvmStartMagic);
  EXPECT_EQ(si.version, 1u);
  EXPECT_EQ(si.flags, 0u);
  EXPECT_EQ(si.cmdline_paddr, kCmdlineAddr);
  EXPECT_EQ(si.rsdp_paddr, kAcpiStart);
  EXPECT_EQ(si.nr_modules, 1u);
  EXPECT_EQ(si.modlist_paddr, kPvhModlistAddr);
  const auto mod = ram.at<HvmModlistEntry>(kPvhModlistAddr);
  EXPECT_EQ(mod.paddr, boot->initrd_gpa);
  EXPECT_EQ(mod.size, initrd.size());
  EXPECT_EQ(mod.cmdline_paddr, 0u);
  const auto e820 = build_e820(ram.bytes.size());
  ASSERT_EQ(si.memmap_entries, e820.size());
  EXPECT_EQ(si.memmap_paddr, kPvhMemmapAddr);
  for (size_t i = 0; i < e820.size(); ++i) {
    auto m = ram.at<HvmMemmapTableEntry>(kPvhMemmapAddr + i * sizeof(HvmMemmapTableEntry));
    EXPECT_EQ(m.addr, e820[i].addr);
    EXPECT_EQ(m.size, e820[i].size);
    EXPECT_EQ(m.type, e820[i].type);
    EXPECT_EQ(m.reserved, 0u);
  }
}

TEST(LoadPvh, NoInitrdNoModules) {
  const auto file = make_fake_elf();
  FlatRam ram(32 * MiB);
  auto boot = load_pvh(ram.mem(), ram.bytes.size(), parsed(file), file, "", {});
  ASSERT_TRUE(boot) << boot.error().message();
  const auto si = ram.at<HvmStartInfo>(kPvhStartInfoAddr);
  EXPECT_EQ(si.nr_modules, 0u);
  EXPECT_EQ(si.modlist_paddr, 0u);
  EXPECT_EQ(boot->initrd_gpa, 0u);
}

/// Each invalid input is refused before anything is written.
void expect_refused(const std::vector<uint8_t>& file, const ElfKernel& k, uint64_t ram_size,
                    std::string_view cmdline, size_t initrd_size, const std::string& what) {
  FlatRam ram(ram_size);
  std::vector<uint8_t> initrd(initrd_size, 1);
  auto boot = load_pvh(ram.mem(), ram.bytes.size(), k, file, cmdline, initrd);
  ASSERT_FALSE(boot) << what;
  EXPECT_THAT(boot.error().message(), HasSubstr(what));
  EXPECT_TRUE(ram.all_zero()) << what;
}

TEST(LoadPvh, RefusesBeforeWriting) {
  auto file = make_fake_elf();
  ElfKernel k = parsed(file);
  ElfKernel no_note = k;
  no_note.pvh_entry.reset();
  expect_refused(file, no_note, 32 * MiB, "", 0, "XEN_ELFNOTE_PHYS32_ENTRY");
  ElfKernel outside = k;
  outside.pvh_entry = 0x2000000;
  expect_refused(file, outside, 32 * MiB, "", 0, "not inside a loaded segment");
  // RAM ends before the segment does.
  expect_refused(file, k, 16 * MiB, "", 0, "needs 17 MiB");
  // A segment over tern's low structures (page tables at 0x9000).
  FakeElf low;
  low.segments = {{0x8000, 0x100, 0x2000}};
  low.pvh_entry = 0x8010;
  auto low_file = make_fake_elf(low);
  expect_refused(low_file, parsed(low_file), 32 * MiB, "", 0, "below 1 MiB");
  // Command line too long for x86 Linux.
  expect_refused(file, k, 32 * MiB, std::string(2048, 'a'), 0, "kernel command line");
  // An initrd that does not fit above the kernel (ends at 16 MiB + 20 KiB).
  expect_refused(file, k, 24 * MiB, "", 8 * MiB, "initrd");
  // A segment whose file range the given file does not hold (parsed from another file).
  std::vector<uint8_t> short_file(file.begin(), file.begin() + 200);
  expect_refused(short_file, k, 32 * MiB, "", 0, "file range past the end");
}

// A segment reaching into the 32-bit hole (memsz of GiBs) is the kernel's fault, not --memory's:
// op "PVH kernel" whatever the RAM, and nothing of its memsz is allocated or touched.
/// The default fake vmlinux (one segment at 16 MiB, 0x3000 file bytes) with `memsz`.
std::vector<uint8_t> elf_with_memsz(uint64_t memsz) {
  FakeElf e;
  e.segments[0].memsz = memsz;
  return make_fake_elf(e);
}

TEST(PlanPvh, SegmentEndingAbove3GiBIsAKernelError) {
  for (uint64_t memsz : {uint64_t{0xC0000000} - 0x1000000 + 0x1000, uint64_t{1} << 40}) {
    const auto file = elf_with_memsz(memsz);
    for (uint64_t ram : {256 * MiB, 3 * GiB + 512 * MiB, 8 * GiB}) {
      auto plan = plan_pvh(parsed(file), file.size(), ram, "", 0);
      ASSERT_FALSE(plan) << memsz << " " << ram;
      EXPECT_EQ(plan.error().op, "PVH kernel");
      EXPECT_THAT(plan.error().message(), HasSubstr("ends above 3 GiB"));
    }
  }
  // Ending exactly at 3 GiB is fine once RAM reaches it.
  const auto file = elf_with_memsz(0xC0000000 - 0x1000000);
  EXPECT_TRUE(plan_pvh(parsed(file), file.size(), 4 * GiB, "", 0));
  auto small = plan_pvh(parsed(file), file.size(), 256 * MiB, "", 0);
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().op, "guest memory");
}

// RAM at the edges: exactly what the kernel needs, between 3 and 4 GiB, above 4 GiB. The memory
// map describes all of it (RAM above 4 GiB for the part past the hole) and the initrd stays
// above the kernel, below 2 GiB (initrd_addr_max) and inside RAM.
TEST(PlanPvh, RamAtTheEdges) {
  const auto file = make_fake_elf();  // ends at 16 MiB + 20 KiB
  const ElfKernel k = parsed(file);
  for (uint64_t ram : {17 * MiB, 3 * GiB + 512 * MiB, 4 * GiB, 8 * GiB}) {
    auto bare = plan_pvh(k, file.size(), ram, "", 0);
    ASSERT_TRUE(bare) << ram << ": " << bare.error().message();
    uint64_t ram_in_map = 0, highest = 0;
    for (const auto& e : bare->e820) {
      if (e.type != kE820Ram) continue;
      ram_in_map += e.size;
      highest = std::max(highest, e.addr + e.size);
    }
    // All of RAM but the EBDA and the BIOS area below 1 MiB.
    EXPECT_EQ(ram_in_map, ram - (kHimemStart - kEbdaStart)) << ram;
    EXPECT_EQ(highest, ram > kHoleStart ? ram + (kHoleEnd - kHoleStart) : ram) << ram;
    if (ram < 32 * MiB) continue;
    auto with_initrd = plan_pvh(k, file.size(), ram, "", 64 * MiB);
    ASSERT_TRUE(with_initrd) << ram << ": " << with_initrd.error().message();
    EXPECT_GE(with_initrd->initrd_gpa, with_initrd->kernel_end);
    EXPECT_LE(with_initrd->initrd_gpa + 64 * MiB, std::min<uint64_t>(ram, uint64_t{kPvhInitrdAddrMax} + 1));
  }
  EXPECT_FALSE(plan_pvh(k, file.size(), 16 * MiB, "", 0));
}

TEST(LoadPvh, RefusesUnbackedRam) {
  const auto file = make_fake_elf();
  FlatRam ram(32 * MiB);
  auto boot = load_pvh(ram.mem(), 64 * MiB, parsed(file), file, "", {});
  ASSERT_FALSE(boot);
  EXPECT_THAT(boot.error().message(), HasSubstr("not backed by guest memory"));
  EXPECT_TRUE(ram.all_zero());
}

TEST(BzImagePayload, FindsPayloadOffsetAndLength) {
  auto f = testing::make_fake_bzimage();
  testing::poke<uint32_t>(f, 0x248, 0x100);
  testing::poke<uint32_t>(f, 0x24C, 0x2000);
  auto bz = parse_bzimage(f);
  ASSERT_TRUE(bz);
  auto p = bzimage_compressed_payload(*bz, f);
  ASSERT_TRUE(p) << p.error().message();
  const size_t pm = (size_t{bz->setup_sects} + 1) * 512;
  EXPECT_EQ(p->data(), f.data() + pm + 0x100);
  EXPECT_EQ(p->size(), 0x2000u);

  testing::poke<uint32_t>(f, 0x24C, 0xffffffff);
  bz = parse_bzimage(f);
  ASSERT_TRUE(bz);
  auto q = bzimage_compressed_payload(*bz, f);
  ASSERT_FALSE(q);
  EXPECT_THAT(q.error().message(), HasSubstr("past the end of the file"));
}

}  // namespace
}  // namespace tern::x86
