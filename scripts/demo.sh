#!/usr/bin/env bash
# Demo: tern boots Debian's stock cloud kernel with a busybox initramfs whose init prints
# "TERN-GUEST-MARKER nproc=... memtotal_kb=... release=..." and powers off.
# On a host with hardware virtualization (vmx/svm + /dev/kvm) it runs build/tern directly; otherwise
# inside the nested test host (testhost/run.sh: QEMU TCG emulating an AMD CPU with SVM).
#
# Usage: scripts/demo.sh [ACTION]   ACTION: poweroff (default), reboot, or shell (interactive)
# Environment: TERN_BIN (default build/tern). Exits with tern's exit status.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$repo/testhost/lib.sh"

action="${1:-poweroff}"
tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "tern not built at $tern: run 'cmake -S . -B build -G Ninja && cmake --build build' (or set TERN_BIN)"
cmdline="console=ttyS0 tern.action=$action"

if grep -qwE 'vmx|svm' /proc/cpuinfo && [[ -c /dev/kvm ]]; then
    ver="$(th_kernel_version)"
    initrd="$TH_CACHE/demo-guest-initramfs.cpio.gz"
    th_log "building guest initramfs"
    "$repo/testhost/build-guest-initramfs.sh" "$initrd"
    th_log "tern run --kernel /boot/vmlinuz-$ver --initrd $initrd --cmdline \"$cmdline\""
    set +e
    "$tern" run --kernel "$(th_kernel_image "$ver")" --initrd "$initrd" --cmdline "$cmdline"
    rc=$?
    th_log "tern exited with status $rc"
    exit "$rc"
fi

why="no vmx/svm flag in /proc/cpuinfo"
[[ -c /dev/kvm ]] || why="no /dev/kvm"
echo "demo: this host cannot run guests at hardware speed ($why); using the nested test host (QEMU TCG with SVM, see testhost/)."
scenario="$(mktemp)"
trap 'rm -f "$scenario"' EXIT
cat >"$scenario" <<EOS
echo "\$ tern run --kernel \$TH_GUEST_KERNEL --initrd \$TH_GUEST_INITRD --cmdline \"$cmdline\""
"\$TH_TERN" run --kernel "\$TH_GUEST_KERNEL" --initrd "\$TH_GUEST_INITRD" --cmdline "$cmdline"
rc=\$?
echo "tern exited with status \$rc"
exit \$rc
EOS
run_args=(--scenario "$scenario" --tern "$tern" --memory 2048 --timeout 600 --log "$TH_CACHE/logs/demo.log")
[[ "$action" != shell ]] || run_args+=(--interactive)
exec "$repo/testhost/run.sh" "${run_args[@]}"
