#!/bin/sh
# shellcheck disable=SC2086  # $RUN and $deb_udhcpd_pid are lists of words
# Runs inside the test host (L1), started by tests/e2e/debian_test.sh through testhost/run.sh with
# the Debian image (images/debian) as L1's /dev/vda (a QEMU snapshot overlay: the image itself is
# never changed). Boots that Debian system under tern with testhost/debian_lib.sh; prints one line
# per check:  DEB-CHECK name=<check> PASS|FAIL <detail>  and  DEB-TIME case=<case> seconds=<s>.
# "bad" (no boot): tern run refuses, naming the file, before the guest prints anything: a missing
#   image; an image on a read-only mount without readonly=on.
# "vda1" (1 vCPU, root on /dev/vda, virtio-blk): the marker says running, 0 failed units, 1 vCPU,
#   root /dev/vda, an address from L1's busybox udhcpd (169.254.20.x, the lease of its MAC in the
#   server's table); wget in the guest fetches a 1 MiB file from busybox httpd in L1, sha256 equal
#   on both sides; a second tern run on /dev/vda meanwhile is refused naming it (the image lock;
#   DEB_LOCK_CHECK=0 skips it); `systemctl poweroff`: tern exits 0; e2fsck -fn /dev/vda clean in L1.
# "nvme2" (2 vCPUs, --disk ...,interface=nvme, root=/dev/nvme0n1): the marker (running, 0 failed,
#   2 vCPUs, root /dev/nvme0n1, a lease); `systemctl reboot`: tern exits 3; e2fsck clean.
# "snap2" (2 vCPUs, virtio-blk): at the login prompt, both vCPUs busy, `tern snapshot --exit` (the
#   VM exits 0), then `tern restore` (paused) and `tern ctl resume` DEB_HOLD (default 40) s later:
#   a command typed afterwards runs (TERN-AFTER-RESTORE 42), wget + sha256 again over the tap it
#   reopened, no watchdog or lockup line in the guest's journal since the save nor on its console
#   (a restored guest must not take the wait for a hung CPU); `systemctl poweroff`: exit 0;
#   e2fsck clean.
# "qcow2" (1 vCPU, virtio-blk): a qcow2 overlay made by qemu-img in L1 over the raw image
#   (-b /dev/vda -F raw): refused without backing_files=on, naming the key; with it the guest boots
#   from the overlay (marker, prompt), writes and syncs a file, is saved (tern snapshot --exit)
#   and restored, the restored guest reads the file back and writes 2 MiB more, `systemctl
#   poweroff`: exit 0;
#   `qemu-img check` of the overlay clean (exit 0), and the overlay holds allocated clusters; then
#   QEMU (-M pc, the same kernel/initrd/cmdline, the overlay as format=qcow2 virtio-blk) boots
#   the overlay tern wrote: its guest reads tern's file with the same sha256, poweroff exits 0,
#   QEMU's stderr is empty, `qemu-img check` clean again.
# DEB_CASES (default all five) runs only the cases it lists; DEB_MEM (default 768) the guest's MiB.
: "${DEB_CASES:=bad vda1 nvme2 snap2 qcow2}" "${DEB_LOCK_CHECK:=1}" "${DEB_MEM:=768}" "${DEB_HOLD:=40}"
# shellcheck source=testhost/debian_lib.sh disable=SC2154  # deb_* results are set by the library
. /testhost/debian_lib.sh
T="$TH_TERN" DISK=/dev/vda fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "DEB-CHECK name=$1 PASS $3"; else echo "DEB-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
}
stage() { echo "DEB-INFO $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }
case_begin() { case_name=$1 case_t0=$(l1_now); stage "case $1"; }
case_end() { echo "DEB-TIME case=$case_name seconds=$(($(l1_now) - case_t0))"; }
want_case() { case " $DEB_CASES " in *" $1 "*) return 0 ;; esac; return 1; }
oneline() { tr '\n' ' ' | cut -c1-400; }

[ -n "$T" ] || { check setup 1 "tern not in the test host"; exit 2; }
[ -n "$TH_DEBIAN_INITRD" ] || { check setup 1 "no Debian initrd in the test host (--with-debian-initrd)"; exit 2; }
for tool in e2fsck "$DEB_IP" dumpleases; do
    command -v "$tool" >/dev/null || { check setup 1 "$tool not in the test host"; exit 2; }
done
l1_wait_for 20 test -b "$DISK" || { check setup 1 "no $DISK in the test host (run.sh --disk IMG and the virtio modules)"; exit 2; }
stage "disk $DISK: $(blockdev --getsize64 "$DISK") bytes; cases: $DEB_CASES"

# fsck_clean CASE: e2fsck -fn on the image from L1 (no guest running) finds nothing to fix.
fsck_clean() {
    out=$(e2fsck -fn "$DISK" 2>&1)
    check "$1-e2fsck" $? "e2fsck -fn $DISK: $(echo "$out" | tail -n 2 | oneline)"
}
# booted CASE CPUS ROOT: the marker came and says running, 0 failed units, CPUS, ROOT; then the prompt.
booted() {
    m=$(deb_marker "$1")
    why=$(deb_marker_ok "$m" "$2" "$3")
    check "$1-multi-user" $? "${m:-no TERN-DEBIAN-MARKER line} ${why:+($why)}"
    [ -n "$m" ] || deb_show "$1"
    deb_prompt "$1" 120
    check "$1-prompt" $? "shell prompt on the console: '$deb_got'"
}
# leased CASE MAC: the marker's address is in udhcpd's pool, and udhcpd leased it to MAC.
leased() {
    addr=$(l1_field "$m" net) ip=${addr#*/} ip=${ip%/*}
    kill -USR1 $deb_udhcpd_pid 2>/dev/null  # udhcpd writes its lease file on SIGUSR1
    l1_wait_for 5 sh -c "dumpleases -f /tmp/udhcpd-tap0.leases 2>/dev/null | grep -qi '$2'"
    lease=$(dumpleases -f /tmp/udhcpd-tap0.leases 2>/dev/null | grep -i "$2" | head -n 1)
    ok=1
    case "$ip" in 169.254.20.1[0-9][0-9]) echo "$lease" | grep -q " $ip " && ok=0 ;; esac
    check "$1-dhcp-lease" "$ok" "guest net=$addr; udhcpd's lease for $2: ${lease:-none}"
}
# fetched CASE: wget in the guest gets /blob from L1's httpd; its sha256 is L1's.
fetched() {
    deb_cmd "$1" 120 "wget -q -O /tmp/blob http://169.254.20.1:8080/blob && sha256sum /tmp/blob"
    got=$(echo "$deb_out" | grep -aoE '^[0-9a-f]{64}' | head -n 1)
    ok=1; [ "$deb_rc" = 0 ] && [ "$got" = "$blob_sha" ] && ok=0
    check "$1-http-fetch" "$ok" "wget + sha256sum rc=${deb_rc:-none}: guest sha=${got:-none}, L1 served sha=$blob_sha"
}
# stopped CASE COMMAND STATUS: COMMAND typed at the prompt makes the VMM (tern or QEMU) exit with STATUS.
stopped() {
    deb_type "$1" "$2"
    deb_wait_exit "$1" 180
    st=$?
    check "$1-exit-status" "$([ "$st" = "$3" ]; echo $?)" "'$2': the VMM exited $st (want $3); stderr: $(tail -n 3 "/tmp/$1.err" | oneline)"
}
# refused TAG FILE CMD...: CMD (a tern run) exits 1 within 30 s, names FILE, and the guest printed nothing.
refused() {
    tag=$1 file=$2
    shift 2
    timeout 30 "$@" >"/tmp/$tag.out" 2>"/tmp/$tag.err" </dev/null
    st=$?
    ok=1; [ "$st" = 1 ] && grep -qF "$file" "/tmp/$tag.err" && [ ! -s "/tmp/$tag.out" ] && ok=0
    check "$tag" "$ok" "exit $st (want 1), console $(wc -c <"/tmp/$tag.out") bytes (want 0); stderr: $(head -c 300 "/tmp/$tag.err" | oneline)"
}
RUN="$T run --kernel $TH_GUEST_KERNEL --initrd $TH_DEBIAN_INITRD --cmdline console=ttyS0"

if want_case bad; then
    case_begin bad
    refused bad-missing-image /tmp/no-such-debian.img $RUN --disk path=/tmp/no-such-debian.img
    mkdir -p /tmp/romnt && mount -t tmpfs -o size=16m tmpfs /tmp/romnt && truncate -s 8M /tmp/romnt/ro.img &&
        mount -o remount,ro /tmp/romnt
    check bad-ro-setup $? "an 8 MiB image on a read-only tmpfs: $(grep /tmp/romnt /proc/mounts | oneline)"
    refused bad-read-only-image /tmp/romnt/ro.img $RUN --disk path=/tmp/romnt/ro.img
    umount /tmp/romnt
    case_end
fi

# ---- L1's side of the network: tap0, udhcpd's pool, httpd with a random file ----
deb_tap tap0 169.254.20.1/24
check net-tap $? "tap0 169.254.20.1/24: $("$DEB_IP" -br addr show tap0 2>&1 | oneline)"
deb_udhcpd tap0 169.254.20.100 169.254.20.110
mkdir -p /tmp/www
dd if=/dev/urandom of=/tmp/www/blob bs=1M count=1 2>/dev/null
blob_sha=$(l1_sha /tmp/www/blob)
deb_httpd /tmp/www 169.254.20.1 8080
check net-httpd $? "busybox httpd on 169.254.20.1:8080 serving a 1 MiB file, sha $blob_sha"
NET=tap=tap0,mac=52:54:00:14:00:01

if want_case vda1; then
    case_begin vda1
    deb_start vda1 tern 1 "$DEB_MEM" "path=$DISK,cache=none" "$NET"
    booted vda1 1 /dev/vda
    leased vda1 52:54:00:14:00:01
    fetched vda1
    if [ "$DEB_LOCK_CHECK" = 1 ]; then
        # The running VM holds the image: a second writer is refused (the image lock).
        refused vda1-second-writer "$DISK" $RUN --disk "path=$DISK"
    else
        stage "vda1: second-writer check off (DEB_LOCK_CHECK=0)"
    fi
    stopped vda1 "systemctl poweroff" 0
    fsck_clean vda1
    case_end
fi

if want_case qcow2; then
    case_begin qcow2
    OV=/tmp/overlay.qcow2
    rm -f "$OV"
    out=$(qemu-img create -q -f qcow2 -b "$DISK" -F raw "$OV" 2>&1)
    check qcow2-create $? "qemu-img create -f qcow2 -b $DISK -F raw $OV: $(echo "$out" | oneline)"
    refused qcow2-backing-refused "backing_files=on" $RUN --disk "path=$OV"
    deb_start qcow2 tern 1 "$DEB_MEM" "path=$OV,backing_files=on" "$NET"
    booted qcow2 1 /dev/vda
    deb_cmd qcow2 60 "dd if=/dev/urandom of=/root/qcow2-probe bs=1M count=8 2>/dev/null && sync && sha256sum /root/qcow2-probe"
    sum=$(echo "$deb_out" | grep -aoE '^[0-9a-f]{64}' | head -n 1)
    [ "$deb_rc" = 0 ] && [ -n "$sum" ]
    check qcow2-guest-write $? "8 MiB written and synced in the guest: rc '$deb_rc', sha256 ${sum:-none}"
    # A running VM on qcow2 is saved and restored (issue 27 item 4): the restored guest reads its
    # file back and allocates more through the restored image; the overlay checks clean after.
    deb_snapshot qcow2
    check qcow2-snapshot $? "tern snapshot --exit: $(echo "$deb_out" | tail -n 1 | oneline)"
    check qcow2-snapshot-exit "$([ "$deb_exit" = 0 ]; echo $?)" "the saved VM's tern exited $deb_exit (want 0)"
    deb_restore qcow2 qcow2r
    deb_cmd qcow2r 120 "sha256sum /root/qcow2-probe; dd if=/dev/urandom of=/root/qcow2-after bs=1M count=2 2>/dev/null && sync && echo TERN-QCOW2-AFTER-OK"
    rsum=$(echo "$deb_out" | grep -aoE '^[0-9a-f]{64}' | head -n 1)
    [ -n "$sum" ] && [ "$rsum" = "$sum" ] && echo "$deb_out" | grep -aq '^TERN-QCOW2-AFTER-OK'
    check qcow2-restored $? "after the restore: sha256 ${rsum:-none} (want ${sum:-?}), 2 MiB more written: $(echo "$deb_out" | grep -ac TERN-QCOW2-AFTER-OK)"
    stopped qcow2r "systemctl poweroff" 0
    rm -f /tmp/qcow2.state /tmp/qcow2.mem
    out=$(qemu-img check "$OV" 2>&1)
    check qcow2-check $? "qemu-img check $OV: $(echo "$out" | oneline)"
    size=$(wc -c <"$OV")
    [ "$size" -gt 8388608 ]
    check qcow2-allocated $? "overlay is $size bytes (> the 8 MiB the guest wrote)"
    # QEMU (its default command line, the same kernel/initrd direct boot) boots the overlay tern
    # wrote: the guest sees tern's file, QEMU's stderr stays empty, and qemu-img check is clean after.
    deb_start qcow2q qemu 1 "$DEB_MEM" "path=$OV,format=qcow2" "$NET"
    booted qcow2q 1 /dev/vda
    deb_cmd qcow2q 60 "sha256sum /root/qcow2-probe"
    qsum=$(echo "$deb_out" | grep -aoE '^[0-9a-f]{64}' | head -n 1)
    [ "$deb_rc" = 0 ] && [ -n "$sum" ] && [ "$qsum" = "$sum" ]
    check qcow2-qemu-reads-tern-file $? "sha256sum under QEMU rc '$deb_rc': ${qsum:-none} (tern's guest wrote ${sum:-none})"
    stopped qcow2q "systemctl poweroff" 0
    [ ! -s /tmp/qcow2q.err ]
    check qcow2-qemu-log-clean $? "QEMU's stderr: '$(head -c 300 /tmp/qcow2q.err | oneline)'"
    out=$(qemu-img check "$OV" 2>&1)
    check qcow2-check-after-qemu $? "qemu-img check $OV: $(echo "$out" | oneline)"
    rm -f "$OV"
    case_end
fi

if want_case nvme2; then
    case_begin nvme2
    deb_start nvme2 tern 2 "$DEB_MEM" "path=$DISK,cache=none,interface=nvme" "$NET"
    booted nvme2 2 /dev/nvme0n1
    leased nvme2 52:54:00:14:00:01
    stopped nvme2 "systemctl reboot" 3
    fsck_clean nvme2
    case_end
fi

if want_case snap2; then
    case_begin snap2
    deb_start snap2 tern 2 "$DEB_MEM" "path=$DISK,cache=none" "$NET"
    booted snap2 2 /dev/vda
    # Both vCPUs busy (niced loops) at the save: a CPU that idles takes a clock jump quietly (its
    # tick restarts and touches the soft-lockup watchdog); a busy one reports it as a lockup.
    deb_cmd snap2 60 "for c in 0 1; do nohup nice -n 19 taskset -c \$c sh -c 'while :; do :; done' >/dev/null 2>&1 & done"
    # The guest's wall clock at the save: what its journal logs later is what happened after it.
    deb_cmd snap2 60 "date +%s; cut -d' ' -f1 /proc/uptime"
    t_save=$(echo "$deb_out" | grep -aoE '^[0-9]{9,}' | tail -n 1)
    up_save=$(echo "$deb_out" | grep -aoE '^[0-9]+\.[0-9]+' | tail -n 1) l1_save=$(l1_now)
    deb_snapshot snap2
    check snap2-snapshot $? "tern snapshot --exit: $(echo "$deb_out" | tail -n 2 | oneline); state $(wc -c </tmp/snap2.state 2>/dev/null) bytes, memory $(du -k /tmp/snap2.mem 2>/dev/null | cut -f1) KiB used"
    check snap2-snapshot-exit "$([ "$deb_exit" = 0 ]; echo $?)" "the saved VM's tern exited $deb_exit (want 0)"
    # Restored paused, and resumed $DEB_HOLD s later (a restore waiting for its resume, as a
    # Firecracker-style client loads and then resumes): the guest must not see that wait as a hung
    # CPU (soft-lockup watchdog) or a clock jump. The wait is the scenario, not a synchronization.
    deb_restore snap2 snap2r paused
    l1_wait_for 30 test -S /tmp/snap2r.sock
    stage "snap2r: restored paused; resuming in ${DEB_HOLD} s"
    sleep "$DEB_HOLD"
    out=$("$T" ctl --api-sock /tmp/snap2r.sock resume 2>&1)
    check snap2-resume $? "tern ctl resume ${DEB_HOLD} s after the restore: $(echo "$out" | oneline)"
    deb_type snap2r 'echo TERN-AFTER-RESTORE $((6*7))'
    deb_wait snap2r 120 '^TERN-AFTER-RESTORE 42'
    check snap2-command-after-restore $? "typed after the resume: ${deb_got:-no TERN-AFTER-RESTORE 42 line}"
    fetched snap2r
    # What the guest saw of the restore: its clocksource, its uptime and every watchdog line its
    # journal holds from the save on (the kernel's too; each prefixed W1D by the guest's shell, so
    # the echoed command line itself does not match), and the restored VM's console. (The boot's
    # "NMI watchdog: Perf NMI watchdog permanently disabled" -- no PMU for the guest -- predates
    # the save.)
    deb_cmd snap2r 120 "cat /sys/devices/system/clocksource/clocksource0/current_clocksource /proc/uptime; journalctl -b --no-pager -o short-monotonic --since @${t_save:-0} | grep -aiE 'watchdog|lockup|clocksource|time jump' | sed \"s/^/W\$((1))D /\""
    echo "$deb_out" | sed 's/^/DEB-INFO snap2r: /'
    up_now=$(echo "$deb_out" | grep -aoE '^[0-9]+\.[0-9]+ ' | tail -n 1)
    echo "DEB-INFO snap2r: guest uptime ${up_save:-?} s at the save, ${up_now:-?}s now; L1 time since the save $(($(l1_now) - l1_save)) s (save, restore, ${DEB_HOLD} s paused, the checks)"
    wd=$(echo "$deb_out" | grep -a '^W1D ' | grep -ai 'watchdog\|lockup')
    con=$(tr -d "\r" </tmp/snap2r.out | grep -ai 'watchdog\|lockup' | grep -av 'journalctl\|W1D')
    ok=1; [ -n "$t_save" ] && [ -n "$deb_rc" ] && [ -z "$wd" ] && [ -z "$con" ] && ok=0
    check snap2-no-watchdog "$ok" "journal since the save (guest time ${t_save:-unknown}) and console after the restore: $(printf '%s %s' "${wd:-no watchdog line}" "$con" | oneline)"
    deb_cmd snap2r 60 "pkill -f 'while :; do :; done'"
    stage "snap2r: systemctl poweroff"  # the L1 uptime of this line and the next: the shutdown's length
    stopped snap2r "systemctl poweroff" 0
    stage "snap2r: tern exited"
    fsck_clean snap2
    rm -f /tmp/snap2.mem /tmp/snap2.state
    case_end
fi

deb_net_stop
for n in vda1 nvme2 snap2 snap2r; do [ -f "/tmp/$n.out" ] && deb_show "$n"; done
echo "DEB-INFO udhcpd: $(tail -n 5 /tmp/udhcpd-tap0.log | oneline)"
stage "end: $fails failed"
exit 0
