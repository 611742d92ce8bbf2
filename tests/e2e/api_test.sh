#!/usr/bin/env bash
# End-to-end control API test: in one nested test host boot, tern is configured and operated purely
# through its API socket with curl (tests/e2e/api_scenario.sh, which prints API-CHECK lines), using a
# guest initramfs with the "tick" action (tests/e2e/api_guest/actions/tick).
#
# Usage: tests/e2e/api_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG.
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/check_scenario.sh"
# shellcheck disable=SC2034  # read by run_check_scenario
CHECK_EXPECTED=(socket boot-source machine-config drive get-machine-config instance-start
    instance-start-twice config-after-start guest-marker guest-sees-drive ticking
    running-vcpu-runs-move pause info-paused pause-while-paused paused-no-kvm-run resume
    resumed-ticks resume-while-running ctrl-alt-del ctrl-alt-del-reboot-status
    guest-saw-ctrl-alt-del event-reboot event-paused config-file-boot ctl-pause ctl-info-paused
    ctl-resume ctl-stats ctl-power-off power-off-status run-socket run-vm-config-drives
    run-vm-config-machine run-machine-config run-power-off run-power-off-status)
run_check_scenario api API-CHECK
