#!/bin/sh
# shellcheck disable=SC3045  # busybox ash has read -t with a timeout
# Runs inside the test host (L1), started by bench/snapshot/run.sh. For each guest size in
# $BENCH_SIZES (MiB), $BENCH_RUNS times, and each mode in $BENCH_VMMS:
#   qemu-default    QEMU 7.2 -M pc: stop, migrate "exec:cat > FILE" at QEMU's default max-bandwidth
#   qemu-unlimited  the same with max-bandwidth raised to 1 TiB/s (no practical limit)
#   tern            tern snapshot --exit (pause, write state + memory files, exit)
# one cycle: boot the stock kernel with /actions/dirty-tick (fills half of RAM with random bytes, then
# prints "TICK n" every ~10 ms), save, then restore in a new process (QEMU: -incoming "exec:cat FILE";
# tern: tern restore --resume) and wait for the first TICK the restored guest prints.
# Snapshot files go to a tmpfs of L1 (/snap): this measures the VMMs, not a disk.
# Prints, for the host:
#   BENCH-PROGRESS snapshot vmm=V size=M run=N/R phase=P uptime=S
#   BENCH-SAVE vmm=V size_mib=M run=N save_wall_ms=A vmm_save_ms=B pause_ms=C save_mib_s=D
#              file_mib=E file_alloc_mib=F max_bandwidth=G [qemu_transferred_mib=H qemu_mbps=I]
#   BENCH-RESTORE vmm=V size_mib=M run=N first_tick_ms=A vmm_running_ms=B status=S tick=T last_tick=L
#   BENCH-ERROR vmm=V size_mib=M run=N what=...       (that cycle's numbers are missing)
# Times (L1's clock):
#   pause_ms        how long the guest stays paused for the save, as the VMM reports it: QEMU's
#                   STOP event to its MIGRATION "completed" event (QEMU's own timestamps; the VM is
#                   stopped for the whole save; query-migrate's "downtime" and "total-time" read 0
#                   for a migration of a stopped VM); tern: "paused P ms" of tern snapshot's last
#                   line (from its pause request to the reply of its power-off request)
#   save_mib_s      guest RAM size / pause_ms
#   vmm_save_ms     QEMU: = pause_ms; tern: "in S s" of that line (writing the files only)
#   save_wall_ms    from just before the save request (QEMU's QMP "stop"; tern snapshot's exec,
#                   so it includes that client's own start) to its end (QEMU's "completed" event
#                   read; tern snapshot's exit)
#   first_tick_ms   from just before the restoring VMM's exec to the first "TICK n" line with n above
#                   the last one seen before the save (busybox ts stamps each line as it reads it, us)
#   vmm_running_ms  QEMU's RESUME event (its timestamp) after that exec; tern: uptime_ms of its
#                   "Running" state event (counted from tern's own start)
: "${BENCH_SIZES:=128 512 1024}" "${BENCH_RUNS:=5}" "${BENCH_VMMS:=qemu-default qemu-unlimited tern}"
: "${BENCH_TIMEOUT:=300}"
SNAP=/snap
SOCK=/tmp/tern-api.sock
QMP=/tmp/qmp
UNLIMITED=1099511627776  # bytes/s (1 TiB/s) for "max-bandwidth"; QEMU 7.2 takes it and reports it back
CMDLINE_BASE="console=ttyS0 quiet loglevel=1 tern.action=dirty-tick"
trap '' PIPE

mkdir -p "$SNAP"
mount -t tmpfs -o size=90% tmpfs "$SNAP" || { echo "BENCH-ERROR vmm=all what=cannot mount a tmpfs on $SNAP"; exit 1; }
echo "BENCH-INFO l1_kernel=$(uname -r) l1_memtotal_kb=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) snap_fs=tmpfs sizes=$(echo "$BENCH_SIZES" | tr " " ,) runs=$BENCH_RUNS vmms=$(echo "$BENCH_VMMS" | tr " " ,)"

# ---- helpers ---------------------------------------------------------------------------------------

# Markers stamped by busybox ts (which stamps a line when it reads it; it buffers its output, so the
# file is complete only after marks_stop).
marks_start() {
    rm -f /tmp/mark.fifo /tmp/marks.log
    mkfifo /tmp/mark.fifo
    ts '%.s' </tmp/mark.fifo >/tmp/marks.log &
    MARK_TS=$!
    sleep 100000 >/tmp/mark.fifo &  # holds the fifo open between markers
    MARK_HOLD=$!
}
mark() { echo "$*" >/tmp/mark.fifo; }
marks_stop() { kill "$MARK_HOLD" 2>/dev/null; wait "$MARK_HOLD" 2>/dev/null; wait "$MARK_TS" 2>/dev/null; }
stamp_of() { awk -v m="$1" '$2 == m { print $1; exit }' /tmp/marks.log; }

# launch NAME CMD...: runs CMD (the VMM) with its console going to /tmp/NAME.log (each line stamped)
# and, live, to fd 3 of this shell. BENCH-T0 is printed just before the exec, BENCH-T1 rc=N after.
launch() {
    name=$1
    shift
    rm -f /tmp/con.fifo /tmp/vmm.pid "/tmp/$name.log"
    mkfifo /tmp/con.fifo
    # shellcheck disable=SC2016  # $$ is the inner shell's pid, which execs timeout, which execs the VMM
    { echo BENCH-T0; sh -c 'echo $$ >/tmp/vmm.pid; exec "$@"' sh timeout -s KILL "$BENCH_TIMEOUT" "$@"
      echo "BENCH-T1 rc=$?"; } </dev/null 2>&1 | tee /tmp/con.fifo | ts '%.s' >"/tmp/$name.log" &
    LAUNCH=$!
    exec 3</tmp/con.fifo
}
# drain FILE: from now on the live console goes to FILE (in the background), this shell lets go of it.
drain() { cat <&3 >"$1" & DRAIN=$!; exec 3<&-; }
vmm_pid() { cat /tmp/vmm.pid 2>/dev/null; }
# finish: kills the VMM if it still runs and waits for its console pipeline (the log is then complete).
finish() {
    p=$(vmm_pid)
    [ -n "$p" ] && kill -KILL "$p" 2>/dev/null
    wait "$LAUNCH" 2>/dev/null
    [ -n "$DRAIN" ] && wait "$DRAIN" 2>/dev/null
    DRAIN=""
}

CR=$(printf '\r')
# read_console: reads one line of fd 3 into $line (CR removed); fails on EOF or after the timeout.
read_console() {
    IFS= read -r -t "$BENCH_TIMEOUT" line <&3 || return 1
    line=${line%"$CR"}
}
# wait_ready: reads the booting guest's console until SNAP-DIRTY-DONE and then a TICK line.
wait_ready() {
    dirty_done=""
    while read_console; do
        case "$line" in
            SNAP-DIRTY-DONE*) dirty_done=${line#SNAP-DIRTY-DONE }; echo "  | $line" ;;
            SNAP-ERROR* | TERN-GUEST-ERROR*) echo "  | $line"; ERR="guest: $line" ;;
            "TICK "*) [ -n "$dirty_done" ] && return 0 ;;
            *BENCH-T1*) ERR="the VMM exited while booting (${line#*BENCH-T1 })"; return 1 ;;
            *) [ -n "$line" ] && echo "  | $line" ;;
        esac
    done
    ERR="no SNAP-DIRTY-DONE and TICK within ${BENCH_TIMEOUT}s (last line: $line)"
    return 1
}
# wait_tick LAST: reads the restored guest's console until a line "TICK n" with n > LAST.
wait_tick() {
    while read_console; do
        case "$line" in
            "TICK "*) [ "${line#TICK }" -gt "$1" ] 2>/dev/null && return 0 ;;
            *BENCH-T1*) ERR="the VMM exited during the restore (${line#*BENCH-T1 })"; return 1 ;;
            *) [ -n "$line" ] && [ "$line" != BENCH-T0 ] && echo "  | $line" ;;
        esac
    done
    ERR="no new TICK within ${BENCH_TIMEOUT}s after the restore (last line: $line)"
    return 1
}
# last_tick LOG: the highest complete "TICK n" in a stamped console log.
last_tick() { awk '{ sub(/\r$/, "") } $2 == "TICK" && $3 ~ /^[0-9]+$/ && $3 + 0 > n { n = $3 + 0 } END { print n + 0 }' "$1"; }

# QMP over two fifos (-chardev pipe, which QEMU opens read-write): commands are written to $QMP.in
# on fd 5, replies and events read from $QMP.out on fd 6. This shell opens both read-write too, so
# nothing blocks, and a command written before QEMU starts waits in the fifo. Events seen go to
# /tmp/qmp-events.txt.
qmp_fifos() {
    qmp_detach
    rm -f "$QMP.in" "$QMP.out" /tmp/qmp-events.txt
    mkfifo "$QMP.in" "$QMP.out"
    : >/tmp/qmp-events.txt
    exec 5<>"$QMP.in" 6<>"$QMP.out"
}
qmp_detach() { exec 5<&- 6<&-; }
qmp_send() { echo "$1" >&5; }
qmp() { qmp_send "$1" && qmp_reply "$1"; }  # qmp JSON: sends one command, prints its reply line
qmp_reply() {  # qmp_reply WHAT: reads the next reply line (fails on an error reply or timeout)
    while IFS= read -r -t "${QMP_T:-$BENCH_TIMEOUT}" qline <&6; do
        case "$qline" in
            *'"return"'*) echo "$qline"; return 0 ;;
            *'"error"'*) echo "$qline"; ERR="QMP $1: $qline"; return 1 ;;
            *'"event"'*) echo "$qline" >>/tmp/qmp-events.txt ;;
        esac
    done
    ERR="QMP $1: no reply"
    return 1
}
qmp_wait_event() {  # qmp_wait_event NAME [TIMEOUT]: waits for an event (seen before, or arriving)
    grep -q "\"event\": \"$1\"" /tmp/qmp-events.txt && return 0
    while IFS= read -r -t "${2:-$BENCH_TIMEOUT}" qline <&6; do
        case "$qline" in *'"event"'*) echo "$qline" >>/tmp/qmp-events.txt ;; esac
        case "$qline" in *"\"event\": \"$1\""*) return 0 ;; esac
    done
    return 1
}
qmp_wait_migration() {  # waits for the MIGRATION event with status completed (0) or failed (1)
    while IFS= read -r -t "$BENCH_TIMEOUT" qline <&6; do
        case "$qline" in *'"event"'*) echo "$qline" >>/tmp/qmp-events.txt ;; esac
        case "$qline" in
            *'"MIGRATION"'*'"completed"'*) return 0 ;;
            *'"MIGRATION"'*'"failed"'*) ERR="migration failed: $qline"; return 1 ;;
        esac
    done
    ERR="migration did not finish within ${BENCH_TIMEOUT}s"
    return 1
}
# event_time NAME [STATUS]: QEMU's timestamp (s since the epoch) of the first such event.
event_time() {
    grep "\"event\": \"$1\"" /tmp/qmp-events.txt | grep "${2:-.}" | head -n 1 |
        sed -n 's/.*"seconds": \([0-9]*\), "microseconds": \([0-9]*\).*/\1 \2/p' | awk '{ printf "%.6f", $1 + $2 / 1e6 }'
}
json_num() { sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" | head -n 1; }  # json_num KEY <JSON: first number
mib_per_s() { awk -v m="$mib" -v t="$1" 'BEGIN { if (t + 0 > 0) printf "%.1f", m / (t / 1000); else print "null" }'; }  # guest MiB / T ms
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "null"; else printf "%.1f", (b - a) * 1000 }'; }
file_mib() { [ -f "$1" ] && awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f", b / 1048576 }' || echo null; }
alloc_mib() { [ -f "$1" ] && du -k "$1" | awk '{ printf "%.1f", $1 / 1024 }' || echo null; }

# qemu_args MIB: the machine (identical for the boot and the restore). store-global-state=off: the
# stream then does not carry the source's run state ("paused", as it is stopped before the migrate),
# so the restoring QEMU starts the guest as soon as the stream is loaded, like tern restore --resume
# (with it, the guest would stay paused until a "cont").
qemu_args() {
    echo "-enable-kvm -M pc -L $TH_QEMU_FW -m ${1}M -smp 1 -kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial stdio -no-reboot -chardev pipe,id=qmp,path=$QMP -mon chardev=qmp,mode=control -global migration.store-global-state=off"
}
tern_has_snapshot() { [ -n "$TH_TERN" ] && "$TH_TERN" snapshot --help >/dev/null 2>&1; }

# ---- one cycle: boot, save, restore ----------------------------------------------------------------

progress() { echo "BENCH-PROGRESS snapshot vmm=$v size=$mib run=$run/$BENCH_RUNS phase=$1 uptime=$(cut -d' ' -f1 /proc/uptime)"; }
fail() { echo "BENCH-ERROR vmm=$v size_mib=$mib run=$run what=$1: $ERR"; finish; qmp_detach; marks_stop; rm -rf "${SNAP:?}"/* "$SOCK"; }

cycle_qemu() {  # cycle_qemu default|unlimited
    cmdline="$CMDLINE_BASE snap.dirty_mib=$((mib / 2))"
    qmp_fifos
    progress boot
    # shellcheck disable=SC2046  # qemu_args is split into words on purpose (no spaces in paths)
    launch boot "$TH_QEMU" $(qemu_args "$mib") -append "$cmdline"
    qmp '{"execute":"qmp_capabilities"}' >/dev/null || { fail boot; return; }
    wait_ready || { fail boot; return; }
    drain /tmp/boot-console.txt
    qmp '{"execute":"migrate-set-capabilities","arguments":{"capabilities":[{"capability":"events","state":true}]}}' >/dev/null || { fail save; return; }
    if [ "$1" = unlimited ]; then
        qmp "{\"execute\":\"migrate-set-parameters\",\"arguments\":{\"max-bandwidth\":$UNLIMITED}}" >/dev/null || { fail save; return; }
    fi
    bw=$(qmp '{"execute":"query-migrate-parameters"}' | json_num max-bandwidth)
    progress save
    mark SAVE-T0
    qmp '{"execute":"stop"}' >/dev/null || { fail save; return; }
    qmp "{\"execute\":\"migrate\",\"arguments\":{\"uri\":\"exec:cat > $SNAP/qemu.mig\"}}" >/dev/null || { fail save; return; }
    qmp_wait_migration || { fail save; return; }
    mark SAVE-T1
    qmp '{"execute":"query-migrate"}' >/tmp/query-migrate.json || { fail save; return; }
    sed 's/^/  | query-migrate: /' /tmp/query-migrate.json
    qmp_wait_event STOP 5
    t_stop=$(event_time STOP) t_done=$(event_time MIGRATION completed)
    qmp '{"execute":"quit"}' >/dev/null
    finish
    qmp_detach
    last=$(last_tick /tmp/boot.log)
    fm=$(file_mib "$SNAP/qemu.mig") am=$(alloc_mib "$SNAP/qemu.mig")

    progress restore
    qmp_fifos
    # QMP sends events only after qmp_capabilities: queue it before QEMU starts, so that the RESUME
    # event of the incoming migration is not lost.
    qmp_send '{"execute":"qmp_capabilities"}'
    # shellcheck disable=SC2046
    launch restore "$TH_QEMU" $(qemu_args "$mib") -append "$cmdline" -incoming "exec:cat $SNAP/qemu.mig"
    if ! wait_tick "$last"; then
        # What QEMU says about it (short timeouts: it may not answer at all).
        QMP_T=5
        qmp_reply qmp_capabilities >/dev/null
        qmp '{"execute":"query-status"}' | sed 's/^/  | query-status: /'
        qmp '{"execute":"query-migrate"}' | sed 's/^/  | query-migrate: /'
        QMP_T=""
        sed 's/^/  | events: /' /tmp/qmp-events.txt
        fail restore
        return
    fi
    drain /dev/null
    resumed=""
    qmp_reply qmp_capabilities >/dev/null || { fail restore; return; }
    qmp_wait_event RESUME 5 && resumed=$(event_time RESUME)
    status=$(qmp '{"execute":"query-status"}' | sed -n 's/.*"status": "\([a-z-]*\)".*/\1/p')
    finish
    qmp_detach
    marks_stop
    t0=$(stamp_of SAVE-T0) t1=$(stamp_of SAVE-T1)
    save_ms=$(ms_between "$t0" "$t1")
    pause=$(ms_between "$t_stop" "$t_done")
    echo "BENCH-SAVE vmm=$v size_mib=$mib run=$run save_wall_ms=$save_ms vmm_save_ms=$pause pause_ms=$pause save_mib_s=$(mib_per_s "$pause") file_mib=$fm file_alloc_mib=$am max_bandwidth=${bw:-null} qemu_transferred_mib=$(json_num transferred </tmp/query-migrate.json | awk '{ printf "%.1f", $1 / 1048576 }') qemu_mbps=$(json_num mbps </tmp/query-migrate.json)"
    restore_line "$(ms_between "$(awk '$2 == "BENCH-T0" { print $1; exit }' /tmp/restore.log)" "$resumed")" "$status"
    rm -rf "${SNAP:?}"/*
}

cycle_tern() {
    cmdline="$CMDLINE_BASE snap.dirty_mib=$((mib / 2))"
    rm -f "$SOCK"
    progress boot
    launch boot "$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --memory "${mib}M" --cpus 1 --api-sock "$SOCK" --cmdline "$cmdline"
    wait_ready || { fail boot; return; }
    drain /tmp/boot-console.txt
    progress save
    mark SAVE-T0
    timeout -s KILL "$BENCH_TIMEOUT" "$TH_TERN" snapshot --api-sock "$SOCK" --state "$SNAP/tern.state" --mem "$SNAP/tern.mem" --exit 2>/tmp/snapshot.err
    src=$?
    mark SAVE-T1
    tr '\r' '\n' </tmp/snapshot.err | grep -v '^$' | tail -n 3 | sed 's/^/  | /'
    [ "$src" = 0 ] || { ERR="tern snapshot exited with $src: $(tr '\r' '\n' </tmp/snapshot.err | grep -v '^$' | tail -n 1)"; fail save; return; }
    # tern exits on its own after --exit: give it 10 s before finish would kill it.
    i=0
    while kill -0 "$(vmm_pid)" 2>/dev/null && [ "$i" -lt 500 ]; do usleep 20000; i=$((i + 1)); done
    finish
    # (the guest's last console line may be cut off: BENCH-T1 can follow it on the same line)
    trc=$(sed -n 's/.*BENCH-T1 \(rc=[0-9]*\).*/\1/p' /tmp/boot.log)
    [ "$trc" = rc=0 ] || echo "BENCH-ERROR vmm=$v size_mib=$mib run=$run what=save: tern run ended with ${trc:-no exit line} after snapshot --exit"
    last=$(last_tick /tmp/boot.log)
    # "tern: snapshot: wrote STATE and MEM: TOTAL MiB (WRITTEN MiB allocated) in S s (R MiB/s), paused P ms"
    done_line=$(tr '\r' '\n' </tmp/snapshot.err | grep 'tern: snapshot: wrote' | tail -n 1)
    vs=$(echo "$done_line" | sed -n 's/.* in \([0-9.]*\) s .*/\1/p')
    pause=$(echo "$done_line" | sed -n 's/.*paused \([0-9.]*\) ms.*/\1/p')
    fm=$(awk -v a="$(file_mib "$SNAP/tern.mem")" -v b="$(file_mib "$SNAP/tern.state")" 'BEGIN { printf "%.1f", a + b }')
    am=$(awk -v a="$(alloc_mib "$SNAP/tern.mem")" -v b="$(alloc_mib "$SNAP/tern.state")" 'BEGIN { printf "%.1f", a + b }')

    progress restore
    rm -f "$SOCK"
    launch restore "$TH_TERN" restore --state "$SNAP/tern.state" --mem "$SNAP/tern.mem" --api-sock "$SOCK" --resume
    wait_tick "$last" || { fail restore; return; }
    drain /dev/null
    # tern's own view: the "Running" state event (GET /tern/events replays the backlog).
    rm -f /tmp/events.txt  # (a stale file from the last cycle would be read before the redirect empties it)
    "$TH_TERN" ctl events --api-sock "$SOCK" >/tmp/events.txt 2>&1 &
    evp=$!
    i=0
    while ! grep -q '"Running"' /tmp/events.txt 2>/dev/null && [ "$i" -lt 500 ]; do usleep 20000; i=$((i + 1)); done
    kill "$evp" 2>/dev/null
    wait "$evp" 2>/dev/null
    sed 's/^/  | events: /' /tmp/events.txt
    running=$(grep '"Running"' /tmp/events.txt | head -n 1 | json_num uptime_ms)
    status=$(grep -q '"Running"' /tmp/events.txt && echo running || echo unknown)
    finish
    marks_stop
    t0=$(stamp_of SAVE-T0) t1=$(stamp_of SAVE-T1)
    save_ms=$(ms_between "$t0" "$t1")
    echo "BENCH-SAVE vmm=$v size_mib=$mib run=$run save_wall_ms=$save_ms vmm_save_ms=$(awk -v s="$vs" 'BEGIN { if (s == "") print "null"; else printf "%.1f", s * 1000 }') pause_ms=${pause:-null} save_mib_s=$(mib_per_s "$pause") file_mib=$fm file_alloc_mib=$am max_bandwidth=null"
    restore_line "${running:-null}" "$status"
    rm -rf "${SNAP:?}"/* "$SOCK"
}

restore_line() {  # restore_line VMM_RUNNING_MS STATUS (uses /tmp/restore.log and $last)
    awk -v v="$v" -v m="$mib" -v n="$run" -v last="$last" -v vr="$1" -v st="$2" '
        { sub(/\r$/, "") }
        $2 == "BENCH-T0" && t0 == "" { t0 = $1 }
        $2 == "TICK" && $3 ~ /^[0-9]+$/ && $3 + 0 > last && tk == "" { tk = $1; tick = $3 }
        END {
            printf "BENCH-RESTORE vmm=%s size_mib=%s run=%s first_tick_ms=%s vmm_running_ms=%s status=%s tick=%s last_tick=%s\n",
                v, m, n, (tk == "" || t0 == "") ? "null" : sprintf("%.1f", (tk - t0) * 1000), vr, st, tick, last
        }' /tmp/restore.log
}

# ---- main --------------------------------------------------------------------------------------------

for v in $BENCH_VMMS; do
    case "$v" in
        qemu-*) [ -n "$TH_QEMU" ] || echo "BENCH-ERROR vmm=$v what=QEMU not included in the test host" ;;
        tern) tern_has_snapshot || echo "BENCH-ERROR vmm=$v what=no tern with a snapshot subcommand in the test host" ;;
        *) echo "BENCH-ERROR vmm=$v what=unknown mode" ;;
    esac
done
echo "BENCH-CMD vmm=qemu cmd=$TH_QEMU $(qemu_args MIB) -append \"$CMDLINE_BASE snap.dirty_mib=MIB/2\"; restore: the same + -incoming \"exec:cat FILE\""
echo "BENCH-CMD vmm=tern cmd=$TH_TERN run --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory MIBM --cpus 1 --api-sock $SOCK --cmdline \"$CMDLINE_BASE snap.dirty_mib=MIB/2\"; $TH_TERN snapshot --api-sock $SOCK --state FILE --mem FILE --exit; $TH_TERN restore --state FILE --mem FILE --api-sock $SOCK --resume"

for mib in $BENCH_SIZES; do
    run=1
    while [ "$run" -le "$BENCH_RUNS" ]; do
        for v in $BENCH_VMMS; do
            ERR="" DRAIN=""
            case "$v" in
                qemu-default | qemu-unlimited) [ -n "$TH_QEMU" ] || continue; marks_start; cycle_qemu "${v#qemu-}" ;;
                tern) tern_has_snapshot || continue; marks_start; cycle_tern ;;
            esac
        done
        run=$((run + 1))
    done
done
echo "BENCH-PROGRESS snapshot done uptime=$(cut -d' ' -f1 /proc/uptime)"
umount "$SNAP"
exit 0
