#!/bin/sh
# Runs inside the test host (L1), started by bench/net/run.sh. L1's disk (/dev/vda, ext4) has an
# empty results/ directory, filled here and read by the host afterwards (debugfs).
# $NET_ROUNDS times, boots the guest once per configuration of $NET_CONFIGS, in that order (so they
# interleave): "qemu" / "qemu-vhost" (virtio-net-pci on -netdev tap, vhost=off / on), and for each
# tern NAME of $NET_TERNS ("NAME=PATH ...") "NAME" / "NAME-vhost" (--net tap=tap0,vhost=off / on).
# Before each boot tap0 is made anew (iproute2's ip: busybox's has no tuntap), 169.254.1.1/16, up;
# the guest (bench/net/guest-net-bench.sh) puts 169.254.1.2/16 on eth0 and runs an iperf3 server.
# Then, from L1, one after the other:
#   tcp-g2h-1 / tcp-g2h-4   iperf3 -R (the guest sends), 1 / 4 streams, $NET_TIME s
#   tcp-h2g-1 / tcp-h2g-4   iperf3 (L1 sends), 1 / 4 streams
#   udp64-g2h / udp64-h2g   iperf3 -u -l 64 -b 0 (as fast as it goes), -R / not
#   tcp-g2h-20m / tcp-h2g-20m, udp64-g2h-1k / udp64-h2g-1k   the same paced at a fixed load that
#                           every configuration reaches: TCP -b 20M, UDP -b 512K (1000 packets/s)
#   ping                    ping -c $NET_PINGS -i 0.01 (L1 → guest, round trips)
# Around each one it records (results/<config>/<round>/samples.txt, KEY=VALUE lines):
#   utime stime guest       the VMM process (all threads) from /proc/PID/stat, clock ticks
#   vhost vhost_threads     utime+stime summed over the kernel threads named vhost-N (the vhost-net
#                           workers of Linux 6.1; only one VMM runs at a time, so all are its own)
#   l1_busy l1_total        L1's /proc/stat cpu line (busy = all but idle and iowait)
#   tap_*                   /sys/class/net/tap0/statistics (rx = from the guest, tx = to the guest)
#   uptime                  L1's /proc/uptime
# and stores <test>.json (iperf3 -J) or ping.txt, plus status ("rc=N tests=M" or "skipped=<why>")
# and console.txt (the VMM's console). Prints NET-PROGRESS / NET-SKIP / NET-ERROR lines for the host,
# and "NET-MARK cfg= round= test= at=begin|end" around each test, which the host stamps with the
# host CPU time of L1's QEMU (bench/lib/stamp_cpu.py): how much of a host core L1 got meanwhile.
: "${NET_CONFIGS:=qemu qemu-vhost}" "${NET_ROUNDS:=1}" "${NET_TIME:=5}" "${NET_PINGS:=1000}"
: "${NET_MEM_MIB:=512}" "${NET_TIMEOUT:=900}" "${NET_TERNS:=${TH_TERN:+tern=$TH_TERN}}"
trap '' PIPE
IP=/usr/sbin/ip HOST_ADDR=169.254.1.1 GUEST_ADDR=169.254.1.2 MAC=52:54:00:12:34:56
CMDLINE="console=ttyS0 quiet loglevel=1 tern.action=net-bench net.addr=$GUEST_ADDR/16"
TESTS="tcp-g2h-1 tcp-g2h-4 tcp-h2g-1 tcp-h2g-4 udp64-g2h udp64-h2g tcp-g2h-20m tcp-h2g-20m udp64-g2h-1k udp64-h2g-1k ping"

i=0
while [ ! -b /dev/vda ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
mkdir -p /mnt
mount -t ext4 /dev/vda /mnt || { echo "NET-ERROR cannot mount the test host's disk /dev/vda"; exit 1; }
rm -rf /mnt/results
mkdir -p /mnt/results
[ -x "$IP" ] || { echo "NET-ERROR no iproute2 ip at $IP in the test host"; exit 1; }
command -v iperf3 >/dev/null || { echo "NET-ERROR no iperf3 in the test host"; exit 1; }
echo "NET-INFO l1_kernel=$(uname -r) vhost_net_dev=$([ -c /dev/vhost-net ] && echo yes || echo no) time=$NET_TIME pings=$NET_PINGS iperf3=$(iperf3 --version | head -n 1 | tr ' ' _)"

tern_path() {  # tern_path NAME: the binary of tern NAME in $NET_TERNS (empty: none)
    for e in $NET_TERNS; do [ "${e%%=*}" = "$1" ] && echo "${e#*=}" && return; done
}

# split_cfg CFG: sets vmm (qemu or a tern NAME) and vhost (on/off) for a configuration name.
split_cfg() {
    vmm="$1" vhost=off
    if [ "$1" != qemu ] && [ -z "$(tern_path "$1")" ] && [ "${1%-vhost}" != "$1" ]; then
        vmm="${1%-vhost}" vhost=on
    fi
}

vmm_cmd() {  # vmm_cmd VMM VHOST
    case "$1" in
        qemu) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${NET_MEM_MIB}M -smp 1 -kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial stdio -no-reboot -netdev tap,id=n0,ifname=tap0,script=no,downscript=no,vhost=$2 -device virtio-net-pci,netdev=n0,mac=$MAC,romfile= -append" ;;
        *) echo "$(tern_path "$1") run --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory ${NET_MEM_MIB}M --cpus 1 --net tap=tap0,mac=$MAC,vhost=$2 --cmdline" ;;
    esac
}

tap_setup() {
    $IP link del tap0 2>/dev/null
    $IP tuntap add dev tap0 mode tap && $IP addr add "$HOST_ADDR/16" dev tap0 && $IP link set tap0 up
}

# sample PID: one KEY=VALUE line of the counters described above.
sample() {
    vh=$(for f in $(grep -lx 'vhost-[0-9]*' /proc/[0-9]*/comm 2>/dev/null); do
        sed 's/.*) //' "${f%/comm}/stat" 2>/dev/null; done | awk '{ t += $12 + $13; n++ } END { printf "vhost=%d vhost_threads=%d", t, n }')
    st=/sys/class/net/tap0/statistics
    echo "$(sed 's/.*) //' "/proc/$1/stat" | awk '{ printf "utime=%d stime=%d guest=%d", $12, $13, $41 }')" \
        "$vh" "$(awk '$1 == "cpu" { printf "l1_busy=%d l1_total=%d", $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)" \
        "tap_rx_packets=$(cat $st/rx_packets) tap_tx_packets=$(cat $st/tx_packets) tap_rx_bytes=$(cat $st/rx_bytes)" \
        "tap_tx_bytes=$(cat $st/tx_bytes) tap_rx_dropped=$(cat $st/rx_dropped) tap_tx_dropped=$(cat $st/tx_dropped)" \
        "uptime=$(cut -d' ' -f1 /proc/uptime)"
}

# run_test NAME: one measurement, its counters before and after in samples.txt.
run_test() {
    t="$1" f="$out/$1.json" rc=0
    case "$t" in
        tcp-g2h-1) args="-R" ;; tcp-g2h-4) args="-R -P 4" ;; tcp-h2g-1) args="" ;; tcp-h2g-4) args="-P 4" ;;
        udp64-g2h) args="-u -l 64 -b 0 -R" ;; udp64-h2g) args="-u -l 64 -b 0" ;;
        tcp-g2h-20m) args="-R -b 20M" ;; tcp-h2g-20m) args="-b 20M" ;;
        udp64-g2h-1k) args="-u -l 64 -b 512K -R" ;; udp64-h2g-1k) args="-u -l 64 -b 512K" ;; ping) f="$out/ping.txt" ;;
    esac
    echo "test=$t at=begin $(sample "$pid")" >>"$out/samples.txt"
    echo "NET-MARK cfg=$cfg round=$round test=$t at=begin"  # the host stamps L1's own CPU time on it
    if [ "$t" = ping ]; then
        ping -c "$NET_PINGS" -i 0.01 "$GUEST_ADDR" >"$f" 2>&1 || rc=$?
    else
        # shellcheck disable=SC2086  # args are split into words on purpose
        timeout $((NET_TIME + 60)) iperf3 -c "$GUEST_ADDR" -t "$NET_TIME" -J --connect-timeout 10000 $args >"$f" 2>&1 || rc=$?
    fi
    echo "NET-MARK cfg=$cfg round=$round test=$t at=end"
    echo "test=$t at=end $(sample "$pid")" >>"$out/samples.txt"
    echo "test=$t rc=$rc" >>"$out/samples.txt"
    if [ "$t" = ping ]; then
        got=$(tail -n 2 "$f" | tr '\n' ' ')
    else
        got=$(grep -A 8 '"sum_received"' "$f" | awk -F: '/"bits_per_second"/ { gsub(/[ ,]/, "", $2); printf "%.1f Mbit/s", $2 / 1e6 }')
        [ "$rc" = 0 ] || got="$got $(grep '"error"' "$f" | head -n 1)"
    fi
    echo "NET-PROGRESS cfg=$cfg$tag test=$t rc=$rc $got"
    [ "$rc" = 0 ] || echo "NET-ERROR cfg=$cfg$tag test=$t rc=$rc $got"
}

run_cfg() {  # run_cfg CFG ROUND
    cfg="$1" round="$2" out="/mnt/results/$1/$2" tag=""
    [ "$NET_ROUNDS" = 1 ] || tag=" round=$2"
    mkdir -p "$out"
    split_cfg "$cfg"
    case "$vmm" in
        qemu) [ -n "$TH_QEMU" ] || { echo "skipped=qemu not in the test host" >"$out/status"; echo "NET-SKIP cfg=$cfg reason=qemu not in the test host"; return; } ;;
        *)
            bin=$(tern_path "$vmm")
            if [ -z "$bin" ] || [ ! -x "$bin" ]; then
                echo "skipped=tern not in the test host" >"$out/status"; echo "NET-SKIP cfg=$cfg reason=tern $vmm not in the test host"; return
            fi
            if ! "$bin" run --help 2>&1 | grep -q -- '--net'; then
                echo "skipped=tern has no --net yet" >"$out/status"
                echo "NET-SKIP cfg=$cfg reason=tern has no --net yet (tern run --help does not list it)"
                return
            fi ;;
    esac
    tap_setup || { echo "skipped=tap0 could not be made" >"$out/status"; echo "NET-ERROR cfg=$cfg$tag cannot make tap0"; return; }
    echo "NET-CMD cfg=$cfg cmd=$(vmm_cmd "$vmm" "$vhost") \"$CMDLINE\""
    rm -f /tmp/in /tmp/vmm.pid /tmp/vmm.out
    mkfifo /tmp/in
    # The inner shell writes its pid and execs busybox timeout, which execs the VMM in the same
    # process: that pid is the VMM's. Its exit status follows its console as NET-VMM-EXIT.
    # shellcheck disable=SC2046,SC2016
    { sh -c 'echo $$ >/tmp/vmm.pid; exec "$@"' sh timeout -s KILL "$NET_TIMEOUT" $(vmm_cmd "$vmm" "$vhost") "$CMDLINE"
      echo "NET-VMM-EXIT rc=$?"; } </tmp/in 2>&1 | tr -d '\r' >/tmp/vmm.out &
    exec 4>/tmp/in
    while [ ! -s /tmp/vmm.pid ]; do usleep 10000; done
    pid=$(cat /tmp/vmm.pid)
    t0=$(cut -d' ' -f1 /proc/uptime)
    echo "NET-PROGRESS cfg=$cfg$tag booting (pid $pid)"
    ready=""
    while :; do
        if grep -q '^NET-GUEST-READY' /tmp/vmm.out; then
            usleep 500000  # the line may still be half written
            ready=$(grep -m 1 '^NET-GUEST-READY' /tmp/vmm.out)
            break
        fi
        if grep -q -e '^NET-VMM-EXIT' -e '^NET-ERROR' /tmp/vmm.out || [ "$(awk -v a="$t0" '{ print ($1 - a > 300) }' /proc/uptime)" = 1 ]; then
            break
        fi
        usleep 200000
    done
    ran=0
    if [ -n "$ready" ]; then
        echo "NET-PROGRESS cfg=$cfg$tag guest up after $(awk -v a="$t0" '{ printf "%.1f", $1 - a }' /proc/uptime)s: ${ready#NET-GUEST-READY }"
        i=0
        until ping -c 1 -W 2 "$GUEST_ADDR" >/dev/null 2>&1; do
            i=$((i + 1))
            [ "$i" -lt 10 ] || break
        done
        if [ "$i" -ge 10 ]; then
            echo "NET-ERROR cfg=$cfg$tag the guest does not answer ping at $GUEST_ADDR"
        else
            echo "vhost_threads_named=$(for f in $(grep -lx 'vhost-[0-9]*' /proc/[0-9]*/comm 2>/dev/null); do printf '%s,' "$(cat "$f")"; done) vmm_threads=$(ls /proc/"$pid"/task | wc -l)" >>"$out/samples.txt"
            for t in $TESTS; do run_test "$t"; ran=$((ran + 1)); done
        fi
    else
        echo "NET-ERROR cfg=$cfg$tag the guest never said NET-GUEST-READY"
    fi
    echo quit >&4
    exec 4>&-
    wait
    cp /tmp/vmm.out "$out/console.txt"
    sed -e '/^NET-VMM-EXIT/d' -e 's/^/  | /' /tmp/vmm.out
    grep -e '^NET-ERROR' -e '^NET-WARN' -e '^TERN-GUEST-ERROR' /tmp/vmm.out | sed "s/^\([A-Z-]*\) /\1 cfg=$cfg$tag /"
    vmm_rc=$(sed -n 's/^NET-VMM-EXIT rc=//p' /tmp/vmm.out)
    echo "rc=${vmm_rc:-unknown} tests=$ran" >"$out/status"
    echo "NET-PROGRESS cfg=$cfg$tag exited rc=${vmm_rc:-unknown} after $(awk -v a="$t0" '{ printf "%.0f", $1 - a }' /proc/uptime)s"
}

r=1
while [ "$r" -le "$NET_ROUNDS" ]; do
    for c in $NET_CONFIGS; do run_cfg "$c" "$r"; done
    r=$((r + 1))
done
$IP link del tap0 2>/dev/null
sync
umount /mnt
exit 0
