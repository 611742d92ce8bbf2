#!/usr/bin/env bash
# Build-server benchmark (not a test): a timed slice of a Linux kernel build (Debian's
# linux-source-6.1, bench/build/slice.sh) in ONE run of the nested test host, interleaved rounds of
#   host            the test host itself, chrooted into the Debian disk (no VMM)
#   tern-writeback  the Debian guest (images/debian) under tern, virtio-blk, cache=writeback
#   qemu-writeback  the same guest under QEMU 7.2 -M pc -enable-kvm, virtio-blk-pci, cache=writeback
#   tern-none, qemu-none   the same with cache=none (O_DIRECT)
#   tern-nvme, qemu-nvme   the emulated NVMe controller, cache=none (guest root /dev/nvme0n1)
# every VM with the same vCPUs and memory, all on one disk: a prepared copy of the Debian image
# (prepare-image.sh: `make prepare` done natively) that the test host gets as its /dev/vda with
# snapshot=on. Reports wall time, guest/host and tern/QEMU ratios, the VMM's host CPU (in and outside
# guest mode) and KVM's and tern's exits per second of build. Writes DIR/build.json, DIR/build.md,
# DIR/build.svg and DIR/console.log (DIR: results/<date>-<objects>obj unless --out says).
#
# Usage: bench/build/run.sh [--image IMG] [--configs LIST] [--rounds N] [--objects N] [--jobs N]
#                           [--cpus N] [--memory MIB] [--tern PATH] [--out DIR/build.json]
#   --image IMG    the Debian image (default $TERN_DEBIAN_IMAGE, else build/images/debian-12.img)
#   --configs LIST which configurations, in this order within a round (default: host tern-writeback
#                  qemu-writeback tern-none qemu-none tern-nvme qemu-nvme)
#   --rounds N     interleaved rounds (default 3); results are medians with min-max
#   --objects N    the slice: the first N object files of slice.txt (default 1)
#   --jobs N       make -jN (default 2, the guest's vCPUs)
#   --cpus N, --memory MIB   the guest (default 2 vCPUs, 2048 MiB)
#   --tern PATH    the tern binary (default $TERN_BIN, else build/tern)
#   --build-timeout SEC   how long one build may take in the test host (default 900)
# Test-host runs hold /tmp/testhost-bench.lock (flock), so at most one benchmark L1 runs at a time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

image="${TERN_DEBIAN_IMAGE:-$repo/build/images/debian-12.img}" rounds=3 objects=1 jobs=2 cpus=2 mem=2048 out="" build_timeout=900
configs="host tern-writeback qemu-writeback tern-none qemu-none tern-nvme qemu-nvme" tern="${TERN_BIN:-$repo/build/tern}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --image) image="$2"; shift 2 ;;
        --configs) configs="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --objects) objects="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --cpus) cpus="$2"; shift 2 ;;
        --memory) mem="$2"; shift 2 ;;
        --tern) tern="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --build-timeout) build_timeout="$2"; shift 2 ;;
        -h | --help) sed -n '2,28p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
for v in rounds objects jobs cpus mem build_timeout; do
    n="${v//_/-}"
    [[ "${!v}" =~ ^[1-9][0-9]*$ ]] || th_die "--${n/#mem/memory} wants a positive whole number, got '${!v}'"
done
nobj="$(grep -v '^#' "$here/slice.txt" | grep -vc '^ *$')"
((objects <= nobj)) || th_die "--objects $objects: slice.txt lists $nobj object files"
for c in $configs; do
    [[ "$c" =~ ^(host|(tern|qemu)-(writeback|none|nvme))$ ]] ||
        th_die "--configs: '$c' is none of host, tern-writeback, tern-none, tern-nvme, qemu-writeback, qemu-none, qemu-nvme"
done
[[ "$(tr ' ' '\n' <<<"$configs" | sort | uniq -d)" == "" ]] || th_die "--configs: a configuration is given twice"
[[ -f "$image" ]] || th_die "--image: no Debian image at $image (images/debian/build.sh builds it)"
[[ " $configs " != *" tern-"* || -x "$tern" ]] || th_die "--tern: not an executable: $tern (cmake --build build --target tern)"
tern="$(readlink -f "$tern")"
th_need_cmd python3 python3
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y-%m-%d)-${objects}obj/build.json"
[[ "$out" == *.json ]] || th_die "--out wants a FILE.json, got '$out'"
mkdir -p "$(dirname "$out")"
work="$TH_CACHE/build-bench"
mkdir -p "$work" "$TH_CACHE/logs"

# 1. The prepared disk (cached) and L1's extra files: tern without its debug sections (a
#    RelWithDebInfo build would cost L1 ~170 MB of RAM to unpack) and bench/blk's sampling helpers.
disk="$("$here/prepare-image.sh" "$image" "$work")"
extra="$(mktemp -d)"
trap 'rm -rf "$extra"' EXIT
strip --strip-debug -o "$extra/tern" "$tern" 2>/dev/null || cp "$tern" "$extra/tern"
th_copy_with_libs "$extra/tern" "$extra/root" /usr/local/bin/tern
install -D -m 0644 "$repo/bench/blk/blk-lib.sh" "$extra/root/opt/build/blk-lib.sh"

# 2. One test-host run (a wedged one is booted once more). Last-resort timeout: 20 min per
#    configuration and round beyond a first 10; the stall watch catches a wedged L1 much sooner.
ncfg="$(wc -w <<<"$configs")"
log="$TH_CACHE/logs/bench-build.log" stamps="$work/stamps.txt" pidfile="$work/l1.pid"
args=(--scenario "$here/scenario.sh" --with-qemu --with-debian-initrd --no-tern --extra "$extra/root"
    --disk "$disk" --disk-snapshot --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
    --timeout $((600 + rounds * ncfg * 1200)) --stall 120 --log "$log" --pidfile "$pidfile"
    --env TH_TERN=/usr/local/bin/tern --env "BUILD_CONFIGS=$configs" --env "BUILD_ROUNDS=$rounds"
    --env "BUILD_OBJECTS=$objects" --env "BUILD_JOBS=$jobs" --env "BUILD_CPUS=$cpus" --env "BUILD_MEM_MIB=$mem" --env "BUILD_TIMEOUT=$build_timeout")
build_host_run() {
    : >"$stamps"
    "$repo/testhost/run.sh" "${args[@]}" |
        python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(BUILD-(PROGRESS|ERROR|RESULT|INFO)|TESTHOST-)' '^BUILD-MARK' "$stamps"
    return "${PIPESTATUS[0]}"
}
load_before="$(th_loadavg)"
th_log "configurations: $configs; $rounds round(s); slice: $objects of $nobj objects, make -j$jobs; guest ${cpus} vCPUs ${mem} MiB; tern $tern; waiting for /tmp/testhost-bench.lock"
exec 9>/tmp/testhost-bench.lock
flock 9
set +e
th_run_retrying "$log" -- build_host_run
rc=$?
set -e
flock -u 9
load_after="$(th_loadavg)"
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"

# 3. JSON, Markdown table, SVG plot.
rev="$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
python3 "$here/summarize.py" "$log" --kernel "$(th_kernel_version)" --configs "$configs" --rounds "$rounds" \
    --objects "$objects" --stamps "$stamps" --git-rev "$rev" --tern "$tern" --image "$image" --cpus "$cpus" \
    --memory-mib "$mem" --test-host "$(th_test_host_desc 6144)" \
    --host-load "$(th_host_load "$load_before" "$load_after")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" "${out%.json}.svg"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
cp "$log" "$(dirname "$out")/console.log"
th_log "wrote $out, ${out%.json}.md, ${out%.json}.svg and $(dirname "$out")/console.log"
