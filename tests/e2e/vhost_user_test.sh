#!/usr/bin/env bash
# shellcheck disable=SC2034  # the CHECK_* variables are read by run_check_scenario
# End-to-end vhost-user-blk test (issue #11), in one nested test host boot with QEMU and
# qemu-storage-daemon in it (tests/e2e/vhost_user_scenario.sh + vhost_user_faults.sh, which print
# VU-CHECK lines; guest actions in tests/e2e/vhost_user_guest/actions/): the interop matrix tern /
# QEMU front-end x qemu-storage-daemon / tern back-end with 2 queues on 2 vCPUs (the guest makes
# ext4, writes 64 MiB, reads them back; L1 runs e2fsck -fn and compares the bytes), read-only
# exports, refusals before boot (fewer queues offered, a back-end that never answers, no back-end),
# the back-end SIGKILLed and restarted during the guest's writes, and a snapshot/restore with the
# back-end kept running.
#
# Usage: tests/e2e/vhost_user_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG,
#   E2E_VU_CASES="qq qqro": only these cases (debugging; default all, see the scenario's header).
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/check_scenario.sh"
source "$here/../../testhost/lib.sh"
th_need_cmd qemu-storage-daemon qemu-system-common
th_need_cmd jq jq
th_need_cmd gcc gcc
export PATH="$PATH:/usr/sbin:/sbin"
for t in mke2fs e2fsck debugfs; do th_need_cmd "$t" e2fsprogs; done

work="$TH_CACHE/vhost-user-e2e"
rm -rf "$work"
# The guest: the actions plus mke2fs (busybox's makes no ext4) with its libraries...
mkdir -p "$work/guest" "$work/l1/testhost" "$work/l1/usr/local/bin"
cp -a "$here/vhost_user_guest/." "$work/guest/"
th_copy_with_libs "$(command -v mke2fs)" "$work/guest" /sbin/mke2fs
# ... and a user-space virtio-blk driver: the read-only cases post a write the device must refuse.
mkdir -p "$work/guest/bin"
gcc -static -O2 -Wall -Wextra -Werror -o "$work/guest/bin/tern-hostile-blk" "$here/hostile_virtio/hostile_blk.c"
# L1: the scenario's second half, a back-end that never answers and the inflight-region counter
# (built here, static).
cp "$here/vhost_user_faults.sh" "$work/l1/testhost/"
gcc -static -O2 -Wall -Wextra -Werror -o "$work/l1/usr/local/bin/vhost_user_silent" "$here/vhost_user_silent.c"
gcc -static -O2 -Wall -Wextra -Werror -o "$work/l1/usr/local/bin/vhost_user_inflight" "$here/vhost_user_inflight.c"

CHECK_GUEST_EXTRA="$work/guest"
# --stall: a test host left at 0% CPU (a TCG wedge at a nested guest's start) is killed after 120 s
# and booted once more (th_run_retrying) instead of waiting for the timeout.
CHECK_RUN_ARGS=(--with-qemu --with-qsd --extra "$work/l1" --stall 120)
for t in mke2fs e2fsck debugfs jq; do CHECK_RUN_ARGS+=(--bin "$(command -v "$t")"); done
if [[ -n "${E2E_VU_CASES:-}" ]]; then CHECK_RUN_ARGS+=(--env "VU_CASES=$E2E_VU_CASES"); fi
run_check_scenario vhost_user VU-CHECK
