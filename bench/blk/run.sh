#!/usr/bin/env bash
# Block benchmark (not a test): fio inside the stock-kernel guest on a virtio-blk disk, served in
# several ways, all in ONE nested test-host run on the same disk file (configurations):
#   qemu          QEMU virtio-blk-pci (cache=none, aio=io_uring)
#   qemu-qsd      QEMU vhost-user-blk-pci + qemu-storage-daemon (cache.direct=on, aio=io_uring)
#   NAME          tern NAME's built-in virtio-blk (--disk path=...,cache=none,io=io_uring)
#   NAME-qsd      tern NAME's vhost-user-blk front-end (--disk vhost-user=SOCK) + qemu-storage-daemon
#   NAME-vub      tern NAME's front-end + tern NAME's own back-end (tern vhost-user-blk --socket SOCK
#                 --disk path=...,cache=none,io=io_uring)
#   qemu-vub      QEMU's front-end + the first tern's back-end (not in the default list)
# (a configuration whose VMM or back-end lacks the feature is skipped and says why).
#   Jobs: 4 KiB random read and random write at queue depth 1, 4, 16, 64, and the Iometer web-server,
#   file-server and database mixes (bench/blk/jobs.txt), each for a fixed time (default 5 s);
#   IOPS, mean and p99 latency (fio JSON), and the host CPU time per I/O: utime+stime of the VMM
#   process PLUS the back-end process (/proc/PID/stat in L1, all threads).
# The data disk is a 512 MiB file of random bytes on an ext4 disk of the test host (tmpfs has no
# O_DIRECT), the same file for every configuration. Writes DIR/blk.json, DIR/blk.md, DIR/blk-*.svg
# and DIR/console.log (DIR: results/<date> unless --out says).
#
# Usage: bench/blk/run.sh [--tern NAME=PATH]... [--rounds N] [--configs LIST] [--runtime SEC]
#                         [--jobs NAME,...] [--engine libaio|io_uring] [--tern-disk OPTS]
#                         [--shmem-thp MODE] [--data-mib N] [--out DIR/FILE.json]
#   --tern NAME=PATH  a tern binary to measure, named NAME in the results (repeatable; default one,
#                     tern=$TERN_BIN or build/tern, skipped when missing). Before/after in one run:
#                     --tern tern-before=/path/to/old/tern --tern tern=build/tern
#   --rounds N        boot every configuration N times, interleaved: qemu, qemu-qsd, NAME, NAME-qsd,
#                     NAME-vub, qemu, ... (default 3); the results are medians with min-max
#   --configs LIST    which configurations and in which order (default: qemu qemu-qsd, then NAME
#                     NAME-qsd NAME-vub for every --tern NAME); --vmms is the old spelling
#   --jobs NAMES      only these jobs (comma-separated job names, or their start up to a dash:
#                     randread,randwrite = the QD sweeps without the mixes; default all)
#   --tern-disk OPTS  what follows path=FILE in tern's --disk, built-in and back-end (default
#                     cache=none,io=io_uring)
#   --shmem-thp MODE  the test host's /sys/kernel/mm/transparent_hugepage/shmem_enabled (default
#                     advise: the memfd guest RAM of the vhost-user rows gets 2 MiB pages like the
#                     built-in rows' anonymous RAM; never = Debian's default, 4 KiB pages)
# Environment: TERN_BIN (default build/tern), TESTHOST_CACHE (default build/testhost).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

configs="" runtime=5 engine=libaio tern_disk="cache=none,io=io_uring" data_mib=512 rounds=3 terns=()
out="" jobs="" shmem_thp=advise
while [[ $# -gt 0 ]]; do
    case "$1" in
        --tern) terns+=("$2"); shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --configs | --vmms) configs="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --shmem-thp) shmem_thp="$2"; shift 2 ;;
        --runtime) runtime="$2"; shift 2 ;;
        --engine) engine="$2"; shift 2 ;;
        --tern-disk) tern_disk="$2"; shift 2 ;;
        --data-mib) data_mib="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h | --help) sed -n '2,39p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ "$runtime" =~ ^[1-9][0-9]*$ ]] || th_die "--runtime wants whole seconds, got '$runtime'"
[[ "$engine" == libaio || "$engine" == io_uring ]] || th_die "--engine must be libaio or io_uring, got '$engine'"
[[ "$data_mib" =~ ^[1-9][0-9]*$ ]] || th_die "--data-mib wants a number of MiB, got '$data_mib'"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || th_die "--rounds wants a number of rounds, got '$rounds'"
[[ -z "$jobs" || "$jobs" =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || th_die "--jobs wants NAME,NAME... of a-z 0-9 -, got '$jobs'"
[[ "$shmem_thp" =~ ^(never|advise|always|within_size)$ ]] || th_die "--shmem-thp must be never, advise, always or within_size, got '$shmem_thp'"
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y-%m-%d)/blk.json"
[[ "$out" == *.json ]] || th_die "--out wants a FILE.json, got '$out'"
# The tern binaries: NAME=PATH each; without --tern, "tern" = $TERN_BIN (skipped when not built).
declare -A tern_path=()
tern_names=()
if ((${#terns[@]} == 0)); then
    default="${TERN_BIN:-$repo/build/tern}"
    if [[ -x "$default" ]]; then terns=("tern=$default"); else
        th_log "no tern binary at $default: tern will be skipped"
        tern_names=(tern)
    fi
fi
for t in ${terns[@]+"${terns[@]}"}; do
    name="${t%%=*}" path="${t#*=}"
    [[ "$t" == *=* && "$name" =~ ^[a-z][a-z0-9._-]*$ && "$name" != qemu* && "$name" != *-qsd && "$name" != *-vub ]] ||
        th_die "--tern wants NAME=PATH with NAME of a-z 0-9 . _ - (not qemu..., not ending in -qsd or -vub), got '$t'"
    [[ -z "${tern_path[$name]:-}" ]] || th_die "--tern: the name '$name' is given twice"
    [[ -x "$path" && -f "$path" ]] || th_die "--tern $name: not an executable: $path"
    tern_path[$name]="$(cd "$(dirname "$path")" && pwd)/$(basename "$path")"
    tern_names+=("$name")
done
if [[ -z "$configs" ]]; then
    configs="qemu qemu-qsd"
    for n in ${tern_names[@]+"${tern_names[@]}"}; do configs+=" $n $n-qsd $n-vub"; done
fi
for c in $configs; do
    v="${c%-qsd}" && v="${v%-vub}"
    [[ "$v" == qemu || " ${tern_names[*]} " == *" $v "* ]] ||
        th_die "--configs: '$c' is neither qemu[-qsd|-vub] nor a --tern NAME[-qsd|-vub] (${tern_names[*]})"
    [[ "$c" != *-vub || ${#tern_names[@]} -gt 0 ]] || th_die "--configs: '$c' needs a tern (its back-end)"
done
[[ "$(tr ' ' '\n' <<<"$configs" | sort | uniq -d)" == "" ]] || th_die "--configs: a configuration is given twice"
ncfg="$(wc -w <<<"$configs")"
qsd=/usr/bin/qemu-storage-daemon
[[ -x "$qsd" ]] || [[ " $configs " != *-qsd\ * ]] ||
    th_die "no $qsd for the -qsd configurations; install the Debian package 'qemu-system-common'"
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

# 3. The tern binaries for L1, without their debug sections (not loaded when they run; ~170 MB of a
#    RelWithDebInfo build would have to be unpacked into L1's RAM for each), at /opt/tern/bin/NAME.
extra="$(mktemp -d)"
trap 'rm -rf "$tmp" "$extra"' EXIT
blk_terns="" sum_terns=()
for name in ${tern_names[@]+"${tern_names[@]}"}; do
    [[ -n "${tern_path[$name]:-}" ]] || continue
    mkdir -p "$extra/stripped"
    if ! strip --strip-debug -o "$extra/stripped/$name" "${tern_path[$name]}" 2>/dev/null; then
        cp "${tern_path[$name]}" "$extra/stripped/$name"
    fi
    th_copy_with_libs "$extra/stripped/$name" "$extra/root" "/opt/tern/bin/$name"
    blk_terns+="$name=/opt/tern/bin/$name "
    sum_terns+=(--tern "$name=${tern_path[$name]}")  # summarize.py records each binary (path, sha256)
done
rm -rf "$extra/stripped"
mkdir -p "$extra/root"

# 4. One test-host run. Per configuration and round: ~30 s to boot the 80 MB initramfs, then the
#    jobs of $runtime s plus fio's start and its report on the serial console (a few s each). Each
#    run has BLK_TIMEOUT s in L1; the whole test host the sum of those (at least 1800 s) as last resort.
per_boot=$((120 + 11 * (runtime + 20)))
timeout=$((300 + rounds * ncfg * per_boot))
((timeout >= 1800)) || timeout=1800
log="$TH_CACHE/logs/bench-blk.log"
bins=()
[[ ! -x "$qsd" ]] || bins=(--with-qsd)  # qemu-storage-daemon and its libraries (TH_QSD), for the -qsd rows
args=(--scenario "$here/scenario.sh" --with-qemu --no-tern --extra "$extra/root" --disk "$img" --modules "$mods"
    ${bins[@]+"${bins[@]}"} --memory 3072 --timeout "$timeout" --stall 180 --log "$log"
    --env "BLK_CONFIGS=$configs" --env "BLK_TERNS=$blk_terns" --env "BLK_ROUNDS=$rounds" --env "BLK_RUNTIME=$runtime"
    --env "BLK_ENGINE=$engine" --env "BLK_TERN_DISK=$tern_disk" --env "BLK_JOBS=$jobs" --env "BLK_SHMEM_THP=$shmem_thp" --env "BLK_TIMEOUT=$((per_boot * 2))")
pidfile="$work/l1.pid" stamps="$work/stamps.txt"
args+=(--pidfile "$pidfile")
# The BLK-MARK lines around each job get L1's host CPU time (stamp_cpu.py): the share of a host core
# the test host had during the job, which this shared machine's load moves.
blk_host_run() {
    : >"$stamps"
    "$repo/testhost/run.sh" "${args[@]}" |
        python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(BLK-(PROGRESS|ERROR|WARN|SKIP|INFO|CMD|FIO-ERROR)|TESTHOST-)' '^BLK-MARK' "$stamps"
    return "${PIPESTATUS[0]}"
}
th_log "configurations: $configs; $rounds round(s)${jobs:+; jobs $jobs}$(for n in ${tern_names[@]+"${tern_names[@]}"}; do printf '; %s = %s' "$n" "${tern_path[$n]:-missing}"; done)"
load_before="$(th_loadavg)"
set +e
th_run_retrying "$log" -- blk_host_run  # a wedged test host is booted once more, saying so
rc=$?
set -e
load_after="$(th_loadavg)"
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"

# 5. Results out of the image, then JSON, Markdown tables and SVG plots.
rm -rf "$work/results"
debugfs -R "rdump /results $work" "$img" >/dev/null 2>&1 || th_die "cannot read results/ from $img"
rev="$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
python3 "$here/summarize.py" "$work/results" --log "$log" --kernel "$ver" --runtime "$runtime" \
    --engine "$engine" --data-mib "$data_mib" --jobs "$here/jobs.txt" --only "$jobs" --configs "$configs" \
    --rounds "$rounds" --git-rev "$rev" --stamps "$stamps" ${sum_terns[@]+"${sum_terns[@]}"} \
    --test-host "$(th_test_host_desc 3072)" \
    --host-load "$(th_host_load "$load_before" "$load_after")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" "${out%.json}"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
cp "$log" "$(dirname "$out")/console.log"
th_log "wrote $out, ${out%.json}.md, ${out%.json}-*.svg and $(dirname "$out")/console.log"
