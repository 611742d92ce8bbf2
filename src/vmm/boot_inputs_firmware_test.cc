// Unit tests: prepare_boot() refuses bad --firmware / --firmware-vars input naming the field,
// before anything is built.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "base/testing/temp_dir.h"
#include "vmm/boot_inputs.h"

namespace tern {
namespace {

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

/// A firmware image of `size` bytes with a SeaBIOS-style far jump at its reset vector; UEFI
/// ("_FVH" at offset 40) when `uefi`.
std::vector<uint8_t> firmware(size_t size, bool uefi) {
  std::vector<uint8_t> b(size, 0);
  b[size - 16] = 0xEA;
  if (uefi) std::memcpy(b.data() + 40, "_FVH", 4);
  return b;
}

std::string error_of(const VmConfig& c) {
  auto r = prepare_boot(c);
  return r ? std::string("accepted") : r.error().message();
}

class FirmwareInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir.path().empty());
    c.memory_bytes = 64 << 20;
    c.console = "file:" + dir.path() + "/console";
    c.firmware_path = dir.path() + "/bios.bin";
    write_file(*c.firmware_path, firmware(128 << 10, false));
  }
  testing::TempDir dir{"tern-fwin"};
  VmConfig c;
};

TEST_F(FirmwareInputs, AcceptsABios) {
  auto in = prepare_boot(c);
  ASSERT_TRUE(in) << in.error().message();
  EXPECT_EQ(in->firmware.size(), 128u << 10);
  EXPECT_EQ(in->firmware_info.kind, firmware::FirmwareKind::kLegacyBios);
  EXPECT_FALSE(in->firmware_vars);
}

TEST_F(FirmwareInputs, RefusesMissingAndNonFirmwareFiles) {
  c.firmware_path = dir.path() + "/missing.bin";
  EXPECT_EQ(error_of(c).rfind("--firmware: ", 0), 0u) << error_of(c);
  EXPECT_NE(error_of(c).find("missing.bin"), std::string::npos);
  c.firmware_path = dir.path();
  EXPECT_EQ(error_of(c).rfind("--firmware: ", 0), 0u) << error_of(c);
  c.firmware_path = dir.path() + "/odd.bin";
  write_file(*c.firmware_path, std::vector<uint8_t>(5000, 0));
  EXPECT_NE(error_of(c).find("not a multiple of 4 KiB"), std::string::npos) << error_of(c);
  write_file(*c.firmware_path, std::vector<uint8_t>(8192, 0));
  EXPECT_NE(error_of(c).find("no x86 reset-vector jump"), std::string::npos) << error_of(c);
  EXPECT_EQ(error_of(c).rfind("--firmware: ", 0), 0u) << error_of(c);
  write_file(*c.firmware_path, firmware((16 << 20) + 4096, false));
  EXPECT_EQ(error_of(c).rfind("--firmware: ", 0), 0u) << error_of(c);
}

TEST_F(FirmwareInputs, VarsNeedUefiAndAWritableStore) {
  c.firmware_vars_path = dir.path() + "/vars.fd";
  EXPECT_NE(error_of(c).find("--firmware-vars: needs a UEFI --firmware"), std::string::npos)
      << error_of(c);
  // A UEFI image with no template beside it: the store must exist.
  c.firmware_path = dir.path() + "/code.fd";
  write_file(*c.firmware_path, firmware(1 << 20, true));
  EXPECT_EQ(error_of(c).rfind("--firmware-vars: ", 0), 0u) << error_of(c);
  EXPECT_EQ(error_of(c).find("firmware-vars: firmware-vars"), std::string::npos) << error_of(c);
  // A store of a size no flash has.
  write_file(*c.firmware_vars_path, std::vector<uint8_t>(1000, 0xFF));
  EXPECT_EQ(error_of(c).rfind("--firmware-vars: ", 0), 0u) << error_of(c);
  // Read-only (as a user, not root: root writes anyway).
  write_file(*c.firmware_vars_path, std::vector<uint8_t>(64 << 10, 0xFF));
  if (::geteuid() != 0) {
    ::chmod(c.firmware_vars_path->c_str(), 0444);
    EXPECT_EQ(error_of(c).rfind("--firmware-vars: ", 0), 0u) << error_of(c);
    ::chmod(c.firmware_vars_path->c_str(), 0644);
  }
  auto in = prepare_boot(c);
  ASSERT_TRUE(in) << in.error().message();
  ASSERT_TRUE(in->firmware_vars);
  EXPECT_EQ(in->firmware_vars->size(), 64u << 10);
}

TEST_F(FirmwareInputs, VarsCreatedFromTheTemplateBesideTheCode) {
  c.firmware_path = dir.path() + "/OVMF_CODE_4M.fd";
  write_file(*c.firmware_path, firmware(1 << 20, true));
  write_file(dir.path() + "/OVMF_VARS_4M.fd", std::vector<uint8_t>(0x84000, 0xAB));
  c.firmware_vars_path = dir.path() + "/my-vars.fd";
  auto in = prepare_boot(c);
  ASSERT_TRUE(in) << in.error().message();
  struct stat st {};
  ASSERT_EQ(::stat(c.firmware_vars_path->c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0x84000);
}

// A 16 MiB UEFI image fills the firmware area: a store below it would sit on KVM's TSS and
// identity-map pages (0xFEFFC000). max_size 0 meant "no limit" to VarsFile::open.
TEST_F(FirmwareInputs, VarsRefusedWhenTheImageFillsTheFirmwareArea) {
  c.firmware_path = dir.path() + "/code.fd";
  write_file(*c.firmware_path, firmware(16 << 20, true));
  c.firmware_vars_path = dir.path() + "/vars.fd";
  write_file(*c.firmware_vars_path, std::vector<uint8_t>(64 << 10, 0xFF));
  EXPECT_EQ(error_of(c).rfind("--firmware-vars: ", 0), 0u) << error_of(c);
  EXPECT_NE(error_of(c).find("16 MiB"), std::string::npos) << error_of(c);
}

// The store is written back: naming the code image itself (or a hard link to it) would
// overwrite the firmware with the variable store on the first store.
TEST_F(FirmwareInputs, VarsRefusedWhenTheyAreTheFirmwareFile) {
  c.firmware_path = dir.path() + "/code.fd";
  const auto code = firmware(1 << 20, true);
  write_file(*c.firmware_path, code);
  c.firmware_vars_path = c.firmware_path;
  EXPECT_EQ(error_of(c).rfind("--firmware-vars: ", 0), 0u) << error_of(c);
  EXPECT_NE(error_of(c).find("same file as --firmware"), std::string::npos) << error_of(c);
  ASSERT_EQ(::link(c.firmware_path->c_str(), (dir.path() + "/link.fd").c_str()), 0);
  c.firmware_vars_path = dir.path() + "/link.fd";
  EXPECT_NE(error_of(c).find("same file as --firmware"), std::string::npos) << error_of(c);
}

}  // namespace
}  // namespace tern
