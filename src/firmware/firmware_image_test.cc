// Unit tests: which files tern takes as firmware, and where it places them.
#include "firmware/firmware_image.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "base/testing/temp_dir.h"

namespace tern::firmware {
namespace {

/// `size` bytes of 0x00 ending with `vector` (the reset vector's 16 bytes, zero-padded).
std::vector<uint8_t> image(size_t size, std::vector<uint8_t> vector) {
  std::vector<uint8_t> b(size, 0);
  std::copy(vector.begin(), vector.end(), b.end() - 16);
  return b;
}

std::string error_of(const std::vector<uint8_t>& b) {
  auto r = check_firmware_image(b);
  return r ? std::string("accepted") : r.error().message();
}

// The reset vectors of Debian's files (tail -c 16): SeaBIOS bios.bin / bios-256k.bin,
// OVMF_CODE_4M.fd, and the older OVMF_CODE.fd (2 MiB build).
const std::vector<uint8_t> kSeaBiosVector = {0xEA, 0x5B, 0xE0, 0x00, 0xF0};
const std::vector<uint8_t> kOvmf4mVector = {0x90, 0x90, 0xE9, 0x5B, 0xFF};
const std::vector<uint8_t> kOvmfVector = {0x0F, 0x20, 0xC0, 0xA8, 0x01, 0x74, 0x05, 0xE9};

TEST(FirmwareImage, AcceptsSeaBiosAndOvmfShapes) {
  auto sea = check_firmware_image(image(256 << 10, kSeaBiosVector));
  ASSERT_TRUE(sea) << sea.error().message();
  EXPECT_EQ(sea->kind, FirmwareKind::kLegacyBios);
  EXPECT_EQ(sea->gpa(), 0xFFFC0000u);

  auto code = image(0x37C000, kOvmf4mVector);  // OVMF_CODE_4M.fd's size
  std::memcpy(code.data() + 40, "_FVH", 4);
  auto ovmf = check_firmware_image(code);
  ASSERT_TRUE(ovmf) << ovmf.error().message();
  EXPECT_EQ(ovmf->kind, FirmwareKind::kUefi);
  EXPECT_EQ(ovmf->gpa(), 0xFFC84000u);
  // OVMF_VARS_4M.fd (0x84000 bytes) directly below: at 0xFFC00000, as QEMU places it.
  EXPECT_EQ(vars_gpa(*ovmf, 0x84000), 0xFFC00000u);

  EXPECT_TRUE(check_firmware_image(image(2 << 20, kOvmfVector)));
}

TEST(FirmwareImage, RefusesWhatIsNotFirmware) {
  EXPECT_NE(error_of({}).find("empty"), std::string::npos);
  EXPECT_NE(error_of(image(4096 + 16, kSeaBiosVector)).find("not a multiple of 4 KiB"),
            std::string::npos);
  EXPECT_NE(error_of(image((16 << 20) + 4096, kSeaBiosVector)).find("larger than 16 MiB"),
            std::string::npos);
  // A kernel, a disk image: zeros or anything but a jump at the reset vector.
  EXPECT_NE(error_of(image(64 << 10, {})).find("no x86 reset-vector jump"), std::string::npos);
  EXPECT_NE(error_of(image(64 << 10, {0x90, 0x90, 0x90, 0xC3})).find("reset-vector"),
            std::string::npos);
  EXPECT_NE(error_of(image(64 << 10, {0x0F, 0x20, 0xC0, 0x90})).find("reset-vector"),
            std::string::npos);
  EXPECT_EQ(error_of(image(16 << 20, kSeaBiosVector)), "accepted");  // the largest taken
}

TEST(FirmwareImage, IsaBiosAliasIsTheLast128KiB) {
  auto big = image(256 << 10, kSeaBiosVector);
  big[(128 << 10)] = 0x42;  // first byte of the last 128 KiB
  auto alias = isa_bios_alias(big);
  ASSERT_EQ(alias.size(), 128u << 10);
  EXPECT_EQ(alias.front(), 0x42);
  EXPECT_EQ(alias.data() + alias.size(), big.data() + big.size());
  auto small = image(64 << 10, kSeaBiosVector);
  EXPECT_EQ(isa_bios_alias(small).size(), 64u << 10);  // a 64 KiB BIOS: all of it
  // Everything below 4 GiB that firmware boots use stays clear of KVM's pages and the IOAPIC.
  static_assert(kFirmwareIdentityMapAddr > 0xFEE00000 + 0x1000);
}

TEST(FirmwareImage, VarsTemplateBesideTheCode) {
  tern::testing::TempDir dir("tern-fw");
  ASSERT_FALSE(dir.path().empty());
  const std::string code = dir.path() + "/OVMF_CODE_4M.fd";
  EXPECT_EQ(vars_template_for(code), "");  // no VARS file there
  std::ofstream(dir.path() + "/OVMF_VARS_4M.fd") << "x";
  EXPECT_EQ(vars_template_for(code), dir.path() + "/OVMF_VARS_4M.fd");
  EXPECT_EQ(vars_template_for(dir.path() + "/bios-256k.bin"), "");
}

}  // namespace
}  // namespace tern::firmware
