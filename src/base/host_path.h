// Host file paths the VM keeps: resolved once, where the user typed them.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"

namespace tern {

/// `path` made absolute against the current working directory (leading "./" dropped; no
/// symlinks resolved, no ".." folded: the kernel's lookup decides those, as it did for the
/// relative path). An absolute `path` is returned as it is. A path kept in the VM's
/// configuration must not depend on where the process (or a later `tern restore`) runs.
/// Errors name `field` (getcwd failed: "--disk path=disk.img: cannot resolve a relative path:
/// <errno text>").
[[nodiscard]] Result<std::string> absolute_host_path(std::string_view path,
                                                     const std::string& field);

}  // namespace tern
