#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/stat_test.sh through testhost/run.sh.
# Boots the stock kernel under tern with --api-sock, --stats-on-exit and a 64 MiB disk (one queue);
# the guest (tests/e2e/stat_guest/actions/stat-fio) runs two fio jobs on it. tern's console is on
# stdio and read here line by line; at each BLK-JOB-BEGIN / BLK-JOB-END mark (the guest waits for
# an answer on its console) this takes `tern stat --once --json`, then answers. At STAT-FIO-DONE
# it runs `tern stat --once --json` once more, the live table once, and stops tern with SIGTERM.
# Prints (besides the console, passed through):
#   E2E-STAT-FIO name=<job> phase=begin|end rc=<tern stat status> <one line of JSON>
#   E2E-STAT-JSON <one line of JSON>        the `tern stat --once --json` output after the jobs
#   E2E-STAT-RC rc=<tern stat status>
#   E2E-STAT-EXIT status=<tern run status>  (the --stats-on-exit summary precedes it on stderr)
: "${E2E_STAT_TIMEOUT:=420}"
[ -n "$TH_TERN" ] || { echo "E2E-ERROR tern binary not in the test host"; exit 2; }
sock=/tmp/tern-stat.sock
disk=/tmp/stat-disk.img
rm -f "$sock" /tmp/stat.in /tmp/stat.out /tmp/tern.pid
truncate -s 64M "$disk"
mkfifo /tmp/stat.in /tmp/stat.out
# The inner shell writes its pid and execs busybox timeout, which execs tern in the same process
# (as bench/blk/scenario.sh does): that pid is tern's. tern's exit status follows its output.
# shellcheck disable=SC2016
{ sh -c 'echo $$ >/tmp/tern.pid; exec "$@"' sh timeout -s KILL "$E2E_STAT_TIMEOUT" \
    "$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" \
    --cmdline "console=ttyS0 quiet tern.action=stat-fio" --memory 512M --cpus 2 \
    --disk "path=$disk,queues=1" --api-sock "$sock" --stats-on-exit
  echo "E2E-STAT-EXIT status=$?"; } </tmp/stat.in 2>&1 | tr -d '\r' >/tmp/stat.out &
exec 4>/tmp/stat.in 3</tmp/stat.out
while IFS= read -r line <&3; do
    case "$line" in
        BLK-JOB-BEGIN* | BLK-JOB-END*)
            echo "$line"
            phase=begin
            case "$line" in BLK-JOB-END*) phase=end ;; esac
            # The guest is parked in fio's exec_prerun/exec_postrun until the answer below.
            out="$("$TH_TERN" stat --api-sock "$sock" --once --json --interval 0.05)"
            rc=$?
            echo "E2E-STAT-FIO name=${line#*name=} phase=$phase rc=$rc $out"
            echo go >&4 ;;
        STAT-FIO-DONE*)
            echo "$line"
            out="$("$TH_TERN" stat --api-sock "$sock" --once --json --interval 1)"
            rc=$?
            echo "E2E-STAT-JSON $out"
            echo "E2E-STAT-RC rc=$rc"
            # The live table, once, for the log (and the README).
            "$TH_TERN" stat --api-sock "$sock" --once --interval 1 --rows 8
            kill -TERM "$(cat /tmp/tern.pid)" ;;
        E2E-STAT-EXIT*)
            echo "$line"
            break ;;
        *) echo "$line" ;;
    esac
done
exec 3<&- 4>&-
wait
exit 0
