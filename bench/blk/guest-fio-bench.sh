#!/bin/sh
# /actions/fio-bench in the guest (L2) of bench/blk: runs the jobs of /etc/blk-jobs (bench/blk/jobs.txt)
# one after the other on /dev/vda, in one fio process, and reports on the console:
#   BLK-GUEST disk=/dev/vda size_bytes=N engine=E runtime=S
#   BLK-JOB-BEGIN name=J        printed by fio's exec_prerun once the job is set up, just before its
#                               first I/O; it then waits for a line on the console (the test host
#                               reads the VMM's CPU time, then answers)
#   BLK-JOB-END name=J          printed by fio's exec_postrun after the job's last I/O; waits likewise
#   BLK-JOB-RC name=all rc=R    fio's exit status
#   BLK-B64 name=fio data=...   fio's JSON report (every job), gzip'ed and base64'ed, 76 characters a line
#   BLK-B64-END name=fio
# So the VMM's CPU time is read around the I/O only: not around fio's start (loading ~80 MB of
# libraries takes seconds here) nor its report.
# Kernel command line: blk.runtime=SECONDS (default 5), blk.engine=libaio|io_uring (default libaio),
# blk.jobs=NAME,NAME... (only these jobs, where NAME is a job or the start of job names up to a
# dash: "randread" is randread-qd1 ... randread-qd64; default all).
# As "/actions/fio-bench mark BEGIN|END NAME" it is the exec_prerun/exec_postrun helper (fio sends
# that command's output to a file, so the helper talks to /dev/console itself).
if [ "$1" = mark ]; then
    echo "BLK-JOB-$2 name=$3" >/dev/console
    # shellcheck disable=SC3045  # busybox ash has read -t
    read -r -t 60 _ </dev/console || echo "BLK-WARN name=$3 no answer from the test host" >/dev/console
    exit 0
fi
runtime=5 engine=libaio only=""
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        blk.runtime=*) runtime="${arg#*=}" ;; blk.engine=*) engine="${arg#*=}" ;;
        blk.jobs=*) only=$(echo "${arg#*=}" | tr , ' ') ;;
    esac
done
wanted() {  # wanted JOB: true when blk.jobs is unset or names JOB (JOB, or JOB's start up to a dash)
    [ -z "$only" ] && return 0
    for p in $only; do case "$1" in "$p" | "$p"-*) return 0 ;; esac; done
    return 1
}
i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
if [ ! -b /dev/vda ]; then
    echo "BLK-ERROR no /dev/vda in the guest (virtio_blk loaded: $(grep -c virtio_blk /proc/modules))"
    exit 1
fi
echo "BLK-GUEST disk=/dev/vda size_bytes=$(blockdev --getsize64 /dev/vda) engine=$engine runtime=$runtime"
stty -echo -F /dev/console 2>/dev/null

# One fio process runs every job, one after the other (stonewall): fio's start (loading ~80 MB of
# libraries through nested paging) costs seconds, once instead of once per job.
{
    echo "[global]"
    printf '%s\n' filename=/dev/vda direct=1 "ioengine=$engine" time_based "runtime=$runtime" norandommap \
        randrepeat=0 lat_percentiles=1 percentile_list=50:99:99.9
    while read -r name args; do
        case "$name" in '' | '#'*) continue ;; esac
        wanted "$name" || continue
        echo "[$name]"
        echo stonewall
        echo "exec_prerun=/actions/fio-bench mark BEGIN $name"
        echo "exec_postrun=/actions/fio-bench mark END $name"
        for a in $args; do echo "${a#--}"; done
    done </etc/blk-jobs
} >/tmp/jobs.fio
fio --output-format=json --output=/tmp/fio.json /tmp/jobs.fio </dev/null >/tmp/fio.err 2>&1
rc=$?
echo "BLK-JOB-RC name=all rc=$rc"
[ "$rc" = 0 ] || head -n 5 /tmp/fio.err | sed "s/^/BLK-FIO-ERROR name=all /"
gzip -c /tmp/fio.json | base64 | sed "s/^/BLK-B64 name=fio data=/"
echo "BLK-B64-END name=fio"
