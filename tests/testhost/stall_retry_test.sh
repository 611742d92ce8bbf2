#!/usr/bin/env bash
# testhost self-test: a test host that stops using CPU and writing to its console is killed by
# run.sh --stall (exit 125, a TESTHOST-STALL log line saying what it saw) and booted once more by
# th_run_retrying (RETRY on stderr, the first log kept as LOG.wedged, a TESTHOST-RETRIED line).
# L1's QEMU is replaced by a fake one (first on PATH) that prints the boot markers and sleeps:
# no nested guest runs, so this takes ~15 s. Usage: tests/testhost/stall_retry_test.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/testhost/lib.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
cat >"$dir/qemu-system-x86_64" <<'FAKE'
#!/usr/bin/env bash
while [[ $# -gt 0 ]]; do [[ "$1" == -pidfile ]] && echo $$ >"$2"; shift; done
echo "TESTHOST-BOOTED uptime=1"
echo "TESTHOST-READY uptime=2 tern=none qemu=none"
echo "FAKE-L1 scenario output"
exec sleep 600
FAKE
chmod +x "$dir/qemu-system-x86_64"
echo 'exit 0' >"$dir/scenario.sh"
log="$dir/l1.log"
rc=0
PATH="$dir:$PATH" th_run_retrying "$log" -- "$repo/testhost/run.sh" --scenario "$dir/scenario.sh" --no-tern \
    --stall 5 --timeout 120 --log "$log" >"$dir/out" 2>"$dir/err" || rc=$?
fails=0
expect() {  # expect NAME CONDITION...: one PASS/FAIL line per property
    local name="$1"; shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
expect "exit status 125 after the second stall (got $rc)" test "$rc" = 125
expect "the retry is said on stderr" grep -q 'RETRY: the test host wedged (run.sh exited 125' "$dir/err"
expect "the first log is kept" grep -q '^TESTHOST-STALL no CPU and no console output' "$log.wedged"
expect "the stall line names the process state" grep -q '^TESTHOST-STALL .*qemu pid [0-9]* state S' "$log"
expect "the second log says it was a retry" grep -q '^TESTHOST-RETRIED once' "$log"
expect "the console's last lines are shown" grep -q 'FAKE-L1 scenario output' "$dir/err"
((fails == 0)) || { echo "--- stderr:"; cat "$dir/err"; exit 1; }
