#!/usr/bin/env bash
# testhost self-test of what counts as the platform's failure (th_run_retrying boots L1 once more)
# and what is a verdict. A test host that stops using CPU and writing to its console is killed by
# run.sh --stall (exit 125, a TESTHOST-STALL log line saying what it saw) and booted once more (RETRY
# on stderr, the first log kept as LOG.wedged, a TESTHOST-RETRIED line). L1's QEMU aborting (SIGABRT after glib's "assertion failed", as QEMU 7.2's TCG
# did in tcg_handle_interrupt with an L2 guest in SeaBIOS) before the scenario's verdict is an
# emulator failure: run.sh exits 125 with a TESTHOST-QEMU-ABORT log line naming the assertion, and
# th_run_retrying boots L1 once more. An abort after TESTHOST-DONE keeps the scenario's verdict, and
# a scenario's own failure is not retried. A scenario that found its nested guest wedged in L1's
# KVM (a TESTHOST-L2-WEDGED line, status 125: tests/e2e/api_scenario.sh) is booted once more; a
# scenario's 125 without that line is its verdict. --tcg-thread / TH_TCG_THREAD reach QEMU's -accel.
# L1's QEMU is a fake one (first on PATH); no nested guest runs (~20 s, the two 5-s stalls).
# Usage: tests/testhost/platform_retry_test.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$repo/testhost/lib.sh"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
# The fake L1: FAKE_MODE abort (markers, glib's assertion, SIGABRT), done-then-abort, fail (rc=1),
# l2-wedged (TESTHOST-L2-WEDGED, rc=125), rc125 (rc=125 alone), stall (a console line, then sleeps).
cat >"$dir/qemu-system-x86_64" <<'FAKE'
#!/usr/bin/env bash
ulimit -c 0
echo "$*" >>"$FAKE_ARGS"
while [[ $# -gt 0 ]]; do [[ "$1" == -pidfile ]] && echo $$ >"$2"; shift; done
echo "TESTHOST-BOOTED uptime=1"
echo "TESTHOST-READY uptime=2 tern=none qemu=none"
case "$FAKE_MODE" in
    abort) ;;
    done-then-abort) echo "TESTHOST-DONE rc=0" ;;
    fail) echo "TESTHOST-DONE rc=1"; exit 0 ;;
    l2-wedged) echo "TESTHOST-L2-WEDGED ticking: every vCPU halted in KVM"; echo "TESTHOST-DONE rc=125"; exit 0 ;;
    rc125) echo "TESTHOST-DONE rc=125"; exit 0 ;;
    stall) echo "FAKE-L1 scenario output"; exec sleep 600 ;;
esac
echo "**" >&2
echo "ERROR:../accel/tcg/tcg-accel-ops.c:80:tcg_handle_interrupt: assertion failed: (qemu_mutex_iothread_locked())" >&2
echo "Bail out! ERROR:../accel/tcg/tcg-accel-ops.c:80:tcg_handle_interrupt: assertion failed: (qemu_mutex_iothread_locked())" >&2
kill -ABRT $$
FAKE
chmod +x "$dir/qemu-system-x86_64"
echo 'exit 0' >"$dir/scenario.sh"
fails=0
expect() {  # expect NAME CONDITION...: one PASS/FAIL line per property
    local name="$1"; shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
run() {  # run MODE [run.sh ARGS...]: th_run_retrying around run.sh with the fake L1; sets rc
    local mode="$1"; shift
    rc=0
    FAKE_MODE="$mode" FAKE_ARGS="$dir/args-$mode" PATH="$dir:$PATH" th_run_retrying "$dir/$mode.log" -- \
        "$repo/testhost/run.sh" --scenario "$dir/scenario.sh" --no-tern --timeout 120 --log "$dir/$mode.log" "$@" \
        >"$dir/$mode.out" 2>"$dir/$mode.err" || rc=$?
}

run stall --stall 5
expect "a stall: exit status 125 after the second stall (got $rc)" test "$rc" = 125
expect "... the retry is said on stderr" grep -q 'RETRY: the test host wedged (run.sh exited 125' "$dir/stall.err"
expect "... the first log is kept" grep -q '^TESTHOST-STALL no CPU and no console output' "$dir/stall.log.wedged"
expect "... the stall line names the process state" grep -q '^TESTHOST-STALL .*qemu pid [0-9]* state S' "$dir/stall.log"
expect "... the second log says it was a retry" grep -q '^TESTHOST-RETRIED once' "$dir/stall.log"
expect "... the console's last lines are shown" grep -q 'FAKE-L1 scenario output' "$dir/stall.err"

run abort
expect "an abort before the verdict: exit 125 after the second abort (got $rc)" test "$rc" = 125
expect "the retry is said on stderr, naming the abort" grep -q 'RETRY: the test host wedged (run.sh exited 125.*SIGABRT.*tcg_handle_interrupt' "$dir/abort.err"
expect "the first log is kept and names the assertion" \
    grep -q '^TESTHOST-QEMU-ABORT qemu status 134 (SIGABRT) before TESTHOST-DONE: ERROR:.*tcg_handle_interrupt: assertion failed' "$dir/abort.log.wedged"
expect "the second log says it was a retry" grep -q '^TESTHOST-RETRIED once' "$dir/abort.log"
expect "QEMU ran twice" test "$(wc -l <"$dir/args-abort")" = 2
expect "QEMU's own threading by default (-accel tcg)" grep -q -- '-accel tcg -cpu' "$dir/args-abort"

run done-then-abort
expect "an abort after TESTHOST-DONE rc=0: the verdict stands (got $rc)" test "$rc" = 0
expect "no retry after the verdict" test "$(wc -l <"$dir/args-done-then-abort")" = 1

TH_TCG_THREAD=single run fail
expect "a scenario's failure is returned, not retried (got $rc)" test "$rc" = 1
expect "... and QEMU ran once" test "$(wc -l <"$dir/args-fail")" = 1
expect "TH_TCG_THREAD=single reaches QEMU (-accel tcg,thread=single)" grep -q -- '-accel tcg,thread=single -cpu' "$dir/args-fail"
rm -f "$dir/args-fail"
TH_TCG_THREAD=single run fail --tcg-thread multi
expect "--tcg-thread multi overrides TH_TCG_THREAD" grep -q -- '-accel tcg,thread=multi -cpu' "$dir/args-fail"
rm -f "$dir/args-fail"
TH_TCG_THREAD=one run fail
expect "a bad TH_TCG_THREAD is refused naming it (got $rc)" grep -q "TH_TCG_THREAD) wants single or multi, got 'one'" "$dir/fail.err"
expect "... before QEMU starts" test ! -e "$dir/args-fail"
run l2-wedged
expect "a nested guest wedged in L1's KVM: 125 after the second time (got $rc)" test "$rc" = 125
expect "... booted once more" test "$(wc -l <"$dir/args-l2-wedged")" = 2
expect "... the retry quoting the wedge" grep -q 'RETRY: the test host wedged (run.sh exited 125.*L2-WEDGED ticking' "$dir/l2-wedged.err"
expect "... the first log kept" grep -q '^TESTHOST-L2-WEDGED' "$dir/l2-wedged.log.wedged"
run rc125
expect "a scenario's own 125 is its verdict (got $rc)" test "$rc" = 125
expect "... not retried" test "$(wc -l <"$dir/args-rc125")" = 1
((fails == 0)) || { for f in "$dir"/*.err; do echo "--- $f:"; cat "$f"; done; exit 1; }
