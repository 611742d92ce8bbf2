"""Shared by the bench summarizers: the test host's hist-trigger counts of a VM's KVM events
(bench/lib/kvm_trace.sh: "<job> begin|end EVENT KEYS COUNT" lines), turned into per-I/O figures, and
the kernel's SVM exit reason names."""
import os

# The kernel's SVM exit reason names (arch/x86/include/uapi/asm/svm.h SVM_EXIT_REASONS), as the
# kvm_exit tracepoint and tern's kernel_exits print them; the test host is an AMD (SVM) CPU.
SVM_NAMES = {**{i: f"read_cr{i}" for i in range(16)}, **{0x10 + i: f"write_cr{i}" for i in range(16)},
             **{0x20 + i: f"read_dr{i}" for i in range(8)}, **{0x30 + i: f"write_dr{i}" for i in range(8)},
             0x40: "DE excp", 0x41: "DB excp", 0x43: "BP excp", 0x46: "UD excp", 0x47: "NM excp",
             0x4d: "GP excp", 0x4e: "PF excp", 0x52: "MC excp", 0x51: "AC excp",
             0x60: "interrupt", 0x61: "nmi", 0x62: "smi", 0x63: "init", 0x64: "vintr", 0x65: "cr0_sel_write",
             0x6e: "rdtsc", 0x6f: "rdpmc", 0x70: "pushf", 0x71: "popf", 0x72: "cpuid", 0x73: "rsm", 0x74: "iret",
             0x75: "swint", 0x76: "invd", 0x77: "pause", 0x78: "hlt", 0x79: "invlpg", 0x7a: "invlpga", 0x7b: "io",
             0x7c: "msr", 0x7d: "task_switch", 0x7e: "ferr_freeze", 0x7f: "shutdown", 0x80: "vmrun",
             0x81: "hypercall", 0x82: "vmload", 0x83: "vmsave", 0x84: "stgi", 0x85: "clgi", 0x86: "skinit",
             0x87: "rdtscp", 0x88: "icebp", 0x89: "wbinvd", 0x8a: "monitor", 0x8b: "mwait", 0x8d: "xsetbv",
             0x8e: "rdpru", 0x8f: "efer_write_trap", 0x400: "npf", 0x401: "avic_incomplete_ipi",
             0x402: "avic_unaccelerated_access", 0x403: "vmgexit"}
# KVM_RUN's exit reasons (include/uapi/linux/kvm.h KVM_EXIT_*), as kvm_userspace_exit's reason.
KVM_EXIT_NAMES = {0: "unknown", 1: "exception", 2: "io", 3: "hypercall", 4: "debug", 5: "hlt", 6: "mmio",
                  7: "irq_window_open", 8: "shutdown", 9: "fail_entry", 10: "intr", 11: "set_tpr",
                  12: "tpr_access", 17: "internal_error", 24: "system_event", 29: "x86_rdmsr", 30: "x86_wrmsr"}
# Linux's x86 vectors: devices get 0x20-0xeb, the local APIC timer is 0xec, IPIs and the rest above.
LOCAL_TIMER_VECTOR = 0xec
X2APIC_EOI_MSR = 0x80b
# The guest's timer programming: TSC deadline (IA32_TSC_DEADLINE) and the x2APIC timer's initial count.
TIMER_MSRS = (0x6e0, 0x838)
XAPIC_EOI_GPA = 0xfee000b0
# MMIO writes in these windows are the platform's (local APIC, IOAPIC, HPET), not a device's doorbell;
# port writes below 0x1000 are ISA/PCI-config ports (serial, PIT, RTC, PIC, 0xcf8/0xcfc), the virtio
# legacy BARs' ports are above.
PLATFORM_MMIO = (0xfec00000, 0xff000000)
LEGACY_PORTS_BELOW = 0x1000


# The figures per_io() makes (the traced rounds contribute these, and their IOPS as traced_iops).
TRACE_KEYS = ("traced_exits_per_io", "exit_reasons_per_io", "userspace_exits_per_io", "userspace_exit_reasons_per_io",
              "inj_virq_per_io", "inj_virq_by_vector_per_io", "irq_device_per_io", "irq_timer_per_io", "eoi_per_io",
              "pv_eoi_per_io", "eoi_exits_per_io", "kicks_per_io", "mmio_per_io", "pio_per_io",
              "mmio_writes_by_gpa_per_io", "pio_writes_by_port_per_io", "msr_exits_by_msr_per_io",
              "timer_msr_exits_per_io", "hlt_exits_per_io", "wakeups_per_io", "wakeups_slept_per_io",
              "halt_polls_ok_per_io", "trace_dropped")


def read_trace(path):
    """{job: {"begin"|"end": {(event, keys): count}}} from trace.txt (empty without the file)."""
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 5 and parts[1] in ("begin", "end") and parts[4].isdigit():
                    out.setdefault(parts[0], {}).setdefault(parts[1], {})[(parts[2], parts[3])] = int(parts[4])
    return out


def _keys(text):
    return {} if text in ("-", "dropped") else dict(kv.split("=", 1) for kv in text.split(","))


def per_io(sample, ios):
    """The figures of one job from its begin/end samples ({"begin": {...}, "end": {...}}) and its
    I/Os: flat numbers (x_per_io) and dicts of them (by exit reason, vector, MSR, address)."""
    if not sample or "begin" not in sample or "end" not in sample or not ios:
        return {}
    b, e = sample["begin"], sample["end"]
    diff = {k: v - b.get(k, 0) for k, v in e.items() if v - b.get(k, 0) > 0}
    r = lambda x: round(x / ios, 3)  # noqa: E731
    reasons, uexits, vectors, msrs, mmio_w, pio_w = {}, {}, {}, {}, {}, {}
    tot = {"kvm_exit": 0, "kvm_userspace_exit": 0, "kvm_inj_virq": 0, "kvm_eoi": 0, "kvm_pv_eoi": 0,
           "kvm_fast_mmio": 0, "wake_slept": 0, "wake_polled": 0, "eoi_exits": 0, "timer_msr": 0, "kicks": 0, "mmio": 0, "pio": 0}
    dropped = 0
    for (ev, ktext), n in diff.items():
        if ktext == "dropped":
            dropped += n
            continue
        k = _keys(ktext)
        if ev == "kvm_exit":
            code = int(k.get("exit_reason", -1))
            name = SVM_NAMES.get(code, hex(code))
            reasons[name] = reasons.get(name, 0) + n
            tot[ev] += n
        elif ev == "kvm_userspace_exit":
            name = KVM_EXIT_NAMES.get(int(k.get("reason", -1)), k.get("reason"))
            uexits[name] = uexits.get(name, 0) + n
            tot[ev] += n
        elif ev == "kvm_inj_virq":
            v = hex(int(k.get("vector", k.get("irq", -1))))
            vectors[v] = vectors.get(v, 0) + n
            tot[ev] += n
        elif ev in ("kvm_eoi", "kvm_pv_eoi"):
            tot[ev] += n
        elif ev == "kvm_msr":
            ecx, w = int(k["ecx"]), k.get("write") == "1"
            name = f"{'wrmsr' if w else 'rdmsr'} {ecx:#x}"
            msrs[name] = msrs.get(name, 0) + n
            if w and ecx == X2APIC_EOI_MSR:
                tot["eoi_exits"] += n
            if w and ecx in TIMER_MSRS:
                tot["timer_msr"] += n
        elif ev == "kvm_mmio":
            tot["mmio"] += n
            gpa = int(k["gpa"])
            if k.get("type") == "2":
                mmio_w[f"{gpa:#x}"] = mmio_w.get(f"{gpa:#x}", 0) + n
                if gpa == XAPIC_EOI_GPA:
                    tot["eoi_exits"] += n
                elif not PLATFORM_MMIO[0] <= gpa < PLATFORM_MMIO[1]:
                    tot["kicks"] += n
        elif ev == "kvm_fast_mmio":
            tot[ev] += n
            tot["kicks"] += n
            mmio_w[f"{int(k['gpa']):#x} (fast)"] = n
        elif ev == "kvm_pio":
            tot["pio"] += n
            port = int(k["port"])
            if k.get("rw") == "1":
                pio_w[f"{port:#x}"] = pio_w.get(f"{port:#x}", 0) + n
                if port >= LEGACY_PORTS_BELOW:
                    tot["kicks"] += n
        elif ev == "kvm_vcpu_wakeup":
            tot["wake_slept" if k.get("waited") == "1" else "wake_polled"] += n
    if not tot["kvm_exit"] and not reasons:
        return {}

    def top(d, n=8):
        return {k: r(v) for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:n]}

    out = {"traced_exits_per_io": r(tot["kvm_exit"]),
           "exit_reasons_per_io": top(reasons, 64),
           "userspace_exits_per_io": r(tot["kvm_userspace_exit"]),
           "userspace_exit_reasons_per_io": top(uexits, 16),
           "inj_virq_per_io": r(tot["kvm_inj_virq"]),
           "inj_virq_by_vector_per_io": top(vectors),
           "irq_device_per_io": r(sum(n for v, n in vectors.items() if 0x20 <= int(v, 16) < LOCAL_TIMER_VECTOR)),
           "irq_timer_per_io": r(vectors.get(hex(LOCAL_TIMER_VECTOR), 0)),
           "eoi_per_io": r(tot["kvm_eoi"]),
           "pv_eoi_per_io": r(tot["kvm_pv_eoi"]),
           "eoi_exits_per_io": r(tot["eoi_exits"]),
           "kicks_per_io": r(tot["kicks"]),
           "mmio_per_io": r(tot["mmio"]), "pio_per_io": r(tot["pio"]),
           "mmio_writes_by_gpa_per_io": top(mmio_w, 6),
           "pio_writes_by_port_per_io": top(pio_w, 6),
           "msr_exits_by_msr_per_io": top(msrs, 8),
           "timer_msr_exits_per_io": r(tot["timer_msr"]),
           "hlt_exits_per_io": r(reasons.get("hlt", 0)),
           "wakeups_per_io": r(tot["wake_slept"] + tot["wake_polled"]),
           "wakeups_slept_per_io": r(tot["wake_slept"]),
           "halt_polls_ok_per_io": r(tot["wake_polled"])}
    if dropped:
        out["trace_dropped"] = dropped
    return out
