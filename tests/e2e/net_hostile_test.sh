#!/usr/bin/env bash
# shellcheck disable=SC2034  # the CHECK_* variables are read by run_check_scenario
# End-to-end hostile virtio-net driver test (issue #10): in one nested test host boot (L1 loads
# tun and tap and makes the tap tern0), tern runs a guest with --net tap=tern0 whose user-space
# driver (tests/e2e/hostile_virtio/hostile_net.c, built here with gcc -static) posts malformed TX
# chains (5 bytes, header only, 70 KiB), malformed control commands, RX buffers too small for the
# frames L1 sends, and no RX buffer at all while L1 floods the tap (tern must not spin), then
# buffers again; L1's side (tests/e2e/net_hostile_scenario.sh, with tern-net-peer from
# tests/e2e/hostile_virtio/net_peer.c) checks the tap's counters, tern's CPU time and /tern/stats.
#
# Usage: tests/e2e/net_hostile_test.sh     Environment: TERN_BIN (default build/tern), E2E_LOG,
#   E2E_NET_VMM=qemu: the same driver against QEMU's virtio-net-pci (tern's API checks skipped).
#   NET_HOSTILE_E2E=net_vhost (set by tests/e2e/net_vhost_test.sh): tern with vhost=on and the
#   driver's vhost mode (issue 31 items 5, 6; net_hostile_scenario.sh's NET_VHOST=on).
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/check_scenario.sh"
source "$here/../../testhost/lib.sh"
name="${NET_HOSTILE_E2E:-net_hostile}"  # net_vhost_scenario.sh is a link to net_hostile_scenario.sh
CHECK_GUEST_EXTRA="$TH_CACHE/$name-guest-extra"
l1_extra="$TH_CACHE/$name-l1-extra"
rm -rf "$CHECK_GUEST_EXTRA" "$l1_extra"
mkdir -p "$CHECK_GUEST_EXTRA/bin" "$l1_extra/usr/local/bin"
cp -a "$here/net_hostile_guest/." "$CHECK_GUEST_EXTRA/"
gcc -static -O2 -Wall -Wextra -Werror -o "$CHECK_GUEST_EXTRA/bin/tern-hostile-net" "$here/hostile_virtio/hostile_net.c"
gcc -static -O2 -Wall -Wextra -Werror -o "$l1_extra/usr/local/bin/tern-net-peer" "$here/hostile_virtio/net_peer.c"
# virtio_net (with its failover modules) gives the guest eth0 once the driver is done.
CHECK_GUEST_MODULES="failover net_failover virtio_net"
CHECK_RUN_ARGS=(--modules "tun tap" --extra "$l1_extra")
if [[ "$name" == net_vhost ]]; then
    CHECK_RUN_ARGS=(--modules "tun tap vhost_iotlb vhost vhost_net" --extra "$l1_extra" --env NET_VHOST=on)
fi
if [[ "${E2E_NET_VMM:-tern}" == qemu ]]; then CHECK_RUN_ARGS+=(--with-qemu --env NET_VMM=qemu); fi
run_check_scenario "$name" NET-HOSTILE-CHECK
