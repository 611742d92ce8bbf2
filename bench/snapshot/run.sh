#!/usr/bin/env bash
# Snapshot benchmark (not a test): in ONE nested test-host run, saves and restores guests of 128 MiB,
# 512 MiB and 1 GiB (half of RAM filled with random bytes in the guest) with QEMU 7.2 (-M pc; migrate
# to a file at its default bandwidth limit, and again with the limit removed; restore with -incoming
# from the file) and with tern (tern snapshot --exit; tern restore --resume). Records save throughput,
# pause time and restore latency (process start -> the first new "TICK n" line the restored guest
# prints; the guest ticks every 10 ms), plus the VMMs' own "running" events; bench/snapshot/scenario.sh
# has the exact definitions, docs/snapshot-benchmark.md the results. Snapshot files live in the test
# host's tmpfs (this measures the VMMs, not a disk). Total ~8 min here with the defaults.
# Writes results/<stamp>.json, <stamp>.md (table) and <stamp>-restore.svg (restore latency vs size).
#
# Usage: bench/snapshot/run.sh [--out FILE.json]
# Environment: BENCH_SIZES (MiB, default "128 512 1024"), BENCH_RUNS (default 5),
#   BENCH_VMMS (default "qemu-default qemu-unlimited tern"), TERN_BIN (default build/tern; tern is
#   skipped when it has no `snapshot` subcommand), BENCH_TIMEOUT (s per wait in L1, default 300),
#   TESTHOST_CACHE. Short check:
#   BENCH_SIZES=128 BENCH_RUNS=1 bench/snapshot/run.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

sizes="${BENCH_SIZES:-128 512 1024}" runs="${BENCH_RUNS:-5}" vmms="${BENCH_VMMS:-qemu-default qemu-unlimited tern}"
out="$here/results/$(date -u +%Y%m%d-%H%M%S).json"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
for s in $sizes; do [[ "$s" =~ ^[1-9][0-9]*$ ]] || th_die "BENCH_SIZES wants MiB numbers, got '$s'"; done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || th_die "BENCH_RUNS wants a number, got '$runs'"
th_need_cmd python3 python3
memory=8192  # L1: a 1 GiB guest, its snapshot files in tmpfs, and the restored guest at once

# 1. Guest initramfs: the busybox guest plus /actions/dirty-tick and /bin/dirty-tick (static).
ver="$(th_kernel_version)"
work="$TH_CACHE/snapshot"
mkdir -p "$work" "$(dirname "$out")" "$TH_CACHE/logs"
th_need_cmd gcc gcc
key="$(th_hash "$ver" "$here/guest-dirty-tick.sh" "$here/dirty_tick.c" "$(gcc --version | head -n 1)" "$TH_DIR/lib.sh" "$TH_DIR/build-guest-initramfs.sh" \
    "$TH_DIR/guest-init.sh" "$(command -v busybox)")"
initrd="$work/guest-$key.cpio.gz"
if [[ ! -f "$initrd" ]]; then
    th_log "building the guest initramfs with /actions/dirty-tick"
    tmp="$(mktemp -d)"
    mkdir -p "$tmp/actions" "$tmp/bin"
    install -m 0755 "$here/guest-dirty-tick.sh" "$tmp/actions/dirty-tick"
    gcc -O2 -static -Wall -Wextra -Werror -o "$tmp/bin/dirty-tick" "$here/dirty_tick.c" ||
        th_die "cannot build a static dirty_tick.c (needs libc6-dev)"
    "$TH_DIR/build-guest-initramfs.sh" "$initrd.tmp" --extra "$tmp"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tmp"
    find "$work" -name 'guest-*.cpio.gz' ! -name "$(basename "$initrd")" -delete
fi

# 2. One test-host run.
log="$TH_CACHE/logs/bench-snapshot.log"
args=(--scenario "$here/scenario.sh" --with-qemu --memory "$memory" --guest-initramfs "$initrd"
    --timeout 2400 --stall 180 --log "$log"
    --env "BENCH_SIZES=$sizes" --env "BENCH_RUNS=$runs" --env "BENCH_VMMS=$vmms"
    --env "BENCH_TIMEOUT=${BENCH_TIMEOUT:-300}")
tern="${TERN_BIN:-$repo/build/tern}"
if [[ " $vmms " == *" tern "* && -x "$tern" ]]; then
    if "$tern" snapshot --help >/dev/null 2>&1; then args+=(--tern "$tern"); else
        th_log "$tern has no 'snapshot' subcommand: tern's results will be missing"
        args+=(--no-tern)
    fi
else
    args+=(--no-tern)
fi
load_before="$(th_loadavg)"
t0="$(date +%s)"
snapshot_host_run() {
    "$repo/testhost/run.sh" "${args[@]}" | grep --line-buffered -E '^(BENCH-|TESTHOST-|  \| SNAP-)'
    return "${PIPESTATUS[0]}"
}
set +e
th_run_retrying "$log" -- snapshot_host_run  # a wedged test host is booted once more, saying so
rc=$?
set -e
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"
load_after="$(th_loadavg)"

# 3. JSON, Markdown table, SVG.
python3 "$here/summarize.py" "$log" --kernel "$ver" --runs "$runs" --wall-s "$(($(date +%s) - t0))" \
    --qemu-version "$(qemu-system-x86_64 --version | head -n 1)" \
    --test-host "$(th_test_host_desc "$memory")" \
    --host-load "$(th_host_load "$load_before" "$load_after")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" >"${out%.json}-restore.svg"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
th_log "wrote $out, ${out%.json}.md and ${out%.json}-restore.svg (console log: $log)"
