// Facts about the host that decide whether and how large a guest can run.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace tern {

/// True if /proc/cpuinfo lists the vmx or svm flag (hardware virtualization visible to Linux).
[[nodiscard]] bool host_has_hw_virt();

/// Bytes of RAM plus swap the host has in total (sysinfo); the most guest RAM it could back.
[[nodiscard]] uint64_t host_memory_limit();

/// The message tern prints when Linux guests cannot run here (no VMX/SVM flag).
[[nodiscard]] std::string no_hw_virt_message();

/// Why this host cannot run a guest, or "" when it can: /dev/kvm missing or not readable and
/// writable by this user (errno's reason and what to do), else no VMX/SVM (no_hw_virt_message()).
[[nodiscard]] std::string kvm_unusable_reason();

}  // namespace tern
