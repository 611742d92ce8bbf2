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
source "$(dirname "${BASH_SOURCE[0]}")/check_scenario.sh"
# shellcheck disable=SC2034  # read by run_check_scenario
CHECK_EXPECTED=(guest-counting run-vm-config-drives save-full-disk save-full-disk-leaves-nothing
    running-after-failed-save save-unwritable-path save save-exit-status bad-truncated-state
    bad-flipped-byte bad-major-version bad-missing-mem bad-short-mem bad-disk-gone bad-disk-size
    api-load api-load-machine-config bad-load-into-existing-vm api-load-power-off
    restored-guest-runs counter-continues-cpu0 timer-ticks-cpu0 counter-continues-cpu1
    timer-ticks-cpu1 disk-writer-continues restored-api restored-machine-config
    restored-vm-config-drives restored-exit-status disk-records-intact mem-guest-ready mem-save
    mem-file-sparse mem-restored-runs mem-restored-machine-config mem-identical mem-restored-exit
    cancel-saving cancel-by-power-off cancel-leaves-nothing resave-guest-ready resave-first-save
    resave-restore-1 resave-kill-saving resave-kill-keeps-old-pair resave-restore-2
    resave-killed-save-data-intact resave-disk-refused resave-same-file-refused
    resave-refusals-keep-files resave-to-own-memory-file resave-running-vm-intact
    restore-while-running-refused resave-restore-3 resave-identical)
run_check_scenario snapshot SNAP-CHECK
