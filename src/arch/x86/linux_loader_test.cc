#include "arch/x86/linux_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "arch/x86/boot_params.h"
#include "arch/x86/bzimage_fake.h"
#include "arch/x86/layout.h"

namespace tern::x86 {
namespace {

using ::testing::HasSubstr;

/// Guest RAM as a plain buffer at GPA 0 (for guests below the hole).
struct FlatRam {
  explicit FlatRam(uint64_t size) : bytes(size, 0) {}
  GuestMemory mem() { return GuestMemory::wrap({MemoryRegion{0, bytes.size(), bytes.data(), 0}}); }
  bool all_zero() const {
    return std::all_of(bytes.begin(), bytes.end(), [](uint8_t b) { return b == 0; });
  }
  std::vector<uint8_t> bytes;
};

BzImage fake_kernel(testing::FakeKernel fk = {}) {
  auto k = parse_bzimage(testing::make_fake_bzimage(fk));
  TERN_CHECK(k.has_value());
  return std::move(*k);
}

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i ^ (i >> 8));
  return v;
}

TEST(LoadLinux, WritesKernelCmdlineInitrdAndBootParams) {
  FlatRam ram(64 * MiB);
  auto mem = ram.mem();
  const BzImage k = fake_kernel();  // init_size 8 MiB at pref 16 MiB: ends at 24 MiB
  const auto initrd = pattern(3 * MiB + 123);
  auto boot = load_linux(mem, ram.bytes.size(), k, "console=ttyS0 quiet", initrd);
  ASSERT_TRUE(boot) << boot.error().message();

  EXPECT_EQ(boot->entry_rip, 0x100200u);
  EXPECT_EQ(boot->boot_params_gpa, kZeroPageAddr);
  EXPECT_EQ(boot->kernel.load_gpa, kHimemStart);
  EXPECT_EQ(boot->kernel.end, 24 * MiB);
  EXPECT_EQ(boot->initrd_gpa, 64 * MiB - 3 * MiB - 4 * KiB);  // highest page that fits
  EXPECT_EQ(boot->initrd_size, initrd.size());

  // Payload at 1 MiB.
  EXPECT_TRUE(std::equal(k.payload.begin(), k.payload.end(), ram.bytes.begin() + kHimemStart));
  // Command line, NUL-terminated.
  EXPECT_STREQ(reinterpret_cast<const char*>(&ram.bytes[kCmdlineAddr]), "console=ttyS0 quiet");
  // Initrd.
  EXPECT_TRUE(std::equal(initrd.begin(), initrd.end(), ram.bytes.begin() + boot->initrd_gpa));

  auto bp = mem.read_obj<BootParams>(kZeroPageAddr);
  ASSERT_TRUE(bp);
  const SetupHeader& h = bp->hdr;
  EXPECT_EQ(h.boot_flag, kBootFlagMagic);
  EXPECT_EQ(h.header, kHdrSMagic);
  EXPECT_EQ(h.version, 0x020F);
  EXPECT_EQ(h.setup_sects, 4);
  EXPECT_EQ(h.xloadflags, k.xloadflags);
  EXPECT_EQ(h.init_size, k.init_size);
  EXPECT_EQ(h.type_of_loader, 0xFF);
  EXPECT_EQ(h.vid_mode, 0xFFFF);
  EXPECT_EQ(h.loadflags, kLoadedHigh | kCanUseHeap);
  EXPECT_EQ(h.heap_end_ptr, 0xFE00);
  EXPECT_EQ(h.code32_start, kHimemStart);
  EXPECT_EQ(h.cmd_line_ptr, kCmdlineAddr);
  EXPECT_EQ(bp->ext_cmd_line_ptr, 0u);
  EXPECT_EQ(h.ramdisk_image, boot->initrd_gpa);
  EXPECT_EQ(h.ramdisk_size, initrd.size());
  EXPECT_EQ(bp->ext_ramdisk_image, 0u);
  EXPECT_EQ(bp->ext_ramdisk_size, 0u);
  EXPECT_EQ(bp->sentinel, 0);

  // e820 table at 0x2D0, count at 0x1E8.
  auto want = build_e820(64 * MiB);
  ASSERT_EQ(bp->e820_entries, want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const BootE820Entry e = bp->e820_table[i];
    EXPECT_EQ(e.addr, want[i].addr);
    EXPECT_EQ(e.size, want[i].size);
    EXPECT_EQ(e.type, want[i].type);
  }
  EXPECT_EQ(boot->e820, want);

  // The same fields at their raw boot.rst offsets inside the zero page.
  const uint8_t* zp = &ram.bytes[kZeroPageAddr];
  auto u32 = [&](size_t off) {
    uint32_t v;
    std::memcpy(&v, zp + off, 4);
    return v;
  };
  EXPECT_EQ(zp[0x1E8], want.size());
  EXPECT_EQ(zp[0x210], 0xFF);
  EXPECT_EQ(u32(0x228), kCmdlineAddr);
  EXPECT_EQ(u32(0x218), boot->initrd_gpa);
  EXPECT_EQ(u32(0x21C), initrd.size());
  EXPECT_EQ(u32(0x2D0 + 20 * 3 + 16), kE820Ram);  // type of the 4th entry (RAM from 1 MiB)
}

TEST(LoadLinux, WithoutInitrdLeavesRamdiskFieldsZero) {
  FlatRam ram(32 * MiB);
  auto mem = ram.mem();
  auto boot = load_linux(mem, ram.bytes.size(), fake_kernel(), "", {});
  ASSERT_TRUE(boot) << boot.error().message();
  EXPECT_EQ(boot->initrd_gpa, 0u);
  auto bp = mem.read_obj<BootParams>(kZeroPageAddr);
  ASSERT_TRUE(bp);
  EXPECT_EQ(bp->hdr.ramdisk_image, 0u);
  EXPECT_EQ(bp->hdr.ramdisk_size, 0u);
  EXPECT_EQ(ram.bytes[kCmdlineAddr], 0);
}

TEST(LoadLinux, TooLittleRamFailsBeforeWriting) {
  FlatRam ram(32 * MiB);
  auto mem = ram.mem();
  auto boot = load_linux(mem, ram.bytes.size(), fake_kernel(), "quiet", pattern(9 * MiB));
  ASSERT_FALSE(boot);
  EXPECT_THAT(boot.error().message(), HasSubstr("32 MiB of guest RAM is too small"));
  EXPECT_THAT(boot.error().message(), HasSubstr("at least 33 MiB"));
  EXPECT_TRUE(ram.all_zero());
}

TEST(LoadLinux, BadCmdlineFailsBeforeWriting) {
  FlatRam ram(32 * MiB);
  auto mem = ram.mem();
  auto boot = load_linux(mem, ram.bytes.size(), fake_kernel(), std::string(2048, 'x'), {});
  ASSERT_FALSE(boot);
  EXPECT_THAT(boot.error().message(), HasSubstr("cmdline_size of 2047"));
  EXPECT_TRUE(ram.all_zero());
}

TEST(LoadLinux, InitrdAboveInitrdAddrMaxFailsBeforeWriting) {
  testing::FakeKernel fk;
  fk.initrd_addr_max = 20 * MiB - 1;  // below the kernel's end at 24 MiB
  FlatRam ram(64 * MiB);
  auto mem = ram.mem();
  auto boot = load_linux(mem, ram.bytes.size(), fake_kernel(fk), "", pattern(4096));
  ASSERT_FALSE(boot);
  EXPECT_THAT(boot.error().message(), HasSubstr("initrd"));
  EXPECT_TRUE(ram.all_zero());
}

TEST(LoadLinux, MemoryThatDoesNotMatchRamBytesFailsBeforeWriting) {
  FlatRam ram(32 * MiB);
  auto mem = ram.mem();
  auto boot = load_linux(mem, 64 * MiB, fake_kernel(), "", {});
  ASSERT_FALSE(boot);
  EXPECT_THAT(boot.error().message(), HasSubstr("not backed by guest memory"));
  EXPECT_TRUE(ram.all_zero());
}

TEST(LoadLinux, GuestAboveTheHoleGetsHighE820Entry) {
  auto mem = GuestMemory::create(ram_regions(3328 * MiB));
  ASSERT_TRUE(mem) << mem.error().message();
  auto boot = load_linux(*mem, 3328 * MiB, fake_kernel(), "", pattern(1 * MiB));
  ASSERT_TRUE(boot) << boot.error().message();
  EXPECT_EQ(boot->initrd_gpa, 2 * GiB - 1 * MiB);  // initrd_addr_max 0x7FFFFFFF
  auto bp = mem->read_obj<BootParams>(kZeroPageAddr);
  ASSERT_TRUE(bp);
  ASSERT_EQ(bp->e820_entries, 5);
  const BootE820Entry high = bp->e820_table[4];
  EXPECT_EQ(high.addr, kHoleEnd);
  EXPECT_EQ(high.size, 256 * MiB);
}

TEST(LoadLinux, DebianKernelAndInitrd) {
  auto file = testing::read_test_file(testing::kDebianKernelPath);
  if (!file) GTEST_SKIP() << testing::kDebianKernelPath << " not present";
  auto k = parse_bzimage(*file);
  ASSERT_TRUE(k) << k.error().message();
  auto initrd = testing::read_test_file(testing::kDebianInitrdPath);
  if (!initrd) initrd = pattern(14 * MiB);

  // Too small: the message says how much is needed.
  {
    FlatRam ram(64 * MiB);
    auto mem = ram.mem();
    auto boot = load_linux(mem, ram.bytes.size(), *k, "console=ttyS0", *initrd);
    ASSERT_FALSE(boot);
    EXPECT_THAT(boot.error().message(), HasSubstr("64 MiB of guest RAM is too small"));
    EXPECT_THAT(boot.error().message(), HasSubstr("MiB below 3 GiB"));
  }

  auto mem = GuestMemory::create(ram_regions(256 * MiB));
  ASSERT_TRUE(mem) << mem.error().message();
  auto boot = load_linux(*mem, 256 * MiB, *k, "console=ttyS0 panic=-1", *initrd);
  ASSERT_TRUE(boot) << boot.error().message();
  EXPECT_EQ(boot->entry_rip, kHimemStart + 0x200);
  EXPECT_EQ(boot->kernel.decompress_gpa, k->pref_address);
  EXPECT_EQ(boot->kernel.end, k->pref_address + k->init_size);
  EXPECT_GE(boot->initrd_gpa, boot->kernel.end);
  EXPECT_LE(boot->initrd_gpa + initrd->size(), 256 * MiB);
  EXPECT_EQ(boot->initrd_gpa % 4096, 0u);

  auto loaded = mem->slice(kHimemStart, k->payload.size());
  ASSERT_TRUE(loaded);
  EXPECT_TRUE(std::equal(k->payload.begin(), k->payload.end(), loaded->begin()));
  auto bp = mem->read_obj<BootParams>(kZeroPageAddr);
  ASSERT_TRUE(bp);
  EXPECT_EQ(bp->hdr.version, k->version);
  EXPECT_EQ(bp->hdr.header, kHdrSMagic);
  EXPECT_EQ(bp->hdr.ramdisk_image, boot->initrd_gpa);
  EXPECT_EQ(bp->hdr.ramdisk_size, initrd->size());
  EXPECT_EQ(bp->hdr.cmd_line_ptr, kCmdlineAddr);
  EXPECT_EQ(bp->hdr.type_of_loader, 0xFF);
  EXPECT_EQ(bp->hdr.loadflags & (kLoadedHigh | kCanUseHeap), kLoadedHigh | kCanUseHeap);
  EXPECT_EQ(bp->sentinel, 0);
}

// memtest86+ 6.10 (Debian's /boot/memtest86+x64.bin): not relocatable, at 1 MiB, its file 8 bytes
// short of syssize * 16. tern loads what the file holds at 1 MiB and enters it at +0x200; the bytes
// after the file's end (up to init_size) are the guest's RAM, zero.
TEST(LoadLinux, Memtest86PlusLoadsWhatItsFileHolds) {
  std::vector<uint8_t> file;
  if (auto real = testing::read_test_file(testing::kMemtestPath)) {
    file = std::move(*real);
  } else {  // a look-alike: 2.12, not relocatable, at 1 MiB, 8 bytes short of syssize * 16
    testing::FakeKernel fk;
    fk.version = 0x020C;
    fk.relocatable_kernel = 0;
    fk.pref_address = kHimemStart;
    fk.init_size = 0x6ACF8;
    fk.payload_size = 142776;
    file = testing::make_fake_bzimage(fk);
  }
  auto k = parse_bzimage(file);
  ASSERT_TRUE(k) << k.error().message();
  const size_t pm_start = (size_t{k->setup_sects} + 1) * 512;
  uint32_t syssize = 0;
  std::memcpy(&syssize, file.data() + 0x1F4, 4);
  ASSERT_EQ(uint64_t{syssize} * 16, file.size() - pm_start + 8);  // the case at hand

  FlatRam ram(64 * MiB);
  auto mem = ram.mem();
  auto boot = load_linux(mem, ram.bytes.size(), *k, "console=ttyS0,115200 nopause", {});
  ASSERT_TRUE(boot) << boot.error().message();
  EXPECT_EQ(boot->entry_rip, kHimemStart + 0x200);
  EXPECT_EQ(boot->kernel.decompress_gpa, kHimemStart);
  EXPECT_EQ(boot->kernel.end, kHimemStart + k->init_size);
  EXPECT_TRUE(std::equal(file.begin() + static_cast<ptrdiff_t>(pm_start), file.end(),
                         ram.bytes.begin() + kHimemStart));
  const auto after = ram.bytes.begin() + static_cast<ptrdiff_t>(kHimemStart + k->payload.size());
  EXPECT_TRUE(std::all_of(after, after + 16, [](uint8_t b) { return b == 0; }));
}

}  // namespace
}  // namespace tern::x86
