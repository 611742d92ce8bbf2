// eBPF programs of KernelExitTrace (kernel_exit_trace.h): classic tracepoint programs on KVM's
// kvm_exit, kvm_entry, kvm_msr, kvm_pio, kvm_page_fault and kvm_inj_virq that count, in kernel
// maps, the events of the threads of one process (config.tgid). Compiled with clang -target bpf
// and embedded into tern; CO-RE: the record layouts below are relocated by libbpf against the
// running kernel's BTF (vmlinux, or the kvm module's), so that one object serves 6.1 and later.
#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "kernel_exits_bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile struct kx_config config = {};

// --- tracepoint records: only the fields used; names as in the kernel (trace_event_raw_<event>) ---
struct trace_event_raw_kvm_exit {
  unsigned int exit_reason;
  __u32 isa;
} __attribute__((preserve_access_index));

struct trace_event_raw_kvm_msr {
  unsigned int write;
  __u32 ecx;
} __attribute__((preserve_access_index));

struct trace_event_raw_kvm_pio {
  unsigned int rw;  // 1 = write (OUT)
  unsigned int port;
} __attribute__((preserve_access_index));

struct trace_event_raw_kvm_page_fault {
  __u64 fault_address;  // unsigned long before 6.x, u64 later: same size on x86-64
  __u64 error_code;     // read by its size in the running kernel (READ_UINT)
} __attribute__((preserve_access_index));

// kvm_inj_virq: `irq` up to ~6.9, then `vector` (with soft/reinjected).
struct trace_event_raw_kvm_inj_virq {
  unsigned int irq;
  unsigned int vector;
} __attribute__((preserve_access_index));

/// The unsigned integer field `f` of the record at `p`, whatever its size in the running kernel
/// (offset and size relocated by libbpf; x86 is little-endian). Read with bpf_probe_read_kernel:
/// a relocated direct load would be a "modified ctx pointer" dereference for the verifier.
#define READ_UINT(p, f)                                                      \
  ({                                                                         \
    __u64 _v = 0;                                                            \
    __u32 _sz = bpf_core_field_size((p)->f);                                 \
    bpf_core_read(&_v, _sz > 8 ? 8 : _sz, &(p)->f);                          \
    _v;                                                                      \
  })

// --- maps ---
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KX_MAX_REASONS);
  __type(key, struct kx_reason_key);
  __type(value, struct kx_reason_value);
} reasons SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KX_MAX_THREADS);
  __type(key, __u32);  // thread id
  __type(value, struct kx_pending);
} pending SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KX_MAX_MSRS);
  __type(key, struct kx_msr_key);
  __type(value, __u64);
} msrs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KX_MAX_PIO);
  __type(key, struct kx_pio_key);
  __type(value, __u64);
} pio SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KX_MAX_NPF);
  __type(key, struct kx_npf_key);
  __type(value, __u64);
} npf SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, KX_MAX_IRQS);
  __type(key, __u32);
  __type(value, __u64);
} irqs SEC(".maps");

/// Events a full map could not record (index 0).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} dropped SEC(".maps");

static __always_inline int ours(void) {
  return (bpf_get_current_pid_tgid() >> 32) == config.tgid;
}

static __always_inline void count_dropped(void) {
  __u32 zero = 0;
  __u64* d = bpf_map_lookup_elem(&dropped, &zero);
  if (d) __sync_fetch_and_add(d, 1);
}

/// counter[key] += 1; a full map counts into `dropped`.
static __always_inline void bump(void* map, const void* key) {
  __u64* v = bpf_map_lookup_elem(map, key);
  if (v) {
    __sync_fetch_and_add(v, 1);
    return;
  }
  __u64 one = 1;
  long err = bpf_map_update_elem(map, key, &one, BPF_NOEXIST);
  if (err == 0) return;
  v = bpf_map_lookup_elem(map, key);  // another CPU inserted it first
  if (v)
    __sync_fetch_and_add(v, 1);
  else
    count_dropped();
}

SEC("tracepoint/kvm/kvm_exit")
int kx_exit(struct trace_event_raw_kvm_exit* ctx) {
  if (!ours()) return 0;
  struct kx_reason_key key = {};
  key.isa = READ_UINT(ctx, isa);
  key.code = READ_UINT(ctx, exit_reason);
  if (key.isa == 1) key.code &= 0xffff;  // VMX: basic exit reason without the flag bits
  struct kx_reason_value* v = bpf_map_lookup_elem(&reasons, &key);
  if (v) {
    __sync_fetch_and_add(&v->count, 1);
  } else {
    struct kx_reason_value init = {.count = 1, .time_ns = 0};
    if (bpf_map_update_elem(&reasons, &key, &init, BPF_NOEXIST) != 0) {
      v = bpf_map_lookup_elem(&reasons, &key);
      if (v)
        __sync_fetch_and_add(&v->count, 1);
      else
        count_dropped();
    }
  }
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  struct kx_pending p = {.ts = bpf_ktime_get_ns(), .key = key};
  if (bpf_map_update_elem(&pending, &tid, &p, BPF_ANY) != 0) count_dropped();
  return 0;
}

SEC("tracepoint/kvm/kvm_entry")
int kx_entry(void* ctx) {
  if (!ours()) return 0;
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  struct kx_pending* p = bpf_map_lookup_elem(&pending, &tid);
  if (!p || p->ts == 0) return 0;
  __u64 now = bpf_ktime_get_ns();
  struct kx_reason_value* v = bpf_map_lookup_elem(&reasons, &p->key);
  if (v && now > p->ts) __sync_fetch_and_add(&v->time_ns, now - p->ts);
  p->ts = 0;
  return 0;
}

SEC("tracepoint/kvm/kvm_msr")
int kx_msr(struct trace_event_raw_kvm_msr* ctx) {
  if (!ours()) return 0;
  struct kx_msr_key key = {.msr = READ_UINT(ctx, ecx), .write = READ_UINT(ctx, write) ? 1 : 0};
  bump(&msrs, &key);
  return 0;
}

SEC("tracepoint/kvm/kvm_pio")
int kx_pio(struct trace_event_raw_kvm_pio* ctx) {
  if (!ours()) return 0;
  struct kx_pio_key key = {.port = READ_UINT(ctx, port) & 0xffff, .in = READ_UINT(ctx, rw) ? 0 : 1};
  bump(&pio, &key);
  return 0;
}

static __always_inline int in_ram(__u64 gpa) {
  for (int i = 0; i < KX_MAX_RAM_RANGES; i++) {
    if (i >= config.ram_count) break;
    if (gpa >= config.ram_start[i] && gpa < config.ram_end[i]) return 1;
  }
  return 0;
}

SEC("tracepoint/kvm/kvm_page_fault")
int kx_page_fault(struct trace_event_raw_kvm_page_fault* ctx) {
  if (!ours()) return 0;
  __u64 gpa = READ_UINT(ctx, fault_address);
  __u64 err = READ_UINT(ctx, error_code);
  struct kx_npf_key key = {};
  if (in_ram(gpa)) {
    key.kind = (err & 1) ? 1 : 0;  // present: ram-other, else ram-not-present
  } else {
    key.kind = (err & 8) ? 2 : 3;  // reserved bit: mmio-cached, else mmio-other
    key.gpa_page = gpa >> 12;
  }
  bump(&npf, &key);
  return 0;
}

SEC("tracepoint/kvm/kvm_inj_virq")
int kx_inj_virq(struct trace_event_raw_kvm_inj_virq* ctx) {
  if (!ours()) return 0;
  __u32 vector;
  if (bpf_core_field_exists(ctx->vector))
    vector = READ_UINT(ctx, vector);
  else
    vector = READ_UINT(ctx, irq);
  bump(&irqs, &vector);
  return 0;
}
