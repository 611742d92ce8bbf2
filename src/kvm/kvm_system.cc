#include "kvm/kvm_system.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <memory>

namespace tern {

Result<KvmSystem> KvmSystem::open(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, open_file(path, O_RDWR));
  int version = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
  if (version != KVM_API_VERSION)
    return fail("KVM_GET_API_VERSION", path + " reports API " + std::to_string(version) +
                                           ", tern needs " + std::to_string(KVM_API_VERSION));
  int mmap_size = ::ioctl(fd.get(), KVM_GET_VCPU_MMAP_SIZE, 0);
  if (mmap_size < static_cast<int>(sizeof(kvm_run))) return fail_errno("KVM_GET_VCPU_MMAP_SIZE");
  return KvmSystem(std::move(fd), static_cast<size_t>(mmap_size));
}

int KvmSystem::check_extension(long cap) const {
  int r = ::ioctl(fd_.get(), KVM_CHECK_EXTENSION, cap);
  return r < 0 ? 0 : r;
}

Result<void> KvmSystem::require(long cap, const char* name) const {
  if (check_extension(cap) <= 0)
    return fail("KVM_CHECK_EXTENSION", std::string("host KVM lacks ") + name);
  return {};
}

Result<std::vector<kvm_cpuid_entry2>> KvmSystem::supported_cpuid() const {
  for (uint32_t n = 64; n <= 4096; n *= 2) {
    auto buf = std::make_unique<uint8_t[]>(sizeof(kvm_cpuid2) + n * sizeof(kvm_cpuid_entry2));
    auto* c = reinterpret_cast<kvm_cpuid2*>(buf.get());
    c->nent = n;
    if (::ioctl(fd_.get(), KVM_GET_SUPPORTED_CPUID, c) == 0)
      return std::vector<kvm_cpuid_entry2>(c->entries, c->entries + c->nent);
    if (errno != E2BIG) return fail_errno("KVM_GET_SUPPORTED_CPUID");
  }
  return fail("KVM_GET_SUPPORTED_CPUID", "too many entries");
}

Result<std::vector<uint32_t>> KvmSystem::msr_index_list() const {
  kvm_msr_list probe{};
  probe.nmsrs = 0;
  if (::ioctl(fd_.get(), KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG)
    return fail_errno("KVM_GET_MSR_INDEX_LIST");
  uint32_t n = probe.nmsrs;
  auto buf = std::make_unique<uint8_t[]>(sizeof(kvm_msr_list) + n * sizeof(uint32_t));
  auto* l = reinterpret_cast<kvm_msr_list*>(buf.get());
  l->nmsrs = n;
  if (::ioctl(fd_.get(), KVM_GET_MSR_INDEX_LIST, l) < 0) return fail_errno("KVM_GET_MSR_INDEX_LIST");
  return std::vector<uint32_t>(l->indices, l->indices + l->nmsrs);
}

Result<KvmVm> KvmSystem::create_vm() const {
  int fd = retry_eintr([&] { return ::ioctl(fd_.get(), KVM_CREATE_VM, 0); });
  if (fd < 0) return fail_errno("KVM_CREATE_VM");
  return KvmVm(UniqueFd(fd), vcpu_mmap_size_);
}

}  // namespace tern
