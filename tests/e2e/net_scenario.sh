#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/net_test.sh through testhost/run.sh. Guest
# actions in tests/e2e/net_guest/actions/. Prints one line per check:  NET-CHECK name=<check> PASS|FAIL <detail>
# L1 side of every case: a tap made with iproute2's ip (called by path: busybox's ip has no tuntap),
# link-local addresses (169.254.0.0/16), busybox nc listeners that send L1's random data and store
# what comes back; sha256 compared on both sides.
# Case 1 (1 queue pair, 1 vCPU): eth0 comes up with the configured MAC, the guest pings L1 and L1
#   the guest, 64 MiB go L1 -> guest and the same 64 MiB back, checksums equal on both sides.
# Case 2 (queues=2, 2 vCPUs, tap multi_queue): two flows of 4 MiB each way, each pinned (taskset)
#   to its own vCPU: both RX and both TX queues carry traffic (the guest's per-queue MSI-X
#   interrupts; tern: per-queue bytes and active_queue_pairs=2 from GET /tern/stats).
# Case 3: case 2 with vhost=on: a vhost worker thread of the VMM exists in L1 (vhost-<pid>); tern:
#   its own data-path counters stay 0 while the tap's (in /tern/stats) moved both flows; each
#   queue's requests (vhost's used entries) are > 0; vhost's interrupts use the MSI-X irqfds
#   directly while the vectors are unmasked (docs/net.md).
# Every case: eth0 has the MAC given and negotiated NET_FEATURES (the guest's sysfs features).
# Case 4 (snapshot): 16 MiB each way at once, the guest's stream paced (1 MiB every 0.25 s), L1's
#   never more than 1 MiB ahead of it; once L1 has 4 MiB the VM is saved (tern snapshot --exit /
#   QEMU migrate to a file), both streams still unfinished, and restored (tern
#   restore --resume / QEMU -incoming; the tap is reopened by name): both transfers complete with
#   the right checksums.
# Case 5 (DHCP): busybox udhcpd on L1's side of the tap; the guest's udhcpc gets a lease from the
#   pool, applies it, pings the server, and L1 reaches the guest at the leased address.
# NET_CASES (default "1 2 3 4 5") runs only the cases it lists (to debug one).
# NET_VMM=qemu (with --with-qemu) runs the same cases with QEMU's virtio-net-pci (tern's counters
# skipped), to check the guest side and this test against a reference device.
: "${NET_WAIT:=180}" "${NET_VMM:=tern}" "${NET_CASES:=1 2 3 4 5}"
T="$TH_TERN"
IP=/usr/sbin/ip
fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "NET-CHECK name=$1 PASS $3"; else echo "NET-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
}
case "$NET_VMM" in
tern) [ -n "$T" ] || { echo "NET-CHECK name=setup FAIL tern binary not in the test host"; exit 2; } ;;
qemu) [ -n "$TH_QEMU" ] || { echo "NET-CHECK name=setup FAIL qemu not in the test host"; exit 2; } ;;
*) echo "NET-CHECK name=setup FAIL NET_VMM=$NET_VMM (tern or qemu)"; exit 2 ;;
esac
tern_only() { [ "$NET_VMM" = tern ]; }
[ -x "$IP" ] || { echo "NET-CHECK name=setup FAIL no iproute2 ip at $IP"; exit 2; }
if tern_only; then
    for c in curl jq; do command -v $c >/dev/null || { echo "NET-CHECK name=setup FAIL $c not in the test host"; exit 2; }; done
fi
wait_for() {  # wait_for SECONDS COMMAND...: poll every 0.1 s
    n=$(($1 * 10)); shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
# wait_vm SECONDS COMMAND...: wait_for, but gives up as soon as the VM process ($vm_pid) is gone.
wait_vm() {
    n=$(($1 * 10)); shift
    while [ "$n" -gt 0 ]; do
        "$@" && return 0
        kill -0 "$vm_pid" 2>/dev/null || { "$@"; return; }
        sleep 0.1
        n=$((n - 1))
    done
    return 1
}
# wait_exit PID SECONDS: the process's exit status once it ended (bounded; 137 after a SIGKILL).
wait_exit() {
    wait_for "$2" sh -c "! kill -0 $1 2>/dev/null" || { echo "NET-INFO pid $1 still running after $2 s: killed"; kill -9 "$1"; }
    wait "$1"
}
has() { grep -q "$2" "$1" 2>/dev/null; }
lines() { grep -a "$2" "$1" 2>/dev/null | tr -d '\r'; }  # lines FILE PATTERN: matching console lines
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }  # field LINE KEY
sha() { sha256sum "$1" | cut -d' ' -f1; }
stage() { echo "NET-INFO $* uptime=$(cut -d' ' -f1 /proc/uptime)"; }  # L1 time, for the log
mon_send() { timeout 10 sh -c 'printf "%s\n" "$1" >"$2"' _ "$2" "/tmp/$1.mon.in"; }
api() {  # api SOCK METHOD PATH [BODY] -> "<body> <status>"
    curl -s -m 60 --unix-socket "$1" -X "$2" -w ' %{http_code}' -H 'Content-Type: application/json' \
        ${4:+-d "$4"} "http://localhost$3"
}
show() {  # show NAME: the guest's TERN- lines and its last other console lines, for the log
    { grep -a '^TERN-' "/tmp/$1.out" | tail -n 30; grep -av '^TERN-' "/tmp/$1.out" | tail -n 3; tail -n 5 "/tmp/$1.err"; } 2>/dev/null |
        tr -d '\r' | sed "s/^/  $1 console: /"
}

# ---- the network: taps, addresses, listeners ----
mods=$(lsmod | awk '$1 ~ /^(tun|tap|vhost|vhost_net|vhost_iotlb)$/ { printf "%s ", $1 }')
echo "NET-INFO modules: $mods; /dev/net/tun: $(ls -l /dev/net/tun 2>&1); /dev/vhost-net: $(ls -l /dev/vhost-net 2>&1)"
# mktap NAME L1_ADDR [multi_queue]: a persistent tap with L1's address, up (no carrier until a VMM
# attaches a queue). The VMMs open it with IFF_MULTI_QUEUE when they use more than one queue pair.
mktap() {
    out=$("$IP" tuntap add "$1" mode tap $3 2>&1 && "$IP" addr add "$2" dev "$1" 2>&1 && "$IP" link set "$1" up 2>&1)
    check "tap-$1" $? "ip tuntap add $1 mode tap $3, $2: ${out:-ok}"
}
mkfifo /tmp/l1.fifo
# serve_send PORT FILE: L1 sends FILE to the first client of PORT (pid in $srv_pid).
serve_send() { nc -l -p "$1" <"$2" >/dev/null 2>"/tmp/srv-$1.err" & srv_pid=$!; }
# serve_recv PORT OUT: L1 stores what the first client of PORT sends in OUT until it closes. Its
# stdin is a FIFO opened read-write, which never ends: busybox nc would half-close otherwise, and
# the client would stop sending.
serve_recv() { nc -l -p "$1" >"$2" 2>"/tmp/srv-$1.err" <>/tmp/l1.fifo & srv_pid=$!; }
# bye ADDR: tells the guest's net_bye that L1 is done (the guest then powers off).
# (retried while the guest's listener is not up yet: nc exits 1 on a refused connection).
bye_once() { timeout 20 sh -c "echo bye | nc $1 7000" >/dev/null 2>&1; }
bye() {
    for _ in 1 2 3 4 5 6 7 8 9 10; do bye_once "$1" && return 0; sleep 0.5; done
    return 1
}
stage "generating L1's random data"
dd if=/dev/urandom of=/tmp/data64 bs=1M count=64 2>/dev/null
dd if=/tmp/data64 of=/tmp/data4a bs=1M count=4 2>/dev/null
dd if=/tmp/data64 of=/tmp/data4b bs=1M skip=4 count=4 2>/dev/null
dd if=/tmp/data64 of=/tmp/data16 bs=1M skip=16 count=16 2>/dev/null
sha_data64=$(sha /tmp/data64) sha_data4a=$(sha /tmp/data4a) sha_data4b=$(sha /tmp/data4b) sha_data16=$(sha /tmp/data16)
stage "data ready"

# ---- the VMM: tern, or QEMU for comparison ----
CMD="console=ttyS0 quiet"
# qemu_net SPEC: QEMU's -netdev/-device for tern's --net SPEC (tap=,mac=,queues=,vhost=).
qemu_net() {
    tap="" mac="" q=1 vh=off
    for kv in $(echo "$1" | tr ',' ' '); do
        case "$kv" in tap=*) tap=${kv#tap=} ;; mac=*) mac=${kv#mac=} ;; queues=*) q=${kv#queues=} ;; vhost=*) vh=${kv#vhost=} ;; esac
    done
    nd="tap,id=n0,ifname=$tap,script=no,downscript=no,vhost=$vh"
    dev="virtio-net-pci,netdev=n0,romfile=,disable-legacy=on${mac:+,mac=$mac}"
    if [ "$q" -gt 1 ]; then nd="$nd,queues=$q" dev="$dev,mq=on,vectors=$((2 * q + 2))"; fi
    echo "-netdev $nd -device $dev"
}
qemu_args() {  # qemu_args NAME CPUS MEM NETSPEC
    echo "-enable-kvm -M pc -L $TH_QEMU_FW -m $3 -smp $2 -kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial file:/tmp/$1.out -no-reboot $(qemu_net "$4") -monitor pipe:/tmp/$1.mon -global migration.store-global-state=off"
}
qemu_mon() {  # qemu_mon NAME: the monitor fifos, its output collected in /tmp/NAME.mon.log
    rm -f "/tmp/$1.mon.in" "/tmp/$1.mon.out"
    mkfifo "/tmp/$1.mon.in" "/tmp/$1.mon.out"
    cat "/tmp/$1.mon.out" >"/tmp/$1.mon.log" &
}
# start_vm NAME CPUS MEM NETSPEC CMDLINE-EXTRA: boots the guest with --net NETSPEC in the background
# (pid in $vm_pid), console in /tmp/NAME.out; tern serves its API on /tmp/NAME.sock, QEMU its
# monitor on the pipe /tmp/NAME.mon. The spec is saved for restore_vm.
start_vm() {
    rm -f "/tmp/$1.sock" "/tmp/$1.out"
    echo "$2 $3 $4" >"/tmp/$1.spec"
    if tern_only; then
        "$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$CMD $5" \
            --cpus "$2" --memory "$3" --net "$4" --api-sock "/tmp/$1.sock" \
            >"/tmp/$1.out" 2>"/tmp/$1.err" </dev/null &
    else
        qemu_mon "$1"
        # shellcheck disable=SC2046  # qemu_args is split into words on purpose (no spaces in it)
        "$TH_QEMU" $(qemu_args "$1" "$2" "$3" "$4") -append "$CMD $5" >"/tmp/$1.err" 2>&1 </dev/null &
    fi
    vm_pid=$!
}
# save_vm NAME: saves the running VM to /tmp/NAME.state + /tmp/NAME.mem (QEMU: /tmp/NAME.mig);
# the VM then ends. Returns the save's status; its output in $save_out.
save_vm() {
    if tern_only; then
        save_out=$("$T" snapshot --api-sock "/tmp/$1.sock" --state "/tmp/$1.state" --mem "/tmp/$1.mem" --exit 2>&1)
        rc=$?
    else
        mon_send "$1" "$(printf 'stop\nmigrate exec:cat>/tmp/%s.mig\ninfo migrate' "$1")"
        wait_for 120 has "/tmp/$1.mon.log" 'Migration status: \(completed\|failed\)'
        has "/tmp/$1.mon.log" 'Migration status: completed'
        rc=$?
        save_out=$(grep -a 'Migration status' "/tmp/$1.mon.log" | tr -d '\r')
        mon_send "$1" quit
    fi
    wait_exit "$vm_pid" 60
    return $rc
}
# restore_vm NAME NEW: continues NAME's saved VM as NEW (console /tmp/NEW.out, API /tmp/NEW.sock).
restore_vm() {
    rm -f "/tmp/$2.sock" "/tmp/$2.out"
    if tern_only; then
        "$T" --log-level debug restore --state "/tmp/$1.state" --mem "/tmp/$1.mem" --resume --api-sock "/tmp/$2.sock" \
            >"/tmp/$2.out" 2>"/tmp/$2.err" </dev/null &
    else
        qemu_mon "$2"
        # shellcheck disable=SC2046  # the saved "CPUS MEM NETSPEC" words
        set -- "$1" "$2" $(cat "/tmp/$1.spec")
        # shellcheck disable=SC2046
        "$TH_QEMU" $(qemu_args "$2" "$3" "$4" "$5") -append "$CMD" -incoming "exec:cat /tmp/$1.mig" >"/tmp/$2.err" 2>&1 </dev/null &
    fi
    vm_pid=$!
}
# finish_vm NAME GUEST_ADDR: L1 pings the guest, says bye; the guest powers off; its exit status.
finish_vm() {
    out=$(ping -c 2 -W 5 "$2" 2>&1)
    check "$1-l1-pings-guest" $? "$(echo "$out" | grep -E 'transmitted' | tr '\n' ' ') neighbours: $("$IP" neigh show | tr '\n' ' ')"
    bye "$2"
    wait_vm 30 has "/tmp/$1.out" '^TERN-NET-BYE got=bye'
    check "$1-guest-bye" $? "$(lines "/tmp/$1.out" '^TERN-NET-BYE')"
    wait_exit "$vm_pid" 60
    st=$?
    check "$1-vm-exit" "$st" "exit status $st at the guest's poweroff; stderr: $(tail -c 300 "/tmp/$1.err" | tr '\n' ' ')"
}
# The features every interface here negotiates (virtio 1.2 §5.1.3: bit numbers) and, with 2 queue
# pairs, MQ and CTRL_VQ: VERSION_1, MAC, STATUS, CSUM, GUEST_CSUM, GUEST_TSO4, HOST_TSO4, MRG_RXBUF,
# INDIRECT_DESC, EVENT_IDX.
NET_FEATURES="32:VERSION_1 5:MAC 16:STATUS 0:CSUM 1:GUEST_CSUM 7:GUEST_TSO4 11:HOST_TSO4 15:MRG_RXBUF 28:INDIRECT_DESC 29:EVENT_IDX"
# check_up NAME MAC RXQ: the guest's TERN-NET-UP line has MAC, RXQ queues, carrier 1, the features
# of NET_FEATURES; its ping got answers.
check_up() {
    l=$(lines "/tmp/$1.out" '^TERN-NET-UP' | head -n 1)
    ok=1; [ "$(field "$l" mac)" = "$2" ] && [ "$(field "$l" rxq)" = "$3" ] && [ "$(field "$l" txq)" = "$3" ] &&
        [ "$(field "$l" carrier)" = 1 ] && ok=0
    check "$1-eth0-up" "$ok" "${l:-no TERN-NET-UP line} (want mac=$2 rxq=txq=$3 carrier=1) $(lines "/tmp/$1.out" '^TERN-NET-ERROR' | head -n 2 | tr '\n' ' ')"
    bits=$(field "$l" features) want=$NET_FEATURES missing=""
    [ "$3" = 1 ] || want="$want 22:MQ 17:CTRL_VQ"
    for f in $want; do
        [ "$(echo "$bits" | cut -c$((${f%%:*} + 1)))" = 1 ] || missing="$missing ${f#*:}"
    done
    check "$1-features" "$([ -n "$bits" ] && [ -z "$missing" ]; echo $?)" "negotiated ${bits:-none}; missing:${missing:- none}"
    l=$(lines "/tmp/$1.out" '^TERN-NET-PING' | head -n 1)
    check "$1-guest-pings-l1" "$([ "$(field "$l" rc)" = 0 ]; echo $?)" "${l:-no TERN-NET-PING line}"
}
# check_flow NAME TAG WANT_SHA L1_RECEIVED: the guest received WANT_SHA (its TERN-NET-RECV), sent it
# back (TERN-NET-SENT), and what L1 received has the same checksum.
check_flow() {
    l=$(lines "/tmp/$1.out" "^TERN-NET-RECV tag=$2 " | head -n 1)
    check "$1-$2-l1-to-guest" "$([ "$(field "$l" sha)" = "$3" ]; echo $?)" "${l:-no TERN-NET-RECV tag=$2 line} (L1 sent sha=$3)"
    s=$(lines "/tmp/$1.out" "^TERN-NET-SENT tag=$2 " | head -n 1)
    got=$(sha "$4") bytes=$(wc -c <"$4")
    ok=1; [ "$(field "$s" rc)" = 0 ] && [ "$(field "$s" sha)" = "$3" ] && [ "$got" = "$3" ] && ok=0
    check "$1-$2-guest-to-l1" "$ok" "guest: ${s:-no TERN-NET-SENT tag=$2 line}; L1 received bytes=$bytes sha=$got"
}
# irq_delta LINE_BEFORE LINE_AFTER QUEUE: how many more interrupts QUEUE (e.g. input.1) had.
irq_delta() { echo $(($(field "$2" "$3" | grep . || echo 0) - $(field "$1" "$3" | grep . || echo 0))); }
# tern_queues SOCK: one line per virtio-net queue from GET /tern/stats, "index=I k=v ..." (all
# numeric fields), and the device-wide counters as "device k=v ...".
tern_queues() {
    api "$1" GET /tern/stats | sed 's/ [0-9]*$//' | jq -r '.device_counters[] | select(.kind == "virtio-net") |
        ("device " + ([.counters | to_entries[] | "\(.key)=\(.value)"] | join(" "))),
        (.queues[] | "index=\(.index) " + ([to_entries[] | select(.key != "index") | "\(.key)=\(.value)"] | join(" ")))' 2>&1
}
qfield() { echo "$1" | grep "^index=$2 " | head -n 1 | tr ' ' '\n' | sed -n "s/^$3=//p"; }  # qfield QUEUES INDEX KEY

want_case() { case " $NET_CASES " in *" $1 "*) return 0 ;; esac; return 1; }
# ---------------- case 1: one queue pair, 64 MiB each way ----------------
mktap tap0 169.254.10.1/24
if want_case 1; then
stage case1
serve_send 5001 /tmp/data64
s1=$srv_pid
serve_recv 5002 /tmp/c1.recv
r1=$srv_pid
start_vm c1 1 384M tap=tap0,mac=52:54:00:0a:00:02 \
    "tern.action=net-xfer tern.net_addr=169.254.10.2/24 tern.net_peer=169.254.10.1 tern.net_flows=a:5001:5002:0"
wait_vm "$NET_WAIT" has /tmp/c1.out '^TERN-NET-DONE'
check c1-done $? "$(lines /tmp/c1.out '^TERN-NET-\(RECV\|SENT\|ERROR\)' | tr '\n' ' ')"
stage "case1 transfers done"
check_up c1 52:54:00:0a:00:02 1
wait_exit "$r1" 30 >/dev/null
wait_exit "$s1" 30 >/dev/null
check_flow c1 a "$sha_data64" /tmp/c1.recv
if tern_only; then
    qs=$(tern_queues /tmp/c1.sock)
    echo "$qs" | sed 's/^/NET-INFO c1 stats: /'
    ok=1; [ "$(qfield "$qs" 0 bytes)" -ge 67108864 ] 2>/dev/null && [ "$(qfield "$qs" 1 bytes)" -ge 67108864 ] 2>/dev/null && ok=0
    check c1-tern-queue-bytes "$ok" "rx0 bytes=$(qfield "$qs" 0 bytes) tx0 bytes=$(qfield "$qs" 1 bytes) (want >= 64 MiB each)"
fi
finish_vm c1 169.254.10.2
show c1
rm -f /tmp/c1.recv
fi

# ---------------- case 2 / 3: two queue pairs on two vCPUs (userspace, then vhost) ----------------
mktap tap1 169.254.11.1/24 multi_queue
mq_case() {  # mq_case NAME VHOST PORT_BASE
    stage "$1"
    p=$3
    serve_send "$p" /tmp/data4a; sa=$srv_pid
    serve_send $((p + 1)) /tmp/data4b; sb=$srv_pid
    serve_recv $((p + 2)) "/tmp/$1.recv-a"; ra=$srv_pid
    serve_recv $((p + 3)) "/tmp/$1.recv-b"; rb=$srv_pid
    tap_rx0=$(cat /sys/class/net/tap1/statistics/rx_bytes) tap_tx0=$(cat /sys/class/net/tap1/statistics/tx_bytes)
    start_vm "$1" 2 384M "tap=tap1,mac=52:54:00:0b:00:02,queues=2,vhost=$2" \
        "tern.action=net-xfer tern.net_addr=169.254.11.2/24 tern.net_peer=169.254.11.1 tern.net_flows=a:$p:$((p + 2)):0,b:$((p + 1)):$((p + 3)):1"
    wait_vm "$NET_WAIT" has "/tmp/$1.out" '^TERN-NET-DONE'
    check "$1-done" $? "$(lines "/tmp/$1.out" '^TERN-NET-\(RECV\|SENT\|ERROR\)' | tr '\n' ' ')"
    check_up "$1" 52:54:00:0b:00:02 2
    for pid in $ra $rb $sa $sb; do wait_exit "$pid" 30 >/dev/null; done
    check_flow "$1" a "$sha_data4a" "/tmp/$1.recv-a"
    check_flow "$1" b "$sha_data4b" "/tmp/$1.recv-b"
    # Both RX and both TX queues interrupted the guest during the flows (its MSI-X vector per queue).
    b=$(lines "/tmp/$1.out" '^TERN-NET-IRQ tag=before' | head -n 1) a=$(lines "/tmp/$1.out" '^TERN-NET-IRQ tag=after' | head -n 1)
    for q in input.0 input.1 output.0 output.1; do
        d=$(irq_delta "$b" "$a" $q)
        check "$1-guest-irq-$q" "$([ "$d" -gt 0 ]; echo $?)" "$q: $d interrupts during the flows [$b] [$a]"
    done
    if [ "$2" = on ]; then
        # The kernel names a vhost worker "vhost-<pid of the task that set the owner>": a thread of the VMM.
        w=""
        for c in /proc/[0-9]*/comm; do
            n=$(cat "$c" 2>/dev/null)
            case "$n" in vhost-*) [ -d "/proc/$vm_pid/task/${n#vhost-}" ] && w="$w $n" ;; esac
        done
        check "$1-vhost-worker" "$([ -n "$w" ]; echo $?)" "vhost workers of the VMM (pid $vm_pid):${w:- none}"
    fi
    if tern_only; then
        qs=$(tern_queues "/tmp/$1.sock")
        echo "$qs" | sed "s/^/NET-INFO $1 stats: /"
        # Queues 0..3 are receiveq1, transmitq1, receiveq2, transmitq2 (virtio 1.2 §5.1.2); with
        # vhost=on their bytes are unknown to tern (vhost-net does not export them), but its calls
        # used entries are read from the used rings (requests); its interrupts go straight to the
        # MSI-X irqfds while the vectors are unmasked, so tern's interrupts count only those
        # raised while masked (reported, not asserted; the guest's per-queue interrupts are).
        [ "$2" = on ] || for i in 0 1 2 3; do
            v=$(qfield "$qs" $i bytes)
            check "$1-tern-queue$i-bytes" "$([ "${v:-0}" -gt 0 ] 2>/dev/null; echo $?)" "queue $i bytes=${v:-none}"
        done
        [ "$2" = on ] && for i in 0 1 2 3; do
            v=$(qfield "$qs" $i interrupts) r=$(qfield "$qs" $i requests)
            check "$1-tern-queue$i-vhost-counted" "$([ "${r:-0}" -gt 0 ] 2>/dev/null; echo $?)" "queue $i requests=${r:-none} (vhost=on: read from the used ring); interrupts through tern=${v:-none}"
        done
        dev=$(echo "$qs" | grep '^device ')
        devf() { echo "$dev" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
        check "$1-tern-active-pairs" "$([ "$(devf active_queue_pairs)" = 2 ]; echo $?)" "active_queue_pairs=$(devf active_queue_pairs)"
        # With vhost the data path never enters tern: its own rx/tx counters stay 0 while the tap
        # (tx = towards the guest) moved both flows.
        if [ "$2" = on ]; then
            tx=$(devf tap_tx_bytes) rx=$(devf tap_rx_bytes)
            ok=1; [ "$(devf rx_packets)" = 0 ] && [ "$(devf tx_packets)" = 0 ] && [ $((${tx:-0} - tap_tx0)) -ge 8388608 ] &&
                [ $((${rx:-0} - tap_rx0)) -ge 8388608 ] && ! grep -q 'vhost-net unavailable' "/tmp/$1.err" && ok=0
            check "$1-tern-vhost-in-use" "$ok" "tern rx_packets=$(devf rx_packets) tx_packets=$(devf tx_packets), tap rx_bytes=$(devf tap_rx_bytes) tx_bytes=$(devf tap_tx_bytes) (before the VM: $tap_rx0 $tap_tx0; want 0, 0, >= 8 MiB more each); $(grep -i vhost "/tmp/$1.err" | head -n 2 | tr '\n' ' ')"
        fi
    fi
    finish_vm "$1" 169.254.11.2
    show "$1"
    rm -f "/tmp/$1.recv-a" "/tmp/$1.recv-b"
}
if want_case 2; then mq_case c2 off 5010; fi
if want_case 3; then mq_case c3 on 5020; fi

# ---------------- case 4: snapshot and restore with TCP transfers in progress ----------------
if want_case 4; then
stage case4
size_at_least() { [ "$(wc -c <"$1" 2>/dev/null || echo 0)" -ge "$2" ]; }
# L1's stream follows the guest's: its MiB number i goes once L1 has i - 1 MiB of the guest's, so
# neither stream ends while the other is well under way (the guest's is paced).
: >/tmp/c4.recv
echo 0 >/tmp/c4.sent
( i=0; while [ $i -lt 16 ]; do
    wait_for "$NET_WAIT" size_at_least /tmp/c4.recv $((i * 1048576)) || break
    dd if=/tmp/data16 bs=1M skip=$i count=1 2>/dev/null
    i=$((i + 1)); echo $i >/tmp/c4.sent
done ) | nc -l -p 5031 >/dev/null 2>/tmp/srv-5031.err &
s4=$!
serve_recv 5032 /tmp/c4.recv
r4=$srv_pid
start_vm c4 1 256M tap=tap0,mac=52:54:00:0a:00:02 \
    "tern.action=net-snap tern.net_addr=169.254.10.2/24 tern.net_peer=169.254.10.1 tern.net_mib=16 tern.net_rport=5031 tern.net_sport=5032"
wait_vm "$NET_WAIT" size_at_least /tmp/c4.recv 4194304
check c4-started $? "L1 had $(wc -c </tmp/c4.recv) bytes of the guest's stream, had sent $(cat /tmp/c4.sent) MiB"
stage "case4 saving"
save_vm c4
check c4-save $? "$(echo "$save_out" | tail -n 2 | tr '\n' ' ')"
# Both streams were cut by the save: neither had ended (what arrives after the VM stopped only
# comes from buffers; the guest's pace leaves at least 3 s of it to go at 4 MiB).
got=$(wc -c </tmp/c4.recv) sent=$(cat /tmp/c4.sent)
ok=1; [ "$got" -lt 16777216 ] && [ "$sent" -lt 16 ] && ! has /tmp/c4.out '^TERN-NET-RECV' && ok=0
check c4-in-progress "$ok" "after the save L1 had $got of the guest's 16777216 bytes and had sent $sent of 16 MiB"
stage "case4 restoring"
restore_vm c4 c4r
# Until both transfers end: a progress line every 10 s of waiting, so a log tells a restored guest
# that stops (the lines go on, its byte counts and uptime stand still) from a test host that wedged
# (the lines stop; run.sh's --stall then kills L1 and th_run_retrying boots it once more).
c4_progress() {
    stage "case4 progress: L1 has $(wc -c </tmp/c4.recv) bytes of the guest's stream and sent $(cat /tmp/c4.sent) MiB;" \
        "guest: $(lines /tmp/c4r.out '^TERN-NET-SNAP' | tail -n 1 | tr -s ' ');" \
        "VMM: $(kill -0 "$vm_pid" 2>/dev/null && echo running || echo gone), stderr: $(tail -n 1 /tmp/c4r.err | cut -c1-160)"
    if tern_only; then tern_queues /tmp/c4r.sock | sed 's/^/NET-INFO case4 queue /'; fi
}
c4_waited=0 c4_rc=1
while [ "$c4_waited" -lt "$NET_WAIT" ]; do
    wait_vm 10 has /tmp/c4r.out '^TERN-NET-DONE' && { c4_rc=0; break; }
    kill -0 "$vm_pid" 2>/dev/null || break
    c4_waited=$((c4_waited + 10))
    c4_progress
done
echo "NET-INFO case4 restore: $(grep -a 'restore' /tmp/c4r.err | tr -s ' ' | tr '\n' ';' | cut -c1-900)"
[ "$c4_rc" = 0 ]
check c4-done $? "after the restore: $(lines /tmp/c4r.out '^TERN-NET-\(RECV\|SENT\|ERROR\)' | tr '\n' ' ') $(tail -c 300 /tmp/c4r.err | tr '\n' ' ')"
stage "case4 transfers done"
wait_exit "$r4" 30 >/dev/null
wait_exit "$s4" 30 >/dev/null
l=$(lines /tmp/c4r.out '^TERN-NET-RECV tag=in ' | head -n 1)
ok=1; [ "$(field "$l" sha)" = "$sha_data16" ] && [ "$(field "$l" rc)" = 0 ] && ok=0
check c4-l1-to-guest "$ok" "${l:-no TERN-NET-RECV line} (L1 sent sha=$sha_data16)"
d=$(lines /tmp/c4.out '^TERN-NET-DATA' | head -n 1)
s=$(lines /tmp/c4r.out '^TERN-NET-SENT tag=out ' | head -n 1)
got=$(sha /tmp/c4.recv) bytes=$(wc -c </tmp/c4.recv)
ok=1; [ -n "$d" ] && [ "$(field "$d" sha)" = "$got" ] && [ "$(field "$s" rc)" = 0 ] && ok=0
check c4-guest-to-l1 "$ok" "guest: ${d:-no TERN-NET-DATA line} ${s:-no TERN-NET-SENT line}; L1 received bytes=$bytes sha=$got"
finish_vm c4r 169.254.10.2
show c4
show c4r
rm -f /tmp/c4.mem /tmp/c4.mig /tmp/c4.state /tmp/c4.recv
fi

# ---------------- case 5: a DHCP lease from busybox udhcpd on L1's side ----------------
if want_case 5; then
stage case5
cat >/tmp/udhcpd.conf <<EOF
start 169.254.10.100
end 169.254.10.110
interface tap0
lease_file /tmp/udhcpd.leases
option subnet 255.255.255.0
option lease 600
EOF
: >/tmp/udhcpd.leases
udhcpd -f /tmp/udhcpd.conf >/tmp/udhcpd.log 2>&1 &
dpid=$!
start_vm c5 1 256M tap=tap0,mac=52:54:00:0a:00:05 "tern.action=net-dhcp"
wait_vm "$NET_WAIT" has /tmp/c5.out '^TERN-NET-PING'
l=$(lines /tmp/c5.out '^TERN-NET-DHCP' | head -n 1)
ip=$(field "$l" ip)
ok=1
case "$ip" in 169.254.10.1[01][0-9]) [ "${ip##*.}" -le 110 ] && [ "$(field "$l" serverid)" = 169.254.10.1 ] && [ "$(field "$l" mask)" = 24 ] && ok=0 ;; esac
check c5-lease "$ok" "${l:-no TERN-NET-DHCP line} $(lines /tmp/c5.out '^TERN-NET-UDHCPC')"
a=$(lines /tmp/c5.out '^TERN-NET-ADDR' | head -n 1)
check c5-address "$([ -n "$ip" ] && [ "$(field "$a" inet)" = "$ip/24" ]; echo $?)" "${a:-no TERN-NET-ADDR line} (lease $ip)"
l=$(lines /tmp/c5.out '^TERN-NET-PING' | head -n 1)
check c5-guest-pings-server "$([ "$(field "$l" rc)" = 0 ]; echo $?)" "${l:-no TERN-NET-PING line}"
finish_vm c5 "${ip:-169.254.10.100}"
kill "$dpid" 2>/dev/null
show c5
echo "NET-INFO udhcpd: $(tail -n 5 /tmp/udhcpd.log | tr '\n' ' ')"
fi

stage end
echo "NET-DONE fails=$fails vmm=$NET_VMM"
exit 0
