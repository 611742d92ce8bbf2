#include "kvm/kvm_vcpu.h"

#include <sys/ioctl.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>

#include "kvm/kvm_abi.h"

namespace tern {

namespace {
std::string vcpu_ctx(uint32_t id) { return "vCPU " + std::to_string(id); }
}  // namespace

KvmVcpu::~KvmVcpu() {
  if (run_ != nullptr) ::munmap(run_, run_size_);
}

int KvmVcpu::run() {
  if (::ioctl(fd_.get(), KVM_RUN, 0) < 0) return -errno;
  return 0;
}

Result<kvm_regs> KvmVcpu::get_regs() const {
  kvm_regs r{};
  if (::ioctl(fd_.get(), KVM_GET_REGS, &r) < 0) return fail_errno("KVM_GET_REGS", vcpu_ctx(id_));
  return r;
}

Result<void> KvmVcpu::set_regs(const kvm_regs& r) {
  if (::ioctl(fd_.get(), KVM_SET_REGS, &r) < 0) return fail_errno("KVM_SET_REGS", vcpu_ctx(id_));
  return {};
}

Result<kvm_sregs> KvmVcpu::get_sregs() const {
  kvm_sregs s{};
  if (::ioctl(fd_.get(), KVM_GET_SREGS, &s) < 0) return fail_errno("KVM_GET_SREGS", vcpu_ctx(id_));
  return s;
}

Result<void> KvmVcpu::set_sregs(const kvm_sregs& s) {
  if (::ioctl(fd_.get(), KVM_SET_SREGS, &s) < 0) return fail_errno("KVM_SET_SREGS", vcpu_ctx(id_));
  return {};
}

Result<void> KvmVcpu::set_fpu(const kvm_fpu& f) {
  if (::ioctl(fd_.get(), KVM_SET_FPU, &f) < 0) return fail_errno("KVM_SET_FPU", vcpu_ctx(id_));
  return {};
}

Result<void> KvmVcpu::set_cpuid(std::span<const kvm_cpuid_entry2> entries) {
  using Header = kvm_abi::Cpuid2Header;
  auto buf = std::make_unique<uint8_t[]>(sizeof(Header) + entries.size_bytes());
  auto* h = reinterpret_cast<Header*>(buf.get());
  h->nent = static_cast<uint32_t>(entries.size());
  h->padding = 0;
  std::memcpy(buf.get() + sizeof(Header), entries.data(), entries.size_bytes());
  if (::ioctl(fd_.get(), kvm_abi::kSetCpuid2, h) < 0) return fail_errno("KVM_SET_CPUID2", vcpu_ctx(id_));
  return {};
}

Result<size_t> KvmVcpu::set_msrs(std::span<const MsrValue> msrs) {
  using Header = kvm_abi::MsrsHeader;
  auto buf = std::make_unique<uint8_t[]>(sizeof(Header) + msrs.size() * sizeof(kvm_msr_entry));
  auto* h = reinterpret_cast<Header*>(buf.get());
  h->nmsrs = static_cast<uint32_t>(msrs.size());
  h->pad = 0;
  for (size_t i = 0; i < msrs.size(); ++i) {
    kvm_msr_entry e{};
    e.index = msrs[i].index;
    e.data = msrs[i].data;
    std::memcpy(buf.get() + sizeof(Header) + i * sizeof(e), &e, sizeof(e));
  }
  int r = ::ioctl(fd_.get(), kvm_abi::kSetMsrs, h);
  if (r < 0) return fail_errno("KVM_SET_MSRS", vcpu_ctx(id_));
  return static_cast<size_t>(r);
}

Result<kvm_lapic_state> KvmVcpu::get_lapic() const {
  kvm_lapic_state s{};
  if (::ioctl(fd_.get(), KVM_GET_LAPIC, &s) < 0) return fail_errno("KVM_GET_LAPIC", vcpu_ctx(id_));
  return s;
}

Result<void> KvmVcpu::set_lapic(const kvm_lapic_state& s) {
  if (::ioctl(fd_.get(), KVM_SET_LAPIC, &s) < 0) return fail_errno("KVM_SET_LAPIC", vcpu_ctx(id_));
  return {};
}

}  // namespace tern
