#include "kvm/kvm_system.h"

#include <fcntl.h>
#include <sys/ioctl.h>

#include <cstring>
#include <memory>

#include "kvm/kvm_abi.h"

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
    using Header = kvm_abi::Cpuid2Header;
    auto buf = std::make_unique<uint8_t[]>(sizeof(Header) + n * sizeof(kvm_cpuid_entry2));
    auto* h = reinterpret_cast<Header*>(buf.get());
    h->nent = n;
    if (::ioctl(fd_.get(), kvm_abi::kGetSupportedCpuid, h) == 0) {
      std::vector<kvm_cpuid_entry2> out(h->nent);
      std::memcpy(out.data(), buf.get() + sizeof(Header), out.size() * sizeof(kvm_cpuid_entry2));
      return out;
    }
    if (errno != E2BIG) return fail_errno("KVM_GET_SUPPORTED_CPUID");
  }
  return fail("KVM_GET_SUPPORTED_CPUID", "too many entries");
}

Result<std::vector<uint32_t>> KvmSystem::msr_index_list() const {
  using Header = kvm_abi::MsrListHeader;
  Header probe{0};
  if (::ioctl(fd_.get(), kvm_abi::kGetMsrIndexList, &probe) < 0 && errno != E2BIG)
    return fail_errno("KVM_GET_MSR_INDEX_LIST");
  uint32_t n = probe.nmsrs;
  auto buf = std::make_unique<uint8_t[]>(sizeof(Header) + n * sizeof(uint32_t));
  auto* h = reinterpret_cast<Header*>(buf.get());
  h->nmsrs = n;
  if (::ioctl(fd_.get(), kvm_abi::kGetMsrIndexList, h) < 0)
    return fail_errno("KVM_GET_MSR_INDEX_LIST");
  std::vector<uint32_t> out(h->nmsrs);
  std::memcpy(out.data(), buf.get() + sizeof(Header), out.size() * sizeof(uint32_t));
  return out;
}

Result<KvmVm> KvmSystem::create_vm() const {
  int fd = retry_eintr([&] { return ::ioctl(fd_.get(), KVM_CREATE_VM, 0); });
  if (fd < 0) return fail_errno("KVM_CREATE_VM");
  return KvmVm(UniqueFd(fd), vcpu_mmap_size_);
}

}  // namespace tern
