#!/usr/bin/env bash
# Demo (the main job): tern boots a Debian 12 system - Debian's stock cloud kernel, its own
# initramfs-tools initrd and the root filesystem image that images/debian/build.sh builds (scripts/
# setup.sh runs it) on a virtio-blk disk with cache=none - to root's autologin shell on the serial
# console, networked, and powers it off.
#
# On a host with hardware virtualization (vmx/svm + /dev/kvm) it runs build/tern directly (a network
# only when TERN_DEMO_TAP names a tap: tern opens it, the guest asks for a DHCP lease on it; the
# image is booted read-write, so what the guest changes stays in it). Otherwise inside the nested
# test host (testhost/run.sh: QEMU TCG emulating an AMD CPU with SVM), which attaches the image
# read-only (QEMU snapshot=on: never changed) and gives the guest a network: a tap with a
# link-local address and busybox udhcpd handing out a DHCP lease.
#
# stdin a terminal: you are at the guest's console; type `systemctl poweroff` (or reboot) to end.
# Otherwise (CI, scripts): it waits for the image's TERN-DEBIAN-MARKER line, shows the guest's
# `ip -br addr` and `systemctl is-system-running`, then types `systemctl poweroff`.
#
# Usage: scripts/demo.sh                      the Debian system
#        scripts/demo.sh --initramfs [ACTION] the quick variant, no disk: a busybox initramfs whose
#            init prints "TERN-GUEST-MARKER nproc=... memtotal_kb=... release=..." then does ACTION:
#            poweroff (default), reboot (tern exits 3), or shell (interactive)
# Environment: TERN_BIN (default build/tern); TERN_DEMO_IMAGE (default build/images/debian-12.img);
#   TERN_DEMO_TAP (host with VMX/SVM only: a tap for the guest, e.g. tap0; default no network);
#   TERN_DEMO_CPUS (default 2), TERN_DEMO_MEMORY (default 1G); TERN_DEMO_ARGS: more words for
#   `tern run` (the Debian system), e.g. "--kernel-exits --stats-on-exit": the accounting from the
#   first exit, and tern's totals printed when it exits.
# Exits with tern's exit status: 0 when the guest powered off.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/testhost/lib.sh"
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

mode=debian action=""
case "${1:-}" in
-h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
--initramfs)
    mode=initramfs action="${2:-poweroff}"
    [[ "$action" =~ ^(poweroff|reboot|shell)$ ]] || die "--initramfs: ACTION is poweroff, reboot or shell, not '$action'" ;;
"") ;;
*) die "unknown argument '$1'; usage: scripts/demo.sh [--initramfs [poweroff|reboot|shell]] (see --help)" ;;
esac
tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || die "tern not built at $tern: run scripts/setup.sh (or set TERN_BIN)"
ver="$(th_kernel_version)"
direct=1 why=""
grep -qwE 'vmx|svm' /proc/cpuinfo || direct=0 why="no vmx/svm flag in /proc/cpuinfo"
[[ -c /dev/kvm ]] || direct=0 why="no /dev/kvm"

# The quick variant: a busybox initramfs guest (testhost/guest-init.sh) with tern.action=ACTION.
initramfs_demo() {
    local cmdline="console=ttyS0 tern.action=$action" initrd scenario rc
    if ((direct)); then
        initrd="$TH_CACHE/demo-guest-initramfs.cpio.gz"
        th_log "building guest initramfs"
        "$repo/testhost/build-guest-initramfs.sh" "$initrd"
        th_log "tern run --kernel /boot/vmlinuz-$ver --initrd $initrd --cmdline \"$cmdline\""
        rc=0
        "$tern" run --kernel "$(th_kernel_image "$ver")" --initrd "$initrd" --cmdline "$cmdline" || rc=$?
        th_log "tern exited with status $rc"
        return "$rc"
    fi
    scenario="$(mktemp)"
    # shellcheck disable=SC2064  # the file's name now
    trap "rm -f '$scenario'" EXIT
    cat >"$scenario" <<EOS
echo "\$ tern run --kernel \$TH_GUEST_KERNEL --initrd \$TH_GUEST_INITRD --cmdline \"$cmdline\""
"\$TH_TERN" run --kernel "\$TH_GUEST_KERNEL" --initrd "\$TH_GUEST_INITRD" --cmdline "$cmdline"
rc=\$?
echo "tern exited with status \$rc"
exit \$rc
EOS
    local run_args=(--scenario "$scenario" --tern "$tern" --memory 2048 --timeout 600 --log "$TH_CACHE/logs/demo.log")
    [[ "$action" != shell ]] || run_args+=(--interactive)
    "$TH_DIR/run.sh" "${run_args[@]}"
}

# The Debian system: scripts/demo_debian_scenario.sh (on testhost/debian_lib.sh) boots and drives it,
# run by bash here or as the test host's scenario: the same guest, commands and exit status on both.
debian_demo() {
    local image="${TERN_DEMO_IMAGE:-$repo/build/images/debian-12.img}" cpus="${TERN_DEMO_CPUS:-2}"
    local memory="${TERN_DEMO_MEMORY:-1G}" scenario="$repo/scripts/demo_debian_scenario.sh" initrd rc=0 envs
    [[ -f "$image" ]] || die "no Debian image at $image: build it with images/debian/build.sh (scripts/setup.sh runs it: ~1–2 min the first time with its tree on a tmpfs, when >= 8 GiB of RAM are free, more on disk; it needs root and the Debian mirror), or set TERN_DEMO_IMAGE; 'scripts/demo.sh --initramfs' needs no image"
    envs=(DEMO_INTERACTIVE="$([[ -t 0 ]] && echo 1 || echo 0)" DEMO_CPUS="$cpus" DEMO_MEMORY="$memory"
        DEB_TERN_ARGS="${TERN_DEMO_ARGS:-}")
    th_log "Debian guest: image $image ($(du -h "$image" | cut -f1) used of $(du -h --apparent-size "$image" | cut -f1)), kernel $ver, $cpus vCPUs, $memory"
    if ((direct)); then
        initrd="/boot/initrd.img-$ver"
        [[ -r "$initrd" ]] || die "cannot read $initrd (Debian's initramfs-tools makes it with the kernel; reading it needs root)"
        envs+=(TH_TERN="$tern" TH_GUEST_KERNEL="$(th_kernel_image "$ver")" TH_DEBIAN_INITRD="$initrd"
            DEMO_DISK="$image" DEMO_TAP="${TERN_DEMO_TAP:-}" DEMO_L1_NET=0
            DEMO_LIB="$TH_DIR/debian_lib.sh" TH_L1_LIB="$TH_DIR/l1_lib.sh")
        [[ -n "${TERN_DEMO_TAP:-}" ]] || th_log "no network: set TERN_DEMO_TAP=tap0 to give the guest a tap (made e.g. with 'ip tuntap add tap0 mode tap')"
        th_log "booting the image read-write: what the guest changes stays in it (images/debian/build.sh --force rebuilds it)"
        env "${envs[@]}" bash "$scenario" || rc=$?
        th_log "tern exited with status $rc"
        return "$rc"
    fi
    [[ -z "${TERN_DEMO_TAP:-}" ]] || th_log "TERN_DEMO_TAP ignored: the test host makes its own tap (tap0)"
    local ip_bin=/usr/sbin/ip  # iproute2's (busybox's ip has no tuntap); L1 calls it by this path
    [[ -x "$ip_bin" ]] || die "$ip_bin missing; install the Debian package 'iproute2'"
    envs+=(DEMO_DISK=/dev/vda DEMO_TAP=tap0 DEMO_L1_NET=1)
    local log="$TH_CACHE/logs/demo-debian.log" e
    local run_args=(--scenario "$scenario" --tern "$tern" --memory 3072 --timeout 900 --stall 120 --log "$log"
        --disk "$image" --disk-snapshot --with-debian-initrd --bin "$ip_bin"
        --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk tun tap")
    for e in "${envs[@]}"; do run_args+=(--env "$e"); done
    [[ "${envs[0]}" == DEMO_INTERACTIVE=0 ]] || run_args+=(--interactive)
    th_run_retrying "$log" -- "$TH_DIR/run.sh" "${run_args[@]}" || rc=$?
    th_log "demo finished with status $rc (log: $log)"
    return "$rc"
}

if ((!direct)); then
    th_log "this host cannot run guests at hardware speed ($why): using the nested test host (QEMU TCG with SVM, see testhost/)"
fi
"${mode}_demo"  # its status is the script's (set -e)
