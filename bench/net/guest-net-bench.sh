#!/bin/sh
# /actions/net-bench in the guest (L2) of bench/net: brings eth0 up with the address of the kernel
# command line (net.addr=169.254.1.2/16), starts an iperf3 server on it, says
#   NET-GUEST-READY if=eth0 addr=A mac=M mtu=N features=<virtio feature bits, as sysfs prints them>
# and waits for one line on the console (the test host writes it to the VMM's stdin once its
# iperf3 clients and ping are done); then it stops the server and returns (/init powers off).
# Everything the benchmark measures is driven from the test host (L1): the guest only answers.
addr=169.254.1.2/16
for arg in $(cat /proc/cmdline); do
    case "$arg" in net.addr=*) addr="${arg#*=}" ;; esac
done
i=0
while [ ! -e /sys/class/net/eth0 ] && [ "$i" -lt 100 ]; do usleep 100000; i=$((i + 1)); done
if [ ! -e /sys/class/net/eth0 ]; then
    echo "NET-ERROR no eth0 in the guest (virtio_net loaded: $(grep -c '^virtio_net ' /proc/modules))"
    exit 1
fi
ip link set lo up
ip addr add "$addr" dev eth0 || { echo "NET-ERROR ip addr add $addr dev eth0 failed"; exit 1; }
ip link set eth0 up || { echo "NET-ERROR ip link set eth0 up failed"; exit 1; }
iperf3 -s >/tmp/iperf3.log 2>&1 &
server=$!
stty -echo -F /dev/console 2>/dev/null
echo "NET-GUEST-READY if=eth0 addr=$addr mac=$(cat /sys/class/net/eth0/address) mtu=$(cat /sys/class/net/eth0/mtu) features=$(cat /sys/class/net/eth0/device/features 2>/dev/null || echo unknown)"
# shellcheck disable=SC3045  # busybox ash has read -t
read -r -t 3600 _ </dev/console || echo "NET-WARN no answer from the test host in 3600 s"
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
grep -i error /tmp/iperf3.log | head -n 3 | sed 's/^/NET-WARN guest iperf3: /'
exit 0
