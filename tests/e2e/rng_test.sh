#!/usr/bin/env bash
# shellcheck disable=SC2034  # the CHECK_* variables are read by run_check_scenario
# End-to-end virtio-rng test (issue #9): in one nested test host boot, tern runs guests with --rng
# (tests/e2e/rng_scenario.sh, which prints RNG-CHECK lines; guest actions in
# tests/e2e/rng_guest/actions/): the guest reads 1 MiB from /dev/hwrng through virtio_rng, a saved
# and restored VM reads again, a hostile user-space driver (tests/e2e/hostile_virtio/hostile_rng.c,
# built here with gcc -static) posts malformed chains and tern answers or resets the queue, a
# rate-limited rng and one configured with PUT /entropy still deliver.
#
# Usage: tests/e2e/rng_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG,
#   E2E_RNG_VMM=qemu: the same guest checks against QEMU's virtio-rng-pci (tern's API checks skipped).
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/check_scenario.sh"
source "$here/../../testhost/lib.sh"
CHECK_GUEST_EXTRA="$TH_CACHE/rng-guest-extra"
rm -rf "$CHECK_GUEST_EXTRA"
mkdir -p "$CHECK_GUEST_EXTRA/bin"
cp -a "$here/rng_guest/." "$CHECK_GUEST_EXTRA/"
gcc -static -O2 -Wall -Wextra -Werror -o "$CHECK_GUEST_EXTRA/bin/tern-hostile-rng" "$here/hostile_virtio/hostile_rng.c"
CHECK_GUEST_MODULES=virtio_rng
CHECK_RUN_ARGS=()
# Every check the scenario prints (cases 1-3; with tern also its API checks and case 4).
CHECK_EXPECTED=(rng-current read-1mib save restored-reads restored-continues restored-stop hostile-ran
    hostile-vmm-survives hostile-good hostile-readonly hostile-zerolen hostile-loop hostile-badnext
    hostile-badhead hostile-oob hostile-overflow hostile-huge hostile-indirect hostile-jump
    hostile-good-again hostile-disk-works hostile-rebound-current hostile-rebound-read
    limited-read-1mib limited-exit)
if [[ "${E2E_RNG_VMM:-tern}" == qemu ]]; then
    CHECK_RUN_ARGS=(--with-qemu --env RNG_VMM=qemu)
else
    CHECK_EXPECTED+=(vm-config-entropy restored-vm-config-entropy limited-vm-config
        bad-rng-zero-bandwidth bad-rng-unknown-key api-boot-source api-machine-config api-bad-entropy
        api-entropy api-vm-config-entropy api-instance-start api-entropy-after-start api-rng-current
        api-read-1mib api-exit)
fi
run_check_scenario rng RNG-CHECK
