// Shared between the eBPF programs (kernel_exits.bpf.c) and their loader (kernel_exit_trace.cc):
// the layouts of the configuration in .rodata and of the map keys and values. Plain C with fixed
// width types only, so that clang -target bpf and g++ agree on every offset.
#ifndef TERN_TRACE_KERNEL_EXITS_BPF_H
#define TERN_TRACE_KERNEL_EXITS_BPF_H

#define KX_MAX_RAM_RANGES 16
#define KX_MAX_REASONS 1024
#define KX_MAX_MSRS 1024
#define KX_MAX_PIO 1024
#define KX_MAX_NPF 1024
#define KX_MAX_IRQS 256
#define KX_MAX_THREADS 1024

/// Set by the loader before load (.rodata: the verifier sees them as constants).
struct kx_config {
  __u32 tgid;                          ///< count only threads of this process
  __u32 ram_count;                     ///< valid entries of ram_start/ram_end
  __u64 ram_start[KX_MAX_RAM_RANGES];  ///< guest-physical, bytes, inclusive
  __u64 ram_end[KX_MAX_RAM_RANGES];    ///< guest-physical, bytes, exclusive
};

struct kx_reason_key {
  __u32 isa;   ///< KVM_ISA_VMX 1, KVM_ISA_SVM 2
  __u32 code;  ///< SVM exit code or VMX basic exit reason
};
struct kx_reason_value {
  __u64 count;
  __u64 time_ns;  ///< kvm_exit -> next kvm_entry of the same thread
};

/// The exit a vCPU thread is handling (kvm_exit seen, kvm_entry not yet).
struct kx_pending {
  __u64 ts;  ///< bpf_ktime_get_ns() at kvm_exit; 0 when nothing is pending
  struct kx_reason_key key;
};

struct kx_msr_key {
  __u32 msr;
  __u32 write;  ///< 1 WRMSR, 0 RDMSR
};
struct kx_pio_key {
  __u32 port;
  __u32 in;  ///< 1 IN, 0 OUT
};
struct kx_npf_key {
  __u32 kind;  ///< tern::NpfKind
  __u32 pad;
  __u64 gpa_page;  ///< gpa >> 12 for the MMIO kinds, 0 for RAM
};

#endif
