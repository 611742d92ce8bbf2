#!/bin/sh
# Runs inside the test host (L1), started by bench/boot/run.sh. Boots the stock kernel + guest
# initramfs (256 MiB, 1 vCPU) $BENCH_RUNS times with each VMM in $BENCH_VMMS (tern, qemu-microvm,
# qemu-pc; round robin), then once more idle per VMM to measure its memory. Prints, for the host:
#   BENCH-SAMPLE vmm=V run=N rc=R marker_ms=M exit_ms=E   (M, E in ms since just before the exec)
#   BENCH-MEM vmm=V vmrss_kb=A guest_ram_rss_kb=B overhead_kb=A-B guest_ram_mappings=K
#   BENCH-ERROR vmm=V what=...                            (a VMM that failed is not retried)
# Timestamps: busybox `ts '%.s'` stamps each output line (µs) as it reads it from the pipe.
: "${BENCH_RUNS:=5}" "${BENCH_VMMS:=tern qemu-microvm qemu-pc}" "${BENCH_TIMEOUT:=120}"
MEM_MIB=256
CMDLINE="console=ttyS0 quiet"
failed=""

# vmm_cmd VMM ACTION: prints the command line that boots the guest with tern.action=ACTION.
vmm_cmd() {
    common="-kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial stdio -no-reboot"
    case "$1" in
        tern) echo "$TH_TERN run --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory ${MEM_MIB}M --cpus 1 --cmdline" ;;
        qemu-microvm) echo "$TH_QEMU -enable-kvm -M microvm -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
        qemu-pc) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
    esac
}

available() {
    case "$1" in tern) [ -n "$TH_TERN" ] ;; qemu-*) [ -n "$TH_QEMU" ] ;; *) false ;; esac
}

for v in $BENCH_VMMS; do
    available "$v" || { echo "BENCH-ERROR vmm=$v what=not included in the test host"; failed="$failed $v"; }
    echo "BENCH-CMD vmm=$v cmd=$(vmm_cmd "$v" poweroff) \"$CMDLINE tern.action=poweroff\""
done

boot_once() {  # boot_once VMM RUN
    out=/tmp/boot-$1-$2.txt
    # shellcheck disable=SC2046  # vmm_cmd's output is split into words on purpose (no spaces in paths)
    { echo BENCH-T0; timeout -s KILL "$BENCH_TIMEOUT" $(vmm_cmd "$1") "$CMDLINE tern.action=poweroff" </dev/null
      echo "BENCH-T1 rc=$?"; } 2>&1 | ts '%.s' >"$out"
    sed 's/^/  /' "$out"
    awk -v v="$1" -v n="$2" '
        $2 == "BENCH-T0" { t0 = $1 }
        /TERN-GUEST-MARKER/ && m == "" { m = $1 }
        $2 == "BENCH-T1" { t1 = $1; rc = substr($3, 4) }
        $2 != "BENCH-T0" && $2 != "BENCH-T1" && $2 != "" { last = $0; sub(/^[^ ]* /, "", last) }
        END {
            ms = (m == "") ? "null" : sprintf("%.1f", (m - t0) * 1000)
            printf "BENCH-SAMPLE vmm=%s run=%s rc=%s marker_ms=%s exit_ms=%.1f\n", v, n, rc, ms, (t1 - t0) * 1000
            if (m == "" || rc != 0) printf "BENCH-ERROR vmm=%s what=run %s: exit status %s, marker %s, last output: %s\n", v, n, rc, (m == "" ? "missing" : "seen"), (last == "" ? "(none)" : last)
        }' "$out" | tee /tmp/sample.txt
    ! grep -q BENCH-ERROR /tmp/sample.txt
}

run=1
while [ "$run" -le "$BENCH_RUNS" ]; do
    for v in $BENCH_VMMS; do
        case " $failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS boot vmm=$v run=$run/$BENCH_RUNS uptime=$(cut -d' ' -f1 /proc/uptime)"
        boot_once "$v" "$run" || failed="$failed $v"
    done
    run=$((run + 1))
done

# Memory of an idle guest: wait for the marker on a fifo (no sleeps), then read /proc/PID/smaps.
# Guest RAM = the mappings named memfd:tern-guest-ram, else the one mapping of exactly 256 MiB
# (QEMU's pc.ram is an anonymous mapping of the RAM size).
for v in $BENCH_VMMS; do
    case " $failed " in *" $v "*) continue ;; esac
    echo "BENCH-PROGRESS idle vmm=$v uptime=$(cut -d' ' -f1 /proc/uptime)"
    fifo=/tmp/console-$v
    mkfifo "$fifo"
    # shellcheck disable=SC2046
    timeout -s KILL "$BENCH_TIMEOUT" $(vmm_cmd "$v") "$CMDLINE tern.action=idle" </dev/null >"$fifo" 2>&1 &
    pid=$!
    exec 3<"$fifo"
    seen=0
    while IFS= read -r line <&3; do
        echo "  $line"
        case "$line" in *TERN-GUEST-MARKER*) seen=1; break ;; esac
    done
    if [ "$seen" = 1 ]; then
        vmrss=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$pid/status")
        awk -v v="$v" -v vmrss="$vmrss" -v ram=$((MEM_MIB * 1024)) '
            /^[0-9a-f]+-[0-9a-f]+ / { name = $6 }
            /^Size:/ { size = $2 }
            /^Rss:/ {
                if (name ~ /tern-guest-ram/) { named += $2; nnamed++ }
                else if (size == ram) { sized += $2; nsized++ }
            }
            END {
                if (nnamed > 0) { g = named; k = nnamed } else { g = sized; k = nsized }
                if (k == 0) { printf "BENCH-ERROR vmm=%s what=no guest RAM mapping found in smaps\n", v; exit }
                printf "BENCH-MEM vmm=%s vmrss_kb=%d guest_ram_rss_kb=%d overhead_kb=%d guest_ram_mappings=%d\n", v, vmrss, g, vmrss - g, k
            }' "/proc/$pid/smaps"
    else
        echo "BENCH-ERROR vmm=$v what=idle guest printed no marker"
    fi
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    cat <&3 >/dev/null
    exec 3<&-
    rm -f "$fifo"
done
exit 0
