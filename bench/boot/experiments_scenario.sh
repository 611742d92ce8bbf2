#!/bin/sh
# Runs inside the test host (L1), started by bench/boot/investigate.sh --experiments: what-if boots
# that need no change to tern's source, each $EXP_RUNS times (round robin), quiet, 256 MiB, 1 vCPU:
#   tern          as in the benchmark
#   tern-thp      tern with the test host's shmem THP on (transparent_hugepage/shmem_enabled=always):
#                 its memfd guest RAM then gets 2 MiB pages, as QEMU's anonymous RAM does by default
#   qemu-pc       as in the benchmark (QEMU's default CPU model, qemu64)
#   qemu-pc-host  QEMU -M pc -cpu host: the guest sees the same CPU (features, family) as under tern
# Prints per boot:  EXP-SAMPLE cfg=C run=N rc=R marker_ms=M exit_ms=E user_s=U sys_s=S
# and once per config with the test host's KVM tracepoints on:
#   EXP-EXITS cfg=C total=T npf=N io=I msr=M interrupt=Q userspace=U
: "${EXP_RUNS:=3}" "${EXP_CFGS:=tern tern-thp qemu-pc qemu-pc-host}" "${EXP_TIMEOUT:=180}"
MEM_MIB=256
T=/sys/kernel/tracing
THP=/sys/kernel/mm/transparent_hugepage
mount -t tracefs tracefs $T 2>/dev/null
echo "EXP-INFO thp_enabled=$(cat $THP/enabled | tr ' ' ,) shmem_enabled=$(cat $THP/shmem_enabled | tr ' ' ,)"

cmd() {
    common="-kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial stdio -no-reboot"
    case "$1" in
        tern | tern-thp) echo "$TH_TERN run --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory ${MEM_MIB}M --cpus 1 --cmdline" ;;
        qemu-pc) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
        qemu-pc-host) echo "$TH_QEMU -enable-kvm -M pc -cpu host -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
    esac
}
setup() { case "$1" in tern-thp) echo always >$THP/shmem_enabled ;; *) echo never >$THP/shmem_enabled ;; esac; }

boot() {  # boot CFG RUN
    setup "$1"
    # shellcheck disable=SC2046
    { echo EXP-T0; time -f "EXP-TIME %U %S" timeout -s KILL "$EXP_TIMEOUT" $(cmd "$1") "console=ttyS0 quiet tern.action=poweroff" </dev/null 2>&1
      echo "EXP-T1 rc=$?"; } 2>&1 | ts '%.s' >/tmp/exp
    awk -v c="$1" -v n="$2" '$2 == "EXP-T0" { t0 = $1 } /TERN-GUEST-MARKER/ && m == "" { m = $1 }
        $2 == "EXP-TIME" { u = $3; s = $4 } $2 == "EXP-T1" { t1 = $1; rc = substr($3, 4) }
        END { printf "EXP-SAMPLE cfg=%s run=%s rc=%s marker_ms=%s exit_ms=%.0f user_s=%s sys_s=%s\n", c, n, rc,
              (m == "" ? "null" : sprintf("%.0f", (m - t0) * 1000)), (t1 - t0) * 1000, u, s }' /tmp/exp
}

run=1
while [ "$run" -le "$EXP_RUNS" ]; do
    for c in $EXP_CFGS; do echo "EXP-PROGRESS cfg=$c run=$run/$EXP_RUNS"; boot "$c" "$run"; done
    run=$((run + 1))
done

for c in $EXP_CFGS; do
    setup "$c"
    echo 0 >$T/tracing_on
    echo 65536 >$T/buffer_size_kb
    echo >$T/trace
    for e in kvm_exit kvm_userspace_exit; do echo 1 >$T/events/kvm/$e/enable; done
    echo 1 >$T/tracing_on
    # shellcheck disable=SC2046
    timeout -s KILL "$EXP_TIMEOUT" $(cmd "$c") "console=ttyS0 quiet tern.action=poweroff" </dev/null >/dev/null 2>&1
    echo 0 >$T/tracing_on
    for e in kvm_exit kvm_userspace_exit; do echo 0 >$T/events/kvm/$e/enable; done
    awk -v c="$c" '/kvm_exit:/ { t++; for (i = 1; i <= NF; i++) if ($i == "reason") { r[$(i + 1)]++; break } }
        /kvm_userspace_exit:/ { u++ }
        END { printf "EXP-EXITS cfg=%s total=%d npf=%d io=%d msr=%d interrupt=%d vintr=%d userspace=%d\n", c, t, r["npf"], r["io"], r["msr"], r["interrupt"], r["vintr"], u }' $T/trace
done
echo never >$THP/shmem_enabled
exit 0
