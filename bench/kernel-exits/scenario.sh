#!/bin/sh
# Runs inside the test host (L1), started by bench/kernel-exits/run.sh through testhost/run.sh.
# For each round, in the mode order off,on (odd rounds) or on,off (even rounds), for each kind
# (cpuid, pio) and each loop count (0 and $KEX_LOOPS): runs tern on the tiny PVH guest
# /kex/<kind>-<loops>.elf (bench/kernel-exits/guest.S), 1 vCPU, 64 MiB, --stats-on-exit, plus
# --kernel-exits in mode "on", and times it (coreutils date +%s%N around the whole tern process).
# After one untimed warm-up start per kind (accounting on). Prints per run
#   KEX-BENCH round=R mode=off|on kind=K loops=N wall_ns=T rc=RC marker=0|1 counted=C
# (counted: the "cpuid"/"io" row of the in-kernel exits table at exit, mode on; -1 otherwise), and
# the first "on" run's summary once as KEX-SUMMARY lines.
: "${KEX_ROUNDS:=3}" "${KEX_LOOPS:=50000}"
[ -n "$TH_TERN" ] || { echo "KEX-ERROR tern binary not in the test host"; exit 2; }
date=/usr/bin/date  # coreutils (run.sh --bin): busybox date has no %N
case "$($date +%N)" in *[!0-9]* | "") echo "KEX-ERROR $date has no %N"; exit 2 ;; esac
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
summary=0
one() {  # one ROUND MODE KIND LOOPS
    flag=""
    [ "$2" = on ] && flag=--kernel-exits
    t0=$($date +%s%N)
    timeout -s KILL 300 "$TH_TERN" run --kernel "/kex/$3-$4.elf" --memory 64M --cpus 1 \
        --stats-on-exit $flag </dev/null >/tmp/kex.out 2>&1
    rc=$?
    t1=$($date +%s%N)
    row=cpuid
    [ "$3" = pio ] && row=io
    counted=-1
    if [ "$2" = on ]; then
        counted=$(sed -n '/in-kernel exits by reason/,/sum /p' /tmp/kex.out |
            awk -v r="$row" '$1 == r { print $2; f = 1 } END { if (!f) print 0 }')
        if [ "$summary" = 0 ] && [ "$4" != 0 ]; then
            summary=1
            tr -d '\r' </tmp/kex.out | sed 's/^/KEX-SUMMARY /'
        fi
    fi
    echo "KEX-BENCH round=$1 mode=$2 kind=$3 loops=$4 wall_ns=$((t1 - t0)) rc=$rc marker=$(grep -c '^K' /tmp/kex.out) counted=$counted"
}
# Warm-up, untimed: the first tern start after L1's boot is slower (page cache, BPF JIT, BTF).
for kind in cpuid pio; do "$TH_TERN" run --kernel "/kex/$kind-0.elf" --memory 64M --cpus 1 --kernel-exits </dev/null >/dev/null 2>&1; done
r=1
while [ "$r" -le "$KEX_ROUNDS" ]; do
    modes="off on"
    [ $((r % 2)) = 0 ] && modes="on off"
    for mode in $modes; do
        for kind in cpuid pio; do
            for n in 0 "$KEX_LOOPS"; do one "$r" "$mode" "$kind" "$n"; done
        done
    done
    r=$((r + 1))
done
echo "KEX-BENCH-DONE"
