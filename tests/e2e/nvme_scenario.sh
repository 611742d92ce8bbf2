#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/nvme_test.sh through testhost/run.sh. Guest
# actions in tests/e2e/nvme_guest/actions/; VM helpers in nvme_vm.sh (tern, or QEMU's nvme device
# with NVME_VMM=qemu). Prints one line per check:  NVME-CHECK name=<check> PASS|FAIL <detail>
# and re-prints the hostile driver's TERN-NVME-ST / TERN-NVME-DATA lines (nvme_test.sh judges them).
# Images live on L1's tmpfs (discard punches holes there); L1 checks them afterwards.
# "rw" (2 vCPUs; actions/nvme-rw): /dev/nvme0n1 has the image's size and 2 hardware queues; ext4,
#   64 MiB from L1's random data (half from each vCPU) read back; fstrim after deleting another
#   16 MiB file: the image's allocated blocks drop; a controller reset through sysfs, after which
#   the data reads back and new writes work; both I/O queues took interrupts; tern's counters
#   show commands on 2 I/O queues and the reset; clean unmount. Then, in the same VM, two writers
#   on the raw namespace past the file system, one per vCPU; the VM is paused, saved and SIGKILLed
#   in the middle, restored (tern only: QEMU 7.2 does not migrate an nvme device); the writers go
#   on, the guest reads back what their last passes wrote, and so does L1 from the image; e2fsck
#   -fn, the files' bytes.
# "intx" (1 vCPU, pci=nomsi; actions/nvme-intx): the controller's INTx line with shadow doorbells
#   on: 8 MiB written (O_DIRECT, fsync) and read back on the raw namespace; the guest's IRQ is an
#   IO-APIC line (no MSI), its kernel saw no "nobody cared" and no NVMe timeout, and tern shows
#   shadow doorbells enabled.
# "hostile" (actions/nvme-hostile): the user-space driver of tests/e2e/hostile_nvme/; afterwards
#   the VM runs, its virtio disk works, the nvme driver bound again reads the namespace, the image
#   holds what the driver wrote; tern counted the invalid doorbells.
# NVME_CASES (default all) runs only the cases it lists.
: "${NVME_WAIT:=240}" "${NVME_VMM:=tern}" "${NVME_CASES:=rw intx hostile}"
T="$TH_TERN"
fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "NVME-CHECK name=$1 PASS $3"; else echo "NVME-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
}
for tool in e2fsck debugfs jq curl; do
    command -v $tool >/dev/null || { check setup 1 "$tool not in the test host"; exit 2; }
done
if [ "$NVME_VMM" = qemu ]; then
    [ -n "$TH_QEMU" ] || { check setup 1 "QEMU not in the test host (--with-qemu)"; exit 2; }
else
    [ -n "$T" ] || { check setup 1 "tern not in the test host"; exit 2; }
fi
# The test host's clock in whole seconds (the bounds below are in time, not in polls: a poll
# that forks is slow under TCG).
now() { cut -d. -f1 /proc/uptime; }
# wait_every INTERVAL SECONDS COMMAND...: poll every INTERVAL s until COMMAND succeeds.
wait_every() {
    every=$1 end=$(($(now) + $2)); shift 2
    while :; do
        "$@" && return 0
        [ "$(now)" -lt "$end" ] || return 1
        sleep "$every"
    done
}
wait_for() { wait_every 0.1 "$@"; }  # wait_for SECONDS COMMAND...
# wait_vm SECONDS COMMAND...: wait_for, but gives up as soon as the VM process ($vm_pid) is gone.
wait_vm() {
    end=$(($(now) + $1)); shift
    while :; do
        "$@" && return 0
        kill -0 "$vm_pid" 2>/dev/null || { "$@"; return; }
        [ "$(now)" -lt "$end" ] || return 1
        sleep 0.1
    done
}
# wait_exit PID SECONDS: the process's exit status once it ended (bounded; killed after SECONDS).
wait_exit() {
    wait_for "$2" sh -c "! kill -0 $1 2>/dev/null" || { echo "NVME-INFO pid $1 still running after $2 s: killed"; kill -9 "$1"; }
    wait "$1"
}
# The complete lines of FILE (a console file being written: a line without its newline yet is
# left out, so a check never reads half a line).
complete() {
    local d
    d="$(cat "$1" 2>/dev/null; echo .)"
    d="${d%.}"
    if [[ "$d" == *$'\n' ]]; then printf '%s' "$d"
    elif [[ "$d" == *$'\n'* ]]; then printf '%s\n' "${d%$'\n'*}"
    fi
}
has() { complete "$1" | grep -aq "$2"; }
lines() { complete "$1" | grep -a "$2" | tr -d '\r'; }  # lines FILE PATTERN
line() { lines "$@" | head -n 1; }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }  # field LINE KEY
md5() { md5sum "$1" | cut -d' ' -f1; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
stage() { echo "NVME-INFO $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
api() {  # api SOCK METHOD PATH [BODY] -> "<body> <status>"
    curl -s -m 30 --unix-socket "$1" -X "$2" -w ' %{http_code}' -H 'Content-Type: application/json' \
        ${4:+-d "$4"} "http://localhost$3"
}
show() {  # show NAME: a VM's TERN- lines (no chunks) and its last other console / stderr lines
    { grep -a '^TERN-' "/tmp/$1.out" | grep -v '^TERN-NVME-CHUNK' | tail -n 40; grep -av '^TERN-' "/tmp/$1.out" | tail -n 5
      tail -n 8 "/tmp/$1.err"; } 2>/dev/null | tr -d '\r' | sed "s/^/  $1: /"
}
want_case() { case " $NVME_CASES " in *" $1 "*) return 0 ;; esac; return 1; }
tern_only() { [ "$NVME_VMM" != qemu ]; }
# guest_at NAME PATTERN: waits (bounded, while the VM lives) for a console line, or an error line.
guest_at() { wait_vm "$NVME_WAIT" has "/tmp/$1.out" "$2\|^TERN-NVME-ERROR"; has "/tmp/$1.out" "$2"; }
vm_done() {  # vm_done: the VM's exit status once it ended on its own (bounded)
    wait_vm "$NVME_WAIT" sh -c "! kill -0 $vm_pid 2>/dev/null"
    wait_exit "$vm_pid" 10
}
CMD="console=ttyS0 quiet"
. /testhost/nvme_vm.sh
stage "vmm=$NVME_VMM cases=$NVME_CASES"

# L1's data, generated once: the guests copy it from a read-only virtio disk (serial tern-src).
dd if=/dev/urandom of=/tmp/src.img bs=1M count=64 2>/dev/null
src_sha=$(sha /tmp/src.img)
src4_sha=$(head -c 4194304 /tmp/src.img | sha256sum | cut -d' ' -f1)

if want_case rw; then
    stage rw
    rm -f /tmp/rw.img
    truncate -s 257M /tmp/rw.img
    start_vm rw 2 "tern.action=nvme-rw tern.nvme_mib=64" /tmp/rw.img /tmp/src.img tern-src ro
    guest_at rw '^TERN-NVME-WAIT at=trim-before'
    check rw-guest-written $? "$(line /tmp/rw.out '^TERN-NVME-\(WRITTEN\|ERROR\)')"
    l=$(line /tmp/rw.out '^TERN-NVME-INFO')
    ok=1; [ "$(field "$l" size_bytes)" = "$(stat -c %s /tmp/rw.img)" ] && ok=0
    check rw-namespace-size "$ok" "${l:-no TERN-NVME-INFO line} (image: $(stat -c %s /tmp/rw.img) bytes)"
    ok=1; [ "$(field "$l" mq)" = 2 ] && [ "$(field "$l" nproc)" = 2 ] && ok=0
    check rw-two-hw-queues "$ok" "mq=$(field "$l" mq) nproc=$(field "$l" nproc) (want 2 and 2)"
    b=$(line /tmp/rw.out '^TERN-NVME-IRQ tag=before') a=$(line /tmp/rw.out '^TERN-NVME-IRQ tag=after')
    for q in q1 q2; do
        d=$(($(field "$a" $q | grep . || echo 0) - $(field "$b" $q | grep . || echo 0)))
        check "rw-$q-interrupts" "$([ "$d" -gt 0 ]; echo $?)" "$q: $d interrupts during the writes [$b] [$a]"
    done
    w=$(line /tmp/rw.out '^TERN-NVME-WRITTEN')
    check rw-readback "$([ "$(field "$w" sha256)" = "$src_sha" ]; echo $?)" "${w:-no TERN-NVME-WRITTEN line} (L1's data: $src_sha)"
    blocks0=$(stat -c %b /tmp/rw.img)
    vm_send rw go
    guest_at rw '^TERN-NVME-WAIT at=trim-after'
    blocks1=$(stat -c %b /tmp/rw.img)
    t=$(line /tmp/rw.out '^TERN-NVME-TRIM')
    # 80 MiB written, 16 MiB deleted and trimmed: at least 12 MiB (24576 sectors) must be freed.
    ok=1; [ "$(field "$t" rc)" = 0 ] && [ "$blocks0" -ge 163840 ] && [ $((blocks0 - blocks1)) -ge 24576 ] && ok=0
    check rw-fstrim-discards "$ok" "${t:-no TERN-NVME-TRIM line}; image allocated 512-byte blocks: $blocks0 before, $blocks1 after"
    tern_only && s1=$(vm_stats rw) && echo "NVME-INFO rw stats before the reset: $s1"
    vm_send rw go
    guest_at rw '^TERN-NVME-WAIT at=reset-after'
    r=$(line /tmp/rw.out '^TERN-NVME-RESET')
    check rw-reset-live "$([ "$(field "$r" state)" = live ]; echo $?)" "${r:-no TERN-NVME-RESET line} $(line /tmp/rw.out '^TERN-NVME-ERROR')"
    r=$(line /tmp/rw.out '^TERN-NVME-AFTER-RESET')
    ok=1; [ "$(field "$r" sha256)" = "$src_sha" ] && [ "$(field "$r" after)" = "$src4_sha" ] && ok=0
    check rw-io-after-reset "$ok" "${r:-no TERN-NVME-AFTER-RESET line} (want $src_sha, $src4_sha)"
    if tern_only; then
        s2=$(vm_stats rw)
        echo "NVME-INFO rw stats after the reset: $s2"
        r1=$(stat_of "$s1" controller_resets) r2=$(stat_of "$s2" controller_resets)
        ok=1; [ -n "$r1" ] && [ -n "$r2" ] && [ "$r2" -gt "$r1" ] && ok=0
        check rw-counts-reset "$ok" "controller_resets $r1 before the guest's reset, $r2 after"
        n=$(io_queues_used "$s2")
        check rw-commands-on-2-io-queues "$([ "${n:-0}" -ge 2 ]; echo $?)" "I/O queues with requests > 0: ${n:-none}; $(echo "$s2" | jq -c '[.queues[] | {index, requests, kicks, interrupts}]' 2>&1)"
    fi
    vm_send rw go
    guest_at rw '^TERN-NVME-UNMOUNTED'
    check rw-unmounted $? "$(line /tmp/rw.out '^TERN-NVME-\(UNMOUNTED\|ERROR\)')"
    # The snapshot phase (the raw MiB 224-255): both writers under way, then save and restore.
    both_writing() { has /tmp/rw.out '^TERN-NVME-CHUNK w=0 p=0 i=3 ' && has /tmp/rw.out '^TERN-NVME-CHUNK w=1 p=0 i=19 '; }
    wait_vm "$NVME_WAIT" both_writing
    check snap-writers-running $? "$(lines /tmp/rw.out '^TERN-NVME-\(CHUNK\|ERROR\)' | tail -n 2 | tr '\n' ' ')"
    cname=rw
    if tern_only; then
        stage "rw saving"
        vm_save rw
        check snap-save "$saved" "$save_detail"
        stage "rw restoring"
        n0=$(lines /tmp/rw.out '^TERN-NVME-CHUNK' | wc -l)
        vm_restore rw rwr
        check snap-restored "$restored" "$restore_detail"
        cname=rwr
        vm_send rwr go
    else
        echo "NVME-SKIP snap-save: QEMU 7.2 refuses to migrate a VM with an nvme device (query-migrate: \"non-migratable device: .../nvme\"); the writers are checked without it"
        vm_send rw go
    fi
    guest_at "$cname" '^TERN-NVME-SNAP-DONE'
    l=$(line "/tmp/$cname.out" '^TERN-NVME-SNAP-DONE')
    ok=1; [ "$(field "$l" go)" = go ] && [ -n "$(field "$l" expected)" ] && [ "$(field "$l" reread)" = "$(field "$l" expected)" ] &&
        [ "$(field "$l" failed)" = 0 ] && ok=0
    check snap-guest-data "$ok" "${l:-no TERN-NVME-SNAP-DONE line} $(line "/tmp/$cname.out" '^TERN-NVME-ERROR')"
    if tern_only; then
        n1=$(lines /tmp/rwr.out '^TERN-NVME-CHUNK' | wc -l)
        check snap-io-after-restore "$([ "$n1" -gt 0 ]; echo $?)" "$n0 chunks written before the save, $n1 after the restore"
    fi
    vm_done
    st=$?
    check rw-vm-exit "$st" "exit status $st at the guest's poweroff; $(tail -c 300 /tmp/rw.err /tmp/rwr.err 2>/dev/null | tr '\n' ' ')"
    out=$(e2fsck -fn /tmp/rw.img 2>&1)
    check rw-e2fsck $? "e2fsck -fn: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
    for f in data after; do
        want=$src_sha; [ $f = data ] || want=$src4_sha
        got=$(debugfs -R "cat /$f" /tmp/rw.img 2>/dev/null | sha256sum | cut -d' ' -f1)
        check "rw-image-$f" "$([ "$got" = "$want" ]; echo $?)" "/$f in the image: sha256 $got (want $want)"
    done
    # What the writers' last passes wrote, rebuilt from L1's data, against the image.
    p0=$(field "$l" last0) p1=$(field "$l" last1)
    rm -f /tmp/expected
    i=0
    while [ $i -lt 32 ] && [ -n "$p0" ] && [ -n "$p1" ]; do
        p=$p0; [ $i -lt 16 ] || p=$p1
        dd if=/tmp/src.img of=/tmp/expected bs=1M skip=$(((i + p) % 32)) seek=$i count=1 conv=notrunc 2>/dev/null
        i=$((i + 1))
    done
    want=$(md5 /tmp/expected 2>/dev/null) got=$(dd if=/tmp/rw.img bs=1M skip=224 count=32 2>/dev/null | md5sum | cut -d' ' -f1)
    check snap-image-bytes "$([ -n "$want" ] && [ "$got" = "$want" ]; echo $?)" "the image's MiB 224-255: md5 $got (L1 expects $want for last passes $p0/$p1)"
    show rw
    tern_only && show rwr
    rm -f /tmp/rw.img /tmp/rw.state /tmp/rw.mem /tmp/expected
fi

if want_case intx; then
    stage intx
    rm -f /tmp/intx.img
    truncate -s 16M /tmp/intx.img
    start_vm intx 1 "pci=nomsi tern.action=nvme-intx" /tmp/intx.img /tmp/src.img tern-src ro
    guest_at intx '^TERN-NVME-WAIT at=intx-done'
    l=$(line /tmp/intx.out '^TERN-NVME-INTX-DONE')
    src8=$(head -c 8388608 /tmp/src.img | md5sum | cut -d' ' -f1)
    ok=1; [ "$(field "$l" rc)" = 0 ] && [ "$(field "$l" md5)" = "$src8" ] && [ "$(field "$l" reread)" = "$src8" ] && ok=0
    check intx-readback "$ok" "${l:-no TERN-NVME-INTX-DONE line} (L1's 8 MiB: $src8) $(line /tmp/intx.out '^TERN-NVME-ERROR')"
    l=$(line /tmp/intx.out '^TERN-NVME-INTX irq=')
    ok=1; echo "$l" | grep -q 'IO-APIC.*nvme0q1' && ! echo "$l" | grep -q 'MSI' && ok=0
    check intx-ioapic-line "$ok" "${l:-no TERN-NVME-INTX line} (want nvme0q1 on an IO-APIC line, no MSI)"
    l=$(line /tmp/intx.out '^TERN-NVME-INTX-DMESG')
    ok=1; [ "$(field "$l" nobody_cared)" = 0 ] && [ "$(field "$l" timeouts)" = 0 ] && ok=0
    check intx-no-stuck-line "$ok" "${l:-no TERN-NVME-INTX-DMESG line}"
    if tern_only; then
        s=$(vm_stats intx)
        echo "NVME-INFO intx stats: $s"
        n=$(stat_of "$s" shadow_doorbell_enabled)
        check intx-shadow-doorbells "$([ "${n:-0}" = 1 ]; echo $?)" "shadow_doorbell_enabled=${n:-none} (the driver's Doorbell Buffer Config)"
    fi
    vm_send intx go
    vm_done
    st=$?
    check intx-vm-exit "$st" "exit status $st at the guest's poweroff; $(tail -c 300 /tmp/intx.err 2>/dev/null | tr '\n' ' ')"
    show intx
    rm -f /tmp/intx.img
fi

if want_case hostile; then
    stage hostile
    rm -f /tmp/hostile.img /tmp/plain.img
    truncate -s 64M /tmp/hostile.img
    truncate -s 16M /tmp/plain.img
    dd if=/dev/urandom of=/tmp/hostile.img bs=4096 count=1 conv=notrunc 2>/dev/null
    seed_md5=$(head -c 4096 /tmp/hostile.img | md5sum | cut -d' ' -f1)
    start_vm hostile 1 "tern.action=nvme-hostile" /tmp/hostile.img /tmp/plain.img tern-plain
    guest_at hostile '^TERN-NVME-WAIT at=hostile-done'
    check hostile-driver-ran $? "$(line /tmp/hostile.out '^TERN-NVME-HOSTILE-\(RC\|ERROR\)') $(line /tmp/hostile.out '^TERN-NVME-ERROR')"
    lines /tmp/hostile.out '^TERN-NVME-\(ST\|DATA\|AER\|HOSTILE-\)'
    s=$(line /tmp/hostile.out '^TERN-NVME-HOSTILE-SUMS')
    ok=1; [ "$(field "$s" seed1)" = "$seed_md5" ] && [ "$(field "$s" seed2)" = "$seed_md5" ] && ok=0
    check hostile-reads-seed "$ok" "${s:-no TERN-NVME-HOSTILE-SUMS line} (L1 wrote md5 $seed_md5 to LBA 0-7)"
    check hostile-vm-alive "$(kill -0 "$vm_pid" 2>/dev/null; echo $?)" "the VMM process is running after the hostile driver"
    if tern_only; then
        r=$(api /tmp/hostile.sock GET /)
        check hostile-api-answers "$(case "$r" in *Running*" 200") echo 0 ;; *) echo 1 ;; esac)" "GET /: $r"
        s=$(vm_stats hostile)
        echo "NVME-INFO hostile stats: $s"
        n=$(stat_of "$s" invalid_doorbells) c=$(stat_of "$s" controller_fatal)
        # The driver wrote 6 invalid doorbells: SQ 1 and CQ 1 past their size, SQ 9, CQ 9, SQ 64,
        # the admin SQ past its size.
        ok=1; [ "${n:-0}" -ge 6 ] && ok=0
        check hostile-counts-invalid-doorbells "$ok" "invalid_doorbells=${n:-none} (want >= 6) controller_fatal=${c:-none}"
    fi
    vm_send hostile go
    guest_at hostile '^TERN-NVME-REBIND'
    p=$(line /tmp/hostile.out '^TERN-NVME-PLAIN')
    ok=1; [ -n "$(field "$p" md5)" ] && [ "$(field "$p" md5)" = "$(field "$p" reread)" ] && ok=0
    check hostile-virtio-disk-works "$ok" "${p:-no TERN-NVME-PLAIN line}"
    r=$(line /tmp/hostile.out '^TERN-NVME-REBIND')
    check hostile-rebind-reads "$([ "$(field "$r" md5)" = "$seed_md5" ]; echo $?)" "${r:-no TERN-NVME-REBIND line} (want md5 $seed_md5) $(line /tmp/hostile.out '^TERN-NVME-ERROR')"
    vm_done
    st=$?
    check hostile-vm-exit "$st" "exit status $st at the guest's poweroff; $(tail -c 300 /tmp/hostile.err 2>/dev/null | tr '\n' ' ')"
    s=$(line /tmp/hostile.out '^TERN-NVME-HOSTILE-SUMS')
    got=$(dd if=/tmp/hostile.img bs=4096 skip=256 count=16 2>/dev/null | md5sum | cut -d' ' -f1)
    check hostile-image-pattern "$([ "$got" = "$(field "$s" pattern)" ]; echo $?)" "64 KiB at 1 MiB in the image: md5 $got (the driver wrote $(field "$s" pattern))"
    show hostile
    rm -f /tmp/hostile.img /tmp/plain.img
fi

stage end
echo "NVME-DONE fails=$fails"
exit 0
