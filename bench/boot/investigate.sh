#!/usr/bin/env bash
# Where a boot's time and memory go (not a benchmark: tracing slows the guest). Runs
# bench/boot/investigate_scenario.sh in one test host and writes its INV-* sections to
# results/investigate.txt (the raw material of docs/boot.md "Where it goes").
#
# Usage: bench/boot/investigate.sh [--vmms "tern qemu-pc qemu-microvm"]   (TERN_BIN overrides build/tern)
#        bench/boot/investigate.sh --experiments [--runs N]
#   --experiments  instead: bench/boot/experiments_scenario.sh (tern with 2 MiB pages for its guest
#                  RAM, QEMU with -cpu host), written to results/experiments.txt
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

vmms="tern qemu-pc qemu-microvm" experiments=0 runs=3
while [[ $# -gt 0 ]]; do
    case "$1" in
        --vmms) vmms="$2"; shift 2 ;;
        --experiments) experiments=1; shift ;;
        --runs) runs="$2"; shift 2 ;;
        -h | --help) sed -n '2,10p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "no tern binary at $tern (build it, or set TERN_BIN)"
if [[ "$experiments" == 1 ]]; then
    scenario="$here/experiments_scenario.sh" name=experiments env="EXP_RUNS=$runs"
else
    scenario="$here/investigate_scenario.sh" name=investigate env="INV_VMMS=$vmms"
fi
log="$TH_CACHE/logs/bench-boot-$name.log"
out="$here/results/$name.txt"
mkdir -p "$(dirname "$log")" "$(dirname "$out")"
investigate_host_run() {
    "$repo/testhost/run.sh" --scenario "$scenario" --with-qemu --tern "$tern" --memory 2048 \
        --timeout 2400 --stall 120 --log "$log" --env "$env" | grep --line-buffered -E '^(INV-|EXP-|TESTHOST-)'
    return "${PIPESTATUS[0]}"
}
set +e
th_run_retrying "$log" -- investigate_host_run  # a wedged test host is booted once more, saying so
rc=$?
set -e
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"
if [[ "$experiments" == 1 ]]; then
    { echo "# $(date -u +%FT%TZ), host load $(cut -d' ' -f1-3 /proc/loadavg)"; grep -a '^EXP-' "$log"; } >"$out"
else
    awk '/^INV-BEGIN/ { on = 1 } on { print } /^INV-END/ { on = 0 }' "$log" >"$out"
fi
th_log "wrote $out (console log: $log)"
