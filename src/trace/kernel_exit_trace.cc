// Stub until the libbpf implementation lands (issue 15): start() reports that it is not built.
#include "trace/kernel_exit_trace.h"

#include <cstdio>

namespace tern {

struct KernelExitTrace::Impl {};

uint64_t KernelExitCounts::total() const {
  uint64_t t = 0;
  for (const auto& r : reasons) t += r.count;
  return t;
}

Result<std::unique_ptr<KernelExitTrace>> KernelExitTrace::start(const Options&) {
  return fail("in-kernel exit accounting", "not built into this tern");
}

Result<KernelExitCounts> KernelExitTrace::read() const { return KernelExitCounts{}; }

KernelExitTrace::KernelExitTrace(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelExitTrace::~KernelExitTrace() = default;

std::string kernel_exit_reason_name(ExitIsa, uint32_t code) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%x", code);
  return b;
}
const char* exit_isa_name(ExitIsa isa) { return isa == ExitIsa::kVmx ? "vmx" : "svm"; }
std::string msr_name(uint32_t) { return ""; }
const char* npf_kind_name(NpfKind kind) {
  switch (kind) {
    case NpfKind::kRamNotPresent: return "ram-not-present";
    case NpfKind::kRamOther: return "ram-other";
    case NpfKind::kMmioCached: return "mmio-cached";
    case NpfKind::kMmioOther: return "mmio-other";
  }
  return "?";
}

}  // namespace tern
