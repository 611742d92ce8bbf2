#!/bin/sh
# Runs in the machine that runs the VMMs, started by bench/blk/run.sh: the test host (L1), or this
# machine itself when it has hardware virtualization (BLK_DIR set: no disk to mount). The benchmark
# directory (L1: its second disk /dev/vda, ext4, mounted at /mnt; else $BLK_DIR) holds
#   blk.raw              the data disk the guest sees (random bytes, fully allocated)
#   guest-fio.cpio       guest initramfs with fio and /actions/fio-bench (bench/blk/guest-fio-bench.sh)
#   hostfio/             fio (fio, lib/, ld.so: its libraries and loader) for the "host" row (L1
#                        only; elsewhere BLK_FIO says how to run fio)
#   blk.qcow2            blk.raw as a qcow2 image (qemu-img convert, default options: every cluster
#                        allocated), for the VMM-qcow2 rows
#   blk-new.qcow2.orig   an empty qcow2 image of the same size (qemu-img create), copied to
#                        blk-new.qcow2 before each boot of a VMM-qcow2new row (allocating writes)
#   results/             filled here, read by the host from the image afterwards (debugfs)
# $BLK_ROUNDS times (default 1), boots the guest once per configuration of $BLK_CONFIGS, in that
# order, so they interleave: qemu, qemu-qsd, tern, ... A configuration is host, or VMM[-SUFFIX]:
#   host     no VMM: fio runs here, on blk.raw itself (the ceiling of every other row)
#   VMM      qemu, or a tern NAME of $BLK_TERNS ("NAME=PATH ...", default "tern=$TH_TERN")
#   SUFFIX   none: the VMM's own virtio-blk; qsd: vhost-user-blk with qemu-storage-daemon; vub: with
#            `tern vhost-user-blk` of the first tern in $BLK_TERNS (the VMM's own binary when the VMM
#            is a tern); nvme: the VMM's emulated NVMe controller (guest: /dev/nvme0n1); ide: QEMU's
#            emulated IDE disk on the PIIX3 controller of -M pc (guest: /dev/sda through ata_piix)
#   -qcow2 / -qcow2new after any of those (VMM's own disks only): the disk is blk.qcow2 /
#            a fresh copy of blk-new.qcow2.orig instead of blk.raw (tern: format=qcow2; QEMU: its
#            default qcow2 options, format=qcow2)
# L1's shmem_enabled is set to $BLK_SHMEM_THP (default advise) first: see below.
# The three tables below (backend_cmd, disk_args, guest_disk) are all that differs between
# configurations. Every configuration serves the same blk.raw with O_DIRECT and io_uring. Per
# configuration and round the scenario answers the guest's BLK-JOB-BEGIN/END lines after reading
# the CPU time of the VMM and the back-end and the VM's KVM exit counters, and stores in
# results/<config>/<round>/:
#   fio.json     fio's report (every job)
#   cpu.txt      "<job> begin|end vmm_utime vmm_stime vmm_guest be_utime be_stime l1_busy l1_total"
#                (clock ticks; be_* 0 0 without a back-end; l1_* from /proc/stat's cpu line; for
#                the host row vmm_* is fio's own processes)
#   exits.txt    "<job> begin|end exits io_exits mmio_exits halt_exits irq_exits irq_injections" of
#                the VM (KVM's per-VM debugfs counters, blk-lib.sh; "-" where unreadable)
#   trace.txt    "<job> begin|end EVENT KEYS COUNT": the test host's hist triggers on KVM's
#                tracepoints (bench/lib/kvm_trace.sh), the VMM's threads only, counted from the
#                VMM's start; only in the $BLK_KVM_TRACE_ROUNDS extra rounds (default 1) after the
#                $BLK_ROUNDS timed ones (the triggers slow every exit: the timed rounds run without
#                them), numbered on from BLK_ROUNDS + 1; none with BLK_KVM_TRACE=0 or without
#                tracefs, nor for the configurations in $BLK_KVM_TRACE_OFF
#   status       "rc=N jobs=M" of the VMM, or "skipped=<why>"
#   backend.txt  the back-end's output (its counters at exit, errors)
# $BLK_TERN_EXTRA ("NAME=OPTS ...") appends OPTS to every --disk path=... that tern NAME's binary
# gets (its built-in virtio-blk and NVMe disks, its vhost-user-blk back-end), after $BLK_TERN_DISK.
# Prints BLK-PROGRESS / BLK-SKIP / BLK-ERROR lines for the host, and "BLK-MARK cfg= round= job=
# at=begin|end" around each job, which the host stamps with L1's own host CPU time (stamp_cpu.py).
: "${BLK_CONFIGS:=qemu tern}" "${BLK_RUNTIME:=5}" "${BLK_ENGINE:=libaio}" "${BLK_MEM_MIB:=1024}" "${BLK_TIMEOUT:=1200}"
: "${BLK_TERN_DISK:=cache=none,io=io_uring}" "${BLK_ROUNDS:=1}" "${BLK_TERNS:=${TH_TERN:+tern=$TH_TERN}}"
: "${BLK_JOBS:=}" "${BLK_SHMEM_THP:=advise}" "${BLK_EXIT_GRACE:=20}" "${BLK_LIB:=/opt/blk}" "${BLK_DIR:=}"
: "${BLK_TERN_EXTRA:=}" "${BLK_KVM_TRACE:=1}" "${BLK_KVM_TRACE_OFF:=}" "${BLK_KVM_TRACE_ROUNDS:=1}"
# shellcheck source=bench/blk/blk-lib.sh
. "$BLK_LIB/blk-lib.sh"
# shellcheck source=bench/lib/kvm_trace.sh
. "$BLK_LIB/kvm_trace.sh"
kvm_trace=off
if [ "$BLK_KVM_TRACE" = 1 ] && [ "$BLK_KVM_TRACE_ROUNDS" -gt 0 ]; then
    if kt_init; then kvm_trace=on; else kvm_trace=unavailable; echo "BLK-WARN no exits by reason (kvm trace): $KT_WHY"; fi
fi
# The triggers outlive this script unless removed (directly on a machine: its own kernel's tracefs).
trap '[ "$kvm_trace" != on ] || kt_stop' EXIT
trap 'exit 130' INT TERM
export BLK_LIB BLK_RUNTIME BLK_ENGINE BLK_JOBS BLK_FIO
command -v usleep >/dev/null 2>&1 || usleep() { sleep "$(awk -v u="$1" 'BEGIN { printf "%.6f", u / 1e6 }')"; }
trap '' PIPE  # a VMM that died must not take this script with it when it answers a job line
CMDLINE="console=ttyS0 quiet loglevel=1 tern.action=fio-bench blk.runtime=$BLK_RUNTIME blk.engine=$BLK_ENGINE${BLK_JOBS:+ blk.jobs=$BLK_JOBS}"
QSD=${TH_QSD:-/usr/bin/qemu-storage-daemon} SOCK=/tmp/vhost-user-blk.sock

if [ -z "$BLK_DIR" ]; then  # the test host: its second disk
    i=0
    while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
    mkdir -p /mnt
    mount -t ext4 /dev/vda /mnt || { echo "BLK-ERROR cannot mount the test host's disk /dev/vda"; exit 1; }
    BLK_DIR=/mnt mounted=1
fi
DATA=$BLK_DIR/blk.raw DFMT=raw INITRD=$BLK_DIR/guest-fio.cpio RESULTS=$BLK_DIR/results
[ -f "$DATA" ] && [ -f "$INITRD" ] || { echo "BLK-ERROR $DATA or $INITRD missing on the disk"; exit 1; }
rm -rf "$RESULTS"
mkdir -p "$RESULTS"
# fio for the host row: in the test host, the copy on its disk run by its own dynamic loader (fio's
# ~80 MB of libraries stay on the disk instead of L1's initramfs); else whatever BLK_FIO says.
if [ -z "${BLK_FIO:-}" ] && [ -x "$BLK_DIR/hostfio/fio" ]; then
    BLK_FIO="$BLK_DIR/hostfio/ld.so --library-path $BLK_DIR/hostfio/lib $BLK_DIR/hostfio/fio"
    export BLK_FIO
fi
# Shared (memfd) guest RAM, which the vhost-user rows need, gets transparent huge pages only where
# shmem_enabled allows; QEMU and tern both madvise(MADV_HUGEPAGE) it, so "advise" (the default here)
# puts every row on 2 MiB pages like the anonymous RAM of the built-in rows; Debian's "never" leaves
# the vhost-user rows on 4 KiB pages.
echo "$BLK_SHMEM_THP" >/sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null ||
    echo "BLK-WARN cannot set /sys/kernel/mm/transparent_hugepage/shmem_enabled to $BLK_SHMEM_THP"
echo "BLK-INFO where=${BLK_WHERE:-test-host} l1_kernel=$(uname -r) kvm_debugfs=$([ -d /sys/kernel/debug/kvm ] && echo yes || echo no) data_bytes=$(stat -c %s "$DATA") initrd_bytes=$(stat -c %s "$INITRD") runtime=$BLK_RUNTIME engine=$BLK_ENGINE qsd=$([ -x $QSD ] && echo yes || echo no) kvm_trace=$kvm_trace shmem_enabled=$(cat /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null | tr ' ' ,) thp_enabled=$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null | tr ' ' ,)"

tern_path() {  # tern_path NAME: the binary of tern NAME in $BLK_TERNS (empty: none)
    for e in $BLK_TERNS; do [ "${e%%=*}" = "$1" ] && echo "${e#*=}" && return; done
}
first_tern() { for e in $BLK_TERNS; do echo "${e#*=}"; return; done; }
first_tern_name() { for e in $BLK_TERNS; do echo "${e%%=*}"; return; done; }
tern_extra() {  # tern_extra NAME: ",OPTS" of tern NAME in $BLK_TERN_EXTRA (empty: none)
    for e in $BLK_TERN_EXTRA; do [ "${e%%=*}" = "$1" ] && echo ",${e#*=}" && return; done
}

# split_cfg CFG: sets vmm (host, qemu or a tern NAME), backend (none, qsd, vub: the vhost-user-blk
# back-end process) and iface (virtio, nvme, ide: what the guest sees) of a configuration.
split_cfg() {
    vmm="$1" backend=none iface=virtio img=raw
    case "$1" in
        *-qcow2 | *-qcow2new)
            if [ -z "$(tern_path "$1")" ]; then img="${1##*-}" vmm="${1%-*}"; fi ;;
    esac
    case "$vmm" in
        *-qsd | *-vub | *-nvme | *-ide)
            if [ "$vmm" != qemu ] && [ -z "$(tern_path "$vmm")" ]; then
                case "${vmm##*-}" in qsd | vub) backend="${vmm##*-}" ;; *) iface="${vmm##*-}" ;; esac
                vmm="${vmm%-*}"
            fi ;;
    esac
    # The image: blk.raw, or qcow2 (blk.qcow2: blk.raw converted by qemu-img, every cluster
    # allocated) or qcow2new (blk-new.qcow2: a fresh empty image, copied from blk-new.qcow2.orig
    # before each boot, so its writes allocate).
    case "$img" in
        raw) DATA=$BLK_DIR/blk.raw DFMT=raw ;;
        qcow2) DATA=$BLK_DIR/blk.qcow2 DFMT=qcow2 ;;
        qcow2new) DATA=$BLK_DIR/blk-new.qcow2 DFMT=qcow2 ;;
    esac
    vubin=$(tern_path "$vmm") vubname=$vmm
    [ -n "$vubin" ] || { vubin=$(first_tern); vubname=$(first_tern_name); }
}

# --- The configuration tables --------------------------------------------------------------------
# backend_cmd BACKEND: how to start the back-end, listening at $SOCK (empty for none).
backend_cmd() {
    case "$1" in
        qsd) echo "$QSD --blockdev driver=file,node-name=f0,filename=$DATA,cache.direct=on,aio=io_uring --export type=vhost-user-blk,id=e0,node-name=f0,addr.type=unix,addr.path=$SOCK,writable=on" ;;
        vub) echo "$vubin vhost-user-blk --socket $SOCK --disk path=$DATA,$BLK_TERN_DISK$(tern_extra "$vubname")" ;;
    esac
}
# disk_args VMM BACKEND IFACE: the VMM's disk options: its own virtio-blk, NVMe or IDE disk on
# blk.raw, or a vhost-user-blk front-end on $SOCK (QEMU needs guest RAM another process can map: a
# shared memfd as the NUMA node's memory; tern picks memfd itself when a vhost-user disk is configured).
# (qcow2 images: QEMU with its default qcow2 options, tern with format=qcow2; vhost-user rows serve raw only.)
tern_fmt() { [ "$DFMT" = raw ] || echo ",format=$DFMT"; }  # raw rows as before: probed
disk_args() {
    QEMU_DRIVE="-drive file=$DATA,if=none,id=d0,cache=none,aio=io_uring,format=$DFMT"
    case "$1:$2:$3" in
        qemu:none:virtio) echo "$QEMU_DRIVE -device virtio-blk-pci,drive=d0" ;;
        qemu:none:nvme) echo "$QEMU_DRIVE -device nvme,drive=d0,serial=blkbench" ;;
        qemu:none:ide) echo "$QEMU_DRIVE -device ide-hd,drive=d0,bus=ide.0" ;;
        qemu:*) echo "-object memory-backend-memfd,id=mem,size=${BLK_MEM_MIB}M,share=on -numa node,memdev=mem -chardev socket,id=c0,path=$SOCK -device vhost-user-blk-pci,chardev=c0" ;;
        *:none:virtio) echo "--disk path=$DATA,$BLK_TERN_DISK$(tern_fmt)$(tern_extra "$1")" ;;
        *:none:*) echo "--disk path=$DATA,$BLK_TERN_DISK$(tern_fmt)$(tern_extra "$1"),interface=$3" ;;
        *) echo "--disk vhost-user=$SOCK" ;;
    esac
}
# guest_disk IFACE: the guest's kernel command line for its disk (bench/blk/guest-fio-bench.sh):
# which device fio uses, and for IDE the modules Debian's cloud kernel has ATA in (no AHCI there:
# CONFIG_SATA_AHCI is off, ata_piix drives -M pc's PIIX3 IDE controller).
guest_disk() {
    case "$1" in
        virtio) echo "blk.dev=/dev/vda" ;;
        nvme) echo "blk.dev=/dev/nvme0n1" ;;
        ide) echo "blk.dev=/dev/sda blk.modules=scsi_common,scsi_mod,libata,ata_piix,sd_mod" ;;
    esac
}
# -------------------------------------------------------------------------------------------------

vmm_cmd() {  # vmm_cmd VMM BACKEND IFACE
    case "$1" in
        qemu) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${BLK_MEM_MIB}M -smp 1 -kernel $TH_GUEST_KERNEL -initrd $INITRD -display none -nodefaults -serial stdio -no-reboot $(disk_args "$1" "$2" "$3") -append" ;;
        *) echo "$(tern_path "$1") run --kernel $TH_GUEST_KERNEL --initrd $INITRD --memory ${BLK_MEM_MIB}M --cpus 1 $(disk_args "$1" "$2" "$3") --cmdline" ;;
    esac
}

# why_skip VMM BACKEND IFACE: why this configuration cannot run in this test host (empty: it can).
why_skip() {
    case "$1" in
        host) [ -n "${BLK_FIO:-}" ] || echo "no fio for the host row (BLK_FIO unset, no hostfio/ on the disk)"; return ;;
        qemu) [ -n "$TH_QEMU" ] || { echo "qemu not in the test host"; return; }
            [ "$3" = virtio ] || "$TH_QEMU" -device help 2>&1 | grep -q "name \"$(echo "$3" | sed 's/ide/ide-hd/')\"" ||
                echo "this QEMU has no -device $(echo "$3" | sed 's/ide/ide-hd/')" ;;
        *)
            bin=$(tern_path "$1")
            [ -n "$bin" ] && [ -x "$bin" ] || { echo "tern not in the test host"; return; }
            "$bin" run --help 2>&1 | grep -q -- '--disk' || { echo "tern has no --disk yet"; return; }
            if [ "$2" != none ] && ! "$bin" run --help 2>&1 | grep -q -- 'vhost-user'; then
                echo "tern has no vhost-user-blk front-end yet (tern run --help does not mention vhost-user)"; return
            fi
            if [ "$3" = ide ]; then echo "tern has no IDE disk"; return; fi
            if [ "$3" = nvme ] && ! "$bin" run --help 2>&1 | grep -q 'nvme'; then
                echo "tern has no NVMe disk yet (tern run --help does not mention nvme)"; return
            fi ;;
    esac
    case "$2" in
        qsd) [ -x "$QSD" ] || echo "qemu-storage-daemon not in the test host" ;;
        vub)
            if [ -z "$vubin" ] || ! "$vubin" --help 2>&1 | grep -q '^ *vhost-user-blk'; then
                echo "tern has no vhost-user-blk back-end yet (tern --help lists no such subcommand)"
            fi ;;
    esac
}

# sample JOB begin|end: the VMM's and the back-end's CPU time (cpu.txt), the VM's exits (exits.txt)
# and the hist triggers' counts of the VMM's threads (trace.txt).
sample() {
    echo "$1 $2 $(sample_pids "$pid" "$bepid")" >>"$out/cpu.txt"
    echo "$1 $2 $(kvm_exits "$pid")" >>"$out/exits.txt"
    [ "$cfg_trace" != on ] || kt_sample "$pid" "$1 $2" >>"$out/trace.txt"
}

# start_backend BACKEND OUT: starts it in the background (bepid), waits up to 20 s for its socket.
start_backend() {
    bepid=""
    [ "$1" != none ] || return 0
    rm -f "$SOCK" /tmp/be.pid
    echo "BLK-CMD cfg=$cfg backend=$(backend_cmd "$1")"
    # shellcheck disable=SC2046,SC2016
    sh -c 'echo $$ >/tmp/be.pid; exec "$@"' sh $(backend_cmd "$1") >"$2/backend.txt" 2>&1 </dev/null &
    i=0
    while { [ ! -S "$SOCK" ] || [ ! -s /tmp/be.pid ]; } && [ "$i" -lt 200 ]; do usleep 100000; i=$((i + 1)); done
    bepid=$(cat /tmp/be.pid 2>/dev/null)
    [ -S "$SOCK" ] && [ -d "/proc/$bepid" ] && return 0
    echo "BLK-ERROR cfg=$cfg$tag the $1 back-end did not listen at $SOCK within 20 s: $(tail -n 3 "$2/backend.txt" | tr '\n' ' ')"
    stop_backend
    return 1
}
stop_backend() {  # SIGTERM (both back-ends log their counters then), SIGKILL after 10 s
    [ -n "$bepid" ] || return 0
    kill -TERM "$bepid" 2>/dev/null
    i=0
    while [ -d "/proc/$bepid" ] && [ "$(cut -d' ' -f3 "/proc/$bepid/stat" 2>/dev/null)" != Z ] && [ "$i" -lt 100 ]; do
        usleep 100000; i=$((i + 1))
    done
    kill -KILL "$bepid" 2>/dev/null
    wait "$bepid" 2>/dev/null
    bepid=""
}

# print_iops FIO_JSON: a BLK-PROGRESS line per job with its read and write IOPS (fio's pretty JSON:
# per job its name, then "iops" of the read, write, trim sides).
print_iops() {
    awk -F: -v p="BLK-PROGRESS cfg=$cfg$tag" '/"jobname" :/ { gsub(/[ ",]/, "", $2); j = $2; n = 0 }
        /"iops" :/ { gsub(/[ ,]/, "", $2); n++; if (n == 1) r = $2; if (n == 2) printf "%s job=%s read_iops=%.0f write_iops=%.0f\n", p, j, r, $2 }' "$1"
}

# exit_watchdog: once the guest's action has ended (it powers off next), the VMM has
# $BLK_EXIT_GRACE s to exit; a VMM still running then is killed and says so (the results are in
# by then), instead of holding the run until $BLK_TIMEOUT.
exit_watchdog() {
    (
        sleep "$BLK_EXIT_GRACE"
        if kill -0 "$pid" 2>/dev/null; then
            : >/tmp/vmm.killed
            echo "BLK-WARN cfg=$cfg$tag the VMM was still running ${BLK_EXIT_GRACE}s after the guest's action ended (the guest powers off then): killed"
            kill -KILL "$pid"
        fi
    ) &
    dog=$!
}

run_cfg() {  # run_cfg CFG ROUND
    cfg="$1" round="$2" out="$RESULTS/$1/$2" tag=""
    [ "$BLK_ROUNDS" = 1 ] && [ "$2" = 1 ] || tag=" round=$2"
    [ "$2" -le "$BLK_ROUNDS" ] || tag="$tag (traced)"
    mkdir -p "$out"
    split_cfg "$cfg"
    why=$(why_skip "$vmm" "$backend" "$iface")
    if [ -n "$why" ]; then
        echo "skipped=$why" >"$out/status"; echo "BLK-SKIP cfg=$cfg reason=$why"; return
    fi
    if [ "$img" != raw ] && { [ "$backend" != none ] || [ "$vmm" = host ]; }; then
        echo "skipped=qcow2 rows are the VMMs' own disks only" >"$out/status"; echo "BLK-SKIP cfg=$cfg reason=qcow2 rows are the VMMs' own disks only"; return
    fi
    if [ ! -f "$DATA" ] && [ "$img" != qcow2new ]; then
        echo "skipped=no $DATA on the disk" >"$out/status"; echo "BLK-SKIP cfg=$cfg reason=no $DATA"; return
    fi
    if [ "$img" = qcow2new ]; then
        cp "$DATA.orig" "$DATA" || { echo "skipped=no $DATA.orig" >"$out/status"; echo "BLK-SKIP cfg=$cfg reason=no $DATA.orig"; return; }
    fi
    if [ "$vmm" = host ]; then run_host "$out"; return; fi
    start_backend "$backend" "$out" || { echo "skipped=the back-end did not start" >"$out/status"; return; }
    cmdline="$CMDLINE $(guest_disk "$iface")"
    echo "BLK-CMD cfg=$cfg cmd=$(vmm_cmd "$vmm" "$backend" "$iface") \"$cmdline\""
    rm -f /tmp/in /tmp/out /tmp/vmm.pid /tmp/vmm.killed
    mkfifo /tmp/in /tmp/out
    cfg_trace=$kvm_trace
    [ "$round" -gt "$BLK_ROUNDS" ] || cfg_trace=off  # a timed round
    case " $BLK_KVM_TRACE_OFF " in *" $cfg "*) cfg_trace=off ;; esac
    [ "$cfg_trace" != on ] || kt_start  # from the VMM's start: its vCPU threads' ids are not known before
    # The inner shell writes its pid and execs busybox timeout, which execs the VMM in the same
    # process: that pid is the VMM's. The VMM's exit status follows its output as BLK-VMM-EXIT.
    # shellcheck disable=SC2046,SC2016
    { sh -c 'echo $$ >/tmp/vmm.pid; exec "$@"' sh timeout -s KILL "$BLK_TIMEOUT" $(vmm_cmd "$vmm" "$backend" "$iface") "$cmdline"
      echo "BLK-VMM-EXIT rc=$?"; } </tmp/in 2>&1 | tr -d '\r' >/tmp/out &
    vmmjob=$!
    exec 4>/tmp/in 3</tmp/out
    while [ ! -s /tmp/vmm.pid ]; do usleep 10000; done
    pid=$(cat /tmp/vmm.pid)
    vmm_rc="" dog="" last=""
    : >"$out/cpu.txt"
    : >"$out/exits.txt"
    [ "$cfg_trace" != on ] || : >"$out/trace.txt"
    t0=$(cut -d' ' -f1 /proc/uptime)
    echo "BLK-PROGRESS cfg=$cfg$tag booting (pid $pid${bepid:+, back-end pid $bepid})"
    while IFS= read -r line <&3; do
        case "$line" in
            BLK-JOB-BEGIN*)
                job="${line#*name=}"
                echo "BLK-MARK cfg=$cfg round=$round job=$job at=begin"
                sample "$job" begin
                echo go >&4
                echo "BLK-PROGRESS cfg=$cfg$tag job=$job running (${BLK_RUNTIME}s) l1_uptime=$(cut -d' ' -f1 /proc/uptime)" ;;
            BLK-JOB-END*)
                job="${line#*name=}"
                sample "$job" end
                echo "BLK-MARK cfg=$cfg round=$round job=$job at=end"
                echo go >&4 ;;
            BLK-JOB-RC*)
                case "$line" in *rc=0) ;; *) echo "BLK-ERROR cfg=$cfg$tag fio failed: ${line#BLK-JOB-RC }" ;; esac ;;
            BLK-B64-END*)
                name="${line#*name=}"
                if base64 -d <"/tmp/$name.b64" | gunzip >"$out/$name.json" 2>/dev/null; then
                    print_iops "$out/$name.json"
                else
                    echo "BLK-ERROR cfg=$cfg$tag the fio report did not decode"
                fi
                rm -f "/tmp/$name.b64" ;;
            BLK-VMM-EXIT*) vmm_rc="${line#*rc=}" ;;
            BLK-B64*)
                rest="${line#BLK-B64 name=}"
                echo "${rest#* data=}" >>"/tmp/${rest%% *}.b64" ;;
            *)
                echo "  | $line"
                last="$line"
                case "$line" in
                    BLK-GUEST*)
                        echo "BLK-PROGRESS cfg=$cfg$tag guest up after $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')s: ${line#BLK-GUEST }"
                        echo "BLK-PROGRESS cfg=$cfg$tag l1 $(awk '/^(AnonHugePages|ShmemHugePages|Shmem):/ { printf "%s=%dMiB ", $1, $2 / 1024 }' /proc/meminfo | tr -d :)" ;;
                    BLK-ERROR* | BLK-WARN* | BLK-FIO-ERROR*) echo "${line%% *} cfg=$cfg$tag ${line#* }" ;;
                    TERN-GUEST-ACTION*) [ -n "$dog" ] || exit_watchdog ;;
                esac ;;
        esac
    done
    exec 3<&- 4>&-
    [ -z "$dog" ] || kill "$dog" 2>/dev/null
    wait "$vmmjob"
    [ "$cfg_trace" != on ] || kt_stop
    stop_backend
    # A VMM that refused its options (e.g. a --tern-extra key it does not know) exits before any job.
    if [ "${vmm_rc:-unknown}" != 0 ] && ! grep -q ' end ' "$out/cpu.txt"; then
        echo "BLK-ERROR cfg=$cfg$tag the VMM exited rc=${vmm_rc:-unknown} before any job: $last"
    fi
    [ ! -s "$out/backend.txt" ] || sed 's/^/  be| /' "$out/backend.txt" | tail -n 40
    echo "rc=${vmm_rc:-unknown}$([ ! -f /tmp/vmm.killed ] || echo " (killed: still running ${BLK_EXIT_GRACE}s after the guest's action ended)") jobs=$(grep -c ' end ' "$out/cpu.txt")" >"$out/status"
    rm -f /tmp/*.b64
    echo "BLK-PROGRESS cfg=$cfg$tag exited rc=${vmm_rc:-unknown} after $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f", b - a }')s"
}

# run_host OUT: the host row: fio here, on blk.raw itself, with the guest's job list; its marks
# read fio's own CPU time (guest-fio-bench.sh host).
run_host() {
    echo "BLK-CMD cfg=$cfg cmd=$BLK_FIO (on $DATA)"
    echo "BLK-PROGRESS cfg=$cfg$tag fio on $DATA"
    t0=$(cut -d' ' -f1 /proc/uptime)
    BLK_DEV=$DATA BLK_JOBS_FILE=$BLK_LIB/jobs.txt BLK_OUT=$1 BLK_ROUND=$round BLK_CONSOLE=/proc/$$/fd/1 \
        sh "$BLK_LIB/fio-bench" host
    rc=$?
    [ "$rc" = 0 ] || echo "BLK-ERROR cfg=$cfg$tag fio failed: rc=$rc: $(head -n 3 "$1/fio.err" | tr '\n' ' ')"
    [ ! -f "$1/fio.json" ] || print_iops "$1/fio.json"
    echo "rc=$rc jobs=$(grep -c ' end ' "$1/cpu.txt")" >"$1/status"
    echo "BLK-PROGRESS cfg=$cfg$tag done rc=$rc after $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f", b - a }')s"
}

r=1 all_rounds=$BLK_ROUNDS
[ "$kvm_trace" != on ] || all_rounds=$((BLK_ROUNDS + BLK_KVM_TRACE_ROUNDS))
while [ "$r" -le "$all_rounds" ]; do
    for c in $BLK_CONFIGS; do
        # The traced rounds: every configuration the triggers count (not the host row; not those of
        # BLK_KVM_TRACE_OFF, which would only be timed again).
        if [ "$r" -gt "$BLK_ROUNDS" ]; then
            case "$c" in host) continue ;; esac
            case " $BLK_KVM_TRACE_OFF " in *" $c "*) continue ;; esac
        fi
        run_cfg "$c" "$r"
    done
    r=$((r + 1))
done
sync
[ -z "${mounted:-}" ] || umount /mnt
exit 0
