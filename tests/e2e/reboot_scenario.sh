#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/reboot_test.sh through testhost/run.sh.
# Prints one line per check:  REBOOT-CHECK name=<check> PASS|FAIL <detail>
# Case 1: tern run --on-reboot restart --api-sock: the guest (action rebootdisk) writes a record to
#   /dev/vda and reboots; it boots again in the same tern (marker twice on the console), reads the
#   record back; the same socket answers GET /tern/stats (lifecycle.resets 1) and GET / (Running);
#   the events stream has one "reset"; a snapshot of the restarted VM (`tern snapshot --exit`)
#   restores and the guest ticks on; PUT /tern/power-off ends the restored tern with status 0.
# Case 2: the same guest and a fresh disk without --on-reboot (kernel boot: exit): status 3, one boot.
: "${REBOOT_WAIT:=120}"
[ -n "$TH_TERN" ] || { echo "REBOOT-CHECK name=setup FAIL tern binary not in the test host"; exit 2; }
command -v curl >/dev/null || { echo "REBOOT-CHECK name=setup FAIL curl not in the test host"; exit 2; }

check() {  # check NAME CONDITION-RESULT DETAIL
    if [ "$2" = 0 ]; then echo "REBOOT-CHECK name=$1 PASS $3"; else echo "REBOOT-CHECK name=$1 FAIL $3"; fi
}
# wait_for SECONDS COMMAND...: poll COMMAND every 0.1 s until it succeeds; 1 on timeout.
wait_for() {
    n=$(($1 * 10)); shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
has() { grep -q "$2" "$1" 2>/dev/null; }
api() {  # api METHOD PATH -> prints "<body> <status>"
    curl -s -m 20 --unix-socket "$S" -X "$1" -w ' %{http_code}' "http://localhost$2"
}
ARGS="--kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory 256M"
CMDLINE="console=ttyS0 reboot=k panic=1 quiet tern.action=rebootdisk"

# ---- case 1: --on-reboot restart ----
S=/tmp/reboot1.sock
CON=/tmp/reboot1.log
dd if=/dev/zero of=/tmp/reboot1.img bs=1M count=8 2>/dev/null
# shellcheck disable=SC2086
"$TH_TERN" run $ARGS --cmdline "$CMDLINE" --disk path=/tmp/reboot1.img --on-reboot restart \
    --api-sock "$S" >"$CON" 2>/tmp/reboot1.err </dev/null &
tern_pid=$!
wait_for 10 test -S "$S"
check socket $? "api socket $S"
"$TH_TERN" ctl --api-sock "$S" events >/tmp/reboot1-events.log 2>&1 &
events_pid=$!
wait_for "$REBOOT_WAIT" has "$CON" TERN-REBOOT-FIRST-BOOT
check first-boot $? "$(grep -a TERN-REBOOT-FIRST-BOOT "$CON")"
wait_for "$REBOOT_WAIT" has "$CON" TERN-REBOOT-SECOND-BOOT
check second-boot $? "$(grep -a TERN-REBOOT-SECOND-BOOT "$CON")"
n=$(grep -ac TERN-GUEST-MARKER "$CON")
[ "$n" = 2 ]; check marker-twice $? "TERN-GUEST-MARKER lines: $n"
has "$CON" 'TERN-REBOOT-SECOND-BOOT read=\[TERN-REBOOT-RECORD boot=1\]'
check record-read-back $? "$(grep -a TERN-REBOOT-SECOND-BOOT "$CON")"
r=$(api GET /tern/stats)
[ "${r##* }" = 200 ]; check same-socket-answers $? "GET /tern/stats: ${r##* }"
echo "$r" | grep -q '"lifecycle":{"last_reset_reason":"reboot","resets":1}'
check stats-resets $? "$(echo "$r" | grep -o '"lifecycle":{[^}]*}')"
r=$(api GET /)
echo "$r" | grep -q '"state":"Running"'; check state-running $? "$r"
# A snapshot of the restarted VM restores (nothing of the VM before the reset in it): `tern
# snapshot --exit` saves it and ends tern (0); `tern restore --resume` goes on ticking from there.
last_tick() { tr -d '\r' <"$1" | sed -n 's/^TERN-TICK \([0-9][0-9]*\)$/\1/p' | tail -n 1; }
ticked_past() { t=$(last_tick "$1"); [ -n "$t" ] && [ "$t" -gt "$2" ]; }  # ticked_past LOG N
out=$("$TH_TERN" snapshot --api-sock "$S" --state /tmp/reboot1.state --mem /tmp/reboot1.mem --exit 2>&1)
check snapshot-after-reset $? "$(echo "$out" | tail -n 1)"
wait "$tern_pid"
st=$?
[ "$st" = 0 ]; check snapshot-exit-status $? "tern exit status $st; stderr: $(tr '\n' ' ' </tmp/reboot1.err)"
saved=$(last_tick "$CON")
S=/tmp/reboot1b.sock
"$TH_TERN" restore --state /tmp/reboot1.state --mem /tmp/reboot1.mem --resume --api-sock "$S" \
    >/tmp/reboot1b.log 2>/tmp/reboot1b.err </dev/null &
pid_b=$!
rc=1
[ -n "$saved" ] && wait_for "$REBOOT_WAIT" ticked_past /tmp/reboot1b.log $((saved + 3)) && rc=0
check restored-after-reset-ticks $rc "saved at tick ${saved:-none}, restored VM at tick $(last_tick /tmp/reboot1b.log); stderr: $(head -c 300 /tmp/reboot1b.err)"
api PUT /tern/power-off >/dev/null
wait "$pid_b"
st=$?
[ "$st" = 0 ]; check power-off-status $? "restored tern exit status $st"
wait "$events_pid"
grep -q '"event":"reset"' /tmp/reboot1-events.log
check event-reset $? "$(grep -a '"event":"reset"' /tmp/reboot1-events.log)"
n=$(grep -c '"event":"reset"' /tmp/reboot1-events.log)
[ "$n" = 1 ]; check event-one-reset $? "reset events: $n"
echo "--- case 1 console (markers)"; grep -a 'TERN-GUEST-MARKER\|TERN-REBOOT' "$CON"

# ---- case 2: the default for a kernel boot (exit) ----
CON=/tmp/reboot2.log
dd if=/dev/zero of=/tmp/reboot2.img bs=1M count=8 2>/dev/null
# shellcheck disable=SC2086
"$TH_TERN" run $ARGS --cmdline "$CMDLINE" --disk path=/tmp/reboot2.img >"$CON" 2>/tmp/reboot2.err </dev/null
st=$?
[ "$st" = 3 ]; check exit-status $? "tern exit status $st (3: guest reboot); stderr: $(tr '\n' ' ' </tmp/reboot2.err)"
n=$(grep -ac TERN-GUEST-MARKER "$CON")
[ "$n" = 1 ] && has "$CON" TERN-REBOOT-FIRST-BOOT; check exit-one-boot $? "TERN-GUEST-MARKER lines: $n"
