#include "config/boot_source_check.h"

namespace tern {

BootSourceNames cli_boot_source_names() {
  return {"--kernel", "--initrd", "--cmdline", "--boot-protocol", "--firmware", "--firmware-vars"};
}

BootSourceNames json_boot_source_names(const std::string& where) {
  std::string p = where.empty() ? "" : where + ".";
  return {p + "kernel_image_path", p + "initrd_path",  p + "boot_args",
          p + "boot_protocol",     p + "firmware_path", p + "firmware_vars_path"};
}

Result<void> check_boot_source(const BootSource& b, const BootSourceNames& n) {
  const bool kernel = !b.kernel_image_path.empty();
  if (b.firmware_vars_path && !b.firmware_path)
    return fail(n.firmware_vars, "needs " + n.firmware + " (a UEFI firmware image such as "
                                 "/usr/share/OVMF/OVMF_CODE_4M.fd)");
  if (!b.firmware_path) {
    if (!kernel) return fail(n.kernel, "missing: give a kernel image or " + n.firmware);
    return {};
  }
  if (kernel)
    return fail(n.firmware + " and " + n.kernel + " cannot be combined",
                "the firmware boots from a disk; tern loads a kernel only without firmware "
                "(drop one of them)");
  const std::string why = " applies to " + n.kernel + " only (firmware boots its disk's own "
                          "bootloader and kernel)";
  if (b.initrd_path) return fail(n.initrd, "cannot be combined with " + n.firmware + ":" + why);
  if (b.boot_args) return fail(n.cmdline, "cannot be combined with " + n.firmware + ":" + why);
  if (b.boot_protocol != BootProtocol::kAuto)
    return fail(n.protocol, "cannot be combined with " + n.firmware + ":" + why);
  return {};
}

}  // namespace tern
