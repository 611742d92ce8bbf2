#include "vmm/host_check.h"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>
#include <sstream>

namespace tern {

bool host_has_hw_virt() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w)
      if (w == "vmx" || w == "svm") return true;
  }
  return false;
}

uint64_t host_memory_limit() {
  struct sysinfo si {};
  if (::sysinfo(&si) != 0) return UINT64_MAX;
  return (static_cast<uint64_t>(si.totalram) + si.totalswap) * si.mem_unit;
}

std::string no_hw_virt_message() {
  return "this host has no hardware virtualization (no vmx/svm flag in /proc/cpuinfo): its "
         "/dev/kvm, if any, cannot boot Linux guests at a useful speed. Run tern inside the nested "
         "test host instead: scripts/demo.sh does that for you (testhost/README.md for your own "
         "scenarios; README.md, \"No VMX/SVM here?\")";
}

std::string kvm_unusable_reason() {
  if (::access("/dev/kvm", R_OK | W_OK) != 0) {
    const int e = errno;
    if (e == ENOENT)
      return "/dev/kvm does not exist: load kvm-intel or kvm-amd (modprobe), or, in a VM, enable "
             "nested virtualization";
    return std::string("/dev/kvm: ") + std::strerror(e) +
           ": tern needs read and write access to it (e.g. add the user to the kvm group)";
  }
  if (!host_has_hw_virt()) return no_hw_virt_message();
  return "";
}

}  // namespace tern
