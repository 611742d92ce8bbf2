#include "vmm/vm_config.h"

#include <sstream>

namespace tern {

Result<MemoryBackend> choose_memory_backend(std::optional<MemoryBackend> chosen,
                                            const std::vector<DeviceSpec>& devices,
                                            const std::string& option) {
  bool vhost_user = false;
  for (const DeviceSpec& d : devices)
    if (const DiskConfig* disk = disk_config_of(d); disk && !disk->vhost_user_socket.empty())
      vhost_user = true;
  if (!chosen) return vhost_user ? MemoryBackend::kMemfd : MemoryBackend::kAnon;
  if (*chosen == MemoryBackend::kAnon && vhost_user)
    return fail(option + " anon",
                "a vhost-user disk needs shared memory (memfd or hugetlbfs)");
  return *chosen;
}

std::string with_default_console(const std::string& cmdline) {
  std::istringstream words(cmdline);
  std::string w;
  while (words >> w)
    if (w.rfind("console=", 0) == 0) return cmdline;
  return cmdline.empty() ? "console=ttyS0" : cmdline + " console=ttyS0";
}

}  // namespace tern
