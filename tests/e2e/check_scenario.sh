# Sourced by e2e tests whose scenario prints one "<PREFIX> name=<check> PASS|FAIL <detail>" line per
# check (api_test.sh, snapshot_test.sh). Not a test itself (CTest registers *_test.sh only).
#
#   run_check_scenario NAME PREFIX
# builds a guest initramfs with the virtio-blk modules and tests/e2e/NAME_guest/ as --extra, runs
# tests/e2e/NAME_scenario.sh in one test-host boot (with tern and curl), then prints each check as
# "PASS|FAIL <check> <detail>" and "N passed, M failed"; returns 1 on any failure, when the test
# host failed, when no check ran, or when an expected check (CHECK_EXPECTED) did not run. Environment: TERN_BIN (default build/tern), E2E_LOG.
# Optional, set by the caller: CHECK_GUEST_MODULES (more guest modules), CHECK_GUEST_EXTRA (the
# guest's --extra directory instead of NAME_guest/), CHECK_RUN_ARGS (array: more run.sh arguments),
# CHECK_EXPECTED (array: the check names the scenario must print; each one missing from the log is
# a FAIL "<name> did not run", so a scenario that stops early or skips a case cannot pass on the
# checks it did print). Without CHECK_EXPECTED one PASS is enough, as before, and a NOTE says so.
run_check_scenario() {
    local name="$1" prefix="$2"
    local here repo tern guest modules log host_rc passed failed
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    repo="$(cd "$here/../.." && pwd)"
    source "$repo/testhost/lib.sh"
    tern="${TERN_BIN:-$repo/build/tern}"
    [[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
    th_need_cmd curl curl
    guest="$TH_CACHE/$name-guest-initramfs.cpio.gz"
    # The virtio modules let the guest see its disk (--disk or PUT /drives) as /dev/vda.
    modules="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk ${CHECK_GUEST_MODULES:-}"
    "$repo/testhost/build-guest-initramfs.sh" "$guest" --extra "${CHECK_GUEST_EXTRA:-$here/${name}_guest}" --modules "$modules"
    log="${E2E_LOG:-$TH_CACHE/logs/e2e-$name.log}"
    mkdir -p "$(dirname "$log")"
    : >"$log"

    local run_args=(--scenario "$here/${name}_scenario.sh" --tern "$tern" --guest-initramfs "$guest"
        --bin "$(command -v curl)" --timeout 900 --log "$log" ${CHECK_RUN_ARGS[@]+"${CHECK_RUN_ARGS[@]}"})
    set +e
    # A wedged test host (TCG) is booted once more, saying so: testhost/lib.sh th_run_retrying.
    th_run_retrying "$log" -- "$repo/testhost/run.sh" "${run_args[@]}" >/dev/null
    host_rc=$?
    set -e

    passed=$(grep -ac "^$prefix name=[^ ]* PASS" "$log" || true)
    failed=$(grep -ac "^$prefix name=[^ ]* FAIL" "$log" || true)
    grep -a "^$prefix" "$log" | sed "s/^$prefix name=\([^ ]*\) \(PASS\|FAIL\)/\2 \1/" || true
    if [[ -n "${CHECK_EXPECTED+x}" ]]; then
        local want
        for want in "${CHECK_EXPECTED[@]}"; do
            if ! grep -aq "^$prefix name=$want \(PASS\|FAIL\)" "$log"; then
                echo "FAIL $want did not run (log: $log)"
                failed=$((failed + 1))
            fi
        done
    else
        echo "NOTE no expected check list (CHECK_EXPECTED): any PASS counts"
    fi
    if [[ "$host_rc" != 0 && "$failed" == 0 ]]; then
        echo "FAIL test host: run.sh exited $host_rc (log: $log)"
        failed=$((failed + 1))
    fi
    [[ "$passed" -gt 0 ]] || { echo "FAIL no checks ran (log: $log)"; failed=$((failed + 1)); }
    echo "$passed passed, $failed failed"
    ((failed == 0))
}
