// KernelExitTrace: in-kernel accounting of the VM exits of tern's own vCPU threads, by hardware
// exit reason, through eBPF programs (libbpf) attached to KVM's tracepoints kvm:kvm_exit,
// kvm:kvm_entry, kvm:kvm_msr, kvm:kvm_pio, kvm:kvm_page_fault and kvm:kvm_inj_virq. The programs
// aggregate in kernel maps (no event per exit reaches userspace) and count only the exits of
// threads of this process (bpf_get_current_pid_tgid() >> 32 == tgid): scoped to tern's VM, never
// host-wide. While no KernelExitTrace exists nothing is attached: zero extra work per exit.
// docs/stats.md, "In-kernel exits".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"

namespace tern {

/// The CPU vendor extension that produced an exit: the kernel's KVM_ISA_VMX (1) / KVM_ISA_SVM (2),
/// as the kvm_exit tracepoint's `isa` field carries them.
enum class ExitIsa : uint32_t { kVmx = 1, kSvm = 2 };

/// Exits with one hardware exit reason, cumulative since the trace started.
struct KernelExitReason {
  ExitIsa isa = ExitIsa::kSvm;
  uint32_t code = 0;     ///< SVM exit code (SVM_EXIT_*) or VMX basic exit reason (EXIT_REASON_*)
  uint64_t count = 0;    ///< kvm_exit events with this reason
  uint64_t time_ns = 0;  ///< sum over them of kvm_exit -> next kvm_entry on the same vCPU (ns)
};

/// MSR accesses that KVM handled or forwarded (kvm_msr tracepoint), cumulative.
struct KernelMsrAccess {
  uint32_t msr = 0;    ///< ECX, e.g. 0x80b (x2APIC EOI)
  bool write = false;  ///< WRMSR (true) or RDMSR
  uint64_t count = 0;
};

/// Port I/O seen by KVM (kvm_pio tracepoint: both the accesses KVM's in-kernel devices and
/// ioeventfds served and those that left for tern), cumulative.
struct KernelPioAccess {
  uint16_t port = 0;
  bool in = false;  ///< IN (true) or OUT
  uint64_t count = 0;
};

/// What kind of guest-physical address a nested page fault (SVM NPF, VMX EPT violation/misconfig)
/// hit, classified in the kernel against tern's RAM ranges and the fault's error code.
enum class NpfKind : uint32_t {
  kRamNotPresent = 0,  ///< RAM, no mapping yet (first touch, or after the mapping was zapped)
  kRamOther = 1,       ///< RAM, mapping present: write protection (dirty logging) or permissions
  kMmioCached = 2,     ///< not RAM, reserved-bit fault: KVM's cached MMIO SPTE (fast MMIO path)
  kMmioOther = 3,      ///< not RAM, first fault on that page
};

/// Nested page faults of one kind on one page, cumulative.
struct KernelNpf {
  NpfKind kind = NpfKind::kRamNotPresent;
  uint64_t gpa_page = 0;  ///< guest-physical address >> 12 for the MMIO kinds; 0 for the RAM kinds
  uint64_t count = 0;
};

/// Interrupts KVM injected into a vCPU (kvm_inj_virq tracepoint), by vector, cumulative.
struct KernelInjectedIrq {
  uint32_t vector = 0;
  uint64_t count = 0;
};

/// One reading of every map. Counts are cumulative since start(); each vector is sorted by count,
/// descending. `dropped` counts events a full map could not record (their exits are still in
/// `reasons`: only breakdown rows are ever dropped).
struct KernelExitCounts {
  std::vector<KernelExitReason> reasons;
  std::vector<KernelMsrAccess> msrs;
  std::vector<KernelPioAccess> pio;
  std::vector<KernelNpf> npf;
  std::vector<KernelInjectedIrq> irqs;
  uint64_t dropped = 0;
  /// Sum of reasons[].count.
  [[nodiscard]] uint64_t total() const;
};

/// A guest-physical range of RAM [start, start + size), bytes.
struct GuestRamRange {
  uint64_t start = 0;
  uint64_t size = 0;
};

/// The loaded and attached programs; detached and unloaded on destruction. read() may be called
/// from any thread at any time (map lookups only).
class KernelExitTrace {
 public:
  struct Options {
    pid_t tgid = 0;                    ///< whose threads' exits are counted (tern: getpid())
    std::vector<GuestRamRange> ram;    ///< the VM's RAM (at most 16 ranges), for NpfKind
  };

  /// Loads and attaches the programs. Errors say exactly what is missing, e.g. "in-kernel exit
  /// accounting: bpf(BPF_PROG_LOAD): needs CAP_BPF and CAP_PERFMON (or root): Operation not
  /// permitted", "... no tracefs (mount -t tracefs nodev /sys/kernel/tracing)", "... kernel has no
  /// kvm:kvm_exit tracepoint (kvm module not loaded?)", "... no kernel BTF
  /// (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF)". Never aborts.
  [[nodiscard]] static Result<std::unique_ptr<KernelExitTrace>> start(const Options& options);

  /// Current cumulative counts.
  [[nodiscard]] Result<KernelExitCounts> read() const;

  ~KernelExitTrace();
  KernelExitTrace(const KernelExitTrace&) = delete;
  KernelExitTrace& operator=(const KernelExitTrace&) = delete;

  struct Impl;

 private:
  explicit KernelExitTrace(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The kernel's name of an exit reason, as the kvm_exit tracepoint prints it: SVM from
/// SVM_EXIT_REASONS ("npf", "msr", "io", "hlt", "vintr", ...), VMX from VMX_EXIT_REASONS
/// ("EPT_VIOLATION", "MSR_WRITE", "EXTERNAL_INTERRUPT", ...) of <asm/svm.h> / <asm/vmx.h>;
/// unknown codes as "0x<hex>".
[[nodiscard]] std::string kernel_exit_reason_name(ExitIsa isa, uint32_t code);
/// "svm" or "vmx".
[[nodiscard]] const char* exit_isa_name(ExitIsa isa);
/// A short name of a well-known MSR ("X2APIC_EOI", "TSC_DEADLINE", "EFER", ...) or "" when tern
/// does not know it.
[[nodiscard]] std::string msr_name(uint32_t msr);
/// "ram-not-present", "ram-other", "mmio-cached", "mmio-other".
[[nodiscard]] const char* npf_kind_name(NpfKind kind);

}  // namespace tern
