// KvmSystem: the /dev/kvm handle — API version and capability checks, supported CPUID/MSRs.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/fd.h"
#include "base/result.h"
#include "kvm/kvm_vm.h"

namespace tern {

class KvmSystem {
 public:
  /// Opens `path` (normally /dev/kvm) and checks KVM_GET_API_VERSION == 12.
  static Result<KvmSystem> open(const std::string& path = "/dev/kvm");

  /// KVM_CHECK_EXTENSION on the system fd: 0 when absent, otherwise the capability's value.
  [[nodiscard]] int check_extension(long cap) const;
  /// Fails with a message naming the capability when it is absent.
  [[nodiscard]] Result<void> require(long cap, const char* name) const;

  /// KVM_GET_SUPPORTED_CPUID: every leaf/subleaf the host KVM can expose to a guest.
  [[nodiscard]] Result<std::vector<kvm_cpuid_entry2>> supported_cpuid() const;
  /// KVM_GET_MSR_INDEX_LIST: MSRs KVM can save/restore.
  [[nodiscard]] Result<std::vector<uint32_t>> msr_index_list() const;
  /// KVM_GET_VCPU_MMAP_SIZE: bytes to mmap from each vCPU fd for struct kvm_run.
  [[nodiscard]] size_t vcpu_mmap_size() const { return vcpu_mmap_size_; }

  /// KVM_CREATE_VM (default machine type).
  [[nodiscard]] Result<KvmVm> create_vm() const;

 private:
  KvmSystem(UniqueFd fd, size_t mmap_size) : fd_(std::move(fd)), vcpu_mmap_size_(mmap_size) {}
  UniqueFd fd_;
  size_t vcpu_mmap_size_;
};

}  // namespace tern
