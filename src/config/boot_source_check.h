// What may be combined in a BootSource: a kernel or a firmware image, never both; kernel-only
// options only with a kernel; a variable store only with a firmware image. Shared by the CLI
// (`tern run` option names) and the API/config file (boot-source field names).
#pragma once

#include <string>

#include "base/result.h"
#include "config/vm_specs.h"

namespace tern {

/// The user-facing names of BootSource's fields where the input came from.
struct BootSourceNames {
  std::string kernel;         ///< "--kernel" / "boot-source.kernel_image_path"
  std::string initrd;         ///< "--initrd" / "boot-source.initrd_path"
  std::string cmdline;        ///< "--cmdline" / "boot-source.boot_args"
  std::string protocol;       ///< "--boot-protocol" / "boot-source.boot_protocol"
  std::string firmware;       ///< "--firmware" / "boot-source.firmware_path"
  std::string firmware_vars;  ///< "--firmware-vars" / "boot-source.firmware_vars_path"
};

/// The names `tern run` uses.
[[nodiscard]] BootSourceNames cli_boot_source_names();
/// The names of the API's and config file's boot-source fields, prefixed with `where`.
[[nodiscard]] BootSourceNames json_boot_source_names(const std::string& where);

/// Checks the combination in `b` (not the files): exactly one of a kernel and a firmware image;
/// with a firmware image no initrd, boot_args or boot_protocol other than auto (they describe a
/// kernel tern loads; firmware loads its own); firmware_vars_path only with firmware_path.
/// Errors name the field, e.g. "--firmware and --kernel cannot be combined: ...".
[[nodiscard]] Result<void> check_boot_source(const BootSource& b, const BootSourceNames& n);

}  // namespace tern
