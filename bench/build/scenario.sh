#!/bin/sh
# Runs in the test host (L1), started by bench/build/run.sh. L1's /dev/vda is the prepared Debian
# disk (bench/build/prepare-image.sh; QEMU snapshot=on, so the file on the host never changes). Per
# round, every configuration of $BUILD_CONFIGS in turn (interleaved):
#   host          L1 mounts /dev/vda, chroots into it and runs the slice there (same compiler, same
#                 files, no VMM); unmounted again before any VM uses the disk
#   VMM-CACHE     the Debian guest booted from /dev/vda under VMM (tern or qemu: QEMU -M pc
#                 -enable-kvm), virtio-blk with cache=CACHE (writeback or none)
#   VMM-nvme      the same on the VMM's emulated NVMe controller (cache=none)
# The guest has $BUILD_CPUS vCPUs and $BUILD_MEM_MIB MiB; it logs in on the serial console; the scenario
# types `slice.sh run N J` (bench/build/slice.sh, in the image at /root/tern-bench/) and waits for
# its BUILD-END line, then powers the guest off. Before each run L1 drops its page cache.
# Console lines (parsed by summarize.py):
#   BUILD-INFO ...                      L1's kernel, CPU count, debugfs, the slice
#   BUILD-MARK cfg= round= at=begin|end   stamped by the host with L1's host CPU time (stamp_cpu.py)
#   BUILD-RESULT cfg= round= rc= wall_s= make_s= sync_s= boot_s= objects= built= vmm_utime= vmm_stime=
#                vmm_guest= l1_busy= l1_total= exits= io_exits= mmio_exits= halt_exits= irq_exits=
#                irq_injections=      wall_s: L1's clock from typing the command to BUILD-END;
#                make_s, sync_s: the build system's own clock (slice.sh); CPU in clock ticks
#                (blk-lib.sh's cpu_ticks of the VMM process, L1's /proc/stat), KVM exits of the
#                VM in L1's debugfs (blk-lib.sh's kvm_exits) over the build, "-" where unknown
#   BUILD-TERNSTATS cfg= round= at=begin|end exits={...} process={...}   tern's own exit accounting
#                (GET /tern/stats through `tern stat --once --json`: exits by reason, process CPU)
#   BUILD-VMMSTATS cfg= round= line=...  tern's --stats-on-exit summary (stderr at its exit)
#   BUILD-ERROR / BUILD-PROGRESS         for the host and the log
: "${BUILD_CONFIGS:=host tern-writeback qemu-writeback}" "${BUILD_ROUNDS:=1}" "${BUILD_OBJECTS:=4}"
: "${BUILD_JOBS:=2}" "${BUILD_CPUS:=2}" "${BUILD_MEM_MIB:=2048}" "${BUILD_LIB:=/opt/build}"
: "${BUILD_BOOT_TIMEOUT:=400}" "${BUILD_TIMEOUT:=1500}" "${BUILD_POLL:=2}"
# shellcheck source=bench/blk/blk-lib.sh
. "$BUILD_LIB/blk-lib.sh"
# shellcheck source=testhost/debian_lib.sh
. /testhost/debian_lib.sh
# shellcheck disable=SC2034
DEB_TERN_ARGS="--stats-on-exit"  # read by deb_start: tern's exit accounting on stderr at its end
command -v usleep >/dev/null 2>&1 || usleep() { sleep "$(awk -v u="$1" 'BEGIN { printf "%.6f", u / 1e6 }')"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" -v b="$(uptime_s)" 'BEGIN { printf "%.2f", b - a }'; }
err() { echo "BUILD-ERROR cfg=${cfg:-setup}${round:+ round=$round} $*"; }

i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
[ -b /dev/vda ] || { err "no /dev/vda in the test host (run.sh --disk, the virtio modules)"; exit 1; }
MNT=/mnt/deb
mkdir -p "$MNT"

# chroot_mount / chroot_umount: the disk at $MNT with /proc, /sys, /dev for the chroot.
chroot_mount() {
    mount -t ext4 /dev/vda "$MNT" || { err "cannot mount /dev/vda"; return 1; }
    mount -t proc proc "$MNT/proc" && mount -t sysfs sysfs "$MNT/sys" && mount -o bind /dev "$MNT/dev"
}
chroot_umount() {
    sync
    umount "$MNT/dev" "$MNT/sys" "$MNT/proc" 2>/dev/null
    umount "$MNT" || { err "cannot unmount /dev/vda: a VM must not use a mounted disk"; return 1; }
}
in_chroot() {  # in_chroot CMD...: CMD in the Debian system with a clean environment
    chroot "$MNT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C "$@"
}
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# The slice's files are in the image already (prepare-image.sh); check it, and what the build runs.
chroot_mount || exit 1
[ -f "$MNT/root/tern-bench/slice.sh" ] && [ -f "$MNT/root/linux-6.1/include/generated/autoconf.h" ] ||
    { err "the disk is not a prepared image (no /root/tern-bench/slice.sh or no make prepare in /root/linux-6.1)"; chroot_umount; exit 1; }
gcc_ver=$(in_chroot gcc -dumpfullversion 2>/dev/null)
make_ver=$(in_chroot make --version 2>/dev/null | head -n 1 | tr ' ' _)
nobj=$(in_chroot sh /root/tern-bench/slice.sh count)
objs=$(in_chroot sh -c "grep -v '^#' /root/tern-bench/slice.txt | grep -v '^ *\$' | head -n $BUILD_OBJECTS" | tr '\n' ,)
chroot_umount || exit 1
echo "BUILD-INFO l1_kernel=$(uname -r) l1_cpus=$(nproc) l1_mem_mib=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo) kvm_debugfs=$([ -d /sys/kernel/debug/kvm ] && echo yes || echo no) gcc=$gcc_ver make=$make_ver slice_objects=$BUILD_OBJECTS of=$nobj jobs=$BUILD_JOBS objects=${objs%,}"

# split_cfg CFG: vmm (host, tern, qemu), cache (writeback, none) and iface (virtio, nvme).
split_cfg() {
    vmm=${1%%-*} cache=${1#*-} iface=virtio
    case "$1" in
        host) cache=- ;;
        *-nvme) cache=none iface=nvme ;;
    esac
}

# diskspec: tern's --disk spec of this configuration (debian_lib.sh gives QEMU the same disk:
# -drive cache=CACHE,aio=io_uring with virtio-blk-pci or nvme); io_uring for both VMMs.
diskspec() { echo "path=/dev/vda,cache=$cache,io=io_uring$([ "$iface" = virtio ] || echo ",interface=$iface")"; }

# result LINE_FIELDS: the BUILD-RESULT line of this run.
result() { echo "BUILD-RESULT cfg=$cfg round=$round $*"; }

run_host() {
    chroot_mount || return 1
    drop_caches
    # shellcheck disable=SC2046
    set -- $(l1_ticks)
    echo "BUILD-MARK cfg=$cfg round=$round at=begin"
    t0=$(uptime_s)
    end=$(in_chroot /bin/sh /root/tern-bench/slice.sh run "$BUILD_OBJECTS" "$BUILD_JOBS" | tee /tmp/host-build.out | grep '^BUILD-END')
    wall=$(since "$t0")
    echo "BUILD-MARK cfg=$cfg round=$round at=end"
    # shellcheck disable=SC2046
    set -- "$@" $(l1_ticks)
    grep '^BUILD-LOG' /tmp/host-build.out
    chroot_umount
    result "rc=$(echo "$end" | sed -n 's/.* rc=\([0-9]*\).*/\1/p') wall_s=$wall $(echo "$end" | sed 's/^BUILD-END rc=[0-9]* //') boot_s=- vmm_utime=- vmm_stime=- vmm_guest=- l1_busy=$(($3 - $1)) l1_total=$(($4 - $2)) $(echo "$KVM_EXIT_STATS" | sed 's/\([a-z_]*\)/\1=-/g')"
}

# ternstats AT: tern's own counters of the running VM (its API socket), two JSON fragments.
ternstats() {
    [ "$vmm" = tern ] || return 0
    j=$("$TH_TERN" stat --api-sock "/tmp/$name.sock" --once --json --interval 0.05 2>/dev/null)
    echo "BUILD-TERNSTATS cfg=$cfg round=$round at=$1 $(echo "$j" | grep -o '"by_reason": *{[^}]*}' | head -n 1 | tr -d ' ') $(echo "$j" | grep -o '"process": *{[^}]*}' | head -n 1 | tr -d ' ')"
}

run_vm() {
    name=bench
    drop_caches
    t0=$(uptime_s)
    deb_start "$name" "$vmm" "$BUILD_CPUS" "$BUILD_MEM_MIB" "$(diskspec)" || { err "the VM did not start"; return 1; }
    if ! deb_prompt "$name" "$BUILD_BOOT_TIMEOUT"; then
        err "no shell prompt within ${BUILD_BOOT_TIMEOUT}s: $(deb_show "$name" | tail -n 4 | tr '\n' ' ')"
        deb_stop "$name" >/dev/null; return 1
    fi
    # The marker comes once `systemctl is-system-running --wait` returned: the build starts on a
    # guest whose boot has settled.
    marker=$(deb_marker "$name" "$BUILD_BOOT_TIMEOUT") || err "no TERN-DEBIAN-MARKER within ${BUILD_BOOT_TIMEOUT}s"
    boot=$(since "$t0")
    echo "BUILD-PROGRESS cfg=$cfg round=$round booted after ${boot}s: $marker"
    pid=$(cat "/tmp/$name.pid")
    ternstats begin
    c0=$(cpu_ticks "$pid") k0=$(kvm_exits "$pid") l0=$(l1_ticks)
    echo "BUILD-MARK cfg=$cfg round=$round at=begin"
    t1=$(uptime_s)
    deb_type "$name" "sh /root/tern-bench/slice.sh run $BUILD_OBJECTS $BUILD_JOBS"
    # A look at the console every $BUILD_POLL s (each forks: L1's CPU is the guest's too).
    poll=$DEB_POLL DEB_POLL=$BUILD_POLL
    deb_wait "$name" "$BUILD_TIMEOUT" '^BUILD-END rc=' || err "no BUILD-END within ${BUILD_TIMEOUT}s"
    DEB_POLL=$poll
    wall=$(since "$t1")
    c1=$(cpu_ticks "$pid") k1=$(kvm_exits "$pid") l1=$(l1_ticks)
    echo "BUILD-MARK cfg=$cfg round=$round at=end"
    ternstats end
    end=$deb_got
    tr -d '\r' <"/tmp/$name.out" | grep '^BUILD-LOG'
    result "rc=$(echo "$end" | sed -n 's/.* rc=\([0-9]*\).*/\1/p') wall_s=$wall $(echo "$end" | sed 's/^BUILD-END rc=[0-9]* //') boot_s=$boot $(echo "$c0 $c1" | awk '{ printf "vmm_utime=%d vmm_stime=%d vmm_guest=%d", $4 - $1, $5 - $2, $6 - $3 }') $(echo "$l0 $l1" | awk '{ printf "l1_busy=%d l1_total=%d", $3 - $1, $4 - $2 }') $(echo "$KVM_EXIT_STATS|$k0|$k1" | awk -F'|' '{ n = split($1, s, " "); split($2, a, " "); split($3, b, " "); for (i = 1; i <= n; i++) printf "%s=%s ", s[i], (a[i] ~ /^[0-9]+$/ && b[i] ~ /^[0-9]+$/) ? b[i] - a[i] : "-" }')"
    deb_type "$name" "systemctl poweroff"
    deb_wait_exit "$name" 180
    rc=$?
    [ "$rc" != 137 ] || err "the guest did not power off within 180s: killed"
    [ "$vmm" != tern ] || grep -v '^ *$' "/tmp/$name.err" | sed "s/^/BUILD-VMMSTATS cfg=$cfg round=$round line=/"
    echo "BUILD-PROGRESS cfg=$cfg round=$round powered off (rc=${rc:-?}) after $(since "$t0")s"
}

round=1
while [ "$round" -le "$BUILD_ROUNDS" ]; do
    for cfg in $BUILD_CONFIGS; do
        split_cfg "$cfg"
        echo "BUILD-PROGRESS cfg=$cfg round=$round starting (l1 uptime $(uptime_s)s)"
        if [ "$vmm" = host ]; then run_host; else run_vm; fi
    done
    round=$((round + 1))
done
exit 0
