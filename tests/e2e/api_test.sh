#!/usr/bin/env bash
# End-to-end control API test: in one nested test host boot, tern is configured and operated purely
# through its API socket with curl (tests/e2e/api_scenario.sh, which prints API-CHECK lines), using a
# guest initramfs with the "tick" action (tests/e2e/api_guest/actions/tick).
#
# Usage: tests/e2e/api_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG.
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/check_scenario.sh"
run_check_scenario api API-CHECK
