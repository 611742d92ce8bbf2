# shellcheck shell=dash
# The Debian demo's VM, run by scripts/demo.sh: as the test host's scenario (L1, busybox sh) or, on
# a host with VMX/SVM, directly by bash. Uses testhost/debian_lib.sh (DEMO_LIB, default
# /testhost/debian_lib.sh: L1's copy) to boot the Debian image under tern ($TH_TERN,
# $TH_GUEST_KERNEL, $TH_DEBIAN_INITRD) with DEMO_CPUS vCPUs and DEMO_MEMORY of RAM, root on
# DEMO_DISK (virtio-blk, cache=none).
# Network: DEMO_TAP names the guest's tap (empty: none); DEMO_L1_NET=1 makes it here first, with
# 169.254.30.1/24 and busybox udhcpd leasing the guest 169.254.30.100-110 (the test host).
# DEMO_INTERACTIVE=1: tern's console is this terminal; the user types (`systemctl poweroff` ends
# it). Otherwise: the guest's console is shown as it comes; once the TERN-DEBIAN-MARKER line says
# multi-user was reached, the guest's `ip -br addr` and `systemctl is-system-running` are typed at
# the shell prompt, then tern's own view of the VM (`tern stat --once --kernel-exits`: exits by
# reason, device queues, KVM's counters, CPU per thread, and every exit inside the kernel by
# hardware reason, reconciled with KVM's count), then `systemctl poweroff`; at the end tern's
# messages (its stderr: warnings, `--stats-on-exit`'s summary).
# DEB_TERN_ARGS (debian_lib.sh; scripts/demo.sh's TERN_DEMO_ARGS): more words for `tern run`.
# Exits with tern's exit status (0: the guest powered off).
# shellcheck source=testhost/debian_lib.sh
. "${DEMO_LIB:-/testhost/debian_lib.sh}"
demo_t0="$(cut -d' ' -f1 /proc/uptime)"
say() { echo "demo: [$(awk -v a="$demo_t0" '{ printf "%5.1f", $1 - a }' /proc/uptime)s] $*"; }
disk="path=$DEMO_DISK,cache=none"
net=""
if [ "${DEMO_L1_NET:-0}" = 1 ]; then
    deb_tap "$DEMO_TAP" 169.254.30.1/24 || { say "could not make the tap $DEMO_TAP"; exit 1; }
    deb_udhcpd "$DEMO_TAP" 169.254.30.100 169.254.30.110
    say "network: $DEMO_TAP (169.254.30.1/24 on this side), busybox udhcpd leasing 169.254.30.100-110"
fi
[ -z "$DEMO_TAP" ] || net="tap=$DEMO_TAP"
cmdline="console=ttyS0 root=/dev/vda rw${DEB_CMDLINE:+ $DEB_CMDLINE}"
say "tern run --kernel $DEB_KERNEL --initrd $DEB_INITRD --memory $DEMO_MEMORY --cpus $DEMO_CPUS --disk $disk${net:+ --net $net} --cmdline \"$cmdline\"${DEB_TERN_ARGS:+ $DEB_TERN_ARGS}"

if [ "${DEMO_INTERACTIVE:-0}" = 1 ]; then
    say "the guest's console follows; root is logged in at 'root@tern-debian:~#' once systemd is up (about a minute here; the image's TERN-DEBIAN-MARKER line says so); type 'systemctl poweroff' to end"
    # shellcheck disable=SC2086  # DEB_TERN_ARGS: words
    "$DEB_TERN" run --kernel "$DEB_KERNEL" --initrd "$DEB_INITRD" --memory "$DEMO_MEMORY" --cpus "$DEMO_CPUS" \
        --disk "$disk" ${net:+--net "$net"} --cmdline "$cmdline" $DEB_TERN_ARGS
    rc=$?
    say "tern exited with status $rc"
    exit "$rc"
fi

deb_start demo tern "$DEMO_CPUS" "$DEMO_MEMORY" "$disk" "$net" /dev/vda
tail -n +1 -f /tmp/demo.out &  # the guest's console as it comes
tail_pid=$!
stop() {  # stop RC: the console's last bytes out, then exit RC
    sleep 1
    kill "$tail_pid" 2>/dev/null
    echo
    if [ -s /tmp/demo.err ]; then
        say "tern's messages (stderr):"
        cat /tmp/demo.err
    fi
    say "tern exited with status $1"
    exit "$1"
}
say "booting: waiting (up to ${DEB_BOOT_WAIT}s) for systemd to report on the console (TERN-DEBIAN-MARKER)"
if ! marker="$(deb_marker demo)"; then
    say "no TERN-DEBIAN-MARKER line: stopping tern"
    deb_stop demo
    stop $?
fi
say "multi-user reached: $marker"
deb_prompt demo 60 || say "no shell prompt on the console after 60 s; typing anyway"
deb_type demo "ip -br addr; systemctl is-system-running" # the guest's echo shows it; the prompt again: done
deb_prompt demo 60 || say "no answer from the guest's shell in 60 s"
# What tern is for: where the VM's time goes, every exit accounted for. The console's tail is
# paused meanwhile (the guest is idle at its prompt), so the screen is not interleaved; as in
# stop(), tail polls the file each second: a second lets it show what the guest printed.
sleep 1
kill "$tail_pid" 2>/dev/null
say "tern stat --api-sock /tmp/demo.sock --once --kernel-exits --rows 6 (tern's view of this VM over one second)"
"$DEB_TERN" stat --api-sock /tmp/demo.sock --once --kernel-exits --rows 6 || say "tern stat failed (status $?)"
tail -c +"$(($(wc -c </tmp/demo.out) + 1))" -f /tmp/demo.out &
tail_pid=$!
deb_type demo "systemctl poweroff"
deb_wait_exit demo 180
stop $?
