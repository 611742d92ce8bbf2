#!/bin/sh
# shellcheck shell=dash
# bench/lib/kvm_trace.sh — the test host's own count of a VM's KVM events, the same for every VMM
# (sourced by a scenario in the machine that runs the VMMs: busybox sh or any POSIX sh). tracefs
# hist triggers on KVM's tracepoints, each keyed by common_pid (the thread the event fired in: a
# vCPU thread for everything below) plus the fields that say what happened; reading the hist files
# and keeping the VMM's threads (/proc/PID/task) gives that VM's counts, whatever else runs.
#
#   kt_init                 finds tracefs (mounts it when needed); 1 (and KT_WHY says why) when
#                           the kvm events or their trigger files are not there
#   kt_start                installs the hist triggers (KT_EVENTS); counting starts
#   kt_sample PID [PREFIX]  one line per (event, keys) of PID's threads: "PREFIX EVENT KEYS COUNT", KEYS
#                           "name=value,..." (decimal, as the hist prints them; "-" for none); the
#                           counts since kt_start, summed over PID's threads; one awk process
#   kt_stop                 removes the triggers (their counts go with them)
#
# The events and their keys (KT_EVENTS: EVENT[:KEY,KEY...]); a KEY "a|b" takes the first field of
# the two the event's format has (kvm_inj_virq's vector was "irq" before Linux 6.0):
#   kvm_exit:exit_reason          every guest exit, by SVM/VMX exit code
#   kvm_userspace_exit:reason     returns of KVM_RUN to the VMM (KVM_EXIT_IO = 2, MMIO = 6, ...)
#   kvm_inj_virq:vector|irq       interrupts injected into the guest, by vector
#   kvm_eoi                       EOIs the local APIC processed (register write or PV EOI)
#   kvm_pv_eoi                    of which paravirtual (KVM_FEATURE_PV_EOI: no exit of their own)
#   kvm_msr:write,ecx             MSR accesses that exited (x2APIC EOI: write ecx 0x80b; TSC
#                                 deadline 0x6e0; ICR 0x830)
#   kvm_mmio:type,gpa             emulated MMIO accesses (type 0 read unsatisfied, 1 read, 2 write),
#                                 also those KVM completes itself (an ioeventfd, the xAPIC page)
#   kvm_fast_mmio:gpa             MMIO writes KVM matched to a zero-length ioeventfd without
#                                 decoding (VMX EPT misconfig path only)
#   kvm_pio:rw,port               port accesses (rw 1 = out)
#   kvm_vcpu_wakeup:waited        a halted vCPU running again (waited 1: it slept, 0: halt polling
#                                 found work)
KT_EVENTS="kvm_exit:exit_reason kvm_userspace_exit:reason kvm_inj_virq:vector|irq kvm_eoi kvm_pv_eoi kvm_msr:write,ecx kvm_mmio:type,gpa kvm_fast_mmio:gpa kvm_pio:rw,port kvm_vcpu_wakeup:waited"
# shellcheck disable=SC2034  # KT_WHY is for the caller
KT_TFS="" KT_WHY="" KT_SPECS=""

kt_init() {
    KT_TFS=/sys/kernel/tracing
    [ -d "$KT_TFS/events" ] || mount -t tracefs nodev "$KT_TFS" 2>/dev/null
    [ -d "$KT_TFS/events" ] || KT_TFS=/sys/kernel/debug/tracing
    if [ ! -w "$KT_TFS/events/kvm/kvm_exit/trigger" ]; then
        # shellcheck disable=SC2034
        KT_WHY="no writable kvm:kvm_exit trigger (tracefs at /sys/kernel/tracing or /sys/kernel/debug/tracing; root?)"
        return 1
    fi
    # The spec of each event present: keys with "a|b" resolved against its format file.
    KT_SPECS=""
    for _e in $KT_EVENTS; do
        _n="${_e%%:*}" _k=""
        [ "$_n" = "$_e" ] || _k="${_e#*:}"
        _f="$KT_TFS/events/kvm/$_n/format"
        [ -r "$_f" ] || continue
        case "$_k" in
            *"|"*)
                _a="${_k%%|*}" _b="${_k#*|}"
                _fmt="$(cat "$_f")"
                case "$_fmt" in *" $_a;"*) _k="$_a" ;; *) _k="$_b" ;; esac ;;
        esac
        KT_SPECS="$KT_SPECS $_n=hist:keys=common_pid${_k:+,$_k}"
    done
    return 0
}

kt_start() {
    for _s in $KT_SPECS; do
        echo "${_s#*=}" >"$KT_TFS/events/kvm/${_s%%=*}/trigger" 2>/dev/null ||
            echo "BLK-WARN cannot install ${_s#*=} on kvm:${_s%%=*}"
    done
}

kt_stop() {
    for _s in $KT_SPECS; do echo "!${_s#*=}" >"$KT_TFS/events/kvm/${_s%%=*}/trigger" 2>/dev/null; done
}

kt_sample() {
    _tids=""
    for _t in /proc/"$1"/task/*; do _tids="$_tids ${_t##*/}"; done
    _files=""
    for _s in $KT_SPECS; do _files="$_files $KT_TFS/events/kvm/${_s%%=*}/hist"; done
    # A hist line: "{ common_pid:        215, exit_reason:        124 } hitcount:         86";
    # "Dropped: N" counts events a full table lost (printed as EVENT dropped N when not 0).
    # shellcheck disable=SC2086
    awk -v tids="$_tids" -v pre="${2:+$2 }" '
        BEGIN { n = split(tids, t, " "); for (i = 1; i <= n; i++) want[t[i]] = 1 }
        FNR == 1 { ev = FILENAME; sub(/\/hist$/, "", ev); sub(/.*\//, "", ev); order[++ne] = ev }
        /^\{/ {
            s = $0; sub(/^\{ */, "", s); cnt = s; sub(/ *\}.*/, "", s); sub(/.*hitcount: */, "", cnt)
            m = split(s, kv, ","); keys = ""; pid = ""
            for (i = 1; i <= m; i++) {
                f = kv[i]; gsub(/ /, "", f); split(f, p, ":")
                if (p[1] == "common_pid") pid = p[2]; else keys = keys (keys == "" ? "" : ",") p[1] "=" p[2]
            }
            if (pid in want) { k = ev " " (keys == "" ? "-" : keys); if (!(k in c)) ks[++nk] = k; c[k] += cnt + 0 }
        }
        /^ *Dropped: *[1-9]/ { d = $0; sub(/.*: */, "", d); dropped[ev] = d }
        END {
            for (i = 1; i <= nk; i++) print pre ks[i], c[ks[i]]
            for (e in dropped) print pre e, "dropped", dropped[e]
        }' $_files 2>/dev/null
}
