#!/usr/bin/env bash
# shellcheck disable=SC2034  # the CHECK_* variables are read by run_check_scenario
# End-to-end virtio-net test (issue #10): in one nested test host boot, guests with --net over a
# tap in L1 (tests/e2e/net_scenario.sh, which prints NET-CHECK lines; guest actions in
# tests/e2e/net_guest/actions/): eth0 up with busybox ip and link-local addresses, pings both ways,
# 64 MiB each way over TCP with sha256 compared on both sides (case 1; the later cases move
# 4-16 MiB per flow to keep the test short); two queue pairs on two vCPUs, both
# RX and both TX queues carrying traffic, in userspace and with vhost=on; a save and restore in the
# middle of a TCP transfer in each direction; a DHCP lease from busybox udhcpd on L1's side.
#
# Usage: tests/e2e/net_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG,
#   E2E_NET_VMM=qemu: the same checks against QEMU's virtio-net-pci (tern's counters skipped);
#   E2E_NET_CASES="1 4": only these cases (debugging; default all five).
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/check_scenario.sh"
source "$here/../../testhost/lib.sh"
ip_bin=/usr/sbin/ip  # iproute2's (busybox's ip has no tuntap); L1 calls it by this path
[[ -x "$ip_bin" ]] && "$ip_bin" -V 2>&1 | grep -q iproute2 || th_die "$ip_bin is not iproute2's ip; install the Debian package 'iproute2'"
CHECK_GUEST_MODULES="failover net_failover virtio_net"
# --stall: a test host left at 0% CPU (a TCG wedge at a nested guest's start) is killed after 120 s
# and booted once more (th_run_retrying) instead of waiting for the 900 s timeout.
CHECK_RUN_ARGS=(--modules "tun tap vhost_iotlb vhost vhost_net" --bin "$ip_bin" --stall 120)
if [[ "${E2E_NET_VMM:-tern}" == qemu ]]; then
    CHECK_RUN_ARGS+=(--with-qemu --env NET_VMM=qemu)
else
    th_need_cmd jq jq
    CHECK_RUN_ARGS+=(--bin "$(command -v jq)")
fi
if [[ -n "${E2E_NET_CASES:-}" ]]; then CHECK_RUN_ARGS+=(--env "NET_CASES=$E2E_NET_CASES"); fi
run_check_scenario net NET-CHECK
