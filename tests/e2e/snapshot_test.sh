#!/usr/bin/env bash
# End-to-end snapshot test (issue #5): in one nested test host boot, tern saves running guests and
# `tern restore` continues them (tests/e2e/snapshot_scenario.sh, which prints SNAP-CHECK lines;
# guest actions in tests/e2e/snapshot_guest/actions/): counters on 2 vCPUs and a disk writer go on
# from the saved point, a 512 MiB guest's memory file stays sparse and its data identical, and
# every bad save/restore input is refused with its own message.
#
# Usage: tests/e2e/snapshot_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG.
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
th_need_cmd curl curl
guest="$TH_CACHE/snapshot-guest-initramfs.cpio.gz"
# The virtio modules let the guest see its --disk as /dev/vda.
modules="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
"$repo/testhost/build-guest-initramfs.sh" "$guest" --extra "$here/snapshot_guest" --modules "$modules"
log="${E2E_LOG:-$TH_CACHE/logs/e2e-snapshot.log}"
mkdir -p "$(dirname "$log")"
: >"$log"

set +e
"$repo/testhost/run.sh" --scenario "$here/snapshot_scenario.sh" --tern "$tern" --guest-initramfs "$guest" \
    --bin "$(command -v curl)" --timeout 900 --log "$log" >/dev/null
host_rc=$?
set -e

passed=$(grep -ac '^SNAP-CHECK name=[^ ]* PASS' "$log" || true)
failed=$(grep -ac '^SNAP-CHECK name=[^ ]* FAIL' "$log" || true)
grep -a '^SNAP-CHECK' "$log" | sed 's/^SNAP-CHECK name=\([^ ]*\) \(PASS\|FAIL\)/\2 \1/' || true
if [[ "$host_rc" != 0 && "$failed" == 0 ]]; then
    echo "FAIL test host: run.sh exited $host_rc (log: $log)"
    failed=$((failed + 1))
fi
[[ "$passed" -gt 0 ]] || { echo "FAIL no checks ran (log: $log)"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
((failed == 0))
