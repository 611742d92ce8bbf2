#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/vhost_user_test.sh through testhost/run.sh
# (--with-qemu --with-qsd). Guest actions in tests/e2e/vhost_user_guest/actions/. Prints one line
# per check:  VU-CHECK name=<check> PASS|FAIL <detail>
# Front-ends: tern (`tern run --disk vhost-user=SOCK,queues=N`, guest RAM then shared memfd) and
# QEMU (vhost-user-blk-pci, memory-backend-memfd share=on). Back-ends: qemu-storage-daemon
# (--export type=vhost-user-blk) and tern's (`tern vhost-user-blk --socket SOCK --disk path=IMG`).
# Images live on L1's tmpfs; L1 checks them afterwards with e2fsck -fn and debugfs.
# Interop cases (2 vCPUs, 2 queues; actions/vu-rw): the guest makes ext4, writes 64 MiB with
#   O_DIRECT, half from each vCPU, syncs, reads it back; both queues' interrupts moved,
#   /sys/block/vdX/mq has 2 queues, the image is clean and holds the bytes; then 2 x 2 MiB through
#   the page cache, pages interleaved (writeback builds seg_max-segment requests), synced, re-read
#   after dropping the caches, and in the image. QEMU's queue-size is given (128, its default) and tern's back-end
#   must log no malformed chain and no broken ring: with seg_max larger than the ring QEMU picked,
#   requests were refused and the guest, reading a stale status byte, lost the writes (issue 31).
#   The data is L1's (random, generated once), copied from a second, read-only plain disk.
#     qq  QEMU <-> qsd (the reference: checks the guest side and this harness)
#     tq  tern <-> qsd          tt  tern <-> tern vhost-user-blk          qt  QEMU <-> tern vhost-user-blk
# Read-only cases (actions/vu-ro): the guest sees ro=1, reads the seed file, writes are refused (by
#   the guest's kernel, and by the device: a write posted from user space gets IOERR), the image
#   is byte-identical afterwards.   qqro QEMU <-> qsd writable=off   tqro tern <-> qsd
#   writable=off   ttro tern <-> tern readonly=on
# Refusals before boot, in bounded time, with the socket named: "fewer" (qsd exports 1 queue, tern
#   asks for queues=2), "silent" (a back-end that accepts and never answers: the request named),
#   "nosock" (no back-end listening).
# "kill" / "killq" (actions/vu-fault): tern with a vhost-user disk (tern's back-end / qsd) and a
#   plain --disk; the back-end is SIGKILLed in the middle of the guest's writes and restarted on the
#   same socket: the guest's writes resume and complete with the right bytes (the front-end
#   reconnects; tern's back-end, killed while its inflight region showed requests, resubmits them
#   and says so; qsd offers no INFLIGHT_SHMFD and serves them again from the ring restarted at
#   used->idx: src/vhost_user/frontend/vhost_user_blk.h), the console and the plain disk keep working meanwhile, the API answers,
#   tern's counters (GET /tern/stats) show the disconnect and the reconnect.
# "snap" (actions/vu-snap): a VM with a vhost-user disk (qsd, kept running) is saved (tern snapshot
#   --exit) and restored (tern restore --resume); the guest reads the file it wrote before and
#   writes another; the image is clean and holds both.
# VU_CASES (default all) runs only the cases it lists, e.g. VU_CASES="qq qqro" without tern's pieces.
: "${VU_WAIT:=180}" "${VU_CASES:=qq qqro tq tt qt tqro ttro fewer silent nosock kill killq snap}"
T="$TH_TERN" QSD="$TH_QSD"
fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "VU-CHECK name=$1 PASS $3"; else echo "VU-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
}
MKE2FS=/usr/sbin/mke2fs  # busybox's mke2fs comes first in PATH and makes no ext4
for tool in e2fsck debugfs $MKE2FS curl jq; do
    command -v $tool >/dev/null || { check setup 1 "$tool not in the test host"; exit 2; }
done
[ -n "$QSD" ] || { check setup 1 "qemu-storage-daemon not in the test host (--with-qsd)"; exit 2; }
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
# wait_exit PID SECONDS: the process's exit status once it ended (bounded; killed after SECONDS).
wait_exit() {
    wait_for "$2" sh -c "! kill -0 $1 2>/dev/null" || { echo "VU-INFO pid $1 still running after $2 s: killed"; kill -9 "$1"; }
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
sha() { sha256sum "$1" | cut -d' ' -f1; }
md5() { md5sum "$1" | cut -d' ' -f1; }
stage() { echo "VU-INFO $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
api() {  # api SOCK METHOD PATH [BODY] -> "<body> <status>"
    curl -s -m 30 --unix-socket "$1" -X "$2" -w ' %{http_code}' -H 'Content-Type: application/json' \
        ${4:+-d "$4"} "http://localhost$3"
}
show() {  # show NAME: a VM's TERN- lines and its last other console / stderr lines, for the log
    { grep -a '^TERN-' "/tmp/$1.out" | tail -n 30; grep -av '^TERN-' "/tmp/$1.out" | tail -n 5; tail -n 8 "/tmp/$1.err"; } 2>/dev/null |
        tr -d '\r' | sed "s/^/  $1: /"
}
want_case() { case " $VU_CASES " in *" $1 "*) return 0 ;; esac; return 1; }
CMD="console=ttyS0 quiet"

# ---- back-ends (pid in $be_pid; output in /tmp/NAME.be) ----
# start_qsd NAME IMG SOCK WRITABLE QUEUES
start_qsd() {
    rm -f "$3"
    ro=off; [ "$4" = on ] || ro=on
    "$QSD" --blockdev "driver=file,node-name=f0,filename=$2,read-only=$ro" \
        --export "type=vhost-user-blk,id=e0,node-name=f0,addr.type=unix,addr.path=$3,writable=$4,num-queues=$5" \
        >"/tmp/$1.be" 2>&1 </dev/null &
    be_pid=$!
    wait_for 30 test -S "$3"
    check "$1-backend-up" $? "qemu-storage-daemon on $3 (writable=$4, num-queues=$5): $(tail -n 3 "/tmp/$1.be" | tr '\n' ' ')"
}
# start_ternbe NAME IMG SOCK QUEUES [more --disk options]
start_ternbe() {
    rm -f "$3"
    # At info: the log says when requests are resubmitted from the inflight region (case kill).
    "$T" --log-level info vhost-user-blk --socket "$3" --disk "path=$2,queues=$4${5:+,$5}" >"/tmp/$1.be" 2>&1 </dev/null &
    be_pid=$!
    wait_for 30 test -S "$3"
    check "$1-backend-up" $? "tern vhost-user-blk --socket $3 --disk path=$2,queues=$4${5:+,$5}: $(tail -n 3 "/tmp/$1.be" | tr '\n' ' ')"
}
# stop_backend NAME [nocheck]: SIGTERM; the back-end (qsd or tern's) must exit 0 (bounded).
stop_backend() {
    kill "$be_pid" 2>/dev/null
    wait_exit "$be_pid" 30
    bst=$?
    if [ "$2" = nocheck ]; then
        echo "VU-INFO $1 back-end exit status $bst: $(tail -n 5 "/tmp/$1.be" | tr '\n' ' ')"
    else
        check "$1-backend-exit" "$bst" "exit status $bst after SIGTERM: $(tail -n 5 "/tmp/$1.be" | tr '\n' ' ' | cut -c1-600)"
    fi
}

# ---- front-ends (pid in $vm_pid; console in /tmp/NAME.out, stderr in /tmp/NAME.err) ----
# start_qemu NAME CPUS SOCK QUEUES CMDLINE-EXTRA [SRC_IMAGE: a read-only virtio-blk disk, serial tern-src]
start_qemu() {
    src_args=""
    [ -z "$6" ] || src_args="-drive file=$6,if=none,id=s0,format=raw,readonly=on -device virtio-blk-pci,drive=s0,serial=tern-src"
    rm -f "/tmp/$1.out"
    # shellcheck disable=SC2086  # $src_args is split into words on purpose (no spaces in it)
    "$TH_QEMU" -enable-kvm -M pc,memory-backend=mem -L "$TH_QEMU_FW" -m 256M -smp "$2" \
        -object memory-backend-memfd,id=mem,size=256M,share=on \
        -kernel "$TH_GUEST_KERNEL" -initrd "$TH_GUEST_INITRD" -append "$CMD $5" \
        -display none -nodefaults -serial "file:/tmp/$1.out" -no-reboot \
        -chardev "socket,id=c0,path=$3" -device "vhost-user-blk-pci,chardev=c0,num-queues=$4,queue-size=128" $src_args \
        >"/tmp/$1.err" 2>&1 </dev/null &
    vm_pid=$!
}
# start_tern NAME CPUS CMDLINE-EXTRA TERN-ARGS...: API on /tmp/NAME.sock, stdin from /tmp/NAME.in
start_tern() {
    tname="$1" tcpus="$2" tcmd="$3"
    shift 3
    rm -f "/tmp/$tname.out" "/tmp/$tname.sock" "/tmp/$tname.in"
    mkfifo "/tmp/$tname.in"
    "$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$CMD $tcmd" --cpus "$tcpus" \
        --memory 256M --api-sock "/tmp/$tname.sock" "$@" >"/tmp/$tname.out" 2>"/tmp/$tname.err" <>"/tmp/$tname.in" &
    vm_pid=$!
}
vm_done() {  # vm_done NAME: the VM's exit status once it ended on its own (bounded)
    wait_vm "$VU_WAIT" sh -c "! kill -0 $vm_pid 2>/dev/null"
    wait_exit "$vm_pid" 10
}

# ---- interop cases ----
# irq_delta BEFORE AFTER QUEUE
irq_delta() { echo $(($(field "$2" "$3" | grep . || echo 0) - $(field "$1" "$3" | grep . || echo 0))); }
# check_rw NAME IMG QUEUES VM_STATUS: what the guest printed and what the image holds.
check_rw() {
    o="/tmp/$1.out"
    l=$(line "$o" '^TERN-VU-INFO')
    ok=1; [ "$(field "$l" mq)" = "$3" ] && [ "$(field "$l" ro)" = 0 ] && [ "$(field "$l" nproc)" = 2 ] && ok=0
    check "$1-guest-disk" "$ok" "${l:-no TERN-VU-INFO line} (want mq=$3 ro=0 nproc=2) $(line "$o" '^TERN-VU-ERROR')"
    w=$(line "$o" '^TERN-VU-WRITTEN')
    check "$1-guest-readback" "$([ "$(field "$w" reread)" = "$src_md5" ]; echo $?)" "${w:-no TERN-VU-WRITTEN line} (L1's data: md5=$src_md5) $(line "$o" '^TERN-VU-ERROR')"
    b=$(line "$o" '^TERN-VU-IRQ tag=before') a=$(line "$o" '^TERN-VU-IRQ tag=after')
    q=0
    while [ $q -lt "$3" ]; do
        d=$(irq_delta "$b" "$a" req.$q)
        check "$1-queue$q-interrupts" "$([ "$d" -gt 0 ]; echo $?)" "req.$q: $d interrupts during the writes [$b] [$a]"
        q=$((q + 1))
    done
    check "$1-vm-exit" "$4" "front-end exit status $4 at the guest's poweroff; $(tail -c 300 "/tmp/$1.err" | tr '\n' ' ')"
    stage "$1 checking the image"
    out=$(e2fsck -fn "$2" 2>&1)
    check "$1-e2fsck" $? "e2fsck -fn: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
    size=$(debugfs -R "stat /data" "$2" 2>/dev/null | sed -n 's/.*Size: \([0-9]*\).*/\1/p' | head -n 1)
    got=$(debugfs -R "cat /data" "$2" 2>/dev/null | md5sum | cut -d' ' -f1)
    ok=1; [ "$got" = "$src_md5" ] && [ "$size" = 67108864 ] && ok=0
    check "$1-image-bytes" "$ok" "/data in the image: $size bytes md5=$got (L1's data: md5=$src_md5)"
    bl=$(line "$o" '^TERN-VU-BUFFERED')
    ok=1; [ -n "$(field "$bl" md5)" ] && [ "$(field "$bl" reread)" = "$(field "$bl" md5)" ] && [ "$(field "$bl" reread_b)" = "$(field "$bl" md5_b)" ] && ok=0
    check "$1-guest-buffered" "$ok" "${bl:-no TERN-VU-BUFFERED line} $(line "$o" '^TERN-VU-ERROR')"
    ga=$(debugfs -R "cat /buffered-a" "$2" 2>/dev/null | md5sum | cut -d' ' -f1)
    gb=$(debugfs -R "cat /buffered-b" "$2" 2>/dev/null | md5sum | cut -d' ' -f1)
    ok=1; [ "$ga" = "$(field "$bl" md5)" ] && [ "$gb" = "$(field "$bl" md5_b)" ] && ok=0
    check "$1-image-buffered" "$ok" "/buffered-a, -b in the image: md5=$ga $gb (the guest wrote $(field "$bl" md5) $(field "$bl" md5_b))"
    stage "$1 checked"
}
RW="tern.action=vu-rw tern.vu_mib=64 tern.vu_queues=2"
# L1's data, generated once: the guests copy it from a read-only disk (serial tern-src) to their
# vhost-user disk (random data costs the nested guests more CPU than the copy).
stage "generating the data"
dd if=/dev/urandom of=/tmp/src.img bs=1M count=64 2>/dev/null
src_md5=$(md5 /tmp/src.img)
stage "data ready"
# rw_case NAME FRONT(qemu|tern) BACK(qsd|tern)
rw_case() {
    stage "$1"
    img="/tmp/$1.img" sock="/tmp/$1.vu"
    rm -f "$img"
    truncate -s 256M "$img"
    if [ "$3" = qsd ]; then start_qsd "$1" "$img" "$sock" on 2; else start_ternbe "$1" "$img" "$sock" 2; fi
    if [ "$2" = qemu ]; then
        start_qemu "$1" 2 "$sock" 2 "$RW" /tmp/src.img
    else
        start_tern "$1" 2 "$RW" --disk "vhost-user=$sock,queues=2" --disk path=/tmp/src.img,readonly=on,serial=tern-src
    fi
    vm_done "$1"
    st=$?
    stage "$1 front-end ended"
    stop_backend "$1"
    check_rw "$1" "$img" 2 "$st"
    if [ "$3" = tern ]; then
        bad=$(grep -a 'malformed chain\|needs reset' "/tmp/$1.be" | head -n 3 | tr '\n' ' ')
        check "$1-backend-log-clean" "$([ -z "$bad" ]; echo $?)" "tern vhost-user-blk's log: ${bad:-no malformed chain, no broken ring}"
    fi
    show "$1"
    rm -f "$img"
}
want_case qq && rw_case qq qemu qsd
want_case tq && rw_case tq tern qsd
want_case tt && rw_case tt tern tern
want_case qt && rw_case qt qemu tern

# ---- read-only cases ----
mkdir -p /tmp/seed
echo "seed-$(cat /proc/sys/kernel/random/uuid)" >/tmp/seed/seed.txt
seed=$(cat /tmp/seed/seed.txt)
"$MKE2FS" -q -F -t ext4 -d /tmp/seed -L tern-vu-ro /tmp/ro.img 64M
ro_sha=$(sha /tmp/ro.img)
# ro_case NAME FRONT BACK
ro_case() {
    stage "$1"
    sock="/tmp/$1.vu"
    if [ "$3" = qsd ]; then start_qsd "$1" /tmp/ro.img "$sock" off 1; else start_ternbe "$1" /tmp/ro.img "$sock" 1 readonly=on; fi
    if [ "$2" = qemu ]; then start_qemu "$1" 1 "$sock" 1 tern.action=vu-ro; else start_tern "$1" 1 tern.action=vu-ro --disk "vhost-user=$sock"; fi
    vm_done "$1"
    st=$?
    stop_backend "$1"
    o="/tmp/$1.out"
    l=$(line "$o" '^TERN-VU-INFO')
    check "$1-guest-sees-ro" "$([ "$(field "$l" ro)" = 1 ]; echo $?)" "${l:-no TERN-VU-INFO line} $(line "$o" '^TERN-VU-ERROR')"
    l=$(line "$o" '^TERN-VU-SEED')
    check "$1-guest-reads" "$([ "$l" = "TERN-VU-SEED $seed" ]; echo $?)" "${l:-no TERN-VU-SEED line} (want $seed)"
    l=$(line "$o" '^TERN-VU-RO')
    check "$1-writes-refused" "$([ "$l" = "TERN-VU-RO fs=refused raw=refused" ]; echo $?)" "${l:-no TERN-VU-RO line}"
    # The guest kernel stopped those itself (it sees ro=1): a write posted from user space, past
    # the guest's read-only flag, must be refused by the device (IOERR), the image unchanged.
    l=$(line "$o" '^TERN-HOSTILE write1')
    check "$1-device-refuses-write" "$([ "$(field "$l" status)" = 1 ]; echo $?)" "${l:-no TERN-HOSTILE write1 line} (want status=1: IOERR) $(line "$o" '^TERN-VU-ERROR')"
    check "$1-image-unchanged" "$([ -n "$ro_sha" ] && [ "$(sha /tmp/ro.img)" = "$ro_sha" ]; echo $?)" "sha256 $(sha /tmp/ro.img), before $ro_sha"
    check "$1-vm-exit" "$st" "front-end exit status $st"
    show "$1"
}
want_case qqro && ro_case qqro qemu qsd
want_case tqro && ro_case tqro tern qsd
want_case ttro && ro_case ttro tern tern

# ---- refusals before boot: tern run must fail, in bounded time, naming the socket (and more) ----
# refused NAME WANT... : tern's exit status is not 0, stderr names every WANT, the guest never ran.
refused() {
    rname="$1"
    shift
    t0=$(cut -d' ' -f1 /proc/uptime)
    vm_done "$rname"
    st=$?
    t1=$(cut -d' ' -f1 /proc/uptime)
    msg=$(tr '\n' ' ' <"/tmp/$rname.err" | tr -d '\r')
    ok=1; [ "$st" != 0 ] && [ "$st" != 137 ] && ! has "/tmp/$rname.out" TERN-GUEST-MARKER && ok=0
    for w in "$@"; do case "$msg" in *"$w"*) ;; *) ok=1 ;; esac; done
    check "$rname-refused" "$ok" "exit status $st after $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s, wants '$*' in: $(echo "$msg" | cut -c1-400)"
}
if want_case fewer; then
    stage fewer
    truncate -s 64M /tmp/fewer.img
    start_qsd fewer /tmp/fewer.img /tmp/fewer.vu on 1
    start_tern fewer 2 "" --disk vhost-user=/tmp/fewer.vu,queues=2
    refused fewer /tmp/fewer.vu queues=2 "at most 1"
    stop_backend fewer
    rm -f /tmp/fewer.img
fi
if want_case silent; then
    stage silent
    rm -f /tmp/silent.vu
    vhost_user_silent /tmp/silent.vu >/tmp/silent.be 2>&1 &
    be_pid=$!
    wait_for 10 test -S /tmp/silent.vu
    start_tern silent 1 "" --disk vhost-user=/tmp/silent.vu
    refused silent /tmp/silent.vu GET_FEATURES
    stop_backend silent nocheck
fi
if want_case nosock; then
    stage nosock
    rm -f /tmp/nosock.vu
    start_tern nosock 1 "" --disk vhost-user=/tmp/nosock.vu
    refused nosock /tmp/nosock.vu
fi

# ---- kill -9 the back-end in the middle of the guest's writes, restart it; snapshot/restore ----
. /testhost/vhost_user_faults.sh

stage end
echo "VU-DONE fails=$fails"
exit 0
