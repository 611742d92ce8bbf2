#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/api_test.sh through testhost/run.sh.
# Drives tern purely through its control API with curl --unix-socket, using the request bodies of
# Firecracker's getting-started guide, and prints one line per check:
#   API-CHECK name=<check> PASS|FAIL <detail>
# Case 1 (tern --api-sock): configure (with a drive the guest sees as /dev/vda), InstanceStart,
#   guest marker, pause stops the vCPUs (their KVM_RUN returns and in-kernel exits in
#   GET /tern/stats do not move while paused; they do over the same window running), resume
#   continues the guest's ticking console, SendCtrlAltDel makes the guest's init reboot: event + status 3.
# Case 2 (tern --config-file + --api-sock): boots at once; tern ctl pause/resume/power-off: status 0.
# Case 3 (tern run --disk x2 --cpus 2 --memory 384M --api-sock, issue #9): GET /vm/config lists both
#   CLI drives (path_on_host, is_read_only) and the machine config; GET /machine-config agrees.
# A guest whose ticks stall gets its state dumped (dump_stall, API-DUMP lines); one wedged in L1's
# KVM before any pause (l2_timer_wedged) ends the scenario with TESTHOST-L2-WEDGED and status 125,
# which th_run_retrying (testhost/lib.sh) answers by booting the test host once more.
: "${API_WAIT:=120}"
[ -n "$TH_TERN" ] || { echo "API-CHECK name=setup FAIL tern binary not in the test host"; exit 2; }
command -v curl >/dev/null || { echo "API-CHECK name=setup FAIL curl not in the test host"; exit 2; }
. /testhost/l1_lib.sh  # l1_stall_dump, l1_l2_wedged
fails=0

check() {  # check NAME CONDITION-RESULT DETAIL; returns CONDITION-RESULT
    if [ "$2" = 0 ]; then echo "API-CHECK name=$1 PASS $3"; else echo "API-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
    return "$2"
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

api() {  # api METHOD PATH [BODY] -> prints "<status> <body>"
    if [ -n "$3" ]; then
        curl -s -m 20 --unix-socket "$S" -X "$1" -w ' %{http_code}' -H 'Content-Type: application/json' \
            -d "$3" "http://localhost$2"
    else
        curl -s -m 20 --unix-socket "$S" -X "$1" -w ' %{http_code}' "http://localhost$2"
    fi
}

status_of() { echo "$1" | awk '{ print $NF }'; }
ticks() { n=$(grep -c '^TERN-TICK [0-9]' "$1" 2>/dev/null); echo "${n:-0}"; }
ticks_above() { [ "$(ticks "$1")" -gt "$2" ]; }
has() { grep -q "$2" "$1" 2>/dev/null; }
# vcpu_runs: each vCPU's KVM_RUN returns (tern's exits.kvm_run_returns) and in-kernel exits (KVM's
# binary stats "exits") from GET /tern/stats, as one line; empty if neither could be read.
vcpu_runs() {
    api GET /tern/stats | tr ',{}' '\n\n\n' | sed -n 's/^ *"\(kvm_run_returns\|exits\)": *\([0-9][0-9]*\) *$/\1=\2/p' | tr '\n' ' '
}

# dump_stall WHY: API-DUMP lines saying what L1 sees of the stalled guest (testhost/l1_lib.sh).
dump_stall() { l1_stall_dump API-DUMP "$1" "$tern_pid" "$S" "$CON"; }
# l2_timer_wedged WHY: true (printing TESTHOST-L2-WEDGED) when the guest, whose tick sleeps 0.2 s,
# is wedged in L1's KVM with no part of tern involved (testhost/l1_lib.sh says exactly when).
l2_timer_wedged() { l1_l2_wedged "$1" "$tern_pid" "0.2 s"; }

# ---- case 1: configured purely through the API ----
S=/tmp/api1.sock
CON=/tmp/console1.log
"$TH_TERN" --api-sock "$S" >"$CON" 2>/tmp/tern1.err </dev/null &
tern_pid=$!
wait_for 10 test -S "$S"
check socket $? "api socket $S"

r=$(api PUT /boot-source "{
        \"kernel_image_path\": \"$TH_GUEST_KERNEL\",
        \"initrd_path\": \"$TH_GUEST_INITRD\",
        \"boot_args\": \"console=ttyS0 reboot=k panic=1 quiet tern.action=tick\"
    }")
[ "$(status_of "$r")" = 204 ]; check boot-source $? "$r"
r=$(api PUT /machine-config '{
        "vcpu_count": 2,
        "mem_size_mib": 256
    }')
[ "$(status_of "$r")" = 204 ]; check machine-config $? "$r"
dd if=/dev/zero of=/tmp/api-disk.img bs=1M count=8 2>/dev/null
r=$(api PUT /drives/rootfs '{
        "drive_id": "rootfs",
        "path_on_host": "/tmp/api-disk.img",
        "is_root_device": false,
        "is_read_only": false
    }')
[ "$(status_of "$r")" = 204 ]; check drive $? "$r"
r=$(api GET /machine-config)
echo "$r" | grep -q '"vcpu_count":2'; check get-machine-config $? "$r"
r=$(api PUT /actions '{
        "action_type": "InstanceStart"
    }')
[ "$(status_of "$r")" = 204 ]; check instance-start $? "$r"
r=$(api PUT /actions '{"action_type": "InstanceStart"}')
[ "$(status_of "$r")" = 400 ] && echo "$r" | grep -q 'Running'; check instance-start-twice $? "$r"
r=$(api PUT /boot-source "{\"kernel_image_path\": \"$TH_GUEST_KERNEL\"}")
[ "$(status_of "$r")" = 400 ]; check config-after-start $? "$r"

wait_for "$API_WAIT" has "$CON" TERN-GUEST-MARKER
check guest-marker $? "$(grep -a TERN-GUEST-MARKER "$CON" | head -n 1)"
wait_for 30 has "$CON" 'TERN-TICK-DISK size=16384 ro=0'
check guest-sees-drive $? "$(grep -a TERN-TICK-DISK "$CON" | head -n 1)"
wait_for 60 ticks_above "$CON" 5
if ! check ticking $? "ticks=$(ticks "$CON")"; then
    dump_stall ticking
    # The platform wedged, not tern: the test host is booted once more (testhost/lib.sh th_wedged).
    l2_timer_wedged ticking && { kill "$tern_pid"; exit 125; }
fi

"$TH_TERN" ctl --api-sock "$S" events >/tmp/events1.log 2>&1 &
events_pid=$!
# A paused guest does not run: no vCPU returns from KVM_RUN (tern's kvm_run_returns) and none
# exits inside KVM (KVM's own per-vCPU "exits" counter) while paused. The control measurement
# first: over the same window while running, the same counters do move (so the check can fail).
r0=$(vcpu_runs)
wait_for 30 ticks_above "$CON" $(($(ticks "$CON") + 3))
r1=$(vcpu_runs)
[ -n "$r0" ] && [ "$r0" != "$r1" ]; check running-vcpu-runs-move $? "running: [$r0] -> [$r1]" || dump_stall running-vcpu-runs-move
r=$(api PATCH /vm '{
        "state": "Paused"
    }')
[ "$(status_of "$r")" = 204 ]; check pause $? "$r"
r=$(api GET /)
echo "$r" | grep -q '"state":"Paused"'; check info-paused $? "$r"
r=$(api PATCH /vm '{"state": "Paused"}')
[ "$(status_of "$r")" = 400 ]; check pause-while-paused $? "$r"
n1=$(ticks "$CON")
p0=$(vcpu_runs)
sleep 3  # an observation window (nothing to wait for: the point is that nothing happens)
p1=$(vcpu_runs)
n2=$(ticks "$CON")
[ -n "$p0" ] && [ "$p0" = "$p1" ]; check paused-no-kvm-run $? "paused 3 s: [$p0] -> [$p1]; console ticks $n1 -> $n2"
r=$(api PATCH /vm '{
        "state": "Resumed"
    }')
[ "$(status_of "$r")" = 204 ]; check resume $? "$r"
wait_for 30 ticks_above "$CON" $((n2 + 5))
check resumed-ticks $? "ticks $n2 -> $(ticks "$CON")" || dump_stall resumed-ticks
r=$(api PATCH /vm '{"state": "Resumed"}')
[ "$(status_of "$r")" = 400 ] && echo "$r" | grep -q Running; check resume-while-running $? "$r"

r=$(api PUT /actions '{
        "action_type": "SendCtrlAltDel"
    }')
[ "$(status_of "$r")" = 204 ]; check ctrl-alt-del $? "$r"
wait "$tern_pid"
st=$?
[ "$st" = 3 ]; check ctrl-alt-del-reboot-status $? "tern exit status $st (3: guest reboot); stderr: $(tr '\n' ' ' </tmp/tern1.err)"
has "$CON" TERN-GUEST-CTRL-ALT-DEL; check guest-saw-ctrl-alt-del $? "$(grep -a TERN-GUEST-CTRL-ALT-DEL "$CON")"
wait "$events_pid"  # the events client ends when tern closes the stream
grep -q '"reason":"reboot"' /tmp/events1.log; check event-reboot $? "$(tr '\n' ' ' </tmp/events1.log)"
grep -q '"state":"Paused"' /tmp/events1.log; check event-paused $? ""
echo "--- case 1 console tail"; grep -a TERN-TICK-CLOCK "$CON"; tail -n 5 "$CON"

# ---- case 2: --config-file (Firecracker's config shape) + tern ctl ----
S=/tmp/api2.sock
CON=/tmp/console2.log
cat >/tmp/vm_config.json <<EOC
{
  "boot-source": {
    "kernel_image_path": "$TH_GUEST_KERNEL",
    "boot_args": "console=ttyS0 reboot=k panic=1 quiet tern.action=tick",
    "initrd_path": "$TH_GUEST_INITRD"
  },
  "drives": [],
  "machine-config": {
    "vcpu_count": 1,
    "mem_size_mib": 256,
    "smt": false,
    "track_dirty_pages": false,
    "huge_pages": "None"
  },
  "cpu-config": null,
  "balloon": null,
  "network-interfaces": [],
  "vsock": null,
  "logger": null,
  "metrics": null,
  "mmds-config": null,
  "entropy": null,
  "pmem": [],
  "memory-hotplug": null
}
EOC
"$TH_TERN" --config-file /tmp/vm_config.json --api-sock "$S" >"$CON" 2>/tmp/tern2.err </dev/null &
tern_pid=$!
wait_for "$API_WAIT" ticks_above "$CON" 3
if ! check config-file-boot $? "$(grep -a TERN-GUEST-MARKER "$CON" | head -n 1)"; then
    dump_stall config-file-boot
    l2_timer_wedged config-file-boot && { kill "$tern_pid"; exit 125; }
fi
"$TH_TERN" ctl --api-sock "$S" pause; check ctl-pause $? ""
"$TH_TERN" ctl --api-sock "$S" info | grep -q Paused; check ctl-info-paused $? ""
"$TH_TERN" ctl --api-sock "$S" resume; check ctl-resume $? ""
"$TH_TERN" ctl --api-sock "$S" stats >/dev/null; check ctl-stats $? ""
"$TH_TERN" ctl --api-sock "$S" power-off; check ctl-power-off $? ""
wait "$tern_pid"
st=$?
[ "$st" = 0 ]; check power-off-status $? "tern exit status $st; stderr: $(tr '\n' ' ' </tmp/tern2.err)"

# ---- case 3: tern run --disk ... --api-sock: the CLI's drives in GET /vm/config (issue #9) ----
S=/tmp/api3.sock
CON=/tmp/console3.log
dd if=/dev/zero of=/tmp/api-disk2.img bs=1M count=4 2>/dev/null
"$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cpus 2 --memory 384M \
    --cmdline "console=ttyS0 quiet tern.action=idle" --disk path=/tmp/api-disk.img \
    --disk path=/tmp/api-disk2.img,readonly=on --api-sock "$S" >"$CON" 2>/tmp/tern3.err </dev/null &
tern_pid=$!
wait_for 10 test -S "$S"
check run-socket $? "api socket $S"
r=$(api GET /vm/config)
n=$(echo "$r" | grep -o '"path_on_host"' | wc -l)
ro=$(echo "$r" | grep -o '"is_read_only": *true' | wc -l)
ok=1
[ "$n" = 2 ] && [ "$ro" = 1 ] && echo "$r" | grep -q '"path_on_host": *"/tmp/api-disk.img"' &&
    echo "$r" | grep -q '"path_on_host": *"/tmp/api-disk2.img"' && ok=0
check run-vm-config-drives $ok "$n drives, $ro read-only (want 2, 1): $r"
ok=1; echo "$r" | grep -q '"vcpu_count": *2[,}]' && echo "$r" | grep -q '"mem_size_mib": *384[,}]' && ok=0
check run-vm-config-machine $ok "$r"
r=$(api GET /machine-config)
ok=1; echo "$r" | grep -q '"vcpu_count": *2[,}]' && echo "$r" | grep -q '"mem_size_mib": *384[,}]' && ok=0
check run-machine-config $ok "$r"
"$TH_TERN" ctl --api-sock "$S" power-off; check run-power-off $? ""
wait "$tern_pid"
st=$?
[ "$st" = 0 ]; check run-power-off-status $? "tern exit status $st; stderr: $(tr '\n' ' ' </tmp/tern3.err)"

# L1's clock (what the nested guests' timers and kvmclock are built on), for every run's log.
echo "API-INFO l1-clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource); $(dmesg | grep -i -e 'clocksource' -e 'tsc' | tail -n 8 | tr '\n' ';')"
echo "API-SUMMARY fails=$fails"
[ "$fails" = 0 ]
