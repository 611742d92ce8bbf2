#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/snapshot_test.sh through testhost/run.sh.
# Prints one line per check:  SNAP-CHECK name=<check> PASS|FAIL <detail>
# Case 1: a 2-vCPU guest with a counter per vCPU and a disk writer (actions/snap-counter). A save to
#   a full tmpfs and to a missing directory fail and the VM keeps running; the real save (while
#   running) ends tern; every bad restore input is refused with its own message; PUT /snapshot/load
#   into a tern that already has a VM is refused; then `tern restore --resume` continues the guest:
#   counters go on from the saved values, timers tick on both vCPUs, the disk writer's records are
#   all in the image, the console keeps printing. GET /vm/config of the running VM lists its
#   --disk drive, and GET /machine-config after PUT /snapshot/load and after `tern restore` reports
#   the snapshot's 2 vCPUs and 256 MiB (issue #9; case 2's restore: 1 vCPU, 512 MiB).
# Case 2: a 512 MiB guest with 128 MiB random data of which 64 MiB were zeroed (actions/snap-mem):
#   the memory file's allocated blocks stay far below 512 MiB, and the data reads back identical.
# Case 3: a rate-limited save in progress is cancelled by PUT /tern/power-off; no file is left.
# Case 4 (issue #8): a guest with 64 MiB of random data is saved, restored, and the restored VM is
#   SIGKILLed in the middle of a rate-limited save over the same pair: the old pair is unchanged and
#   restores; that VM saves itself to the memory file it is running from (and to the disk image:
#   refused, and so are two spellings of one file); while it runs, restoring its snapshot again is
#   refused naming the disk it has locked; the last restore still has the same MD5.
: "${SNAP_WAIT:=120}"
[ -n "$TH_TERN" ] || { echo "SNAP-CHECK name=setup FAIL tern binary not in the test host"; exit 2; }
command -v curl >/dev/null || { echo "SNAP-CHECK name=setup FAIL curl not in the test host"; exit 2; }
T="$TH_TERN"
fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "SNAP-CHECK name=$1 PASS $3"; else echo "SNAP-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
}
wait_for() {  # wait_for SECONDS COMMAND...: poll every 0.1 s
    n=$(($1 * 10)); shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
# last_n FILE CPU: the last counter value vCPU CPU printed (0 if none).
last_n() { sed -n "s/^TERN-COUNT cpu=$2 n=\([0-9]*\) .*/\1/p" "$1" | tail -n 1 | grep . || echo 0; }
first_n() { sed -n "s/^TERN-COUNT cpu=$2 n=\([0-9]*\) .*/\1/p" "$1" | head -n 1 | grep . || echo 0; }
counted() { [ "$(sed -n "s/^TERN-COUNT cpu=$2 .*/x/p" "$1" | wc -l)" -ge "$3" ]; }
last_rec() { sed -n 's/^TERN-REC n=\([0-9]*\).*/\1/p' "$1" | tail -n 1 | grep . || echo 0; }
first_rec() { sed -n 's/^TERN-REC n=\([0-9]*\).*/\1/p' "$1" | head -n 1 | grep . || echo 0; }
loc_of() { sed -n "s/^TERN-COUNT cpu=$2 n=[0-9]* loc=\([0-9]*\).*/\1/p" "$1" | sed -n "$3p"; }
has() { grep -q "$2" "$1" 2>/dev/null; }
api() {  # api SOCK METHOD PATH [BODY] -> "<body> <status>"
    curl -s -m 60 --unix-socket "$1" -X "$2" -w ' %{http_code}' -H 'Content-Type: application/json' \
        ${4:+-d "$4"} "http://localhost$3"
}
# restore_fails NAME WANT STATE MEM: tern restore must exit 1 with WANT in its message.
restore_fails() {
    out=$("$T" restore --state "$3" --mem "$4" --resume 2>&1 </dev/null)
    rc=$?
    case "$out" in *"$2"*) ok=0 ;; *) ok=1 ;; esac
    [ "$rc" = 1 ] || ok=1
    check "$1" "$ok" "rc=$rc $(echo "$out" | head -n 2 | tr '\n' ' ')"
}

# ---------------- case 1: counters on 2 vCPUs + disk writer ----------------
truncate -s 64M /tmp/w.img
cmd1="console=ttyS0 quiet tern.action=snap-counter"
"$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$cmd1" --cpus 2 \
    --memory 256M --disk path=/tmp/w.img --api-sock /tmp/a.sock >/tmp/a.out 2>/tmp/a.err </dev/null &
pid_a=$!
wait_for "$SNAP_WAIT" sh -c "grep -q 'TERN-COUNT cpu=1 n=3 ' /tmp/a.out && grep -q 'TERN-REC n=3' /tmp/a.out"
check guest-counting $? "$(grep -c TERN-COUNT /tmp/a.out) counter lines before the save"
# drives_are SOCK PATH: GET /vm/config lists exactly one drive, PATH.
drives_are() {
    r=$(api "$1" GET /vm/config)
    ok=1
    [ "$(echo "$r" | grep -o '"path_on_host"' | wc -l)" = 1 ] && echo "$r" | grep -q "\"path_on_host\": *\"$2\"" && ok=0
}
# machine_is SOCK CPUS MIB: GET /machine-config reports CPUS vCPUs and MIB MiB.
machine_is() {
    r=$(api "$1" GET /machine-config)
    ok=1
    echo "$r" | grep -q "\"vcpu_count\": *$2[,}]" && echo "$r" | grep -q "\"mem_size_mib\": *$3[,}]" && ok=0
}
drives_are /tmp/a.sock /tmp/w.img
check run-vm-config-drives "$ok" "tern run --disk path=/tmp/w.img: $r"

# A save to a full file system fails cleanly; nothing is left there; the VM keeps running.
mkdir -p /mnt/full && mount -t tmpfs -o size=8m tmpfs /mnt/full
out=$("$T" snapshot --api-sock /tmp/a.sock --state /mnt/full/s.state --mem /mnt/full/s.mem 2>&1)
rc=$?
case "$out" in *"No space left"*) ok=0 ;; *) ok=1 ;; esac
[ "$rc" = 1 ] || ok=1
check save-full-disk "$ok" "rc=$rc $(echo "$out" | tail -n 1)"
check save-full-disk-leaves-nothing "$([ -z "$(ls -A /mnt/full)" ]; echo $?)" "left: $(ls -A /mnt/full | tr '\n' ' ')"
before=$(last_n /tmp/a.out 0)
wait_for 30 sh -c "[ \$(sed -n 's/^TERN-COUNT cpu=0 n=\([0-9]*\) .*/\1/p' /tmp/a.out | tail -n 1) -gt $before ]"
check running-after-failed-save $? "vCPU 0 counter moved on from $before; state: $(api /tmp/a.sock GET /)"
out=$("$T" snapshot --api-sock /tmp/a.sock --state /nonexistent/dir/s.state --mem /tmp/x.mem 2>&1)
rc=$?
case "$out" in *"snapshot_path: /nonexistent/dir"*) ok=0 ;; *) ok=1 ;; esac
[ "$rc" = 1 ] || ok=1
check save-unwritable-path "$ok" "rc=$rc $out"

# The real save, while the guest runs; tern exits 0 afterwards.
out=$("$T" snapshot --api-sock /tmp/a.sock --state /tmp/s.state --mem /tmp/s.mem --exit 2>&1)
rc=$?
echo "$out" | sed 's/^/  /'
check save "$rc" "$(echo "$out" | tail -n 1)"
wait "$pid_a"
check save-exit-status "$?" "tern run exited after --exit"
c0=$(last_n /tmp/a.out 0); c1=$(last_n /tmp/a.out 1); rec=$(last_rec /tmp/a.out)
echo "SNAP-INFO saved at cpu0 n=$c0 cpu1 n=$c1 rec=$rec state_bytes=$(stat -c %s /tmp/s.state)"

# ---- bad restore input: each refused with its own message, before any vCPU runs ----
head -c 100 /tmp/s.state >/tmp/trunc.state
restore_fails bad-truncated-state "truncated" /tmp/trunc.state /tmp/s.mem
cp /tmp/s.state /tmp/flip.state
size=$(stat -c %s /tmp/flip.state)
off=$((size / 2))
b=$(dd if=/tmp/flip.state bs=1 skip=$off count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
printf "$(printf '\\%03o' $(((b + 1) % 256)))" | dd of=/tmp/flip.state bs=1 seek=$off conv=notrunc 2>/dev/null
restore_fails bad-flipped-byte "checksum" /tmp/flip.state /tmp/s.mem
cp /tmp/s.state /tmp/major.state
printf '\002' | dd of=/tmp/major.state bs=1 seek=8 conv=notrunc 2>/dev/null
restore_fails bad-major-version "format version 2" /tmp/major.state /tmp/s.mem
restore_fails bad-missing-mem "No such file" /tmp/s.state /tmp/none.mem
head -c 1048576 /tmp/s.mem >/tmp/short.mem
restore_fails bad-short-mem "1048576" /tmp/s.state /tmp/short.mem
mv /tmp/w.img /tmp/w.img.away
restore_fails bad-disk-gone "/tmp/w.img" /tmp/s.state /tmp/s.mem
cp /tmp/w.img.away /tmp/w.img && truncate -s 65M /tmp/w.img
restore_fails bad-disk-size "changed size" /tmp/s.state /tmp/s.mem
mv /tmp/w.img.away /tmp/w.img
# PUT /snapshot/load (Firecracker's body) on a fresh tern works; a second load is refused.
"$T" --api-sock /tmp/c.sock >/tmp/c.out 2>/tmp/c.err </dev/null &
pid_c=$!
wait_for 10 test -S /tmp/c.sock
load='{"snapshot_path": "/tmp/s.state", "mem_backend": {"backend_path": "/tmp/s.mem", "backend_type": "File"}, "resume_vm": false}'
r=$(api /tmp/c.sock PUT /snapshot/load "$load")
check api-load "$([ "${r##* }" = 204 ]; echo $?)" "$r; state: $(api /tmp/c.sock GET /)"
machine_is /tmp/c.sock 2 256
check api-load-machine-config "$ok" "after PUT /snapshot/load (want 2 vCPUs, 256 MiB): $r"
r=$(api /tmp/c.sock PUT /snapshot/load "$load")
case "$r" in *"already has a VM"*" 400") ok=0 ;; *) ok=1 ;; esac
check bad-load-into-existing-vm "$ok" "$r"
api /tmp/c.sock PUT /tern/power-off >/dev/null
wait "$pid_c"
check api-load-power-off "$?" "tern exited after power-off of the loaded (never resumed) VM"

# ---- the real restore ----
"$T" restore --state /tmp/s.state --mem /tmp/s.mem --resume --api-sock /tmp/b.sock \
    >/tmp/b.out 2>/tmp/b.err </dev/null &
pid_b=$!
wait_for "$SNAP_WAIT" sh -c "[ \$(grep -c '^TERN-COUNT cpu=0 ' /tmp/b.out) -ge 4 ] && [ \$(grep -c '^TERN-COUNT cpu=1 ' /tmp/b.out) -ge 4 ] && grep -q '^TERN-REC' /tmp/b.out"
check restored-guest-runs $? "$(grep -c TERN-COUNT /tmp/b.out) counter lines after the restore; stderr: $(head -c 300 /tmp/b.err)"
for c in 0 1; do
    saved=$(last_n /tmp/a.out $c); first=$(first_n /tmp/b.out $c)
    ok=1; { [ "$first" = $((saved + 1)) ] || [ "$first" = $((saved + 2)) ]; } && ok=0
    check "counter-continues-cpu$c" "$ok" "saved n=$saved, first after restore n=$first"
    l1=$(loc_of /tmp/b.out $c 1); l4=$(loc_of /tmp/b.out $c 4)
    ok=1; [ -n "$l1" ] && [ -n "$l4" ] && [ "$l4" -gt "$l1" ] && ok=0
    check "timer-ticks-cpu$c" "$ok" "local timer interrupts on vCPU $c: $l1 -> $l4 over 3 sleeps"
done
first=$(first_rec /tmp/b.out)
ok=1; { [ "$first" = $((rec + 1)) ] || [ "$first" = $((rec + 2)) ]; } && ok=0
check disk-writer-continues "$ok" "saved rec=$rec, first after restore rec=$first"
r=$(api /tmp/b.sock GET /tern/stats)
case "$r" in *'"snapshot"'*) ok=0 ;; *) ok=1 ;; esac
check restored-api "$ok" "GET /tern/stats answers on the restored tern"
machine_is /tmp/b.sock 2 256
check restored-machine-config "$ok" "after tern restore (want 2 vCPUs, 256 MiB): $r"
drives_are /tmp/b.sock /tmp/w.img
check restored-vm-config-drives "$ok" "after tern restore: $r"
"$T" ctl --api-sock /tmp/b.sock power-off >/dev/null
wait "$pid_b"
rc_b=$?
# Anything else the restored guest's kernel printed (warnings about clocks or lockups would show).
grep -v '^TERN-' /tmp/b.out | sed 's/^/  restored console: /' | head -n 20
(exit $rc_b)
check restored-exit-status "$?" "tern restore exited after power-off"
last=$(last_rec /tmp/b.out)
bad=""
i=1
while [ "$i" -le "$last" ]; do
    got=$(dd if=/tmp/w.img bs=512 skip="$i" count=1 2>/dev/null | head -c 12)
    [ "$got" = "$(printf 'rec %08d' "$i")" ] || bad="$bad $i"
    i=$((i + 1))
done
check disk-records-intact "$([ -z "$bad" ]; echo $?)" "records 1..$last on the image; missing/wrong:${bad:- none}"

# ---------------- case 2: 512 MiB, 128 MiB random of which 64 MiB zeroed ----------------
rm -f /tmp/s.mem /tmp/s.state /tmp/*.state /tmp/short.mem
cmd2="console=ttyS0 quiet tern.action=snap-mem"
"$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$cmd2" --cpus 1 \
    --memory 512M --api-sock /tmp/m.sock >/tmp/m.out 2>/tmp/m.err </dev/null &
pid_m=$!
wait_for "$SNAP_WAIT" has /tmp/m.out 'TERN-MEM-READY sum=[0-9a-f]\{32\}'
check mem-guest-ready $? "$(grep TERN-MEM-READY /tmp/m.out)"
out=$("$T" snapshot --api-sock /tmp/m.sock --state /tmp/m.state --mem /tmp/m.mem --exit 2>&1)
check mem-save "$?" "$(echo "$out" | tail -n 1)"
wait "$pid_m"
alloc_kb=$(du -k /tmp/m.mem | cut -f1)
size=$(stat -c %s /tmp/m.mem)
echo "SNAP-INFO memfile size=$size allocated_kb=$alloc_kb"
ok=1; [ "$alloc_kb" -lt $((256 * 1024)) ] && ok=0
check mem-file-sparse "$ok" "memory file: $size bytes, $alloc_kb KiB allocated (guest RAM 524288 KiB; < 262144 wanted)"
"$T" restore --state /tmp/m.state --mem /tmp/m.mem --resume --api-sock /tmp/m2.sock \
    >/tmp/m2.out 2>/tmp/m2.err </dev/null &
pid_m2=$!
wait_for "$SNAP_WAIT" sh -c "[ \$(grep -c '^TERN-MEM-SUM' /tmp/m2.out) -ge 2 ]"
check mem-restored-runs $? "$(grep -c TERN-MEM-SUM /tmp/m2.out) sums after restore; stderr: $(head -c 300 /tmp/m2.err)"
machine_is /tmp/m2.sock 1 512
check mem-restored-machine-config "$ok" "after tern restore (want 1 vCPU, 512 MiB): $r"
want=$(sed -n 's/^TERN-MEM-READY sum=\([0-9a-f]\{32\}\).*/\1/p' /tmp/m.out)
sums=$(sed -n 's/^TERN-MEM-SUM \([0-9a-f]*\).*/\1/p' /tmp/m2.out | sort -u)
ok=1; [ -n "$want" ] && [ "$sums" = "$want" ] && ok=0
check mem-identical "$ok" "before: $want; after restore: $(echo $sums)"
"$T" ctl --api-sock /tmp/m2.sock power-off >/dev/null
wait "$pid_m2"
check mem-restored-exit "$?" "tern restore exited after power-off"
# ---------------- case 3: a slow (rate-limited) save is cancelled by power-off ----------------
"$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "console=ttyS0 quiet tern.action=idle" \
    --memory 256M --api-sock /tmp/k.sock >/tmp/k.out 2>/tmp/k.err </dev/null &
pid_k=$!
wait_for "$SNAP_WAIT" has /tmp/k.out TERN-GUEST-MARKER
"$T" snapshot --api-sock /tmp/k.sock --state /tmp/k.state --mem /tmp/k.mem --rate-limit 1M >/tmp/ks.out 2>&1 &
pid_ks=$!
wait_for 60 sh -c "curl -s --unix-socket /tmp/k.sock http://localhost/tern/stats | grep -q '\"phase\":\"saving\"'"
check cancel-saving $? "GET /tern/stats shows the rate-limited save in progress"
r=$(api /tmp/k.sock PUT /tern/power-off)
wait "$pid_k"
rc_k=$?
wait "$pid_ks"
rc_ks=$?
ok=1; [ "$rc_k" = 0 ] && [ "$rc_ks" = 1 ] && grep -q cancelled /tmp/ks.out && ok=0
check cancel-by-power-off "$ok" "power-off: $r; tern exit $rc_k; tern snapshot exit $rc_ks: $(tail -n 1 /tmp/ks.out)"
left=$(ls -A /tmp | grep -e '^k\.state$' -e '^k\.mem$' -e 'tern-tmp')
check cancel-leaves-nothing "$([ -z "$left" ]; echo $?)" "left: ${left:-nothing}"

# ---------------- case 4: re-snapshot a restored VM to its own memory file ----------------
rm -f /tmp/m.mem /tmp/m.state
# Only whole sums (32 hex digits): the console file may end in a line still being written.
sums_of() { sed -n 's/^TERN-MEM-SUM \([0-9a-f]\{32\}\).*/\1/p' "$1" | sort -u; }
restore_r() {  # restore_r NAME: tern restore of /tmp/r.state + /tmp/r.mem as NAME, until a sum
    "$T" restore --state /tmp/r.state --mem /tmp/r.mem --resume --api-sock "/tmp/$1.sock" \
        >"/tmp/$1.out" 2>"/tmp/$1.err" </dev/null &
    pid_r=$!
    # The first MD5 after a restore faults in all 64 MiB from the memory file: slow under TCG.
    wait_for "$SNAP_WAIT" has "/tmp/$1.out" '^TERN-MEM-SUM [0-9a-f]\{32\}'
}
truncate -s 16M /tmp/r.img
cmd4="console=ttyS0 quiet tern.action=snap-mem tern.rand_mib=64 tern.zero_mib=0"
"$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$cmd4" --cpus 1 \
    --memory 256M --disk path=/tmp/r.img --api-sock /tmp/r0.sock >/tmp/r0.out 2>/tmp/r0.err </dev/null &
pid_r0=$!
wait_for "$SNAP_WAIT" has /tmp/r0.out 'TERN-MEM-READY sum=[0-9a-f]\{32\}'
want=$(sed -n 's/^TERN-MEM-READY sum=\([0-9a-f]\{32\}\).*/\1/p' /tmp/r0.out)
check resave-guest-ready "$([ -n "$want" ]; echo $?)" "64 MiB random, md5 $want"
out=$("$T" snapshot --api-sock /tmp/r0.sock --state /tmp/r.state --mem /tmp/r.mem --exit 2>&1)
check resave-first-save "$?" "$(echo "$out" | tail -n 1)"
wait "$pid_r0"
state_sum=$(md5sum </tmp/r.state | cut -d' ' -f1)
mem_ino=$(stat -c %i /tmp/r.mem)

# Restore, then SIGKILL that tern while it saves over the same pair (1 MiB/s: minutes to go).
restore_r r1
check resave-restore-1 $? "$(sums_of /tmp/r1.out | tr '\n' ' ')stderr: $(head -c 300 /tmp/r1.err)"
"$T" snapshot --api-sock /tmp/r1.sock --state /tmp/r.state --mem /tmp/r.mem --rate-limit 1M >/tmp/rs.out 2>&1 &
pid_rs=$!
wait_for 60 sh -c "curl -s --unix-socket /tmp/r1.sock http://localhost/tern/stats | grep -q '\"phase\":\"saving\"'"
check resave-kill-saving $? "GET /tern/stats shows the rate-limited save over the pair in progress"
kill -KILL "$pid_r"
wait "$pid_r"
wait "$pid_rs"
stray=$(ls -A /tmp | grep tern-tmp | tr '\n' ' ')
ok=1
[ "$(md5sum </tmp/r.state | cut -d' ' -f1)" = "$state_sum" ] && [ "$(stat -c %i /tmp/r.mem)" = "$mem_ino" ] && ok=0
# At most one stray temporary per target (the state file's is written before the memory file).
case "$stray" in
"" | .r.mem.tern-tmp-??????" " | .r.state.tern-tmp-??????" " | \
    .r.mem.tern-tmp-??????" ".r.state.tern-tmp-??????" ") ;;
*) ok=1 ;;
esac
check resave-kill-keeps-old-pair "$ok" "state file unchanged, memory file the same inode; stray temporaries: ${stray:-none}"
rm -f /tmp/.r.*.tern-tmp-*

# The old pair restores; that VM then saves itself to the memory file it maps, and resumes.
restore_r r2
check resave-restore-2 $? "$(sums_of /tmp/r2.out | tr '\n' ' ')stderr: $(head -c 300 /tmp/r2.err)"
ok=1; [ "$(sums_of /tmp/r2.out)" = "$want" ] && ok=0
check resave-killed-save-data-intact "$ok" "after the killed save: $(sums_of /tmp/r2.out | tr '\n' ' ')want $want"
out=$("$T" snapshot --api-sock /tmp/r2.sock --state /tmp/r.state --mem /tmp/r.img 2>&1)
rc=$?
case "$out" in *"mem_file_path: /tmp/r.img is the VM's disk 0"*) ok=0 ;; *) ok=1 ;; esac
[ "$rc" = 1 ] || ok=1
check resave-disk-refused "$ok" "rc=$rc $(echo "$out" | tail -n 1)"
out=$("$T" snapshot --api-sock /tmp/r2.sock --state /tmp/r.state --mem /tmp/../tmp/r.state 2>&1)
rc=$?
case "$out" in *"mem_file_path: /tmp/../tmp/r.state is the same file as snapshot_path"*) ok=0 ;; *) ok=1 ;; esac
[ "$rc" = 1 ] || ok=1
check resave-same-file-refused "$ok" "rc=$rc $(echo "$out" | tail -n 1)"
check resave-refusals-keep-files "$([ "$(md5sum </tmp/r.state | cut -d' ' -f1)" = "$state_sum" ]; echo $?)" \
    "state file unchanged after the refused saves"
n2=$(grep -c '^TERN-MEM-SUM' /tmp/r2.out)
out=$("$T" snapshot --api-sock /tmp/r2.sock --state /tmp/r.state --mem /tmp/r.mem 2>&1)
check resave-to-own-memory-file "$?" "$(echo "$out" | tail -n 1)"
wait_for "$SNAP_WAIT" sh -c "[ \$(grep -c '^TERN-MEM-SUM' /tmp/r2.out) -gt $n2 ]"
ok=1; [ "$(sums_of /tmp/r2.out)" = "$want" ] && ok=0
check resave-running-vm-intact "$ok" "the VM that saved over its own memory file: $(sums_of /tmp/r2.out | tr '\n' ' ')"
# That VM still runs and holds its disk's write lock: restoring its snapshot a second time is
# refused before anything runs, naming the image (the restores above came after their tern exited).
restore_fails restore-while-running-refused \
    "--disk path=/tmp/r.img: in use by another process (a write lock is held on it); stop that VM, or restore once the VM that saved the snapshot has ended" \
    /tmp/r.state /tmp/r.mem
"$T" ctl --api-sock /tmp/r2.sock power-off >/dev/null
wait "$pid_r"
restore_r r3
check resave-restore-3 $? "$(sums_of /tmp/r3.out | tr '\n' ' ')stderr: $(head -c 300 /tmp/r3.err)"
ok=1; [ "$(sums_of /tmp/r3.out)" = "$want" ] && ok=0
check resave-identical "$ok" "before the first save: $want; after the last restore: $(sums_of /tmp/r3.out | tr '\n' ' ')"
"$T" ctl --api-sock /tmp/r3.sock power-off >/dev/null
wait "$pid_r"

echo "SNAP-DONE fails=$fails"
exit 0
