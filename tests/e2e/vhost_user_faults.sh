# Sourced by tests/e2e/vhost_user_scenario.sh in the test host (L1) as /testhost/vhost_user_faults.sh:
# the cases "kill" and "snap" (see the scenario's header). Uses its helpers (check, start_*, ...).

# vu_stats SOCK: the vhost-user disk's counters from GET /tern/stats, one "key=value" per line.
vu_stats() {
    api "$1" GET /tern/stats | sed 's/ [0-9]*$//' |
        jq -r '.device_counters[] | select(.kind | test("vhost-user")) | .counters | to_entries[] | "\(.key)=\(.value)"' 2>&1
}
stat_of() { echo "$1" | sed -n "s/^$2=//p" | head -n 1; }  # stat_of STATS KEY

if want_case kill; then
    stage kill
    rm -f /tmp/kill.img /tmp/kill-plain.img
    truncate -s 64M /tmp/kill.img /tmp/kill-plain.img
    start_ternbe kill /tmp/kill.img /tmp/kill.vu 1
    start_tern kill 1 "tern.action=vu-fault tern.vu_mib=32" --disk vhost-user=/tmp/kill.vu --disk path=/tmp/kill-plain.img
    wait_vm "$VU_WAIT" has /tmp/kill.out '^TERN-VU-CHUNK i=3 '
    check kill-writing $? "$(lines /tmp/kill.out '^TERN-VU-\(INFO\|CHUNK\|ERROR\)' | tail -n 4 | tr '\n' ' ')"
    s0=$(vu_stats /tmp/kill.sock)
    echo "$s0" | sed 's/^/VU-INFO kill stats before: /'
    kill -9 "$be_pid"
    wait "$be_pid" 2>/dev/null
    stage "kill: back-end SIGKILLed"
    chunks0=$(grep -c '^TERN-VU-CHUNK' /tmp/kill.out)
    beats0=$(grep -c '^TERN-VU-BEAT' /tmp/kill.out)
    # While vda has no back-end: the guest's console and its plain disk (vdb) keep working, and so does
    # tern's API, whose counters say that the back-end went away.
    wait_vm 60 sh -c "[ \$(grep -c '^TERN-VU-BEAT n=[0-9]* vdb=ok' /tmp/kill.out) -ge $((beats0 + 4)) ]"
    check kill-console-and-plain-disk "$?" "heartbeats after the kill: $(lines /tmp/kill.out '^TERN-VU-BEAT' | tail -n 2 | tr '\n' ' ') (had $beats0 before)"
    r=$(api /tmp/kill.sock GET /vm/config)
    check kill-api-answers "$([ "${r##* }" = 200 ]; echo $?)" "GET /vm/config: $(echo "$r" | cut -c1-200)"
    disconnected() { s1=$(vu_stats /tmp/kill.sock); [ "$(stat_of "$s1" disconnects)" -ge 1 ] 2>/dev/null; }
    wait_vm 30 disconnected
    check kill-counts-disconnect $? "GET /tern/stats: $(echo "$s1" | tr '\n' ' ')"
    start_ternbe kill2 /tmp/kill.img /tmp/kill.vu 1
    stage "kill: back-end restarted"
    wait_vm "$VU_WAIT" has /tmp/kill.out '^TERN-VU-FAULT-DONE'
    l=$(line /tmp/kill.out '^TERN-VU-FAULT-DONE')
    gsha=$(field "$l" sha)
    ok=1; [ -n "$gsha" ] && [ "$(field "$l" reread)" = "$gsha" ] && [ "$(field "$l" failed)" = 0 ] && ok=0
    check kill-guest-writes-resume "$ok" "${l:-no TERN-VU-FAULT-DONE line}; $chunks0 chunks done at the kill; $(lines /tmp/kill.out '^TERN-VU-CHUNK i=[0-9]* rc=[1-9]' | head -n 3 | tr '\n' ' ')"
    s2=$(vu_stats /tmp/kill.sock)
    echo "$s2" | sed 's/^/VU-INFO kill stats after: /'
    ok=1; [ "$(stat_of "$s2" reconnects)" -ge 1 ] 2>/dev/null && ok=0
    check kill-counts-reconnect "$ok" "GET /tern/stats: $(echo "$s2" | tr '\n' ' ')"
    wait_vm 30 has /tmp/kill.out '^TERN-VU-VDB'
    l=$(line /tmp/kill.out '^TERN-VU-VDB')
    check kill-plain-disk-bytes "$([ -n "$(field "$l" sha)" ] && [ "$(field "$l" sha)" = "$(field "$l" reread)" ]; echo $?)" "${l:-no TERN-VU-VDB line}"
    vm_done kill
    st=$?
    check kill-vm-exit "$st" "tern exit status $st at the guest's poweroff; $(tail -c 300 /tmp/kill.err | tr '\n' ' ')"
    stop_backend kill2
    got=$(dd if=/tmp/kill.img bs=1M count=32 2>/dev/null | sha256sum | cut -d' ' -f1)
    check kill-image-bytes "$([ -n "$gsha" ] && [ "$got" = "$gsha" ]; echo $?)" "the image's first 32 MiB: sha=$got (guest wrote $gsha)"
    show kill
    rm -f /tmp/kill.img /tmp/kill-plain.img
fi

if want_case snap; then
    stage snap
    rm -f /tmp/snap.img /tmp/snap.state /tmp/snap.mem
    truncate -s 128M /tmp/snap.img
    start_qsd snap /tmp/snap.img /tmp/snap.vu on 1
    snap_be=$be_pid
    start_tern snap 1 "tern.action=vu-snap tern.vu_mib=16" --disk vhost-user=/tmp/snap.vu
    wait_vm "$VU_WAIT" has /tmp/snap.out '^TERN-VU-SNAP-READY'
    check snap-guest-ready $? "$(line /tmp/snap.out '^TERN-VU-\(SNAP-READY\|ERROR\)')"
    out=$("$T" snapshot --api-sock /tmp/snap.sock --state /tmp/snap.state --mem /tmp/snap.mem --exit 2>&1)
    check snap-save $? "$(echo "$out" | tail -n 2 | tr '\n' ' ')"
    wait_exit "$vm_pid" 60
    check snap-save-exit $? "tern run exited after the save"
    check snap-backend-kept "$(kill -0 "$snap_be" 2>/dev/null; echo $?)" "qemu-storage-daemon still running after the save: $(tail -n 2 /tmp/snap.be | tr '\n' ' ')"
    rm -f /tmp/snapr.out /tmp/snapr.sock /tmp/snapr.in
    mkfifo /tmp/snapr.in
    "$T" restore --state /tmp/snap.state --mem /tmp/snap.mem --resume --api-sock /tmp/snapr.sock \
        >/tmp/snapr.out 2>/tmp/snapr.err <>/tmp/snapr.in &
    vm_pid=$!
    restored() { r=$(api /tmp/snapr.sock GET /); case "$r" in *Running*" 200") return 0 ;; esac; return 1; }
    wait_vm 60 restored
    check snap-restored "$?" "GET /: $r; stderr: $(tail -n 3 /tmp/snapr.err | tr '\n' ' ')"
    echo go >/tmp/snapr.in
    wait_vm "$VU_WAIT" has /tmp/snapr.out '^TERN-VU-SNAP-DONE'
    l=$(line /tmp/snapr.out '^TERN-VU-SNAP-DONE')
    sa=$(line /tmp/snap.out '^TERN-VU-SNAP-READY') sa=$(field "$sa" sha_a)
    ok=1; [ -n "$sa" ] && [ "$(field "$l" go)" = go ] && [ "$(field "$l" sha_a)" = "$sa" ] && [ "$(field "$l" reread_a)" = "$sa" ] &&
        [ -n "$(field "$l" sha_b)" ] && [ "$(field "$l" reread_b)" = "$(field "$l" sha_b)" ] && ok=0
    check snap-guest-after-restore "$ok" "${l:-no TERN-VU-SNAP-DONE line} $(line /tmp/snapr.out '^TERN-VU-ERROR')"
    vm_done snapr
    st=$?
    check snap-vm-exit "$st" "tern restore exit status $st at the guest's poweroff; $(tail -c 300 /tmp/snapr.err | tr '\n' ' ')"
    be_pid=$snap_be
    stop_backend snap
    out=$(e2fsck -fn /tmp/snap.img 2>&1)
    check snap-e2fsck $? "e2fsck -fn: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
    for f in a b; do
        rm -f "/tmp/snap.$f"
        debugfs -R "dump /$f /tmp/snap.$f" /tmp/snap.img >/dev/null 2>&1
        want=$sa; [ $f = a ] || want=$(field "$l" sha_b)
        got=$(sha "/tmp/snap.$f" 2>/dev/null)
        check "snap-image-$f" "$([ -n "$want" ] && [ "$got" = "$want" ]; echo $?)" "/$f in the image: sha=$got (guest: $want)"
    done
    show snap
    show snapr
    rm -f /tmp/snap.img /tmp/snap.state /tmp/snap.mem /tmp/snap.a /tmp/snap.b
fi
