#!/bin/sh
# shellcheck disable=SC2154  # deb_* results are set by testhost/debian_lib.sh
# Runs inside the test host (L1), started by bench/boot/run.sh. Two rows of boots, each in
# interleaved rounds (round r boots every VMM of the row once): first the busybox rounds and the
# idle-memory boots, then the Debian warm-up and rounds.
#  busybox  the stock kernel + guest initramfs (256 MiB, 1 vCPU) with each VMM in $BENCH_VMMS:
#           tern (its default boot path), tern-pvh / tern-bzimage (`--boot-protocol pvh|bzimage`),
#           qemu-microvm, qemu-pc; $BENCH_RUNS rounds; then once more idle per VMM for its memory.
#  debian   the Debian image (images/debian, L1's /dev/vda) with Debian's kernel + initrd, root on
#           virtio-blk (cache=writeback), $BENCH_DEBIAN_CPUS vCPUs, $BENCH_DEBIAN_MEM MiB, under each
#           of $BENCH_DEBIAN_VMMS: tern, tern-pvh, tern-bzimage, qemu (-M pc, testhost/debian_lib.sh).
#           One untimed warm-up boot first (the image's first boot commits the machine id, and
#           L1's page cache gets the disk's blocks, for every timed boot alike). Each boot ends with
#           `systemctl poweroff` at the autologin shell, so the next one finds a clean filesystem.
#           In round 1 the guest's systemd-analyze, critical-chain and blame (top 10) are captured.
# Lines for the host (times in ms since just before the VMM's exec; busybox `ts '%.s'` stamps each
# console line as it reads it from the pipe, µs):
#   BENCH-CMD vmm=V cmd=...  /  BENCH-DEBIAN-CMD vmm=V cmd=...
#   BENCH-SAMPLE vmm=V run=N rc=R marker_ms=M exit_ms=E
#   BENCH-MEM vmm=V vmrss_kb=A guest_ram_rss_kb=B overhead_kb=A-B guest_ram_mappings=K
#   BENCH-DEBIAN-MARK vmm=V run=N            (right after the marker was seen: the CPU stamp's end)
#   BENCH-DEBIAN-SAMPLE vmm=V run=N rc=R marker_ms=M login_ms=L exit_ms=E guest_uptime_s=U state=S failed=F
#       marker: TERN-DEBIAN-MARKER (systemctl is-system-running --wait returned: multi-user reached
#       and no job left); login: agetty's "login: root (automatic login)" line; exit: the VMM's
#       exit after `systemctl poweroff` (polled, ±0.1 s); guest_uptime_s: the marker's uptime field
#   BENCH-DEBIAN-ANALYZE vmm=V what=time|chain|blame line=...
#   BENCH-DEBIAN-VMMSTATS vmm=V run=N line=...     (tern's --stats-on-exit, its stderr)
#   BENCH-ERROR vmm=V what=...                     (a VMM that failed is not retried)
#   BENCH-EXITS vmm=V run=N code=C count=K       (the hist trigger's rows for one untimed boot: SVM code)
#   BENCH-EXITS-TOTAL vmm=V run=N rc=R hist_total=T
#   BENCH-EXITS-TERN vmm=V run=N sum=S kvm_exits=K (tern's --kernel-exits reconciliation line)
#   BENCH-PROGRESS boot|debian|idle|warmup|exits ...
: "${BENCH_RUNS:=5}" "${BENCH_VMMS:=tern qemu-microvm qemu-pc}" "${BENCH_TIMEOUT:=120}"
: "${BENCH_DEBIAN_ROUNDS:=0}" "${BENCH_DEBIAN_VMMS:=tern qemu}" "${BENCH_DEBIAN_CPUS:=2}" "${BENCH_DEBIAN_MEM:=512}"
: "${BENCH_DEBIAN_TIMEOUT:=600}" "${BENCH_DEBIAN_WARMUP:=1}" "${BENCH_DEBIAN_ANALYZE:=1}"
MEM_MIB=256
CMDLINE="console=ttyS0 quiet"
failed=""
up() { cut -d' ' -f1 /proc/uptime; }

# tern_proto VMM: tern's --boot-protocol words for a tern row (none for plain "tern").
tern_proto() {
    case "$1" in tern-*) echo "--boot-protocol ${1#tern-}" ;; esac
}

# vmm_cmd VMM: prints the command line that boots the busybox guest (the kernel command line follows).
vmm_cmd() {
    common="-kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial stdio -no-reboot"
    case "$1" in
        tern | tern-*) echo "$TH_TERN run $(tern_proto "$1") --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory ${MEM_MIB}M --cpus 1 --cmdline" ;;
        qemu-microvm) echo "$TH_QEMU -enable-kvm -M microvm -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
        qemu-pc) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
    esac
}

available() {
    case "$1" in tern | tern-*) [ -n "$TH_TERN" ] ;; qemu*) [ -n "$TH_QEMU" ] ;; *) false ;; esac
}

for v in $BENCH_VMMS; do
    if [ -z "$(vmm_cmd "$v")" ] || ! available "$v"; then
        echo "BENCH-ERROR vmm=$v what=not a busybox row this scenario knows, or not included in the test host"
        failed="$failed $v"
        continue
    fi
    echo "BENCH-CMD vmm=$v cmd=$(vmm_cmd "$v") \"$CMDLINE tern.action=poweroff\""
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

# ---- the Debian row -------------------------------------------------------------------------
deb_failed=""
if [ "$BENCH_DEBIAN_ROUNDS" -gt 0 ]; then
    # shellcheck source=testhost/debian_lib.sh
    . /testhost/debian_lib.sh
    # shellcheck disable=SC2034  # read by debian_lib.sh
    DEB_POLL=1  # the times come from ts's stamps, not from the polls: each poll forks (L1 is TCG)
    # _deb_launch (replaces debian_lib.sh's): the same files, but the console goes through a FIFO
    # to tee (NAME.out, raw and unbuffered: prompts without a newline are there at once) and ts
    # (NAME.ts: each complete line stamped as ts reads it; written out at the end). NAME.t0 is stamped by the same ts just before the exec.
    # shellcheck disable=SC2317  # called by deb_start
    _deb_launch() {
        n="$1"
        shift
        rm -f "/tmp/$n.out" "/tmp/$n.err" "/tmp/$n.in" "/tmp/$n.sock" "/tmp/$n.ts" "/tmp/$n.pipe"
        mkfifo "/tmp/$n.in" "/tmp/$n.pipe"
        echo 0 >"/tmp/$n.mark"
        : >"/tmp/$n.out"
        echo "$*" >"/tmp/$n.cmd"
        tee "/tmp/$n.out" <"/tmp/$n.pipe" | ts '%.s' >"/tmp/$n.ts" &
        deb_reader=$!
        echo BENCH-T0 | ts '%.s' >"/tmp/$n.t0"
        "$@" >"/tmp/$n.pipe" 2>"/tmp/$n.err" <>"/tmp/$n.in" &
        deb_pid=$!
        echo "$deb_pid" >"/tmp/$n.pid"
    }
    deb_vmm() { case "$1" in tern | tern-*) echo tern ;; *) echo "$1" ;; esac; }
    deb_available() {
        case "$1" in tern | tern-*) [ -n "$TH_TERN" ] ;; qemu) [ -n "$TH_QEMU" ] ;; *) false ;; esac
    }
    if [ -z "$TH_DEBIAN_INITRD" ]; then
        echo "BENCH-ERROR vmm=debian what=no Debian initrd in the test host (run.sh --with-debian-initrd)"
        BENCH_DEBIAN_ROUNDS=0
    elif ! l1_wait_for 20 test -b /dev/vda; then
        echo "BENCH-ERROR vmm=debian what=no /dev/vda in the test host (run.sh --disk IMG, the virtio modules)"
        BENCH_DEBIAN_ROUNDS=0
    fi
    for v in $BENCH_DEBIAN_VMMS; do
        deb_available "$v" || { echo "BENCH-ERROR vmm=debian-$v what=not a Debian row this scenario knows, or not in the test host"; deb_failed="$deb_failed $v"; }
    done
fi
DEB_DISK="path=/dev/vda,cache=writeback"

# stamp_of FILE ERE: the ts stamp of FILE's first line matching ERE ("" if none).
stamp_of() { tr -d '\r' <"$1" | grep -aE "$2" | head -n 1 | cut -d' ' -f1; }
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "null"; else printf "%.1f", (b - a) * 1000 }'; }

# deb_analyze NAME VMM: systemd-analyze, critical-chain and blame (top 10) from the guest's shell.
deb_analyze() {
    deb_cmd "$1" 60 "export SYSTEMD_COLORS=0 SYSTEMD_PAGER=cat COLUMNS=160" || return 1
    for what in time chain blame; do
        case "$what" in
            time) c="systemd-analyze" ;; chain) c="systemd-analyze critical-chain" ;;
            blame) c="systemd-analyze blame | head -n 10" ;;
        esac
        deb_cmd "$1" 600 "$c" || { echo "BENCH-ERROR vmm=debian-$2 what=$c: no status within 600 s"; return 1; }
        echo "$deb_out" | grep -av 'TERN-DEB-RC' | grep -av "^root@" | grep -av "printf '" | grep -av '^ *$' |
            sed "s/^/BENCH-DEBIAN-ANALYZE vmm=$2 what=$what line=/"
    done
}

# deb_boot VMM RUN (RUN 0: the warm-up, nothing reported but errors).
deb_boot() {
    v="$1" r="$2" n="deb"
    # shellcheck disable=SC2034  # DEB_TERN_ARGS: read by deb_start
    case "$v" in tern | tern-*) DEB_TERN_ARGS="--stats-on-exit $(tern_proto "$v")" ;; *) DEB_TERN_ARGS="" ;; esac
    deb_start "$n" "$(deb_vmm "$v")" "$BENCH_DEBIAN_CPUS" "$BENCH_DEBIAN_MEM" "$DEB_DISK" || return 1
    [ "$r" != 1 ] || echo "BENCH-DEBIAN-CMD vmm=$v cmd=$(cat "/tmp/$n.cmd")"
    ok=0
    # Seen in NAME.out (tee writes through at once; ts buffers its output until the VMM's exit:
    # the stamps are read from NAME.ts only then).
    if l1_wait_pid_every 1 "$deb_pid" "$BENCH_DEBIAN_TIMEOUT" l1_has "/tmp/$n.out" 'TERN-DEBIAN-MARKER .*uptime='; then
        ok=1
        [ "$r" = 0 ] || echo "BENCH-DEBIAN-MARK vmm=$v run=$r"
        if deb_prompt "$n" 120; then
            [ "$r" != 1 ] || [ "$BENCH_DEBIAN_ANALYZE" != 1 ] || deb_analyze "$n" "$v"
            deb_type "$n" "systemctl poweroff"
        else
            echo "BENCH-ERROR vmm=debian-$v what=run $r: no shell prompt within 120 s of the marker"
            deb_stop "$n" >/dev/null
        fi
    else
        echo "BENCH-ERROR vmm=debian-$v what=run $r: no TERN-DEBIAN-MARKER within ${BENCH_DEBIAN_TIMEOUT}s: $(deb_show "$n" | tail -n 5 | tr '\n' ' ')"
        kill "$deb_pid" 2>/dev/null
    fi
    deb_wait_exit "$n" 180
    rc=$?
    echo BENCH-T1 | ts '%.s' >"/tmp/$n.t1"
    wait "$deb_reader" 2>/dev/null
    tr -d '\r' <"/tmp/$n.ts" | sed "s/^/  deb-$v-$r: /"
    [ "$r" != 0 ] || { [ "$ok" = 1 ] && return 0; return 1; }
    t0=$(cut -d' ' -f1 "/tmp/$n.t0") t1=$(cut -d' ' -f1 "/tmp/$n.t1")
    tm=$(stamp_of "/tmp/$n.ts" 'TERN-DEBIAN-MARKER .*uptime=')
    tl=$(stamp_of "/tmp/$n.ts" 'login: root \(automatic login\)|login: *$')
    mline=$(tr -d '\r' <"/tmp/$n.ts" | grep -a 'TERN-DEBIAN-MARKER .*uptime=' | head -n 1 | sed 's/.*TERN-DEBIAN-MARKER /TERN-DEBIAN-MARKER /')
    echo "BENCH-DEBIAN-SAMPLE vmm=$v run=$r rc=$rc marker_ms=$(ms_between "$t0" "$tm") login_ms=$(ms_between "$t0" "$tl") exit_ms=$(ms_between "$t0" "$t1") guest_uptime_s=$(l1_field "$mline" uptime) state=$(l1_field "$mline" state) failed=$(l1_field "$mline" failed)"
    case "$v" in tern | tern-*) grep -v '^ *$' "/tmp/$n.err" | sed "s/^/BENCH-DEBIAN-VMMSTATS vmm=$v run=$r line=/" ;; esac
    [ "$ok" = 1 ] && [ "$rc" = 0 ]
}

run=1
while [ "$run" -le "$BENCH_RUNS" ]; do
    for v in $BENCH_VMMS; do
        case " $failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS boot vmm=$v run=$run/$BENCH_RUNS uptime=$(up)"
        boot_once "$v" "$run" || failed="$failed $v"
    done
    run=$((run + 1))
done

# Memory of an idle guest: wait for the marker on a fifo (no sleeps), then read /proc/PID/smaps.
# Guest RAM = the mappings named memfd:tern-guest-ram, else the one mapping of exactly 256 MiB
# (QEMU's pc.ram is an anonymous mapping of the RAM size).
for v in $BENCH_VMMS; do
    case " $failed " in *" $v "*) continue ;; esac
    echo "BENCH-PROGRESS idle vmm=$v uptime=$(up)"
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

# ---- in-kernel exits by reason per boot (issue 15): $BENCH_EXITS_ROUNDS untimed busybox boots per
# VMM after the timed ones (the accounting costs time per exit: the timed boots run without it).
# The test host's own reader, for every VMM alike: a hist trigger on kvm:kvm_exit keyed by
# exit_reason around the boot (nothing else runs KVM in L1: host-wide = this VMM's VM). tern
# also runs with --kernel-exits --stats-on-exit, its own count (its summary's reconciliation line).
: "${BENCH_EXITS_ROUNDS:=$BENCH_RUNS}"
tfs=/sys/kernel/tracing
[ -d "$tfs/events" ] || mount -t tracefs nodev "$tfs" 2>/dev/null
trig="$tfs/events/kvm/kvm_exit/trigger"
spec="hist:keys=exit_reason:size=256"
if [ "$BENCH_EXITS_ROUNDS" -gt 0 ] && ! [ -w "$trig" ]; then
    echo "BENCH-ERROR vmm=exits what=no kvm:kvm_exit trigger file in the test host (tracefs)"
    BENCH_EXITS_ROUNDS=0
fi
run=1
while [ "$run" -le "$BENCH_EXITS_ROUNDS" ]; do
    for v in $BENCH_VMMS; do
        case " $failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS exits vmm=$v run=$run/$BENCH_EXITS_ROUNDS uptime=$(up)"
        cmd="$(vmm_cmd "$v")"
        case "$v" in tern | tern-*) cmd="$TH_TERN run --kernel-exits --stats-on-exit ${cmd#"$TH_TERN run "}" ;; esac
        echo "$spec" >"$trig"
        # shellcheck disable=SC2086  # cmd is split into words on purpose (no spaces in paths)
        timeout -s KILL "$BENCH_TIMEOUT" $cmd "$CMDLINE tern.action=poweroff" </dev/null >/tmp/exits.out 2>&1
        rc=$?
        awk -v v="$v" -v n="$run" -v rc="$rc" '
            /^\{ exit_reason:/ { c = $3; k = $6; printf "BENCH-EXITS vmm=%s run=%s code=%s count=%s\n", v, n, c, k; t += k }
            END { printf "BENCH-EXITS-TOTAL vmm=%s run=%s rc=%s hist_total=%d\n", v, n, rc, t }' "$tfs/events/kvm/kvm_exit/hist"
        echo "!$spec" >"$trig"
        tr -d '\r' </tmp/exits.out | grep -E '^ *sum [0-9]+ = KVM exits' | head -n 1 |
            awk -v v="$v" -v n="$run" '{ printf "BENCH-EXITS-TERN vmm=%s run=%s sum=%s kvm_exits=%s\n", v, n, $2, $6 }'
        grep -q TERN-GUEST-MARKER /tmp/exits.out || echo "BENCH-ERROR vmm=$v what=exits run $run: no marker (rc $rc)"
    done
    run=$((run + 1))
done

# ---- then the Debian rounds (after every busybox boot: a Debian boot leaves L1's memory full of
# page cache, and the busybox boots right after one were slower by seconds before the guest's
# kernel started, seen for tern in the validation run)
if [ "$BENCH_DEBIAN_ROUNDS" -gt 0 ] && [ "$BENCH_DEBIAN_WARMUP" = 1 ]; then
    # QEMU boots the warm-up when it is a row (the reference VMM), else the first row.
    case " $BENCH_DEBIAN_VMMS " in *" qemu "*) warm=qemu ;; *) warm=$BENCH_DEBIAN_VMMS ;; esac
    for v in $warm; do
        case " $deb_failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS warmup vmm=debian-$v (untimed first boot of the image) uptime=$(up)"
        deb_boot "$v" 0 || echo "BENCH-ERROR vmm=debian-$v what=the warm-up boot failed"
        break
    done
fi

run=1
while [ "$run" -le "$BENCH_DEBIAN_ROUNDS" ]; do
    for v in $BENCH_DEBIAN_VMMS; do
        case " $deb_failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS debian vmm=$v run=$run/$BENCH_DEBIAN_ROUNDS uptime=$(up)"
        deb_boot "$v" "$run" || { echo "BENCH-ERROR vmm=debian-$v what=run $run failed"; deb_failed="$deb_failed $v"; }
    done
    run=$((run + 1))
done
exit 0
