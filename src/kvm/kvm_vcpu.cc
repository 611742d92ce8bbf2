#include "kvm/kvm_vcpu.h"

#include <sys/ioctl.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "kvm/kvm_abi.h"

namespace tern {

namespace {
std::string vcpu_ctx(uint32_t id) { return "vCPU " + std::to_string(id); }

/// Fixed-size get/set ioctl helpers for the plain (no flexible array) KVM structs.
template <class T>
Result<T> get_struct(int fd, unsigned long req, const char* op, uint32_t id) {
  T v{};
  if (::ioctl(fd, req, &v) < 0) return fail_errno(op, vcpu_ctx(id));
  return v;
}
template <class T>
Result<void> set_struct(int fd, unsigned long req, const T& v, const char* op, uint32_t id) {
  if (::ioctl(fd, req, &v) < 0) return fail_errno(op, vcpu_ctx(id));
  return {};
}
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

Result<void> KvmVcpu::complete_pending_io() {
  run_->immediate_exit = 1;
  int r = ::ioctl(fd_.get(), KVM_RUN, 0);
  int err = errno;
  run_->immediate_exit = 0;
  if (r == 0) return fail("KVM_RUN", vcpu_ctx(id_) + ": immediate_exit run returned an exit");
  if (err != EINTR) return fail_code(err, "KVM_RUN", vcpu_ctx(id_) + " (immediate_exit)");
  return {};
}

size_t KvmVcpu::xsave_size() const {
  return xsave2_size_ > kvm_abi::kXsaveLegacyBytes ? xsave2_size_ : kvm_abi::kXsaveLegacyBytes;
}

Result<std::vector<uint8_t>> KvmVcpu::get_xsave() const {
  // uint32_t storage: KVM's kvm_xsave is 4-byte aligned.
  std::vector<uint32_t> buf((xsave_size() + 3) / 4, 0);
  const bool v2 = xsave2_size_ != 0;
  if (::ioctl(fd_.get(), v2 ? kvm_abi::kGetXsave2 : kvm_abi::kGetXsave, buf.data()) < 0)
    return fail_errno(v2 ? "KVM_GET_XSAVE2" : "KVM_GET_XSAVE",
                      vcpu_ctx(id_) + ", " + std::to_string(xsave_size()) + " bytes");
  const auto* p = reinterpret_cast<const uint8_t*>(buf.data());
  return std::vector<uint8_t>(p, p + xsave_size());
}

Result<void> KvmVcpu::set_xsave(std::span<const uint8_t> image) {
  const size_t n = xsave_size();
  if (image.size() > n) {
    for (size_t i = n; i < image.size(); ++i)
      if (image[i] != 0)
        return fail("KVM_SET_XSAVE", vcpu_ctx(id_) + ": XSAVE image of " +
                                         std::to_string(image.size()) + " bytes has state at byte " +
                                         std::to_string(i) + ", this host's KVM takes " +
                                         std::to_string(n));
  }
  std::vector<uint32_t> buf((n + 3) / 4, 0);
  std::memcpy(buf.data(), image.data(), std::min(n, image.size()));
  if (::ioctl(fd_.get(), kvm_abi::kSetXsave, buf.data()) < 0)
    return fail_errno("KVM_SET_XSAVE", vcpu_ctx(id_) + ", " + std::to_string(n) + " bytes");
  return {};
}

Result<kvm_xcrs> KvmVcpu::get_xcrs() const {
  return get_struct<kvm_xcrs>(fd_.get(), KVM_GET_XCRS, "KVM_GET_XCRS", id_);
}
Result<void> KvmVcpu::set_xcrs(const kvm_xcrs& x) {
  return set_struct(fd_.get(), KVM_SET_XCRS, x, "KVM_SET_XCRS", id_);
}
Result<kvm_debugregs> KvmVcpu::get_debugregs() const {
  return get_struct<kvm_debugregs>(fd_.get(), KVM_GET_DEBUGREGS, "KVM_GET_DEBUGREGS", id_);
}
Result<void> KvmVcpu::set_debugregs(const kvm_debugregs& d) {
  return set_struct(fd_.get(), KVM_SET_DEBUGREGS, d, "KVM_SET_DEBUGREGS", id_);
}

Result<std::vector<MsrValue>> KvmVcpu::get_msrs(std::span<const uint32_t> indices) const {
  using Header = kvm_abi::MsrsHeader;
  // uint64_t storage keeps kvm_msr_entry (u32 index, u32 reserved, u64 data) 8-byte aligned.
  std::vector<uint64_t> buf((sizeof(Header) + indices.size() * sizeof(kvm_msr_entry)) / 8, 0);
  auto* base = reinterpret_cast<uint8_t*>(buf.data());
  Header h{static_cast<uint32_t>(indices.size()), 0};
  std::memcpy(base, &h, sizeof(h));
  for (size_t i = 0; i < indices.size(); ++i) {
    kvm_msr_entry e{};
    e.index = indices[i];
    std::memcpy(base + sizeof(Header) + i * sizeof(e), &e, sizeof(e));
  }
  int r = ::ioctl(fd_.get(), kvm_abi::kGetMsrs, base);
  if (r < 0) return fail_errno("KVM_GET_MSRS", vcpu_ctx(id_));
  std::vector<MsrValue> out;
  out.reserve(static_cast<size_t>(r));
  for (size_t i = 0; i < static_cast<size_t>(r) && i < indices.size(); ++i) {
    kvm_msr_entry e;
    std::memcpy(&e, base + sizeof(Header) + i * sizeof(e), sizeof(e));
    out.push_back(MsrValue{e.index, e.data});
  }
  return out;
}

Result<kvm_mp_state> KvmVcpu::get_mp_state() const {
  return get_struct<kvm_mp_state>(fd_.get(), KVM_GET_MP_STATE, "KVM_GET_MP_STATE", id_);
}
Result<void> KvmVcpu::set_mp_state(const kvm_mp_state& s) {
  return set_struct(fd_.get(), KVM_SET_MP_STATE, s, "KVM_SET_MP_STATE", id_);
}
Result<kvm_vcpu_events> KvmVcpu::get_vcpu_events() const {
  return get_struct<kvm_vcpu_events>(fd_.get(), KVM_GET_VCPU_EVENTS, "KVM_GET_VCPU_EVENTS", id_);
}
Result<void> KvmVcpu::set_vcpu_events(const kvm_vcpu_events& e) {
  return set_struct(fd_.get(), KVM_SET_VCPU_EVENTS, e, "KVM_SET_VCPU_EVENTS", id_);
}

Result<uint32_t> KvmVcpu::get_tsc_khz() const {
  int r = ::ioctl(fd_.get(), KVM_GET_TSC_KHZ, 0);
  if (r < 0) return fail_errno("KVM_GET_TSC_KHZ", vcpu_ctx(id_));
  return static_cast<uint32_t>(r);
}
Result<void> KvmVcpu::set_tsc_khz(uint32_t khz) {
  if (::ioctl(fd_.get(), KVM_SET_TSC_KHZ, static_cast<unsigned long>(khz)) < 0)
    return fail_errno("KVM_SET_TSC_KHZ", vcpu_ctx(id_) + ", " + std::to_string(khz) + " kHz");
  return {};
}

Result<bool> KvmVcpu::kvmclock_ctrl() {
  if (::ioctl(fd_.get(), KVM_KVMCLOCK_CTRL, 0) == 0) return true;
  if (errno == EINVAL) return false;  // kvmclock not enabled by the guest (MSR_KVM_SYSTEM_TIME)
  return fail_errno("KVM_KVMCLOCK_CTRL", vcpu_ctx(id_));
}

}  // namespace tern
