#!/usr/bin/env bash
# Block benchmark (not a test): fio inside the stock-kernel guest on a virtio-blk disk, for QEMU
# (virtio-blk-pci, cache=none, aio=io_uring) and for tern (--disk path=...,cache=none,io=io_uring;
# skipped while `tern run --help` lists no --disk), all in ONE nested test-host run:
#   4 KiB random read and random write at queue depth 1, 4, 16, 64, and the Iometer web-server,
#   file-server and database mixes (bench/blk/jobs.txt), each for a fixed time (default 5 s);
#   IOPS, mean and p99 latency (fio JSON), and the VMM's CPU time per I/O (/proc/PID/stat in L1).
# The data disk is a 512 MiB file of random bytes on an ext4 disk of the test host (tmpfs has no
# O_DIRECT). Writes results/blk.json, results/blk.md and results/blk-iops.svg (IOPS vs queue depth).
#
# Usage: bench/blk/run.sh [--vmms "qemu tern"] [--runtime SEC] [--engine libaio|io_uring]
#                         [--tern-disk OPTS] [--data-mib N] [--out FILE.json]
#   --tern-disk OPTS  what follows path=FILE in tern's --disk (default cache=none,io=io_uring)
# Environment: TERN_BIN (default build/tern), TESTHOST_CACHE (default build/testhost).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

vmms="qemu tern" runtime=5 engine=libaio tern_disk="cache=none,io=io_uring" data_mib=512
out="$here/results/blk.json"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --vmms) vmms="$2"; shift 2 ;;
        --runtime) runtime="$2"; shift 2 ;;
        --engine) engine="$2"; shift 2 ;;
        --tern-disk) tern_disk="$2"; shift 2 ;;
        --data-mib) data_mib="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h | --help) sed -n '2,16p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ "$runtime" =~ ^[1-9][0-9]*$ ]] || th_die "--runtime wants whole seconds, got '$runtime'"
[[ "$engine" == libaio || "$engine" == io_uring ]] || th_die "--engine must be libaio or io_uring, got '$engine'"
[[ "$data_mib" =~ ^[1-9][0-9]*$ ]] || th_die "--data-mib wants a number of MiB, got '$data_mib'"
th_need_cmd fio fio
th_need_cmd python3 python3
th_need_cmd mke2fs e2fsprogs
th_need_cmd debugfs e2fsprogs

mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
work="$TH_CACHE/blk"
mkdir -p "$work" "$(dirname "$out")"
ver="$(th_kernel_version)"

# 1. Guest initramfs: fio with every library ldd lists (an uncompressed cpio first, ~80 MB), then the
#    busybox guest (gzip) with the virtio modules, /actions/fio-bench and /etc/blk-jobs.
fio_bin="$(command -v fio)"
key="$(th_hash "$ver" "$mods" "$here/guest-fio-bench.sh" "$here/jobs.txt" "$TH_DIR/lib.sh" \
    "$TH_DIR/build-guest-initramfs.sh" "$TH_DIR/guest-init.sh" "$(command -v busybox)" "$fio_bin" \
    "$(ldd "$fio_bin" | awk '{ print $1, $3 }')")"
initrd="$work/guest-fio-$key.cpio"
if [[ ! -f "$initrd" ]]; then
    th_log "building the guest initramfs with fio"
    tmp="$(mktemp -d)"
    mkdir -p "$tmp/extra/actions" "$tmp/extra/etc"
    install -m 0755 "$here/guest-fio-bench.sh" "$tmp/extra/actions/fio-bench"
    cp "$here/jobs.txt" "$tmp/extra/etc/blk-jobs"
    "$TH_DIR/build-guest-initramfs.sh" "$initrd.tmp" --modules "$mods" --extra "$tmp/extra" \
        --bin "$fio_bin"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tmp"
    find "$work" -name 'guest-fio-*.cpio' ! -name "$(basename "$initrd")" -delete
fi
th_log "guest initramfs: $(du -m "$initrd" | cut -f1) MiB ($initrd)"

# 2. The test host's second disk: ext4 with the data file (random bytes: every block allocated and
#    non-zero, so reads hit the disk), the guest initramfs and an empty results/ directory.
th_log "building the test host's disk: ${data_mib} MiB of random data + the guest initramfs"
img="$work/l1-disk.img"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
head -c "$((data_mib * 1024 * 1024))" /dev/urandom >"$tmp/blk.raw"
cp "$initrd" "$tmp/guest-fio.cpio"
mkdir -p "$tmp/results"
rm -f "$img"
mke2fs -q -t ext4 -L blkbench -d "$tmp" "$img" "$((data_mib + $(du -m "$initrd" | cut -f1) + 256))M"
rm -rf "$tmp"

# 3. One test-host run. Per VMM: ~30 s to boot the 80 MB initramfs, then 11 jobs of $runtime s plus
#    fio's start and its report on the serial console (a few s each).
tern="${TERN_BIN:-$repo/build/tern}"
args=(--scenario "$here/scenario.sh" --with-qemu --disk "$img" --modules "$mods" --memory 3072
    --timeout 1800 --stall 180 --log "$TH_CACHE/logs/bench-blk.log"
    --env "BLK_VMMS=$vmms" --env "BLK_RUNTIME=$runtime" --env "BLK_ENGINE=$engine"
    --env "BLK_TERN_DISK=$tern_disk" --env BLK_TIMEOUT=840)
if [[ -x "$tern" ]]; then args+=(--tern "$tern"); else
    th_log "no tern binary at $tern: tern will be skipped"
    args+=(--no-tern)
fi
log="$TH_CACHE/logs/bench-blk.log"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
set +e
"$repo/testhost/run.sh" "${args[@]}" | grep --line-buffered -E '^(BLK-|TESTHOST-)'
rc="${PIPESTATUS[0]}"
set -e
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"

# 4. Results out of the image, then JSON, Markdown table and SVG plot.
rm -rf "$work/results"
debugfs -R "rdump /results $work" "$img" >/dev/null 2>&1 || th_die "cannot read results/ from $img"
host_cpu="$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
python3 "$here/summarize.py" "$work/results" --log "$log" --kernel "$ver" --runtime "$runtime" \
    --engine "$engine" --data-mib "$data_mib" --jobs "$here/jobs.txt" \
    --test-host "qemu-system-x86_64 -accel tcg -cpu EPYC,+svm,+npt -smp 1 -m 3072 on $(nproc)x $host_cpu" \
    --host-load "before: $load_before; after: $load_after (1/5/15-min load average, $(nproc) CPUs)" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" >"${out%.json}-iops.svg"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
th_log "wrote $out, ${out%.json}.md and ${out%.json}-iops.svg (console log: $log)"
