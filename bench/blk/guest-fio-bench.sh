#!/bin/sh
# /actions/fio-bench in the guest (L2) of bench/blk: runs the jobs of /etc/blk-jobs (bench/blk/jobs.txt)
# one after the other on the benchmark disk, in one fio process, and reports on the console:
#   BLK-GUEST disk=DEV size_bytes=N engine=E runtime=S
#   BLK-JOB-BEGIN name=J        printed by fio's exec_prerun once the job is set up, just before its
#                               first I/O; it then waits for a line on the console (the test host
#                               reads the VMM's CPU time and KVM exits, then answers)
#   BLK-JOB-END name=J          printed by fio's exec_postrun after the job's last I/O; waits likewise
#   BLK-JOB-RC name=all rc=R    fio's exit status
#   BLK-B64 name=fio data=...   fio's JSON report (every job), gzip'ed and base64'ed, 76 characters a line
#   BLK-B64-END name=fio
# So the VMM's CPU time is read around the I/O only: not around fio's start (loading ~80 MB of
# libraries takes seconds here) nor its report.
# Kernel command line: blk.runtime=SECONDS (default 5), blk.engine=libaio|io_uring (default libaio),
# blk.jobs=NAME,NAME... (only these jobs, where NAME is a job or the start of job names up to a
# dash: "randread" is randread-qd1 ... randread-qd64; default all), blk.dev=DEV (the disk, default
# /dev/vda: /dev/nvme0n1 for an NVMe disk, /dev/sda for an IDE one), blk.modules=M,M... (modules of
# /lib/modules/extra/ to insmod first, in this order: the IDE row's scsi_mod, libata, ata_piix, ...).
# As "/actions/fio-bench mark BEGIN|END NAME" it is the exec_prerun/exec_postrun helper (fio sends
# that command's output to a file, so the helper talks to /dev/console itself).
#
# The same script runs fio in the test host itself (the "host" row: no VMM, the ceiling), as
#   fio-bench host           with BLK_DEV (a file or device), BLK_RUNTIME, BLK_ENGINE, BLK_JOBS
#                            (as blk.jobs), BLK_JOBS_FILE, BLK_FIO (the fio command), BLK_OUT (a
#                            directory: fio.json, cpu.txt, fio.pid) and BLK_CONSOLE (where the
#                            BLK-MARK lines go); its marks ("host-mark BEGIN|END NAME") read fio's
#                            CPU time (blk-lib.sh, $BLK_LIB) themselves instead of asking over a console.
if [ "$1" = mark ]; then
    echo "BLK-JOB-$2 name=$3" >/dev/console
    # shellcheck disable=SC3045  # busybox ash has read -t
    read -r -t 60 _ </dev/console || echo "BLK-WARN name=$3 no answer from the test host" >/dev/console
    exit 0
fi
if [ "$1" = host-mark ]; then
    # shellcheck source=bench/blk/blk-lib.sh
    . "$BLK_LIB/blk-lib.sh"
    at=$(echo "$2" | tr 'A-Z' 'a-z')
    [ "$at" = end ] || echo "BLK-MARK cfg=host round=$BLK_ROUND job=$3 at=$at" >"$BLK_CONSOLE"
    fio=$(cat "$BLK_OUT/fio.pid")
    # fio's main process and its job processes (the children that do the I/O).
    echo "$3 $at $(sample_pids "$fio $(children_of "$fio")")" >>"$BLK_OUT/cpu.txt"
    [ "$at" = begin ] || echo "BLK-MARK cfg=host round=$BLK_ROUND job=$3 at=$at" >"$BLK_CONSOLE"
    exit 0
fi

wanted() {  # wanted JOB: true when the job list is unset or names JOB (JOB, or JOB's start up to a dash)
    [ -z "$only" ] && return 0
    for p in $only; do case "$1" in "$p" | "$p"-*) return 0 ;; esac; done
    return 1
}
# job_file DEV MARK JOBS_FILE: fio's job file: every wanted job of JOBS_FILE on DEV, one after the
# other (stonewall), each with "MARK BEGIN|END NAME" as exec_prerun / exec_postrun.
job_file() {
    echo "[global]"
    printf '%s\n' "filename=$1" direct=1 "ioengine=$engine" time_based "runtime=$runtime" norandommap \
        randrepeat=0 lat_percentiles=1 percentile_list=50:99:99.9
    while read -r name args; do
        case "$name" in '' | '#'*) continue ;; esac
        wanted "$name" || continue
        echo "[$name]"
        echo stonewall
        echo "exec_prerun=$2 BEGIN $name"
        echo "exec_postrun=$2 END $name"
        for a in $args; do echo "${a#--}"; done
    done <"$3"
}

if [ "$1" = host ]; then
    runtime=$BLK_RUNTIME engine=$BLK_ENGINE only=$(echo "$BLK_JOBS" | tr , ' ')
    cd /tmp || exit 1
    job_file "$BLK_DEV" "$0 host-mark" "$BLK_JOBS_FILE" >"$BLK_OUT/jobs.fio"
    : >"$BLK_OUT/cpu.txt"
    # The subshell's pid is fio's once it execs (the marks sum fio's and its children's CPU time).
    # shellcheck disable=SC2086,SC2016  # BLK_FIO is a command with arguments
    sh -c 'echo $$ >"$0"; exec "$@"' "$BLK_OUT/fio.pid" $BLK_FIO --output-format=json --output="$BLK_OUT/fio.json" \
        "$BLK_OUT/jobs.fio" </dev/null >"$BLK_OUT/fio.err" 2>&1
    rc=$?
    [ "$rc" = 0 ] || head -n 5 "$BLK_OUT/fio.err" | sed "s/^/BLK-FIO-ERROR cfg=host /"
    exit "$rc"
fi

runtime=5 engine=libaio only="" dev=/dev/vda modules=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        blk.runtime=*) runtime="${arg#*=}" ;; blk.engine=*) engine="${arg#*=}" ;;
        blk.jobs=*) only=$(echo "${arg#*=}" | tr , ' ') ;;
        blk.dev=*) dev="${arg#*=}" ;; blk.modules=*) modules=$(echo "${arg#*=}" | tr , ' ') ;;
    esac
done
for m in $modules; do
    insmod "/lib/modules/extra/$m.ko" || echo "BLK-ERROR insmod $m failed: $(dmesg | tail -n 2 | tr '\n' ' ')"
done
i=0
while [ ! -b "$dev" ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
if [ ! -b "$dev" ]; then
    echo "BLK-ERROR no $dev in the guest (block devices: $(ls /sys/block | tr '\n' ' '); virtio_blk loaded: $(grep -c virtio_blk /proc/modules))"
    exit 1
fi
echo "BLK-GUEST disk=$dev size_bytes=$(blockdev --getsize64 "$dev") engine=$engine runtime=$runtime queue=$(cat "/sys/block/${dev#/dev/}/device/queue_depth" 2>/dev/null || cat "/sys/block/${dev#/dev/}/queue/nr_requests" 2>/dev/null)"
stty -echo -F /dev/console 2>/dev/null

# One fio process runs every job, one after the other (stonewall): fio's start (loading ~80 MB of
# libraries through nested paging) costs seconds, once instead of once per job.
job_file "$dev" "/actions/fio-bench mark" /etc/blk-jobs >/tmp/jobs.fio
fio --output-format=json --output=/tmp/fio.json /tmp/jobs.fio </dev/null >/tmp/fio.err 2>&1
rc=$?
echo "BLK-JOB-RC name=all rc=$rc"
[ "$rc" = 0 ] || head -n 5 /tmp/fio.err | sed "s/^/BLK-FIO-ERROR name=all /"
gzip -c /tmp/fio.json | base64 | sed "s/^/BLK-B64 name=fio data=/"
echo "BLK-B64-END name=fio"
