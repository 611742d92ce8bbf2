#!/bin/sh
# Runs inside the test host (L1), started by bench/blk/run.sh. L1's second disk (/dev/vda, ext4) holds
#   blk.raw              the data disk the guest sees as /dev/vda (random bytes, fully allocated)
#   guest-fio.cpio       guest initramfs with fio and /actions/fio-bench (bench/blk/guest-fio-bench.sh)
#   results/             filled here, read by the host from the image afterwards (debugfs)
# $BLK_ROUNDS times (default 1), boots the guest once per VMM in $BLK_VMMS (qemu, or a tern NAME of
# $BLK_TERNS = "NAME=PATH ...", default "tern=$TH_TERN"), in that order, so the VMMs interleave:
# qemu, tern-a, tern-b, qemu, ... Each boot has the same data disk as virtio-blk; the scenario answers
# the guest's BLK-JOB-BEGIN/END lines after reading the VMM's CPU time, and stores per VMM and round
# in results/<vmm>/<round>/:
#   <job>.json  fio's report     cpu.txt  "<job> begin|end utime stime guest_time" (clock ticks)
#   status      "rc=N" of the VMM, or "skipped=<why>"
# Prints BLK-PROGRESS / BLK-SKIP / BLK-ERROR lines for the host. ext4 (not tmpfs) under the data disk
# is what makes O_DIRECT (cache=none) possible.
: "${BLK_VMMS:=qemu tern}" "${BLK_RUNTIME:=5}" "${BLK_ENGINE:=libaio}" "${BLK_MEM_MIB:=1024}" "${BLK_TIMEOUT:=1200}"
: "${BLK_TERN_DISK:=cache=none,io=io_uring}" "${BLK_ROUNDS:=1}" "${BLK_TERNS:=${TH_TERN:+tern=$TH_TERN}}"
trap '' PIPE  # a VMM that died must not take this script with it when it answers a job line
CMDLINE="console=ttyS0 quiet loglevel=1 tern.action=fio-bench blk.runtime=$BLK_RUNTIME blk.engine=$BLK_ENGINE"

i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
mkdir -p /mnt
mount -t ext4 /dev/vda /mnt || { echo "BLK-ERROR cannot mount the test host's disk /dev/vda"; exit 1; }
DATA=/mnt/blk.raw INITRD=/mnt/guest-fio.cpio
[ -f "$DATA" ] && [ -f "$INITRD" ] || { echo "BLK-ERROR $DATA or $INITRD missing on the disk"; exit 1; }
rm -rf /mnt/results
mkdir -p /mnt/results
echo "BLK-INFO l1_kernel=$(uname -r) data_bytes=$(stat -c %s "$DATA") initrd_bytes=$(stat -c %s "$INITRD") runtime=$BLK_RUNTIME engine=$BLK_ENGINE"

tern_path() {  # tern_path NAME: the binary of tern NAME in $BLK_TERNS (empty: none)
    for e in $BLK_TERNS; do [ "${e%%=*}" = "$1" ] && echo "${e#*=}" && return; done
}

vmm_cmd() {
    case "$1" in
        qemu) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${BLK_MEM_MIB}M -smp 1 -kernel $TH_GUEST_KERNEL -initrd $INITRD -display none -nodefaults -serial stdio -no-reboot -drive file=$DATA,if=none,id=vda,cache=none,aio=io_uring,format=raw -device virtio-blk-pci,drive=vda -append" ;;
        *) echo "$(tern_path "$1") run --kernel $TH_GUEST_KERNEL --initrd $INITRD --memory ${BLK_MEM_MIB}M --cpus 1 --disk path=$DATA,$BLK_TERN_DISK --cmdline" ;;
    esac
}

# cpu_ticks PID: "utime stime guest_time" of PID, in clock ticks (fields 14, 15, 43 of /proc/PID/stat).
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12, $13, $41 }'; }

run_vmm() {  # run_vmm VMM ROUND
    v="$1" out="/mnt/results/$1/$2" tag=""
    [ "$BLK_ROUNDS" = 1 ] || tag=" round=$2"
    mkdir -p "$out"
    case "$v" in
        qemu) [ -n "$TH_QEMU" ] || { echo "skipped=qemu not in the test host" >"$out/status"; echo "BLK-SKIP vmm=qemu reason=qemu not in the test host"; return; } ;;
        *)
            bin=$(tern_path "$v")
            if [ -z "$bin" ] || [ ! -x "$bin" ]; then
                echo "skipped=tern not in the test host" >"$out/status"; echo "BLK-SKIP vmm=$v reason=tern not in the test host"; return
            fi
            if ! "$bin" run --help 2>&1 | grep -q -- '--disk'; then
                echo "skipped=tern has no --disk yet" >"$out/status"
                echo "BLK-SKIP vmm=$v reason=tern has no --disk yet (tern run --help does not list it)"
                return
            fi ;;
    esac
    echo "BLK-CMD vmm=$v cmd=$(vmm_cmd "$v") \"$CMDLINE\""
    rm -f /tmp/in /tmp/out /tmp/vmm.pid
    mkfifo /tmp/in /tmp/out
    # The inner shell writes its pid and execs busybox timeout, which execs the VMM in the same
    # process: that pid is the VMM's. The VMM's exit status follows its output as BLK-VMM-EXIT.
    # shellcheck disable=SC2046,SC2016
    { sh -c 'echo $$ >/tmp/vmm.pid; exec "$@"' sh timeout -s KILL "$BLK_TIMEOUT" $(vmm_cmd "$v") "$CMDLINE"
      echo "BLK-VMM-EXIT rc=$?"; } </tmp/in 2>&1 | tr -d '\r' >/tmp/out &
    exec 4>/tmp/in 3</tmp/out
    while [ ! -s /tmp/vmm.pid ]; do usleep 10000; done
    pid=$(cat /tmp/vmm.pid)
    vmm_rc=""
    : >"$out/cpu.txt"
    t0=$(cut -d' ' -f1 /proc/uptime)
    echo "BLK-PROGRESS vmm=$v$tag booting (pid $pid)"
    while IFS= read -r line <&3; do
        case "$line" in
            BLK-JOB-BEGIN*)
                job="${line#*name=}"
                echo "$job begin $(cpu_ticks "$pid")" >>"$out/cpu.txt"
                echo go >&4
                echo "BLK-PROGRESS vmm=$v$tag job=$job running (${BLK_RUNTIME}s) l1_uptime=$(cut -d' ' -f1 /proc/uptime)" ;;
            BLK-JOB-END*)
                job="${line#*name=}"
                echo "$job end $(cpu_ticks "$pid")" >>"$out/cpu.txt"
                echo go >&4 ;;
            BLK-JOB-RC*)
                case "$line" in *rc=0) ;; *) echo "BLK-ERROR vmm=$v$tag fio failed: ${line#BLK-JOB-RC }" ;; esac ;;
            BLK-B64-END*)
                job="${line#*name=}"
                if base64 -d <"/tmp/$job.b64" | gunzip >"$out/$job.json" 2>/dev/null; then
                    # fio's pretty JSON: the first "iops" is the read side, the second the write side.
                    summary=$(awk -F: '/"iops" :/ { gsub(/[ ,]/, "", $2); v[++n] = $2 } END { printf "read_iops=%.0f write_iops=%.0f", v[1], v[2] }' "$out/$job.json")
                    echo "BLK-PROGRESS vmm=$v$tag job=$job done $summary"
                else
                    echo "BLK-ERROR vmm=$v$tag job=$job fio report did not decode"
                fi
                rm -f "/tmp/$job.b64" ;;
            BLK-VMM-EXIT*) vmm_rc="${line#*rc=}" ;;
            BLK-B64*)
                rest="${line#BLK-B64 name=}"
                echo "${rest#* data=}" >>"/tmp/${rest%% *}.b64" ;;
            *)
                echo "  | $line"
                case "$line" in
                    BLK-GUEST*) echo "BLK-PROGRESS vmm=$v$tag guest up after $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.1f", b - a }')s: ${line#BLK-GUEST }" ;;
                    BLK-ERROR* | BLK-WARN* | BLK-FIO-ERROR*) echo "${line%% *} vmm=$v$tag ${line#* }" ;;
                esac ;;
        esac
    done
    exec 3<&- 4>&-
    wait
    echo "rc=${vmm_rc:-unknown} jobs=$(grep -c ' end ' "$out/cpu.txt")" >"$out/status"
    echo "BLK-PROGRESS vmm=$v$tag exited rc=${vmm_rc:-unknown} after $(awk -v a="$t0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f", b - a }')s"
}

r=1
while [ "$r" -le "$BLK_ROUNDS" ]; do
    for v in $BLK_VMMS; do run_vmm "$v" "$r"; done
    r=$((r + 1))
done
sync
umount /mnt
exit 0
