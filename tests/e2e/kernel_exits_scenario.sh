#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/kernel_exits_test.sh through testhost/run.sh.
# 1. The test's own reader of KVM's exits, independent of tern: a hist trigger on the kvm:kvm_exit
#    tracepoint keyed by exit_reason (tracefs; counted in the kernel for every exit in L1: nothing
#    but tern runs KVM here, so host-wide = tern's VM). Installed before tern starts.
# 2. tern boots the stock kernel with 2 vCPUs, a 64 MiB disk, --kernel-exits (on from before the
#    first KVM_RUN), --stats-on-exit and --api-sock; the guest (kernel_exits_guest/actions/kex-fio)
#    runs fio on the disk. While fio runs: one `tern stat --kernel-exits` screen. When fio is done:
#    the VM is paused (no vCPU in the guest: both counts are still), GET /tern/stats and the
#    histogram are read, the VM resumed, the guest powers off and tern prints its summary.
# 3. The capability-missing paths: tern as uid 65534 (no CAP_BPF/CAP_PERFMON), and tern as root
#    with tracefs unmounted, with --kernel-exits --stats-on-exit, boot the guest to its marker;
#    their summaries must carry the reason and the rest.
# Prints (besides the consoles, passed through):
#   E2E-KEX-TRACEFS path=<dir> | E2E-KEX-ERROR <why>
#   E2E-KEX-SCREEN <line>                 the tern stat --kernel-exits screen, line by line
#   E2E-KEX-PAUSE code=<http status>      E2E-KEX-RESUME code=<http status>
#   E2E-KEX-STATS <GET /tern/stats JSON>  while paused
#   E2E-KEX-HIST phase=paused|end <line>  the histogram's lines while paused / after tern exited
#   E2E-KEX-EXIT status=<tern run status> (its --stats-on-exit summary precedes it)
#   E2E-KEX-NP name=np|notrace <line>     the capability-missing runs' output;
#   E2E-KEX-NP-EXIT name=np|notrace status=N
. /testhost/l1_lib.sh
: "${E2E_KEX_TIMEOUT:=420}"
[ -n "$TH_TERN" ] || { echo "E2E-KEX-ERROR tern binary not in the test host"; exit 2; }

# tracefs: /sys/kernel/tracing, or debugfs's automount of it.
tfs=/sys/kernel/tracing
[ -d "$tfs/events" ] || mount -t tracefs nodev "$tfs" 2>/dev/null
[ -d "$tfs/events" ] || tfs=/sys/kernel/debug/tracing
trig="$tfs/events/kvm/kvm_exit/trigger"
[ -w "$trig" ] || { echo "E2E-KEX-ERROR no kvm:kvm_exit trigger file (tracefs at $tfs?)"; exit 2; }
echo "E2E-KEX-TRACEFS path=$tfs"
spec="hist:keys=exit_reason:size=256"
echo "$spec" >"$trig" || { echo "E2E-KEX-ERROR cannot install the hist trigger $spec"; exit 2; }
hist() {  # hist PHASE
    sed "s/^/E2E-KEX-HIST phase=$1 /" "$tfs/events/kvm/kvm_exit/hist"
}

sock=/tmp/tern-kex.sock
disk=/tmp/kex-disk.img
rm -f "$sock" /tmp/kex.in /tmp/kex.out /tmp/tern.pid
truncate -s 64M "$disk"
mkfifo /tmp/kex.in /tmp/kex.out
# The inner shell writes its pid and execs busybox timeout, which execs tern (tests/e2e/stat_scenario.sh).
# shellcheck disable=SC2016
{ sh -c 'echo $$ >/tmp/tern.pid; exec "$@"' sh timeout -s KILL "$E2E_KEX_TIMEOUT" \
    "$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" \
    --cmdline "console=ttyS0 quiet tern.action=kex-fio" --memory 512M --cpus 2 \
    --disk "path=$disk,queues=1" --api-sock "$sock" --kernel-exits --stats-on-exit
  echo "E2E-KEX-EXIT status=$?"; } </tmp/kex.in 2>&1 | tr -d '\r' >/tmp/kex.out &
exec 4>/tmp/kex.in 3</tmp/kex.out
while IFS= read -r line <&3; do
    echo "$line"
    case "$line" in
        KEX-FIO-START*)
            "$TH_TERN" stat --api-sock "$sock" --kernel-exits --once --interval 2 --rows 6 2>&1 |
                sed 's/^/E2E-KEX-SCREEN /' ;;
        KEX-FIO-DONE*)
            echo "E2E-KEX-PAUSE code=$(l1_api "$sock" PATCH /vm '{"state": "Paused"}' | awk '{print $NF}')"
            echo "E2E-KEX-STATS $(curl -s -m 60 --unix-socket "$sock" http://localhost/tern/stats | tr -d '\n')"
            hist paused
            echo "E2E-KEX-RESUME code=$(l1_api "$sock" PATCH /vm '{"state": "Resumed"}' | awk '{print $NF}')"
            echo go >&4 ;;
        E2E-KEX-EXIT*) break ;;
    esac
done
exec 3<&- 4>&-
wait
hist end
echo "!$spec" >"$trig"

# The capability-missing paths, one guest boot each to its marker (then poweroff):
#   np       an unprivileged tern: in a new user namespace (busybox unshare -U: uid 65534 there, no
#            capability in the test host's namespace; /dev/kvm opened up for it)
#   notrace  root, with tracefs unmounted (and debugfs, which would automount it)
np_run() {  # np_run NAME [userns] : output as E2E-KEX-NP name=NAME <line>, then E2E-KEX-NP-EXIT
    cmd="timeout -s KILL 300 $TH_TERN run --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD"
    cmd="$cmd --cmdline 'console=ttyS0 quiet panic=-1' --memory 512M --cpus 1 --kernel-exits --stats-on-exit"
    if [ "$2" = userns ]; then
        unshare -U sh -c "id; $cmd" </dev/null >"/tmp/np/$1.out" 2>&1
    else
        sh -c "$cmd" </dev/null >"/tmp/np/$1.out" 2>&1
    fi
    echo "E2E-KEX-NP-EXIT name=$1 status=$?"
    tr -d '\r' <"/tmp/np/$1.out" | sed "s/^/E2E-KEX-NP name=$1 /"
}
mkdir -p /tmp/np && chmod 0777 /tmp/np
chmod 0666 /dev/kvm
np_run np userns
chmod 0600 /dev/kvm
umount "$tfs" 2>/dev/null
umount /sys/kernel/debug/tracing 2>/dev/null
umount /sys/kernel/debug 2>/dev/null
echo "E2E-KEX-NOTRACE tracefs=$(grep -c tracefs /proc/mounts)"
np_run notrace
exit 0
