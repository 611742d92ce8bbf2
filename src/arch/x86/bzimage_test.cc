#include "arch/x86/bzimage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "arch/x86/boot_params.h"
#include "arch/x86/bzimage_fake.h"

namespace tern::x86 {
namespace {

using testing::FakeKernel;
using ::testing::HasSubstr;
using testing::make_fake_bzimage;
using testing::poke;

std::string parse_error(const std::vector<uint8_t>& file) {
  auto r = parse_bzimage(file);
  EXPECT_FALSE(r);
  return r ? std::string() : r.error().message();
}

TEST(BzImage, ParsesSyntheticImage) {
  FakeKernel fk;
  auto file = make_fake_bzimage(fk);
  auto k = parse_bzimage(file);
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->version, 0x020F);
  EXPECT_EQ(k->setup_sects, 4);
  EXPECT_EQ(k->loadflags, kLoadedHigh);
  EXPECT_EQ(k->xloadflags, fk.xloadflags);
  EXPECT_EQ(k->init_size, fk.init_size);
  EXPECT_EQ(k->cmdline_size, 2047u);
  EXPECT_EQ(k->initrd_addr_max, 0x7FFFFFFFu);
  EXPECT_EQ(k->kernel_alignment, 2u << 20);
  EXPECT_TRUE(k->relocatable_kernel);
  EXPECT_EQ(k->pref_address, 16u << 20);
  EXPECT_EQ(k->kernel_version, "6.99.0-fake (tern tests)");
  // The raw header runs from 0x1F1 to 0x202 + file[0x201].
  ASSERT_EQ(k->setup_header.size(), 0x26Cu - 0x1F1u);
  EXPECT_TRUE(std::equal(k->setup_header.begin(), k->setup_header.end(), file.begin() + 0x1F1));
  // The payload starts at (setup_sects + 1) * 512.
  ASSERT_EQ(k->payload.size(), fk.payload_size);
  EXPECT_TRUE(std::equal(k->payload.begin(), k->payload.end(), file.begin() + 5 * 512));
}

TEST(BzImage, SetupSectsZeroMeansFour) {
  FakeKernel fk;
  fk.setup_sects = 0;
  auto file = make_fake_bzimage(fk);
  auto k = parse_bzimage(file);
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->setup_sects, 4);
  EXPECT_EQ(k->payload.size(), fk.payload_size);
  EXPECT_EQ(k->payload[0], testing::fake_payload_byte(0));
}

TEST(BzImage, ParsesDebianKernel) {
  auto file = testing::read_test_file(testing::kDebianKernelPath);
  if (!file) GTEST_SKIP() << testing::kDebianKernelPath << " not present";
  auto k = parse_bzimage(*file);
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_GE(k->version, kMinBootProtocol);
  EXPECT_NE(k->xloadflags & kXlfKernel64, 0);
  EXPECT_NE(k->loadflags & kLoadedHigh, 0);
  EXPECT_TRUE(k->relocatable_kernel);
  EXPECT_EQ(k->kernel_alignment, 2u << 20);
  EXPECT_EQ(k->pref_address, 16u << 20);  // CONFIG_PHYSICAL_START
  EXPECT_EQ(k->cmdline_size, 2047u);
  EXPECT_EQ(k->initrd_addr_max, 0x7FFFFFFFu);
  EXPECT_GT(k->init_size, k->payload.size());  // decompresses into more than it occupies
  EXPECT_EQ(k->payload.size(), file->size() - (size_t{k->setup_sects} + 1) * 512);
  EXPECT_EQ(k->setup_header.size(), 0x202u + (*file)[0x201] - 0x1F1u);
  EXPECT_THAT(k->kernel_version, ::testing::StartsWith("6.1.0-57-cloud-amd64 "));
}

TEST(BzImage, RejectsTruncatedFiles) {
  auto file = make_fake_bzimage();
  EXPECT_THAT(parse_error({}), HasSubstr("truncated"));
  EXPECT_THAT(parse_error(std::vector<uint8_t>(file.begin(), file.begin() + 0x100)),
              HasSubstr("truncated"));
  // Magic present but the header cut short.
  EXPECT_THAT(parse_error(std::vector<uint8_t>(file.begin(), file.begin() + 0x240)),
              HasSubstr("truncated: file is 576 bytes, the setup header ends at 0x26c"));
  // Setup sectors only, no protected-mode kernel.
  EXPECT_THAT(parse_error(std::vector<uint8_t>(file.begin(), file.begin() + 5 * 512)),
              HasSubstr("truncated: setup_sects=4 puts the protected-mode kernel at 0xa00"));
  // Payload shorter than syssize says.
  EXPECT_THAT(parse_error(std::vector<uint8_t>(file.begin(), file.end() - 16)),
              HasSubstr("truncated: the protected-mode kernel is"));
}

// syssize is the protected-mode part in 16-byte paragraphs, rounded up: memtest86+ 6.10's x64.bin
// (Debian's /boot/memtest86+x64.bin) ends 8 bytes before syssize * 16, and QEMU and GRUB load it.
TEST(BzImage, LoadsAFileEndingInsideItsLastSyssizeParagraph) {
  for (uint32_t short_by : {1u, 8u, 15u}) {
    FakeKernel fk;
    fk.payload_size = (64u << 10) - short_by;  // make_fake_bzimage rounds syssize up to 4096
    auto file = make_fake_bzimage(fk);
    ASSERT_EQ(file[0x1F4] | file[0x1F5] << 8, 4096);
    auto k = parse_bzimage(file);
    ASSERT_TRUE(k) << "short by " << short_by << ": " << k.error().message();
    // What the file holds is loaded, nothing more.
    ASSERT_EQ(k->payload.size(), fk.payload_size);
    EXPECT_TRUE(std::equal(k->payload.begin(), k->payload.end(), file.begin() + 5 * 512));
  }
  // A whole paragraph missing is truncation.
  FakeKernel fk;
  fk.payload_size = (64u << 10) - 15;
  auto file = make_fake_bzimage(fk);
  file.pop_back();
  EXPECT_THAT(parse_error(file),
              HasSubstr("truncated: the protected-mode kernel is 65520 bytes but syssize says "
                        "65536 (4096 paragraphs of 16 bytes)"));
}

TEST(BzImage, ParsesMemtest86Plus) {
  auto file = testing::read_test_file(testing::kMemtestPath);
  if (!file) GTEST_SKIP() << testing::kMemtestPath << " not present (apt-get install memtest86+)";
  auto k = parse_bzimage(*file);
  ASSERT_TRUE(k) << k.error().message();
  EXPECT_EQ(k->version, 0x020C);
  EXPECT_NE(k->xloadflags & kXlfKernel64, 0);
  EXPECT_FALSE(k->relocatable_kernel);
  EXPECT_EQ(k->pref_address, 0x100000u);
  EXPECT_EQ(k->payload.size(), file->size() - (size_t{k->setup_sects} + 1) * 512);
}

TEST(BzImage, RejectsTruncatedDebianKernel) {
  auto file = testing::read_test_file(testing::kDebianKernelPath);
  if (!file) GTEST_SKIP() << testing::kDebianKernelPath << " not present";
  file->resize(file->size() / 2);
  EXPECT_THAT(parse_error(*file), HasSubstr("syssize"));
}

TEST(BzImage, RejectsWrongMagic) {
  auto file = make_fake_bzimage();
  poke<uint16_t>(file, 0x1FE, 0x1234);
  EXPECT_THAT(parse_error(file), HasSubstr("not a bzImage: boot_flag at 0x1FE is 0x1234"));

  file = make_fake_bzimage();
  std::memcpy(file.data() + 0x202, "HdrZ", 4);
  EXPECT_THAT(parse_error(file), HasSubstr("not a bzImage: missing HdrS magic"));
}

TEST(BzImage, RejectsOldProtocol) {
  FakeKernel fk;
  fk.version = 0x020A;
  EXPECT_THAT(parse_error(make_fake_bzimage(fk)),
              HasSubstr("boot protocol 2.10 too old: tern needs >= 2.12"));
  fk.version = 0x020B;
  EXPECT_THAT(parse_error(make_fake_bzimage(fk)), HasSubstr("2.11 too old"));
  fk.version = 0x020C;
  EXPECT_TRUE(parse_bzimage(make_fake_bzimage(fk)));
}

TEST(BzImage, RejectsKernelWithout64BitEntry) {
  FakeKernel fk;
  fk.xloadflags = kXlfCanBeLoadedAbove4G;
  EXPECT_THAT(parse_error(make_fake_bzimage(fk)), HasSubstr("XLF_KERNEL_64"));
}

TEST(BzImage, RejectsMalformedHeaders) {
  FakeKernel fk;
  fk.loadflags = 0;
  EXPECT_THAT(parse_error(make_fake_bzimage(fk)), HasSubstr("LOADED_HIGH"));

  fk = {};
  fk.init_size = 0;
  EXPECT_THAT(parse_error(make_fake_bzimage(fk)), HasSubstr("init_size is 0"));

  fk = {};
  fk.kernel_alignment = 0x300000;
  EXPECT_THAT(parse_error(make_fake_bzimage(fk)), HasSubstr("not a power of two"));
  fk.relocatable_kernel = 0;  // alignment is irrelevant when the kernel cannot move
  EXPECT_TRUE(parse_bzimage(make_fake_bzimage(fk)));

  auto file = make_fake_bzimage();
  poke<uint8_t>(file, 0x201, 0x10);  // header would end at 0x212: shorter than a 2.12 header
  EXPECT_THAT(parse_error(file), HasSubstr("malformed setup header: it ends at 0x212"));
  poke<uint8_t>(file, 0x201, 0xF0);  // 0x2F2: past boot_params' room for it
  EXPECT_THAT(parse_error(file), HasSubstr("malformed setup header"));
}

TEST(BzImage, ProtocolString) {
  EXPECT_EQ(boot_protocol_string(0x020F), "2.15");
  EXPECT_EQ(boot_protocol_string(0x0205), "2.05");
}

}  // namespace
}  // namespace tern::x86
