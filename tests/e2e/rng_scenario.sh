#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/rng_test.sh through testhost/run.sh. Guest
# actions in tests/e2e/rng_guest/actions/ (rng-read, rng-hostile), the hostile driver in
# tests/e2e/hostile_virtio/. Prints one line per check:  RNG-CHECK name=<check> PASS|FAIL <detail>
# Case 1 (--rng, a disk): /sys/class/misc/hw_random/rng_current names virtio_rng; the guest reads
#   1 MiB from /dev/hwrng (all bytes, incompressible, every byte value); GET /vm/config has an
#   "entropy" object; a save while the guest keeps reading, then `tern restore`: the restored guest
#   reads 64 KiB again and again (new data, its loop counter going on), the restored VM's
#   GET /vm/config still has "entropy".
# Case 2 (--rng, a disk): a user-space driver posts malformed chains to the rng queue; each one is
#   answered (tern: used length 0, it wrote nothing) or DEVICE_NEEDS_RESET is set, never left
#   hanging; the good chains before and after get exactly their 4 KiB (tern) of random bytes; every
#   phase runs (a "huge" phase skipped for want of a hugepage fails); tern survives (exit status 0 at the guest's poweroff), the disk still works, and
#   the device rebound to virtio-pci (reset by the kernel) feeds /dev/hwrng 1 MiB again.
# Case 3 (--rng=bandwidth=64K,refill_time=100,ops=2000,one_time_burst=128K): GET /vm/config shows
#   the rate limiter in Firecracker's shape; the guest still gets its 1 MiB.
# Case 4 (API only): PUT /entropy with an ops rate limiter before InstanceStart, refused after it;
#   the guest gets its 1 MiB. Bad --rng and PUT /entropy input is refused naming the field.
# RNG_VMM=qemu (with --with-qemu) runs cases 1-3 with QEMU's virtio-rng-pci instead, to check the
# guest side against a reference device (saves with HMP migrate; API checks are skipped; a malformed
# chain QEMU leaves in the ring counts as "pending", which is accepted there and not from tern).
: "${RNG_WAIT:=120}" "${RNG_VMM:=tern}"
. /testhost/l1_lib.sh  # l1_stall_dump
T="$TH_TERN"
case "$RNG_VMM" in
tern) [ -n "$T" ] || { echo "RNG-CHECK name=setup FAIL tern binary not in the test host"; exit 2; } ;;
qemu) [ -n "$TH_QEMU" ] || { echo "RNG-CHECK name=setup FAIL qemu not in the test host"; exit 2; } ;;
*) echo "RNG-CHECK name=setup FAIL RNG_VMM=$RNG_VMM (tern or qemu)"; exit 2 ;;
esac
command -v curl >/dev/null || { echo "RNG-CHECK name=setup FAIL curl not in the test host"; exit 2; }
fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "RNG-CHECK name=$1 PASS $3"; else echo "RNG-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
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
# wait_vm SECONDS COMMAND...: wait_for, but gives up as soon as the VM process ($vm_pid) is gone.
wait_vm() {
    n=$(($1 * 10)); shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        kill -0 "$vm_pid" 2>/dev/null || { "$@"; return; }
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
has() { grep -q "$2" "$1" 2>/dev/null; }
api() {  # api SOCK METHOD PATH [BODY] -> "<body> <status>"
    curl -s -m 60 --unix-socket "$1" -X "$2" -w ' %{http_code}' -H 'Content-Type: application/json' \
        ${4:+-d "$4"} "http://localhost$3"
}
lines() { grep -a "$2" "$1" 2>/dev/null | tr -d '\r'; }  # lines FILE PATTERN: matching console lines
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }  # field LINE KEY
tern_only() { [ "$RNG_VMM" = tern ]; }
# wait_exit PID SECONDS: the process's exit status once it ended (bounded; 137 after a SIGKILL).
wait_exit() {
    wait_for "$2" sh -c "! kill -0 $1 2>/dev/null" || { echo "RNG-INFO pid $1 still running after $2 s: killed"; kill -9 "$1"; }
    wait "$1"
}
# mon_send NAME TEXT: TEXT to QEMU's monitor (bounded: the fifo blocks once QEMU is gone).
mon_send() { timeout 10 sh -c 'printf "%s\n" "$1" >"$2"' _ "$2" "/tmp/$1.mon.in"; }
CMD="console=ttyS0 quiet"
stage() { echo "RNG-INFO $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }  # L1 time, for the log

# ---- the VMM: tern, or QEMU for comparison ----
# start_vm NAME ACTION CMDLINE-EXTRA RNG: boots the guest with a 16 MiB disk /tmp/NAME.img and an rng
# (RNG: tern's --rng argument; "" for the default) in the background (pid in $vm_pid), console in
# /tmp/NAME.out; tern serves its API on /tmp/NAME.sock, QEMU its monitor on the pipe /tmp/NAME.mon.
qemu_args() {  # qemu_args NAME RNG-DEVICE-OPTIONS
    echo "-enable-kvm -M pc -L $TH_QEMU_FW -m 256M -smp 1 -kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial file:/tmp/$1.out -no-reboot -drive file=/tmp/$1.img,if=none,id=d0,format=raw -device virtio-blk-pci,drive=d0 -object rng-builtin,id=r0 -device virtio-rng-pci,rng=r0,disable-legacy=on$2 -monitor pipe:/tmp/$1.mon -global migration.store-global-state=off"
}
qemu_mon() {  # qemu_mon NAME: the monitor fifos, its output collected in /tmp/NAME.mon.log
    rm -f "/tmp/$1.mon.in" "/tmp/$1.mon.out"
    mkfifo "/tmp/$1.mon.in" "/tmp/$1.mon.out"
    cat "/tmp/$1.mon.out" >"/tmp/$1.mon.log" &
}
start_vm() {
    [ -f "/tmp/$1.img" ] || truncate -s 16M "/tmp/$1.img"
    rm -f "/tmp/$1.sock" "/tmp/$1.out"
    if tern_only; then
        "$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$CMD tern.action=$2 $3" \
            --memory 256M --disk "path=/tmp/$1.img" "${4:---rng}" --api-sock "/tmp/$1.sock" \
            >"/tmp/$1.out" 2>"/tmp/$1.err" </dev/null &
    else
        qemu_mon "$1"
        # A rate limit becomes QEMU's max-bytes/period (bytes per period in ms).
        case "$4" in --rng=*) q=",max-bytes=65536,period=100" ;; *) q="" ;; esac
        # shellcheck disable=SC2046  # qemu_args is split into words on purpose (no spaces in paths)
        "$TH_QEMU" $(qemu_args "$1" "$q") -append "$CMD tern.action=$2 $3" >"/tmp/$1.err" 2>&1 </dev/null &
    fi
    vm_pid=$!
}
# save_vm NAME: saves the running VM to /tmp/NAME.state + /tmp/NAME.mem (QEMU: /tmp/NAME.mig);
# the VM then ends. Returns the save's status; its last line in $save_out.
save_vm() {
    if tern_only; then
        save_out=$("$T" snapshot --api-sock "/tmp/$1.sock" --state "/tmp/$1.state" --mem "/tmp/$1.mem" --exit 2>&1)
        rc=$?
    else
        mon_send "$1" "$(printf 'stop\nmigrate exec:cat>/tmp/%s.mig\ninfo migrate' "$1")"
        wait_for 120 has "/tmp/$1.mon.log" 'Migration status: \(completed\|failed\)'
        has "/tmp/$1.mon.log" 'Migration status: completed'
        rc=$?
        save_out=$(grep -a 'Migration status' "/tmp/$1.mon.log" | tr -d '\r')
        mon_send "$1" quit
    fi
    wait_exit "$vm_pid" 60
    return $rc
}
# restore_vm NAME NEW: continues NAME's saved VM as NEW (console /tmp/NEW.out, API /tmp/NEW.sock).
restore_vm() {
    rm -f "/tmp/$2.sock" "/tmp/$2.out"
    if tern_only; then
        "$T" restore --state "/tmp/$1.state" --mem "/tmp/$1.mem" --resume --api-sock "/tmp/$2.sock" \
            >"/tmp/$2.out" 2>"/tmp/$2.err" </dev/null &
    else
        qemu_mon "$2"
        ln -sf "/tmp/$1.img" "/tmp/$2.img"
        # shellcheck disable=SC2046
        "$TH_QEMU" $(qemu_args "$2" "") -append "$CMD" -incoming "exec:cat /tmp/$1.mig" >"/tmp/$2.err" 2>&1 </dev/null &
    fi
    vm_pid=$!
}
stop_vm() {  # stop_vm NAME: power the VM off; returns its exit status
    if tern_only; then "$T" ctl --api-sock "/tmp/$1.sock" power-off >/dev/null; else mon_send "$1" quit; fi
    wait_exit "$vm_pid" 60
}
# read_ok LINE BYTES: a TERN-RNG-READ line with BYTES bytes, incompressible, >= 200 byte values.
read_ok() {
    b=$(field "$1" bytes) gz=$(field "$1" gz) d=$(field "$1" distinct)
    [ -n "$b" ] && [ "$b" = "$2" ] && [ "${gz:-0}" -ge $((b - b / 100)) ] && [ "${d:-0}" -ge 200 ]
}
check_read() {  # check_read NAME FILE TAG BYTES
    l=$(lines "$2" "^TERN-RNG-READ tag=$3 " | tail -n 1)
    read_ok "$l" "$4"
    check "$1" $? "${l:-no TERN-RNG-READ tag=$3 line} $(lines "$2" TERN-RNG-ERROR | head -n 2 | tr '\n' ' ')$(head -c 300 "${2%.out}.err" 2>/dev/null | tr '\n' ' ')"
}
check_current() {  # check_current NAME FILE: the first TERN-RNG-CURRENT names virtio_rng
    l=$(lines "$2" '^TERN-RNG-CURRENT' | head -n 1)
    case "$(field "$l" current)" in virtio_rng*) ok=0 ;; *) ok=1 ;; esac
    check "$1" $ok "${l:-no TERN-RNG-CURRENT line}"
}
show() {  # show NAME: the guest's TERN- lines and its last other console lines, for the log
    { grep -a '^TERN-' "/tmp/$1.out" | tail -n 30; grep -av '^TERN-' "/tmp/$1.out" | tail -n 3; } 2>/dev/null | tr -d '\r' | sed "s/^/  $1 console: /"
}
loop_lines() { lines "$1" '^TERN-RNG-READ tag=loop '; }
loops_at_least() { [ "$(loop_lines "$1" | wc -l)" -ge "$2" ]; }

# ---------------- case 1: read 1 MiB, save while reading, restore, read again ----------------
stage case1
start_vm a rng-read tern.rng_loop=1 ""
wait_vm "$RNG_WAIT" loops_at_least /tmp/a.out 2
check_current rng-current /tmp/a.out
check_read read-1mib /tmp/a.out boot 1048576
if tern_only; then
    r=$(api /tmp/a.sock GET /vm/config)
    echo "$r" | grep -q '"entropy": *{'
    check vm-config-entropy $? "$r"
fi
save_vm a
check save $? "$save_out"
saved=$(loop_lines /tmp/a.out | tail -n 1)
n_saved=$(field "$saved" n)
echo "RNG-INFO saved after loop read n=${n_saved:-none}"
restore_vm a b
wait_vm "$RNG_WAIT" loops_at_least /tmp/b.out 2
ok=0 detail=""
for l in $(loop_lines /tmp/b.out | head -n 2 | tr ' ' '|'); do
    l=$(echo "$l" | tr '|' ' ')
    md5=$(field "$l" md5)
    read_ok "$l" 65536 || ok=1
    # Fresh data: the restored device does not hand out what the guest already read before.
    if [ -z "$md5" ] || loop_lines /tmp/a.out | grep -q "md5=$md5"; then ok=1; fi
    detail="$detail [$l]"
done
[ "$(loop_lines /tmp/b.out | wc -l)" -ge 2 ] || ok=1
check restored-reads "$ok" "${detail:- no loop read after the restore} $(head -c 300 /tmp/b.err | tr '\n' ' ')"
first=$(field "$(loop_lines /tmp/b.out | head -n 1)" n)
ok=1; [ -n "$first" ] && [ -n "$n_saved" ] && { [ "$first" = $((n_saved + 1)) ] || [ "$first" = $((n_saved + 2)) ]; } && ok=0
check restored-continues "$ok" "saved after loop read n=$n_saved, first after the restore n=$first"
if tern_only; then
    r=$(api /tmp/b.sock GET /vm/config)
    echo "$r" | grep -q '"entropy": *{'
    check restored-vm-config-entropy $? "$r"
fi
stop_vm b
check restored-stop $? "the restored VM powered off"
show a
show b

# ---------------- case 2: malformed chains to the rng queue ----------------
stage case2
allowed="answered needs_reset"
tern_only || allowed="$allowed pending"
# QEMU fills a request from its entropy backend before it maps the chain: without a limit it first
# generates 4 GiB for the "huge" chain (minutes in the test host). Its max-bytes keeps that short.
hostile_rng=""
tern_only || hostile_rng=--rng=limited
start_vm h rng-hostile tern.hostile_timeout=10 "$hostile_rng"
# Each of the 12 phases waits at most 10 s for the device (pending); tern should answer in ms.
wait_vm $((RNG_WAIT + 120)) has /tmp/h.out 'TERN-GUEST-ACTION action=rng-hostile'
check hostile-ran $? "$(lines /tmp/h.out 'TERN-HOSTILE-RNG-\(READY\|DONE\|RC\)\|TERN-HOSTILE-ERROR\|TERN-RNG-ERROR' | tr '\n' ' ')"
wait_exit "$vm_pid" 60  # the guest powers itself off after the action
st=$?
check hostile-vmm-survives "$st" "exit status $st at the guest's poweroff; stderr: $(head -c 300 /tmp/h.err | tr '\n' ' ')"
phases=$(lines /tmp/h.out '^TERN-HOSTILE-RNG phase=')
for p in good readonly zerolen loop badnext badhead oob overflow huge indirect jump good-again; do
    l=$(echo "$phases" | grep "phase=$p " | head -n 1)
    res=$(field "$l" result) len=$(field "$l" used_len) d=$(field "$l" distinct)
    ok=1
    case " $allowed " in *" $res "*) ok=0 ;; esac
    case "$p:$res" in
    # The control: tern (no rate limit in this case) fills the whole 4 KiB buffer with random
    # bytes; QEMU's source is rate-limited here (max-bytes), so it may hand over less.
    good:answered | good-again:answered)
        if tern_only; then
            [ "$len" = 4096 ] && [ "${d:-0}" -ge 200 ] || ok=1
        else
            [ "${len:-0}" -gt 0 ] && [ "$len" -le 4096 ] && [ "${d:-0}" -ge 200 ] || ok=1
        fi ;;
    good:* | good-again:*) ok=1 ;;
    # No hugepage in the guest: the phase did not run, which is not a pass.
    huge:skipped) ok=1 ;;
    # QEMU maps unassigned guest-physical ranges and drops what it writes there: it answers them.
    oob:answered | overflow:answered) tern_only && { [ "$len" = 0 ] || ok=1; } ;;
    readonly:answered | zerolen:answered) [ "$len" = 0 ] || ok=1 ;;
    # Every other chain is malformed: tern answers it with used length 0 (it wrote nothing).
    *:answered) tern_only && { [ "$len" = 0 ] || ok=1; } ;;
    esac
    check "hostile-$p" "$ok" "${l:-no line for phase $p}"
done
vda=$(lines /tmp/h.out '^TERN-RNG-VDA' | head -n 1)
set -- $vda
ok=1; [ -n "${2:-}" ] && [ "$2" = "${3:-}" ] && ok=0
check hostile-disk-works "$ok" "${vda:-no TERN-RNG-VDA line}"
l=$(lines /tmp/h.out '^TERN-RNG-CURRENT' | tail -n 1)
case "$(field "$l" current)" in virtio_rng*) ok=0 ;; *) ok=1 ;; esac
check hostile-rebound-current "$ok" "after the rebind: ${l:-no line}"
check_read hostile-rebound-read /tmp/h.out rebound 1048576
show h

# ---------------- case 3: rate-limited (--rng=bandwidth=...) ----------------
stage case3
start_vm l rng-read "" --rng=bandwidth=64K,refill_time=100,ops=2000,one_time_burst=128K
if tern_only; then
    wait_vm 10 test -S /tmp/l.sock
    r=$(api /tmp/l.sock GET /vm/config)
    ok=1
    echo "$r" | grep -q '"entropy": *{' && echo "$r" | grep -q '"size": *65536' &&
        echo "$r" | grep -q '"refill_time": *100' && echo "$r" | grep -q '"one_time_burst": *131072' &&
        echo "$r" | grep -q '"size": *2000' && ok=0
    check limited-vm-config "$ok" "$r"
fi
wait_vm "$RNG_WAIT" has /tmp/l.out 'TERN-GUEST-ACTION action=rng-read'
check_read limited-read-1mib /tmp/l.out boot 1048576
wait_exit "$vm_pid" 60
st=$?
check limited-exit "$st" "exit status $st at the guest's poweroff"
show l

# ---------------- case 4 (tern): PUT /entropy, input errors ----------------
stage case4
if tern_only; then
    # bad_rng NAME WANT ARG: tern run refuses ARG before booting, naming WANT.
    bad_rng() {
        out=$(timeout -s KILL 60 "$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" "$3" 2>&1 </dev/null)
        rc=$?
        ok=1
        case "$out" in *"not expected"*) ;; *"$2"*) [ "$rc" = 1 ] && ok=0 ;; esac  # not CLI11's "unknown option"
        check "$1" "$ok" "rc=$rc $(echo "$out" | head -n 2 | tr '\n' ' ')"
    }
    bad_rng bad-rng-zero-bandwidth bandwidth --rng=bandwidth=0,refill_time=100
    bad_rng bad-rng-unknown-key colour --rng=colour=red
    "$T" --api-sock /tmp/e.sock >/tmp/e.out 2>/tmp/e.err </dev/null &
    vm_pid=$!
    wait_vm 10 test -S /tmp/e.sock
    r=$(api /tmp/e.sock PUT /boot-source "{\"kernel_image_path\": \"$TH_GUEST_KERNEL\", \"initrd_path\": \"$TH_GUEST_INITRD\", \"boot_args\": \"$CMD tern.action=rng-read\"}")
    check api-boot-source "$([ "${r##* }" = 204 ]; echo $?)" "$r"
    r=$(api /tmp/e.sock PUT /machine-config '{"vcpu_count": 1, "mem_size_mib": 256}')
    check api-machine-config "$([ "${r##* }" = 204 ]; echo $?)" "$r"
    r=$(api /tmp/e.sock PUT /entropy '{"rate_limiter": {"bandwidth": {"size": 0, "refill_time": 100}}}')
    ok=1; [ "${r##* }" = 400 ] && echo "$r" | grep -q size && ok=0
    check api-bad-entropy "$ok" "$r"
    r=$(api /tmp/e.sock PUT /entropy '{"rate_limiter": {"ops": {"size": 500, "refill_time": 100}}}')
    check api-entropy "$([ "${r##* }" = 204 ]; echo $?)" "$r"
    r=$(api /tmp/e.sock GET /vm/config)
    ok=1; echo "$r" | grep -q '"entropy": *{' && echo "$r" | grep -q '"size": *500' && ok=0
    check api-vm-config-entropy "$ok" "$r"
    r=$(api /tmp/e.sock PUT /actions '{"action_type": "InstanceStart"}')
    check api-instance-start "$([ "${r##* }" = 204 ]; echo $?)" "$r"
    r=$(api /tmp/e.sock PUT /entropy '{}')
    check api-entropy-after-start "$([ "${r##* }" = 400 ]; echo $?)" "$r"
    wait_vm "$RNG_WAIT" has /tmp/e.out 'TERN-GUEST-ACTION action=rng-read' ||
        l1_stall_dump RNG-DUMP "no TERN-GUEST-ACTION after $RNG_WAIT s" "$vm_pid" /tmp/e.sock /tmp/e.out
    check_current api-rng-current /tmp/e.out
    check_read api-read-1mib /tmp/e.out boot 1048576
    wait_exit "$vm_pid" 60
    st=$?
    check api-exit "$st" "tern exit status $st at the guest's poweroff"
    show e
fi

stage end
echo "RNG-DONE fails=$fails vmm=$RNG_VMM"
exit 0
