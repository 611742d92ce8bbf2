#include "vcpu/exit_stats.h"

#include <linux/kvm.h>

namespace tern {

std::string exit_reason_name(uint32_t reason) {
  switch (reason) {
    case KVM_EXIT_UNKNOWN: return "KVM_EXIT_UNKNOWN";
    case KVM_EXIT_EXCEPTION: return "KVM_EXIT_EXCEPTION";
    case KVM_EXIT_IO: return "KVM_EXIT_IO";
    case KVM_EXIT_HYPERCALL: return "KVM_EXIT_HYPERCALL";
    case KVM_EXIT_DEBUG: return "KVM_EXIT_DEBUG";
    case KVM_EXIT_HLT: return "KVM_EXIT_HLT";
    case KVM_EXIT_MMIO: return "KVM_EXIT_MMIO";
    case KVM_EXIT_IRQ_WINDOW_OPEN: return "KVM_EXIT_IRQ_WINDOW_OPEN";
    case KVM_EXIT_SHUTDOWN: return "KVM_EXIT_SHUTDOWN";
    case KVM_EXIT_FAIL_ENTRY: return "KVM_EXIT_FAIL_ENTRY";
    case KVM_EXIT_INTR: return "KVM_EXIT_INTR";
    case KVM_EXIT_SET_TPR: return "KVM_EXIT_SET_TPR";
    case KVM_EXIT_TPR_ACCESS: return "KVM_EXIT_TPR_ACCESS";
    case KVM_EXIT_NMI: return "KVM_EXIT_NMI";
    case KVM_EXIT_INTERNAL_ERROR: return "KVM_EXIT_INTERNAL_ERROR";
    case KVM_EXIT_SYSTEM_EVENT: return "KVM_EXIT_SYSTEM_EVENT";
    case KVM_EXIT_IOAPIC_EOI: return "KVM_EXIT_IOAPIC_EOI";
    default: return "KVM_EXIT_" + std::to_string(reason);
  }
}

}  // namespace tern
