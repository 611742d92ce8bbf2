#!/usr/bin/env bash
# End-to-end control API test: in one nested test host boot, tern is configured and operated purely
# through its API socket with curl (tests/e2e/api_scenario.sh, which prints API-CHECK lines), using a
# guest initramfs with the "tick" action (tests/e2e/api_guest/actions/tick).
#
# Usage: tests/e2e/api_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG.
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
th_need_cmd curl curl
guest="$TH_CACHE/api-guest-initramfs.cpio.gz"
# The virtio modules let the guest see the drive configured through PUT /drives as /dev/vda.
modules="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
"$repo/testhost/build-guest-initramfs.sh" "$guest" --extra "$here/api_guest" --modules "$modules"
log="${E2E_LOG:-$TH_CACHE/logs/e2e-api.log}"
mkdir -p "$(dirname "$log")"
: >"$log"

set +e
"$repo/testhost/run.sh" --scenario "$here/api_scenario.sh" --tern "$tern" --guest-initramfs "$guest" \
    --bin "$(command -v curl)" --timeout 900 --log "$log" >/dev/null
host_rc=$?
set -e

passed=$(grep -ac '^API-CHECK name=[^ ]* PASS' "$log" || true)
failed=$(grep -ac '^API-CHECK name=[^ ]* FAIL' "$log" || true)
grep -a '^API-CHECK' "$log" | sed 's/^API-CHECK name=\([^ ]*\) \(PASS\|FAIL\)/\2 \1/' || true
if [[ "$host_rc" != 0 && "$failed" == 0 ]]; then
    echo "FAIL test host: run.sh exited $host_rc (log: $log)"
    failed=$((failed + 1))
fi
[[ "$passed" -gt 0 ]] || { echo "FAIL no checks ran (log: $log)"; failed=$((failed + 1)); }
echo "$passed passed, $failed failed"
((failed == 0))
