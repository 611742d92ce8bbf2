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
run_check_scenario snapshot SNAP-CHECK
