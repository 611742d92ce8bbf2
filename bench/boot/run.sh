#!/usr/bin/env bash
# Boot benchmark (not a test): in ONE nested test-host run, boots Debian's stock cloud kernel with
# the busybox guest initramfs (256 MiB, 1 vCPU, direct kernel boot) N times each with tern,
# QEMU -M microvm and QEMU -M pc; records time to the guest's marker line and to VMM exit, and each
# VMM's resident memory outside guest RAM for an idle guest. Writes results/boot.json and boot.md.
#
# Usage: bench/boot/run.sh [--runs N] [--out FILE.json]     (TERN_BIN overrides build/tern)
# tern is measured when its binary exists; otherwise (or if it fails) its numbers are null + error.
# Besides L1's wall clock it records the host CPU time L1's QEMU spent per boot (bench/lib/stamp_cpu.py),
# which depends much less on the load of this shared machine, and the host's load average.
# A test host that wedges (no CPU for 120 s, seen once when a nested guest started; or still running
# at the timeout) is booted once more (testhost/lib.sh th_run_retrying).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

runs=5 out="$here/results/boot.json"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h | --help) sed -n '2,8p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
th_need_cmd python3 python3
memory=2048
log="$TH_CACHE/logs/bench-boot.log"
stamps="$TH_CACHE/logs/bench-boot.stamps"
pidfile="$TH_CACHE/bench-boot.pid"
args=(--scenario "$here/scenario.sh" --with-qemu --memory "$memory" --timeout 1800 --log "$log"
    --stall 120 --pidfile "$pidfile" --env "BENCH_RUNS=$runs")
tern="${TERN_BIN:-$repo/build/tern}"
if [[ -x "$tern" ]]; then args+=(--tern "$tern"); else
    th_log "no tern binary at $tern: tern's results will be null"
    args+=(--no-tern)
fi
mkdir -p "$(dirname "$log")" "$(dirname "$out")"
load_before="$(th_loadavg)"
# boot_host_run: one test-host run; only the benchmark's own lines reach the terminal (the full
# console goes to $log), the boots' host-CPU stamps to $stamps.
boot_host_run() {
    : >"$stamps"
    "$repo/testhost/run.sh" "${args[@]}" |
        python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(BENCH-|TESTHOST-)' '^BENCH-(PROGRESS boot|SAMPLE)' "$stamps"
    return "${PIPESTATUS[0]}"
}
set +e
th_run_retrying "$log" -- boot_host_run
rc=$?
set -e
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"
load_after="$(th_loadavg)"

python3 "$here/summarize.py" "$log" --kernel "$(th_kernel_version)" --runs "$runs" --stamps "$stamps" \
    --host-load "$(th_host_load "$load_before" "$load_after")" \
    --test-host "$(th_test_host_desc "$memory")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
th_log "wrote $out and ${out%.json}.md (console log: $log)"
