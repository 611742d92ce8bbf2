// KvmVcpu: one vCPU fd and its mapped struct kvm_run; thin wrappers over the vCPU ioctls.
#pragma once

#include <linux/kvm.h>

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "base/fd.h"
#include "base/result.h"

namespace tern {

/// One (MSR index, value) pair for KVM_GET_MSRS / KVM_SET_MSRS.
struct MsrValue {
  uint32_t index;
  uint64_t data;
};

class KvmVcpu {
 public:
  /// `xsave2_size`: KVM_CHECK_EXTENSION(KVM_CAP_XSAVE2) on the VM fd (bytes), 0 when the host
  /// lacks it (then KVM_GET_XSAVE's 4096 bytes are used).
  KvmVcpu(uint32_t id, UniqueFd fd, kvm_run* run, size_t run_size, size_t xsave2_size = 0)
      : id_(id), fd_(std::move(fd)), run_(run), run_size_(run_size), xsave2_size_(xsave2_size) {}
  KvmVcpu(KvmVcpu&& o) noexcept
      : id_(o.id_), fd_(std::move(o.fd_)), run_(std::exchange(o.run_, nullptr)),
        run_size_(o.run_size_), xsave2_size_(o.xsave2_size_) {}
  KvmVcpu& operator=(KvmVcpu&&) = delete;
  KvmVcpu(const KvmVcpu&) = delete;
  ~KvmVcpu();

  [[nodiscard]] uint32_t id() const { return id_; }
  /// The shared kvm_run page: exit reason and exit data after run().
  [[nodiscard]] kvm_run* run_state() const { return run_; }
  /// The vCPU fd (e.g. for KVM_GET_STATS_FD).
  [[nodiscard]] BorrowedFd fd() const { return fd_.borrow(); }

  /// KVM_RUN. Returns 0 on a VM exit (see run_state()->exit_reason), or -errno (EINTR when
  /// kicked by a signal or immediate_exit; the caller decides whether to re-enter).
  int run();

  [[nodiscard]] Result<kvm_regs> get_regs() const;
  [[nodiscard]] Result<void> set_regs(const kvm_regs& r);
  [[nodiscard]] Result<kvm_sregs> get_sregs() const;
  [[nodiscard]] Result<void> set_sregs(const kvm_sregs& s);
  [[nodiscard]] Result<void> set_fpu(const kvm_fpu& f);
  /// KVM_SET_CPUID2 with `entries` (as patched for this vCPU).
  [[nodiscard]] Result<void> set_cpuid(std::span<const kvm_cpuid_entry2> entries);
  /// KVM_SET_MSRS. Returns how many of `msrs` KVM accepted (it stops at the first it rejects).
  [[nodiscard]] Result<size_t> set_msrs(std::span<const MsrValue> msrs);
  [[nodiscard]] Result<kvm_lapic_state> get_lapic() const;
  [[nodiscard]] Result<void> set_lapic(const kvm_lapic_state& s);

  /// KVM_RUN with kvm_run.immediate_exit = 1: finishes a PIO/MMIO exit still pending in the kernel
  /// (its state is in no GET ioctl) without running guest code. Call on a stopped vCPU before
  /// saving its state. Expects KVM_RUN to return -EINTR; any other result is an error.
  [[nodiscard]] Result<void> complete_pending_io();

  /// Bytes of the kvm_xsave image get_xsave() returns and set_xsave() hands to KVM: the
  /// KVM_CAP_XSAVE2 size, or 4096 without it.
  [[nodiscard]] size_t xsave_size() const;
  /// KVM_GET_XSAVE2 (xsave_size() bytes), or KVM_GET_XSAVE (4096 bytes) without KVM_CAP_XSAVE2:
  /// the raw struct kvm_xsave image (legacy FXSAVE area, XSAVE header, extended components at
  /// the host's CPUID 0xD offsets). Supersedes KVM_GET_FPU.
  [[nodiscard]] Result<std::vector<uint8_t>> get_xsave() const;
  /// KVM_SET_XSAVE with an image from get_xsave(). A shorter image is zero-padded to
  /// xsave_size() (KVM reads that many bytes); a longer one is refused when the bytes beyond
  /// xsave_size() are not all zero (state this host's KVM cannot load).
  [[nodiscard]] Result<void> set_xsave(std::span<const uint8_t> image);
  [[nodiscard]] Result<kvm_xcrs> get_xcrs() const;
  [[nodiscard]] Result<void> set_xcrs(const kvm_xcrs& x);
  [[nodiscard]] Result<kvm_debugregs> get_debugregs() const;
  [[nodiscard]] Result<void> set_debugregs(const kvm_debugregs& d);
  /// KVM_GET_MSRS for `indices`. KVM stops at the first MSR it cannot read: the result holds
  /// the values of the first N indices it did read (N <= indices.size()), in order.
  [[nodiscard]] Result<std::vector<MsrValue>> get_msrs(std::span<const uint32_t> indices) const;
  [[nodiscard]] Result<kvm_mp_state> get_mp_state() const;
  [[nodiscard]] Result<void> set_mp_state(const kvm_mp_state& s);
  [[nodiscard]] Result<kvm_vcpu_events> get_vcpu_events() const;
  [[nodiscard]] Result<void> set_vcpu_events(const kvm_vcpu_events& e);
  /// KVM_GET_TSC_KHZ: the guest TSC frequency in kHz.
  [[nodiscard]] Result<uint32_t> get_tsc_khz() const;
  /// KVM_SET_TSC_KHZ (needs KVM_CAP_TSC_CONTROL for frequencies other than the host's).
  [[nodiscard]] Result<void> set_tsc_khz(uint32_t khz);
  /// KVM_KVMCLOCK_CTRL (KVM API 4.82): tells the guest, through the PVCLOCK_GUEST_STOPPED flag of
  /// its pvclock page (set at the vCPU's next clock update), that the host stopped this vCPU, so
  /// its soft-lockup watchdog does not take the stop for a hung CPU. Call while the vCPU is not
  /// in KVM_RUN, before it runs again. Returns false, not an error, when the guest has not
  /// enabled kvmclock on this vCPU (EINVAL: no pvclock page to flag).
  [[nodiscard]] Result<bool> kvmclock_ctrl();

 private:
  uint32_t id_;
  UniqueFd fd_;
  kvm_run* run_;
  size_t run_size_;
  size_t xsave2_size_;
};

}  // namespace tern
