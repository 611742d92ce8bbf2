#!/usr/bin/env bash
# Where a boot's time and memory go (not a benchmark: tracing slows the guest). Runs
# bench/boot/investigate_scenario.sh in one test host and writes its INV-* sections to
# results/investigate.txt (the raw material of docs/boot.md "Where it goes").
#
# Usage: bench/boot/investigate.sh [--vmms "tern tern-pvh qemu-pc qemu-microvm"] [--parts "exits timeline dmesg debuglog memory"]
#        bench/boot/investigate.sh --debian [--boots "tern qemu tern"]
#        bench/boot/investigate.sh --experiments [--runs N]
#   (default --vmms "tern qemu-pc", parts: all but timeline and memory; see investigate_scenario.sh)
#   --debian       instead: bench/boot/investigate_debian_scenario.sh (the real Debian guest of
#                  images/debian, DEBIAN_IMG or build/images/debian-12.img: systemd-analyze, kernel
#                  log), written to results/investigate-debian.txt
#   --experiments  instead: bench/boot/experiments_scenario.sh (tern with 2 MiB pages for its guest
#                  RAM, QEMU with -cpu host), written to results/experiments.txt
#   --out FILE     write there instead of results/<name>.txt
# Environment: TERN_BIN (default build/tern), TERN_BOOT_ARGS (words appended to every tern's `run`
# options, e.g. "--boot-protocol pvh"), INV_CMDLINE (words added to the busybox guest's command
# line, e.g. "cryptomgr.notests"), TESTHOST_CACHE (as for testhost/run.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

vmms="tern qemu-pc" parts="exits dmesg debuglog" experiments=0 debian=0 runs=3 boots="tern qemu tern" out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --vmms) vmms="$2"; shift 2 ;;
        --parts) parts="$2"; shift 2 ;;
        --experiments) experiments=1; shift ;;
        --debian) debian=1; shift ;;
        --boots) boots="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "no tern binary at $tern (build it, or set TERN_BIN)"
extra=() l1mem=2048
if [[ "$experiments" == 1 ]]; then
    scenario="$here/experiments_scenario.sh" name=experiments env=(--env "EXP_RUNS=$runs")
elif [[ "$debian" == 1 ]]; then
    img="${DEBIAN_IMG:-$repo/build/images/debian-12.img}"
    [[ -f "$img" ]] || th_die "no Debian image at $img (images/debian/build.sh builds it; or set DEBIAN_IMG)"
    scenario="$here/investigate_debian_scenario.sh" name=investigate-debian
    env=(--env "INV_DEB_BOOTS=$boots" --env "TERN_BOOT_ARGS=${TERN_BOOT_ARGS:-}")
    l1mem=3072 extra=(--disk "$img" --disk-snapshot --with-debian-initrd
        --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk")
else
    scenario="$here/investigate_scenario.sh" name=investigate
    env=(--env "INV_VMMS=$vmms" --env "INV_PARTS=$parts" --env "TERN_BOOT_ARGS=${TERN_BOOT_ARGS:-}"
        --env "INV_CMDLINE=${INV_CMDLINE:-}")
fi
log="$TH_CACHE/logs/bench-boot-$name.log"
out="${out:-$here/results/$name.txt}"
mkdir -p "$(dirname "$log")" "$(dirname "$out")"
investigate_host_run() {
    "$repo/testhost/run.sh" --scenario "$scenario" --with-qemu --tern "$tern" --memory "$l1mem" \
        --timeout 2400 --stall 120 --log "$log" "${env[@]}" ${extra[@]+"${extra[@]}"} | grep --line-buffered -E '^(INV-|EXP-|TESTHOST-)'
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
    { echo "# $(date -u +%FT%TZ), host load $(cut -d' ' -f1-3 /proc/loadavg), tern $(git -C "$repo" rev-parse --short HEAD) $tern, TERN_BOOT_ARGS='${TERN_BOOT_ARGS:-}'"
      grep -a '^INV-INFO' "$log"
      awk '/^INV-BEGIN/ { on = 1 } on { print } /^INV-END/ { on = 0 } /^INV-DEB-EXIT/ { print }' "$log"; } >"$out"
fi
th_log "wrote $out (console log: $log)"
