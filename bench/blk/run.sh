#!/usr/bin/env bash
# Block benchmark (not a test): fio inside the stock-kernel guest on its disk, served in several
# ways, all in ONE run on the same disk file, in the nested test host (L1) or, on a machine with
# hardware virtualization (svm/vmx in /proc/cpuinfo and a usable /dev/kvm), directly here
# (--where; the output and the JSON's "where" say which). Configurations:
#   host          no VMM: fio in the machine that runs the VMMs, on the disk file itself (the ceiling)
#   qemu          QEMU virtio-blk-pci (cache=none, aio=io_uring)
#   qemu-nvme     QEMU's emulated NVMe controller (-device nvme; guest /dev/nvme0n1)
#   qemu-ide      QEMU's emulated IDE disk (-device ide-hd on -M pc's PIIX3; guest /dev/sda, ata_piix)
#   qemu-qsd      QEMU vhost-user-blk-pci + qemu-storage-daemon (cache.direct=on, aio=io_uring)
#   NAME          tern NAME's built-in virtio-blk (--disk path=...,cache=none,io=io_uring)
#   NAME-nvme     tern NAME's emulated NVMe controller (--disk path=...,interface=nvme)
#   NAME-qsd      tern NAME's vhost-user-blk front-end (--disk vhost-user=SOCK) + qemu-storage-daemon
#   NAME-vub      tern NAME's front-end + tern NAME's own back-end (tern vhost-user-blk --socket SOCK
#                 --disk path=...,cache=none,io=io_uring)
#   qemu-vub      QEMU's front-end + the first tern's back-end (not in the default list)
# (a configuration whose VMM or back-end lacks the feature is skipped and says why).
#   Jobs: 4 KiB random read and random write at queue depth 1, 4, 16, 64, and the Iometer web-server,
#   file-server and database mixes (bench/blk/jobs.txt), each for a fixed time (default 5 s);
#   IOPS, mean and p99 latency (fio JSON), the host CPU time per I/O: utime+stime of the VMM
#   process PLUS the back-end process (/proc/PID/stat in L1, all threads; the host row: fio's), and
#   KVM exits per I/O (KVM's per-VM debugfs counters in L1: all exits, port/MMIO exits to the VMM).
# The data disk is a 512 MiB file of random bytes on an ext4 disk of the test host (tmpfs has no
# O_DIRECT), the same file for every configuration. Writes DIR/blk.json, DIR/blk.md, DIR/blk-*.svg
# and DIR/console.log (DIR: results/<date> unless --out says).
#
# Usage: bench/blk/run.sh [--tern NAME=PATH]... [--rounds N] [--configs LIST] [--runtime SEC]
#                         [--jobs NAME,...] [--engine libaio|io_uring] [--tern-disk OPTS]
#                         [--shmem-thp MODE] [--data-mib N] [--out DIR/FILE.json]
#                         [--where auto|test-host|direct] [--data-dir DIR]
#                         [--tern-extra NAME=OPTS]... [--kvm-trace on|off] [--kvm-trace-rounds K]
#                         [--kvm-trace-off CFG,...]
#                         [--baseline CFG]
#   --tern NAME=PATH  a tern binary to measure, named NAME in the results (repeatable; default one,
#                     tern=$TERN_BIN or build/tern, skipped when missing). Before/after in one run:
#                     --tern tern-before=/path/to/old/tern --tern tern=build/tern
#   --rounds N        boot every configuration N times, interleaved: qemu, qemu-qsd, NAME, NAME-qsd,
#                     NAME-vub, qemu, ... (default 3); the results are medians with min-max
#   --configs LIST    which configurations and in which order (default: qemu qemu-qsd, then NAME
#                     NAME-qsd NAME-vub for every --tern NAME); --vmms is the old spelling.
#                     "storage" = the storage comparison of issue 12: host qemu qemu-nvme qemu-ide
#                     NAME NAME-nvme NAME-vub (NAME: the first tern)
#                     "qcow2" = the qcow2 comparison of issue 27: NAME NAME-qcow2 NAME-qcow2new
#                     qemu-qcow2 qemu-qcow2new (-qcow2: blk.raw converted to qcow2 by qemu-img, every
#                     cluster allocated; -qcow2new: a fresh empty qcow2 image per boot, its writes
#                     allocate; QEMU with its default qcow2 options). Any VMM[-nvme] row takes
#                     -qcow2 / -qcow2new.
#   --jobs NAMES      only these jobs (comma-separated job names, or their start up to a dash:
#                     randread,randwrite = the QD sweeps without the mixes; default all)
#   --tern-disk OPTS  what follows path=FILE in tern's --disk, built-in and back-end (default
#                     cache=none,io=io_uring)
#   --tern-extra NAME=OPTS  appended (after --tern-disk's) to every --disk path=... of tern NAME
#                     (its built-in virtio-blk and NVMe disks, its vhost-user-blk back-end), e.g. one
#                     binary as several configurations: --tern tern=build/tern --tern tern-coal=build/tern
#                     --tern-extra tern-coal=coalesce_us=50 (repeatable, once per NAME; passed through
#                     as it is: tern says what it does not know)
#   --kvm-trace on|off  the test host's hist triggers on KVM's tracepoints (exits per I/O by reason,
#                     interrupts, EOIs, kicks; bench/lib/kvm_trace.sh; default on), in K extra rounds
#                     after the timed ones: they slow every exit (10-20% fewer IOPS in the test host),
#                     so IOPS, latency, CPU and the debugfs exits come from the untraced rounds only
#   --kvm-trace-rounds K  how many traced rounds (default 1; 0 = --kvm-trace off)
#   --kvm-trace-off CFGS  these configurations (comma-separated) get no traced round
#   --baseline CFG    issue 16's QD1 latency goal compares each tern with CFG (default tern-before
#                     when it is a configuration)
#   --shmem-thp MODE  the test host's /sys/kernel/mm/transparent_hugepage/shmem_enabled (default
#                     advise: the memfd guest RAM of the vhost-user rows gets 2 MiB pages like the
#                     built-in rows' anonymous RAM; never = Debian's default, 4 KiB pages)
#   --where W         auto (default): directly here when this machine has hardware virtualization,
#                     else in the test host; test-host / direct force one
#   --data-dir DIR    direct only: where the disk file and results go (default build/testhost/blk/
#                     direct; not tmpfs: the VMMs open the file with O_DIRECT). KVM's exit counters
#                     need debugfs readable (root); without it exits per I/O are n/a
# Environment: TERN_BIN (default build/tern), TESTHOST_CACHE (default build/testhost).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

configs="" runtime=5 engine=libaio tern_disk="cache=none,io=io_uring" data_mib=512 rounds=3 terns=()
out="" jobs="" shmem_thp=advise where=auto data_dir="" extras=() kvm_trace=on trace_off="" baseline="" trace_rounds=1
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
        --tern-extra) extras+=("$2"); shift 2 ;;
        --kvm-trace) kvm_trace="$2"; shift 2 ;;
        --kvm-trace-off) trace_off="$2"; shift 2 ;;
        --kvm-trace-rounds) trace_rounds="$2"; shift 2 ;;
        --baseline) baseline="$2"; shift 2 ;;
        --data-mib) data_mib="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --where) where="$2"; shift 2 ;;
        --data-dir) data_dir="$2"; shift 2 ;;
        -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ "$runtime" =~ ^[1-9][0-9]*$ ]] || th_die "--runtime wants whole seconds, got '$runtime'"
[[ "$engine" == libaio || "$engine" == io_uring ]] || th_die "--engine must be libaio or io_uring, got '$engine'"
[[ "$data_mib" =~ ^[1-9][0-9]*$ ]] || th_die "--data-mib wants a number of MiB, got '$data_mib'"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || th_die "--rounds wants a number of rounds, got '$rounds'"
[[ -z "$jobs" || "$jobs" =~ ^[a-z0-9-]+(,[a-z0-9-]+)*$ ]] || th_die "--jobs wants NAME,NAME... of a-z 0-9 -, got '$jobs'"
[[ "$shmem_thp" =~ ^(never|advise|always|within_size)$ ]] || th_die "--shmem-thp must be never, advise, always or within_size, got '$shmem_thp'"
[[ "$where" =~ ^(auto|test-host|direct)$ ]] || th_die "--where must be auto, test-host or direct, got '$where'"
[[ "$kvm_trace" == on || "$kvm_trace" == off ]] || th_die "--kvm-trace must be on or off, got '$kvm_trace'"
[[ "$trace_rounds" =~ ^[0-9]+$ ]] || th_die "--kvm-trace-rounds wants a number of rounds (0 = none), got '$trace_rounds'"
[[ "$kvm_trace" == on ]] || trace_rounds=0
((trace_rounds > 0)) || kvm_trace=off
[[ "$tern_disk" =~ ^[A-Za-z0-9_.,=:/+-]+$ ]] || th_die "--tern-disk wants disk options (key=value,... without spaces), got '$tern_disk'"
# hw_virt: true when this machine can run the guests itself: svm or vmx in /proc/cpuinfo and a
# /dev/kvm this user can open that answers KVM_GET_API_VERSION (a software KVM has no svm/vmx flag).
hw_virt() {
    grep -qw -E 'svm|vmx' /proc/cpuinfo || return 1
    python3 -c 'import fcntl, os; fd = os.open("/dev/kvm", os.O_RDWR); assert fcntl.ioctl(fd, 0xAE00) == 12' 2>/dev/null
}
if [[ "$where" == auto ]]; then
    if hw_virt; then
        where=direct
        th_log "where: direct (this machine has hardware virtualization and a usable /dev/kvm)"
    else
        where=test-host
        th_log "where: test-host (no svm/vmx in /proc/cpuinfo or no usable /dev/kvm here: the nested test host runs the VMMs)"
    fi
elif [[ "$where" == direct ]] && ! hw_virt; then
    th_log "WARNING: --where direct without hardware virtualization here (no svm/vmx or no usable /dev/kvm): guests will crawl or fail"
fi
[[ -z "$data_dir" || "$where" == direct ]] || th_die "--data-dir is for --where direct only"
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
    [[ "$t" == *=* && "$name" =~ ^[a-z][a-z0-9._-]*$ && "$name" != qemu* && "$name" != host && ! "$name" =~ -(qsd|vub|nvme|ide|qcow2|qcow2new)$ ]] ||
        th_die "--tern wants NAME=PATH with NAME of a-z 0-9 . _ - (not qemu..., not host, not ending in -qsd, -vub, -nvme, -ide, -qcow2 or -qcow2new), got '$t'"
    [[ -z "${tern_path[$name]:-}" ]] || th_die "--tern: the name '$name' is given twice"
    [[ -x "$path" && -f "$path" ]] || th_die "--tern $name: not an executable: $path"
    tern_path[$name]="$(cd "$(dirname "$path")" && pwd)/$(basename "$path")"
    tern_names+=("$name")
done
# --tern-extra NAME=OPTS: NAME a --tern name, once; OPTS key=value,... (no spaces: the scenario splits
# its lists on them).
declare -A tern_extra=()
blk_extra=""
for e in ${extras[@]+"${extras[@]}"}; do
    name="${e%%=*}" opts="${e#*=}"
    [[ "$e" == *=* && -n "$opts" ]] || th_die "--tern-extra wants NAME=OPTS (e.g. tern-coal=coalesce_us=50), got '$e'"
    [[ " ${tern_names[*]} " == *" $name "* && -n "${tern_path[$name]:-}" ]] ||
        th_die "--tern-extra $e: '$name' is not a --tern NAME (the terns: ${tern_names[*]:-none})"
    [[ -z "${tern_extra[$name]:-}" ]] || th_die "--tern-extra: the name '$name' is given twice (join its options with commas)"
    [[ "$opts" =~ ^[A-Za-z0-9_.=:/+-]+(,[A-Za-z0-9_.=:/+-]+)*$ ]] ||
        th_die "--tern-extra $name: OPTS wants key=value[,key=value...] without spaces, got '$opts'"
    [[ ! "$opts" =~ (^|,)(path|vhost-user)= ]] || th_die "--tern-extra $name: OPTS must not set path= or vhost-user= (the benchmark's disk), got '$opts'"
    tern_extra[$name]="$opts"
    blk_extra+="$name=$opts "
done
if [[ -z "$configs" ]]; then
    configs="qemu qemu-qsd"
    for n in ${tern_names[@]+"${tern_names[@]}"}; do configs+=" $n $n-qsd $n-vub"; done
elif [[ "$configs" == storage ]]; then
    configs="host qemu qemu-nvme qemu-ide"
    n="${tern_names[0]:-}"
    [[ -z "$n" ]] || configs+=" $n $n-nvme $n-vub"
elif [[ "$configs" == qcow2 ]]; then
    n="${tern_names[0]:-}"
    configs="${n:+$n $n-qcow2 $n-qcow2new }qemu-qcow2 qemu-qcow2new"
fi
for c in $configs; do
    v="$c"
    [[ " ${tern_names[*]} " == *" $c "* ]] || { v="${c%-qcow2}"; v="${v%-qcow2new}"; v="${v%-qsd}"; v="${v%-vub}"; v="${v%-nvme}"; }
    [[ "$c" == host || "$v" == qemu || "$c" == qemu-ide || " ${tern_names[*]} " == *" $v "* ]] ||
        th_die "--configs: '$c' is neither host, qemu[-qsd|-vub|-nvme|-ide] nor a --tern NAME[-qsd|-vub|-nvme] (${tern_names[*]})"
    [[ "$c" != *-vub || ${#tern_names[@]} -gt 0 ]] || th_die "--configs: '$c' needs a tern (its back-end)"
    [[ ! "$c" =~ -(qsd|vub)-qcow2(new)?$ && "$c" != host-qcow2* ]] || th_die "--configs: '$c': qcow2 rows are the VMMs' own disks only"
done
[[ "$(tr ' ' '\n' <<<"$configs" | sort | uniq -d)" == "" ]] || th_die "--configs: a configuration is given twice"
ncfg="$(wc -w <<<"$configs")"
for c in ${trace_off//,/ }; do
    [[ " $configs " == *" $c "* ]] || th_die "--kvm-trace-off: '$c' is not one of the configurations ($configs)"
done
[[ -z "$baseline" || " $configs " == *" $baseline "* ]] || th_die "--baseline: '$baseline' is not one of the configurations ($configs)"
qsd=/usr/bin/qemu-storage-daemon
[[ -x "$qsd" ]] || [[ " $configs " != *-qsd\ * ]] ||
    th_die "no $qsd for the -qsd configurations; install the Debian package 'qemu-system-common'"
th_need_cmd fio fio
th_need_cmd python3 python3
[[ "$where" == direct ]] || { th_need_cmd mke2fs e2fsprogs; th_need_cmd debugfs e2fsprogs; }

mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
# The IDE row's guest modules (Debian's cloud kernel has ATA and SCSI disks as modules; NVMe is built
# in): in the guest initramfs at /lib/modules/extra/, loaded by /actions/fio-bench for blk.modules=.
ide_mods="scsi_common scsi_mod libata ata_piix sd_mod"
work="$TH_CACHE/blk"
mkdir -p "$work" "$(dirname "$out")"
ver="$(th_kernel_version)"

# 1. Guest initramfs: fio with every library ldd lists (an uncompressed cpio first, ~80 MB), then the
#    busybox guest (gzip) with the virtio modules, /actions/fio-bench and /etc/blk-jobs.
fio_bin="$(command -v fio)"
key="$(th_hash "$ver" "$mods" "$ide_mods" "$here/guest-fio-bench.sh" "$here/jobs.txt" "$TH_DIR/lib.sh" \
    "$TH_DIR/build-guest-initramfs.sh" "$TH_DIR/guest-init.sh" "$(command -v busybox)" "$fio_bin" \
    "$(ldd "$fio_bin" | awk '{ print $1, $3 }')")"
initrd="$work/guest-fio-$key.cpio"
if [[ ! -f "$initrd" ]]; then
    th_log "building the guest initramfs with fio"
    tmp="$(mktemp -d)"
    mkdir -p "$tmp/extra/actions" "$tmp/extra/etc" "$tmp/extra/lib/modules/extra"
    install -m 0755 "$here/guest-fio-bench.sh" "$tmp/extra/actions/fio-bench"
    cp "$here/jobs.txt" "$tmp/extra/etc/blk-jobs"
    for m in $ide_mods; do cp "$(th_module_path "$ver" "$m")" "$tmp/extra/lib/modules/extra/$m.ko"; done
    "$TH_DIR/build-guest-initramfs.sh" "$initrd.tmp" --modules "$mods" --extra "$tmp/extra" \
        --bin "$fio_bin"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tmp"
    find "$work" -name 'guest-fio-*.cpio' ! -name "$(basename "$initrd")" -delete
fi
th_log "guest initramfs: $(du -m "$initrd" | cut -f1) MiB ($initrd)"

# The scripts the machine running the VMMs needs besides the scenario (L1: /opt/blk).
stage_lib() {  # stage_lib DIR
    mkdir -p "$1"
    install -m 0755 "$here/guest-fio-bench.sh" "$1/fio-bench"
    cp "$here/blk-lib.sh" "$here/jobs.txt" "$repo/bench/lib/kvm_trace.sh" "$1/"
}

# 2. The benchmark directory: the data file (random bytes: every block allocated and non-zero, so
#    reads hit the disk), the guest initramfs and an empty results/ directory; for the test host also
#    fio with its libraries for the host row (hostfio/: run by its own loader, see scenario.sh). In
#    the test host it is an ext4 image, its second disk; directly here a directory.
fill_dir() {  # fill_dir DIR
    head -c "$((data_mib * 1024 * 1024))" /dev/urandom >"$1/blk.raw"
    if [[ " $configs " == *-qcow2* ]]; then  # the qcow2 rows' images (scenario.sh): qemu-img's defaults
        qemu-img convert -f raw -O qcow2 "$1/blk.raw" "$1/blk.qcow2"
        qemu-img create -q -f qcow2 "$1/blk-new.qcow2.orig" "$((data_mib * 1024 * 1024))"
    fi
    cp "$initrd" "$1/guest-fio.cpio"
    mkdir -p "$1/results"
}
load_before="$(th_loadavg)"
log="$TH_CACHE/logs/bench-blk.log"
mkdir -p "$(dirname "$log")"
stamps="$work/stamps.txt"
blk_terns="" sum_terns=()
for name in ${tern_names[@]+"${tern_names[@]}"}; do
    [[ -n "${tern_path[$name]:-}" ]] || continue
    sum_terns+=(--tern "$name=${tern_path[$name]}")  # summarize.py records each binary (path, sha256)
    [[ -z "${tern_extra[$name]:-}" ]] || sum_terns+=(--tern-extra "$name=${tern_extra[$name]}")
done
if [[ "$where" == direct ]]; then
    # 3d. Directly here: the scenario with this machine's QEMU, kernel, fio and tern binaries.
    dir="${data_dir:-$work/direct}"
    mkdir -p "$dir"
    [[ "$(stat -f -c %T "$dir")" != tmpfs ]] || th_die "--data-dir $dir is on tmpfs, which has no O_DIRECT; give a directory on a disk"
    rm -rf "${dir:?}/results" "${dir:?}/lib"
    th_log "filling $dir: ${data_mib} MiB of random data + the guest initramfs"
    fill_dir "$dir"
    stage_lib "$dir/lib"
    for name in ${tern_names[@]+"${tern_names[@]}"}; do
        [[ -z "${tern_path[$name]:-}" ]] || blk_terns+="$name=${tern_path[$name]} "
    done
    [[ -r /sys/kernel/debug/kvm ]] || th_log "WARNING: /sys/kernel/debug/kvm is not readable (debugfs not mounted, or not root): exits per I/O will be n/a"
    th_log "configurations: $configs; $rounds round(s)$( ((trace_rounds == 0)) || echo " + $trace_rounds traced")${jobs:+; jobs $jobs}; directly on this machine"
    : >"$stamps"
    set +e
    env BLK_DIR="$dir" BLK_LIB="$dir/lib" BLK_WHERE=direct BLK_FIO="$fio_bin" BLK_CONFIGS="$configs" \
        BLK_TERNS="$blk_terns" BLK_ROUNDS="$rounds" BLK_RUNTIME="$runtime" BLK_ENGINE="$engine" \
        BLK_TERN_DISK="$tern_disk" BLK_JOBS="$jobs" BLK_SHMEM_THP="$shmem_thp" BLK_TIMEOUT=$((120 + 11 * (runtime + 20) * 2)) \
        BLK_TERN_EXTRA="$blk_extra" BLK_KVM_TRACE="$([[ "$kvm_trace" == on ]] && echo 1 || echo 0)" BLK_KVM_TRACE_OFF="${trace_off//,/ }" BLK_KVM_TRACE_ROUNDS="$trace_rounds" \
        TH_QEMU="$(command -v qemu-system-x86_64 || true)" TH_QEMU_FW=/usr/share/qemu \
        TH_QSD="$( [[ -x /usr/bin/qemu-storage-daemon ]] && echo /usr/bin/qemu-storage-daemon)" \
        TH_GUEST_KERNEL="$(th_kernel_image "$ver")" TH_KERNEL_VERSION="$ver" \
        sh "$here/scenario.sh" </dev/null 2>&1 | tee "$log" |
        python3 "$repo/bench/lib/stamp_cpu.py" /nonexistent '^BLK-(PROGRESS|ERROR|WARN|SKIP|INFO|CMD|FIO-ERROR)' '^BLK-MARK' "$stamps"
    rc="${PIPESTATUS[0]}"
    set -e
    [[ "$rc" == 0 ]] || th_die "the scenario failed (rc=$rc); log: $log"
    results="$dir/results"
    machine="directly on this machine: $(nproc)x $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
else
    img="$work/l1-disk.img"
    th_log "building the test host's disk: ${data_mib} MiB of random data + the guest initramfs"
    tmp="$(mktemp -d)"
    trap 'rm -rf "$tmp"' EXIT
    fill_dir "$tmp"
    if [[ " $configs " == *" host "* ]]; then  # fio and its libraries, flat: hostfio/{ld.so,lib/,fio}
        mkdir -p "$tmp/hostfio/lib"
        cp -L "$fio_bin" "$tmp/hostfio/fio"
        for lib in $(ldd "$fio_bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
            cp -L "$lib" "$tmp/hostfio/lib/"
        done
        mv "$tmp/hostfio/lib/$(basename "$(ldd "$fio_bin" | awk '$1 ~ /^\// { print $1 }')")" "$tmp/hostfio/ld.so"
    fi
    rm -f "$img"
    # Room for the -qcow2new rows' image to grow to the whole disk (a full disk stops QEMU's
    # guest: werror=enospc) besides the 256 MiB of slack.
    room=256
    [[ " $configs " != *-qcow2new\ * ]] || room=$((256 + data_mib + data_mib / 8))
    mke2fs -q -t ext4 -L blkbench -d "$tmp" "$img" "$(($(du -sm "$tmp" | cut -f1) + room))M"
    rm -rf "$tmp"

    # 3. The tern binaries for L1, without their debug sections (not loaded when they run; ~170 MB of a
    #    RelWithDebInfo build would have to be unpacked into L1's RAM for each), at /opt/tern/bin/NAME;
    #    the scripts at /opt/blk.
    extra="$(mktemp -d)"
    trap 'rm -rf "$tmp" "$extra"' EXIT
    for name in ${tern_names[@]+"${tern_names[@]}"}; do
        [[ -n "${tern_path[$name]:-}" ]] || continue
        mkdir -p "$extra/stripped"
        if ! strip --strip-debug -o "$extra/stripped/$name" "${tern_path[$name]}" 2>/dev/null; then
            cp "${tern_path[$name]}" "$extra/stripped/$name"
        fi
        th_copy_with_libs "$extra/stripped/$name" "$extra/root" "/opt/tern/bin/$name"
        blk_terns+="$name=/opt/tern/bin/$name "
    done
    rm -rf "$extra/stripped"
    stage_lib "$extra/root/opt/blk"

    # 4. One test-host run. Per configuration and round: ~30 s to boot the 80 MB initramfs, then the
    #    jobs of $runtime s plus fio's start and its report on the serial console (a few s each). Each
    #    run has BLK_TIMEOUT s in L1; the whole test host the sum of those (at least 1800 s) as last resort.
    per_boot=$((120 + 11 * (runtime + 20)))
    timeout=$((300 + (rounds + trace_rounds) * ncfg * per_boot))
    ((timeout >= 1800)) || timeout=1800
    bins=()
    [[ ! -x "$qsd" ]] || bins=(--with-qsd)  # qemu-storage-daemon and its libraries (TH_QSD), for the -qsd rows
    args=(--scenario "$here/scenario.sh" --with-qemu --no-tern --extra "$extra/root" --disk "$img" --modules "$mods"
        ${bins[@]+"${bins[@]}"} --memory 3072 --timeout "$timeout" --stall 180 --log "$log"
        --env "BLK_CONFIGS=$configs" --env "BLK_TERNS=$blk_terns" --env "BLK_ROUNDS=$rounds" --env "BLK_RUNTIME=$runtime"
        --env "BLK_ENGINE=$engine" --env "BLK_TERN_DISK=$tern_disk" --env "BLK_JOBS=$jobs" --env "BLK_SHMEM_THP=$shmem_thp"
        --env "BLK_TIMEOUT=$((per_boot * 2))" --env "BLK_WHERE=test-host" --env "BLK_TERN_EXTRA=$blk_extra"
        --env "BLK_KVM_TRACE=$([[ "$kvm_trace" == on ]] && echo 1 || echo 0)" --env "BLK_KVM_TRACE_OFF=${trace_off//,/ }"
        --env "BLK_KVM_TRACE_ROUNDS=$trace_rounds")
    pidfile="$work/l1.pid"
    args+=(--pidfile "$pidfile")
    # The BLK-MARK lines around each job get L1's host CPU time (stamp_cpu.py): the share of a host core
    # the test host had during the job, which this shared machine's load moves.
    blk_host_run() {
        : >"$stamps"
        "$repo/testhost/run.sh" "${args[@]}" |
            python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(BLK-(PROGRESS|ERROR|WARN|SKIP|INFO|CMD|FIO-ERROR)|TESTHOST-)' '^BLK-MARK' "$stamps"
        return "${PIPESTATUS[0]}"
    }
    th_log "configurations: $configs; $rounds round(s)$( ((trace_rounds == 0)) || echo " + $trace_rounds traced")${jobs:+; jobs $jobs}$(for n in ${tern_names[@]+"${tern_names[@]}"}; do printf '; %s = %s' "$n" "${tern_path[$n]:-missing}"; done)"
    set +e
    th_run_retrying "$log" -- blk_host_run  # a wedged test host is booted once more, saying so
    rc=$?
    set -e
    [[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"
    rm -rf "$work/results"
    debugfs -R "rdump /results $work" "$img" >/dev/null 2>&1 || th_die "cannot read results/ from $img"
    results="$work/results"
    machine="$(th_test_host_desc 3072)"
fi
load_after="$(th_loadavg)"

# 5. JSON, Markdown tables and SVG plots.
rev="$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
python3 "$here/summarize.py" "$results" --log "$log" --kernel "$ver" --runtime "$runtime" \
    --engine "$engine" --data-mib "$data_mib" --jobs "$here/jobs.txt" --only "$jobs" --configs "$configs" \
    --rounds "$rounds" --git-rev "$rev" --stamps "$stamps" ${sum_terns[@]+"${sum_terns[@]}"} \
    --tern-disk "$tern_disk" --kvm-trace "$kvm_trace" --kvm-trace-off "${trace_off//,/ }" --kvm-trace-rounds "$trace_rounds" \
    --baseline "$baseline" \
    --where "$where" --test-host "$machine" \
    --host-load "$(th_host_load "$load_before" "$load_after")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" "${out%.json}"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
cp "$log" "$(dirname "$out")/console.log"
th_log "ran $(if [[ "$where" == direct ]]; then echo "directly on this machine"; else echo "in the nested test host"; fi); wrote $out, ${out%.json}.md, ${out%.json}-*.svg and $(dirname "$out")/console.log"
