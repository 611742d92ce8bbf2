#!/usr/bin/env bash
# shellcheck disable=SC2034  # the CHECK_* variables are read by run_check_scenario
# End-to-end test of a real Debian guest (issue #14): the Debian 12 image that images/debian/build.sh
# builds (docs/debian-guest.md) booted under tern with Debian's own kernel and initrd, in one nested
# test host boot (tests/e2e/debian_scenario.sh, with testhost/debian_lib.sh; it prints DEB-CHECK
# lines): bad input refused naming the file (missing image, read-only image, an image a running tern
# holds); 1 vCPU on virtio-blk
# with a DHCP lease from busybox udhcpd and an HTTP fetch from busybox httpd (sha256 compared),
# poweroff -> exit 0; 2 vCPUs with root on NVMe, reboot -> exit 3; a snapshot at the login prompt
# restored, a command typed afterwards runs; the Debian guest booted from a qcow2 overlay over the
# image (backing_files=on; refused without), qemu-img check clean after, then QEMU (--with-qemu)
# boots that overlay and its guest reads the file tern's guest wrote; e2fsck -fn clean in L1 after each. The image is L1's
# /dev/vda through a QEMU snapshot overlay: it is never changed.
#
# Usage: tests/e2e/debian_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG,
#   DEBIAN_IMG (default build/images/debian-12.img of this checkout, else of the main checkout
#   whose worktree this is), E2E_DEB_CASES="vda1 snap2": only these cases (default all),
#   E2E_DEB_LOCK_CHECK=0: skip the second-writer check.
# Prints the PASS/FAIL line of each check, each case's time and "N passed, M failed"; exits 1 on
# any failure, and when the image is missing (naming the command that builds it).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$here/check_scenario.sh"
source "$repo/testhost/lib.sh"
t0=$(date +%s)

img="${DEBIAN_IMG:-$repo/build/images/debian-12.img}"
if [[ -z "${DEBIAN_IMG:-}" && ! -f "$img" ]]; then
    # A worktree shares the main checkout's image (it is built once: images/debian/build.sh).
    main="$(git -C "$repo" worktree list --porcelain 2>/dev/null | sed -n '1s/^worktree //p')"
    [[ -z "$main" || ! -f "$main/build/images/debian-12.img" ]] || img="$main/build/images/debian-12.img"
fi
if [[ ! -f "$img" ]]; then
    echo "FAIL debian-image: $img does not exist; build it with images/debian/build.sh (scripts/setup.sh runs it), or set DEBIAN_IMG"
    echo "0 passed, 1 failed"
    exit 1
fi
ip_bin=/usr/sbin/ip  # iproute2's (busybox's ip has no tuntap); L1 calls it by this path
[[ -x "$ip_bin" ]] && "$ip_bin" -V 2>&1 | grep -q iproute2 || th_die "$ip_bin is not iproute2's ip; install the Debian package 'iproute2'"
th_need_cmd e2fsck e2fsprogs
th_need_cmd qemu-img qemu-utils
echo "image: $img ($(du -h "$img" | cut -f1) used)"

# The guest boots from Debian's initrd, not from the test's initramfs: CHECK_GUEST_EXTRA is an empty
# directory with a fixed time (the initramfs, and so the cached L1 layer, stay the same).
CHECK_GUEST_EXTRA="$TH_CACHE/debian-guest-empty"
mkdir -p "$CHECK_GUEST_EXTRA"
touch -d @0 "$CHECK_GUEST_EXTRA"
# L1: the image as /dev/vda (virtio modules), tun/tap for the guest's network, e2fsck; --stall: a
# test host left at 0% CPU is killed after 120 s and booted once more (th_run_retrying).
CHECK_RUN_ARGS=(--disk "$img" --disk-snapshot --with-debian-initrd --memory 3072 --timeout 1500 --stall 120
    --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk tun tap"
    --bin "$ip_bin" --bin "$(command -v e2fsck)" --bin "$(command -v qemu-img)"
    --env "DEB_LOCK_CHECK=${E2E_DEB_LOCK_CHECK:-1}" --with-qemu)
if [[ -n "${E2E_DEB_CASES:-}" ]]; then CHECK_RUN_ARGS+=(--env "DEB_CASES=$E2E_DEB_CASES"); fi
export E2E_LOG="${E2E_LOG:-$TH_CACHE/logs/e2e-debian.log}"
rc=0
run_check_scenario debian DEB-CHECK || rc=$?
grep -a '^DEB-TIME' "$E2E_LOG" | sed 's/^DEB-TIME /time: /' || true
echo "wall time: $(($(date +%s) - t0)) s (log: $E2E_LOG)"
exit "$rc"
