#!/bin/sh
# Shared by bench/blk/scenario.sh and guest-fio-bench.sh's host mode (sourced; busybox sh or any
# POSIX sh): the CPU-time and KVM-exit readings taken around each job, in the machine that runs the
# VMMs (the test host L1, or this machine when it has hardware virtualization).

# cpu_ticks PID...: "utime stime guest_time" summed over the PIDs (every thread of each), in clock
# ticks (fields 14, 15, 43 of /proc/PID/stat); 0 0 0 for none.
cpu_ticks() {
    _u=0 _s=0 _g=0
    for _p in "$@"; do
        # shellcheck disable=SC2046
        set -- $(awk '{ sub(/.*\) /, ""); print $12, $13, $41 }' "/proc/$_p/stat" 2>/dev/null)
        [ $# -eq 3 ] || continue
        _u=$((_u + $1)) _s=$((_s + $2)) _g=$((_g + $3))
    done
    echo "$_u $_s $_g"
}

# children_of PID: the pids whose parent is PID (/proc/PID/task/*/children, CONFIG_PROC_CHILDREN,
# which Debian's kernels have; a process per /proc entry would cost seconds in the test host).
children_of() {
    cat /proc/"$1"/task/*/children 2>/dev/null
}

# l1_ticks: "busy total" of the whole machine (/proc/stat cpu line; busy = user nice system irq
# softirq steal).
l1_ticks() {
    awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat
}

# sample_pids "PIDS" ["BACKEND_PIDS"]: the cpu.txt fields after "<job> begin|end":
#   vmm_utime vmm_stime vmm_guest be_utime be_stime l1_busy l1_total
sample_pids() {
    # shellcheck disable=SC2086
    set -- "$(cpu_ticks $1)" "$(cpu_ticks ${2:-})"
    echo "$1 ${2% *} $(l1_ticks)"
}

# KVM's per-VM statistics in debugfs (Linux >= 5.14: /sys/kernel/debug/kvm/<pid>-<vm fd>/, the vCPU
# counters summed over the VM's vCPUs): every guest exit (exits: also those KVM handles in the
# kernel, e.g. an ioeventfd doorbell), exits to the VMM for port and MMIO accesses, halts, and
# interrupts injected.
KVM_EXIT_STATS="exits io_exits mmio_exits halt_exits irq_exits irq_injections"

# kvm_exits PID: the KVM_EXIT_STATS of PID's VM, space-separated; "-" for each when PID has no VM
# directory in debugfs or it is not readable (debugfs not mounted, not root).
kvm_exits() {
    _d=""
    for _x in /sys/kernel/debug/kvm/"$1"-*; do [ -r "$_x/exits" ] && _d="$_x" && break; done
    # One process for all six files (each costs tens of ms in the test host): a file that is not
    # there prints "-" in its place.
    # shellcheck disable=SC2046
    [ -n "$_d" ] && (cd "$_d" && awk -v want="$KVM_EXIT_STATS" 'BEGIN { n = split(want, w, " ") }
        { v[FILENAME] = $1 } END { for (i = 1; i <= n; i++) printf "%s%s", (i > 1 ? " " : ""), (w[i] in v ? v[w[i]] : "-"); print "" }' \
        $(for _st in $KVM_EXIT_STATS; do [ -r "$_st" ] && echo "$_st"; done)) && return
    echo "$KVM_EXIT_STATS" | sed 's/[a-z_]*/-/g'
}
