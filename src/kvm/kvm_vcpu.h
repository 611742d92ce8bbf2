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
  KvmVcpu(uint32_t id, UniqueFd fd, kvm_run* run, size_t run_size)
      : id_(id), fd_(std::move(fd)), run_(run), run_size_(run_size) {}
  KvmVcpu(KvmVcpu&& o) noexcept
      : id_(o.id_), fd_(std::move(o.fd_)), run_(std::exchange(o.run_, nullptr)),
        run_size_(o.run_size_) {}
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

 private:
  uint32_t id_;
  UniqueFd fd_;
  kvm_run* run_;
  size_t run_size_;
};

}  // namespace tern
