# Sourced by tests/e2e/vhost_user_scenario.sh in the test host (L1) as /testhost/vhost_user_faults.sh:
# the cases "kill" and "snap" (see the scenario's header). Uses its helpers (check, start_*, ...).

# vu_stats SOCK: the vhost-user disk's counters from GET /tern/stats, one "key=value" per line.
# (the device whose counters include backend_connected: src/vhost_user/frontend/backend_session.h)
vu_stats() {
    api "$1" GET /tern/stats | sed 's/ [0-9]*$//' |
        jq -r '.device_counters[] | select(.counters.backend_connected != null) | .counters | to_entries[] | "\(.key)=\(.value)"' 2>&1
}
stat_of() { echo "$1" | sed -n "s/^$2=//p" | head -n 1; }  # stat_of STATS KEY

# kill_case NAME BACKEND(tern|qsd): the back-end SIGKILLed after the guest's 4th write (tern's: at
# a moment its inflight region shows requests taken and not returned, vhost_user_inflight) and
# restarted (the same image and socket) once the API has shown the disconnect: those requests
# complete (tern's back-end resubmits them from the inflight region and logs "resubmitting N").
kill_case() {
    k="$1"
    stage "$k"
    rm -f /tmp/$k.img /tmp/$k-plain.img
    truncate -s 64M /tmp/$k.img /tmp/$k-plain.img
    if [ "$2" = qsd ]; then start_qsd "$k" "/tmp/$k.img" "/tmp/$k.vu" on 1; else start_ternbe "$k" "/tmp/$k.img" "/tmp/$k.vu" 1; fi
    start_tern "$k" 1 "tern.action=vu-fault tern.vu_mib=16 tern.vu_passes=16" --disk vhost-user=/tmp/$k.vu --disk path=/tmp/$k-plain.img,serial=tern-plain
    wait_vm "$VU_WAIT" has /tmp/$k.out '^TERN-VU-CHUNK i=3 '
    check "$k-writing" $? "$(lines /tmp/$k.out '^TERN-VU-\(INFO\|CHUNK\|ERROR\)' | tail -n 4 | tr '\n' ' ')"
    s0=$(vu_stats /tmp/$k.sock)
    echo "$s0" | sed "s/^/VU-INFO $k stats before: /"
    # tern's back-end is killed while it holds requests: stopped (SIGSTOP), its inflight region
    # counted, let go (SIGCONT) and stopped again until some are in flight; the guest writes all
    # the while. (qemu-storage-daemon offers no INFLIGHT_SHMFD: what it took is served again
    # because the front-end restarts the ring at used->idx, not from an inflight region.)
    tries=0 held=""
    while [ "$2" = tern ] && [ $tries -lt 150 ]; do
        kill -STOP "$be_pid"
        held=$(vhost_user_inflight "$be_pid")
        [ "$(field "$held" inflight)" -ge 1 ] 2>/dev/null && break
        kill -CONT "$be_pid"
        tries=$((tries + 1))
        sleep 0.02
    done
    [ "$2" = tern ] && check "$k-killed-holding-requests" "$([ "$(field "$held" inflight)" -ge 1 ] 2>/dev/null; echo $?)" "after $tries tries: $held"
    kill -9 "$be_pid"
    kill -CONT "$be_pid" 2>/dev/null
    wait "$be_pid" 2>/dev/null
    stage "$k: back-end SIGKILLed"
    chunks0=$(grep -c '^TERN-VU-CHUNK' /tmp/$k.out)
    beats0=$(grep -c '^TERN-VU-BEAT' /tmp/$k.out)
    # While the disk has no back-end: the guest's console and its plain disk keep working, and so does
    # tern's API, whose counters say that the back-end went away.
    wait_vm 60 sh -c "[ \$(grep -c '^TERN-VU-BEAT n=[0-9]* plain=ok' /tmp/$k.out) -ge $((beats0 + 4)) ]"
    check "$k-console-and-plain-disk" "$?" "heartbeats after the kill: $(lines /tmp/$k.out '^TERN-VU-BEAT' | tail -n 2 | tr '\n' ' ') (had $beats0 before)"
    r=$(api /tmp/$k.sock GET /vm/config)
    check "$k-api-answers" "$([ "${r##* }" = 200 ]; echo $?)" "GET /vm/config: $(echo "$r" | cut -c1-200)"
    disconnected() { s1=$(vu_stats /tmp/$k.sock); [ "$(stat_of "$s1" backend_disconnects)" -ge 1 ] 2>/dev/null && [ "$(stat_of "$s1" backend_connected)" = 0 ] 2>/dev/null; }
    wait_vm 30 disconnected
    check "$k-counts-disconnect" $? "GET /tern/stats: $(echo "$s1" | tr '\n' ' ')"
    if [ "$2" = qsd ]; then start_qsd "$k-again" "/tmp/$k.img" "/tmp/$k.vu" on 1; else start_ternbe "$k-again" "/tmp/$k.img" "/tmp/$k.vu" 1; fi
    stage "$k: back-end restarted"
    # Poll the counters from now on: the guest may finish and power the VM off soon after the
    # reconnect, and a single read after its last line raced with tern's exit (empty stats).
    reconnected() { s2=$(vu_stats /tmp/$k.sock); [ "$(stat_of "$s2" backend_reconnects)" -ge 1 ] 2>/dev/null && [ "$(stat_of "$s2" backend_connected)" = 1 ] 2>/dev/null; }
    wait_vm "$VU_WAIT" reconnected
    reconnect_rc=$?
    wait_vm "$VU_WAIT" has /tmp/$k.out '^TERN-VU-FAULT-DONE'
    l=$(line /tmp/$k.out '^TERN-VU-FAULT-DONE')
    gsum=$(field "$l" md5)
    ok=1; [ -n "$gsum" ] && [ "$(field "$l" reread)" = "$gsum" ] && [ "$(field "$l" failed)" = 0 ] && ok=0
    check "$k-guest-writes-resume" "$ok" "${l:-no TERN-VU-FAULT-DONE line}; $chunks0 chunks done at the kill; $(lines /tmp/$k.out '^TERN-VU-CHUNK i=[0-9]* rc=[1-9]' | head -n 3 | tr '\n' ' ')"
    # The requests held at the kill were served again from the inflight region (else the guest's
    # write would never complete, and the line above would be missing). tern's back-end says so.
    if [ "$2" = tern ]; then
        r=$(grep -a 'resubmitting [1-9][0-9]* inflight' "/tmp/$k-again.be" | head -n 1)
        check "$k-resubmitted" "$([ -n "$r" ]; echo $?)" "${r:-no resubmitting line in the log of the restarted back-end} (held at the kill: $held)"
    fi
    echo "$s2" | sed "s/^/VU-INFO $k stats after: /"
    check "$k-counts-reconnect" "$reconnect_rc" "GET /tern/stats: $(echo "$s2" | tr '\n' ' ')"
    wait_vm 30 has /tmp/$k.out '^TERN-VU-PLAIN'
    l=$(line /tmp/$k.out '^TERN-VU-PLAIN')
    check "$k-plain-disk-bytes" "$([ -n "$(field "$l" md5)" ] && [ "$(field "$l" md5)" = "$(field "$l" reread)" ]; echo $?)" "${l:-no TERN-VU-PLAIN line}"
    vm_done "$k"
    st=$?
    check "$k-vm-exit" "$st" "tern exit status $st at the guest's poweroff; $(tail -c 300 /tmp/$k.err | tr '\n' ' ')"
    stop_backend "$k-again"
    got=$(dd if=/tmp/$k.img bs=1M count=16 2>/dev/null | md5sum | cut -d' ' -f1)
    check "$k-image-bytes" "$([ -n "$gsum" ] && [ "$got" = "$gsum" ]; echo $?)" "the image's first 16 MiB: md5=$got (guest wrote $gsum)"
    show "$k"
    rm -f /tmp/$k.img /tmp/$k-plain.img
}
want_case kill && kill_case kill tern
want_case killq && kill_case killq qsd

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
    sa=$(line /tmp/snap.out '^TERN-VU-SNAP-READY') sa=$(field "$sa" md5_a)
    ok=1; [ -n "$sa" ] && [ "$(field "$l" go)" = go ] && [ "$(field "$l" md5_a)" = "$sa" ] && [ "$(field "$l" reread_a)" = "$sa" ] &&
        [ -n "$(field "$l" md5_b)" ] && [ "$(field "$l" reread_b)" = "$(field "$l" md5_b)" ] && ok=0
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
        want=$sa; [ $f = a ] || want=$(field "$l" md5_b)
        got=$(md5 "/tmp/snap.$f" 2>/dev/null)
        check "snap-image-$f" "$([ -n "$want" ] && [ "$got" = "$want" ]; echo $?)" "/$f in the image: md5=$got (guest: $want)"
    done
    show snap
    show snapr
    rm -f /tmp/snap.img /tmp/snap.state /tmp/snap.mem /tmp/snap.a /tmp/snap.b
fi
