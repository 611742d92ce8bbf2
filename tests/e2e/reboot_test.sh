#!/usr/bin/env bash
# End-to-end reboot in place (--on-reboot, docs/lifecycle.md): in one nested test host boot
# (tests/e2e/reboot_scenario.sh, REBOOT-CHECK lines) a busybox guest with a disk writes a record to
# it and reboots; with --on-reboot restart the same tern process boots it again (the guest's marker
# twice on the one console, the record read back, the same API socket answering, a "reset" event,
# a snapshot of the restarted VM that restores);
# with the default (a kernel boot: exit) tern ends with status 3 as before.
#
# Usage: tests/e2e/reboot_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG.
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/check_scenario.sh"
# shellcheck disable=SC2034  # read by run_check_scenario
CHECK_EXPECTED=(socket first-boot second-boot marker-twice record-read-back same-socket-answers
    stats-resets state-running snapshot-after-reset snapshot-exit-status
    restored-after-reset-ticks power-off-status event-reset event-one-reset exit-status exit-one-boot)
run_check_scenario reboot REBOOT-CHECK
