// Unit tests: which kernel/firmware combinations a boot source may name, and the names errors use.
#include "config/boot_source_check.h"

#include <gtest/gtest.h>

namespace tern {
namespace {

std::string error_of(const BootSource& b, const BootSourceNames& n = cli_boot_source_names()) {
  auto r = check_boot_source(b, n);
  return r ? std::string("accepted") : r.error().message();
}

TEST(BootSourceCheck, KernelOrFirmware) {
  BootSource kernel;
  kernel.kernel_image_path = "bzImage";
  EXPECT_EQ(error_of(kernel), "accepted");
  BootSource fw;
  fw.firmware_path = "bios.bin";
  EXPECT_EQ(error_of(fw), "accepted");
  fw.firmware_vars_path = "vars.fd";
  EXPECT_EQ(error_of(fw), "accepted");
  EXPECT_EQ(error_of(BootSource{}), "--kernel: missing: give a kernel image or --firmware");
}

TEST(BootSourceCheck, RefusesCombinationsByName) {
  BootSource both;
  both.kernel_image_path = "bzImage";
  both.firmware_path = "bios.bin";
  EXPECT_EQ(error_of(both).rfind("--firmware and --kernel cannot be combined: ", 0), 0u)
      << error_of(both);
  BootSource fw;
  fw.firmware_path = "bios.bin";
  BootSource b = fw;
  b.initrd_path = "initrd";
  EXPECT_EQ(error_of(b).rfind("--initrd: cannot be combined with --firmware", 0), 0u);
  b = fw;
  b.boot_args = "quiet";
  EXPECT_EQ(error_of(b).rfind("--cmdline: cannot be combined with --firmware", 0), 0u);
  b = fw;
  b.boot_protocol = BootProtocol::kPvh;
  EXPECT_EQ(error_of(b).rfind("--boot-protocol: cannot be combined with --firmware", 0), 0u);
  BootSource vars;
  vars.kernel_image_path = "bzImage";
  vars.firmware_vars_path = "vars.fd";
  EXPECT_EQ(error_of(vars).rfind("--firmware-vars: needs --firmware", 0), 0u) << error_of(vars);
  // The API's and config file's names.
  EXPECT_EQ(error_of(vars, json_boot_source_names("boot-source"))
                .rfind("boot-source.firmware_vars_path: needs boot-source.firmware_path", 0),
            0u)
      << error_of(vars, json_boot_source_names("boot-source"));
}

}  // namespace
}  // namespace tern
