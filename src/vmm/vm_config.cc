#include "vmm/vm_config.h"

#include <sstream>

namespace tern {

std::string with_default_console(const std::string& cmdline) {
  std::istringstream words(cmdline);
  std::string w;
  while (words >> w)
    if (w.rfind("console=", 0) == 0) return cmdline;
  return cmdline.empty() ? "console=ttyS0" : cmdline + " console=ttyS0";
}

}  // namespace tern
