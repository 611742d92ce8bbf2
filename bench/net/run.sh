#!/usr/bin/env bash
# Network benchmark (not a test): virtio-net over a tap in the test host (L1), for QEMU
# (virtio-net-pci on -netdev tap, vhost=off and vhost=on) and one or more tern binaries (--net
# tap=tap0, vhost=off and vhost=on; a tern whose `tern run --help` lists no --net is skipped), all in
# ONE nested test-host run, the same guest kernel and the same tap setup for each:
#   iperf3 TCP guest→L1 and L1→guest with 1 and 4 streams, UDP with 64-byte payloads as fast as it
#   goes (packets/s) each way, the same paced at a load every configuration reaches (TCP 20 Mbit/s,
#   UDP 1000 packets/s), and ping -i 0.01 round trips (p50/p99), from L1 to the guest;
#   throughput, latency, and the host CPU per GB and per packet: the VMM process's utime+stime (all
#   threads, /proc/PID/stat in L1) plus the vhost-net kernel worker threads (vhost-N) for vhost=on.
# Writes DIR/net.json, DIR/net.md and DIR/net-*.svg (DIR: results/<date> unless --out says).
#
# Usage: bench/net/run.sh [--tern NAME=PATH]... [--rounds N] [--configs "qemu qemu-vhost NAME NAME-vhost"]
#                         [--time SEC] [--pings N] [--out DIR/FILE.json]
#   --tern NAME=PATH  a tern binary to measure, named NAME in the results (repeatable; default one,
#                     tern=$TERN_BIN or build/tern, skipped when missing); it gives two configurations,
#                     NAME (vhost=off) and NAME-vhost (vhost=on)
#   --rounds N        boot every configuration N times, interleaved: qemu, qemu-vhost, tern,
#                     tern-vhost, qemu, ... (default 3); the results are medians with min-max
#   --configs LIST    which configurations and in which order (default: qemu qemu-vhost, then NAME
#                     NAME-vhost for every --tern NAME)
#   --time SEC        seconds per iperf3 test (default 5); --pings N: round trips (default 1000)
# Environment: TERN_BIN (default build/tern), TESTHOST_CACHE (default build/testhost).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

configs="" time_s=5 pings=1000 rounds=3 terns=() out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --tern) terns+=("$2"); shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --configs) configs="$2"; shift 2 ;;
        --time) time_s="$2"; shift 2 ;;
        --pings) pings="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h | --help) sed -n '2,23p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ "$time_s" =~ ^[1-9][0-9]*$ ]] || th_die "--time wants whole seconds, got '$time_s'"
[[ "$pings" =~ ^[1-9][0-9]*$ ]] || th_die "--pings wants a number of round trips, got '$pings'"
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || th_die "--rounds wants a number of rounds, got '$rounds'"
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y-%m-%d)/net.json"
[[ "$out" == *.json ]] || th_die "--out wants a FILE.json, got '$out'"
# The tern binaries: NAME=PATH each; without --tern, "tern" = $TERN_BIN (skipped when not built).
declare -A tern_path=()
tern_names=()
if ((${#terns[@]} == 0)); then
    default="${TERN_BIN:-$repo/build/tern}"
    if [[ -x "$default" ]]; then terns=("tern=$default"); else
        th_log "no tern binary at $default: tern will be skipped"
        tern_names=(tern)
    fi
fi
for t in ${terns[@]+"${terns[@]}"}; do
    name="${t%%=*}" path="${t#*=}"
    [[ "$t" == *=* && "$name" =~ ^[a-z][a-z0-9._-]*$ && "$name" != qemu && "$name" != *-vhost ]] ||
        th_die "--tern wants NAME=PATH with NAME of a-z 0-9 . _ - (not qemu, not ending in -vhost), got '$t'"
    [[ -z "${tern_path[$name]:-}" ]] || th_die "--tern: the name '$name' is given twice"
    [[ -x "$path" && -f "$path" ]] || th_die "--tern $name: not an executable: $path"
    tern_path[$name]="$(cd "$(dirname "$path")" && pwd)/$(basename "$path")"
    tern_names+=("$name")
done
if [[ -z "$configs" ]]; then
    configs="qemu qemu-vhost"
    for n in "${tern_names[@]}"; do configs+=" $n $n-vhost"; done
fi
for c in $configs; do
    v="${c%-vhost}"
    [[ "$v" == qemu || " ${tern_names[*]} " == *" $v "* ]] ||
        th_die "--configs: '$c' is neither qemu[-vhost] nor a --tern NAME[-vhost] (${tern_names[*]})"
done
ncfg="$(wc -w <<<"$configs")"
th_need_cmd iperf3 iperf3
th_need_cmd python3 python3
th_need_cmd mke2fs e2fsprogs
th_need_cmd debugfs e2fsprogs
[[ -x /usr/sbin/ip ]] || th_die "no /usr/sbin/ip; install the Debian package 'iproute2'"

# Guest: virtio-pci and virtio_net (which needs failover, net_failover); L1: its disk (virtio_blk)
# and the tap + vhost-net modules, in dependency order.
guest_mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net"
l1_mods="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk tun tap vhost_iotlb vhost vhost_net"
work="$TH_CACHE/net"
mkdir -p "$work" "$(dirname "$out")"
ver="$(th_kernel_version)"

# 1. Guest initramfs: busybox, the virtio modules, /actions/net-bench and iperf3 with its libraries.
iperf3_bin="$(command -v iperf3)"
key="$(th_hash "$ver" "$guest_mods" "$here/guest-net-bench.sh" "$TH_DIR/lib.sh" \
    "$TH_DIR/build-guest-initramfs.sh" "$TH_DIR/guest-init.sh" "$(command -v busybox)" "$iperf3_bin" \
    "$(ldd "$iperf3_bin" | awk '{ print $1, $3 }')")"
initrd="$work/guest-net-$key.cpio"
if [[ ! -f "$initrd" ]]; then
    th_log "building the guest initramfs with iperf3"
    tmp="$(mktemp -d)"
    mkdir -p "$tmp/actions"
    install -m 0755 "$here/guest-net-bench.sh" "$tmp/actions/net-bench"
    "$TH_DIR/build-guest-initramfs.sh" "$initrd.tmp" --modules "$guest_mods" --extra "$tmp" --bin "$iperf3_bin"
    mv "$initrd.tmp" "$initrd"
    rm -rf "$tmp"
    find "$work" -name 'guest-net-*.cpio' ! -name "$(basename "$initrd")" -delete
fi
th_log "guest initramfs: $(du -m "$initrd" | cut -f1) MiB ($initrd)"

# 2. The test host's disk: ext4 with an empty results/ directory (read back with debugfs).
img="$work/l1-disk.img"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/results"
rm -f "$img"
mke2fs -q -t ext4 -L netbench -d "$tmp" "$img" 64M

# 3. The tern binaries for L1, without their debug sections, at /opt/tern/bin/NAME.
extra="$(mktemp -d)"
trap 'rm -rf "$tmp" "$extra"' EXIT
net_terns="" sum_terns=()
for name in ${tern_names[@]+"${tern_names[@]}"}; do
    [[ -n "${tern_path[$name]:-}" ]] || continue
    mkdir -p "$extra/stripped"
    if ! strip --strip-debug -o "$extra/stripped/$name" "${tern_path[$name]}" 2>/dev/null; then
        cp "${tern_path[$name]}" "$extra/stripped/$name"
    fi
    th_copy_with_libs "$extra/stripped/$name" "$extra/root" "/opt/tern/bin/$name"
    net_terns+="$name=/opt/tern/bin/$name "
    sum_terns+=(--tern "$name=${tern_path[$name]}")  # summarize.py records each binary (path, sha256)
done
rm -rf "$extra/stripped"
mkdir -p "$extra/root"

# 4. One test-host run. Per configuration and round: the guest boots (~10-30 s), then 10 iperf3 tests
#    of $time_s s plus their start (~3 s each under TCG) and $pings pings at 10 ms. Each VMM has
#    NET_TIMEOUT s in L1; the whole test host the sum of those (at least 1800 s) as last resort.
per_boot=$((120 + 10 * (time_s + 20) + pings / 50))
timeout=$((300 + rounds * ncfg * per_boot))
((timeout >= 1800)) || timeout=1800
log="$TH_CACHE/logs/bench-net.log"
args=(--scenario "$here/scenario.sh" --with-qemu --no-tern --extra "$extra/root" --disk "$img" --modules "$l1_mods"
    --guest-initramfs "$initrd" --bin /usr/sbin/ip --bin "$iperf3_bin"
    --memory 2048 --timeout "$timeout" --stall 180 --log "$log"
    --env "NET_CONFIGS=$configs" --env "NET_TERNS=$net_terns" --env "NET_ROUNDS=$rounds" --env "NET_TIME=$time_s"
    --env "NET_PINGS=$pings" --env "NET_TIMEOUT=$((per_boot * 2))")
pidfile="$work/l1.pid" stamps="$work/stamps.txt"
args+=(--pidfile "$pidfile")
# The NET-MARK lines around each test get L1's host CPU time (stamp_cpu.py): the share of a host core
# the test host had during the test, which this shared machine's load moves.
net_host_run() {
    : >"$stamps"
    "$repo/testhost/run.sh" "${args[@]}" |
        python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(NET-(PROGRESS|ERROR|WARN|SKIP|INFO|CMD)|TESTHOST-)' '^NET-MARK' "$stamps"
    return "${PIPESTATUS[0]}"
}
th_log "configurations: $configs; $rounds round(s)$(for n in ${tern_names[@]+"${tern_names[@]}"}; do printf '; %s = %s' "$n" "${tern_path[$n]:-missing}"; done)"
load_before="$(th_loadavg)"
set +e
th_run_retrying "$log" -- net_host_run  # a wedged test host is booted once more, saying so
rc=$?
set -e
load_after="$(th_loadavg)"
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"

# 5. Results out of the image, then JSON, Markdown tables and SVG plots.
rm -rf "$work/results"
debugfs -R "rdump /results $work" "$img" >/dev/null 2>&1 || th_die "cannot read results/ from $img"
rev="$(git -C "$repo" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
git -C "$repo" diff --quiet HEAD 2>/dev/null || rev+="+dirty"
python3 "$here/summarize.py" "$work/results" --log "$log" --kernel "$ver" --time "$time_s" --pings "$pings" \
    --configs "$configs" --rounds "$rounds" --git-rev "$rev" --stamps "$stamps" ${sum_terns[@]+"${sum_terns[@]}"} \
    --test-host "$(th_test_host_desc 2048)" \
    --host-load "$(th_host_load "$load_before" "$load_after")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" "${out%.json}"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
cp "$log" "$(dirname "$out")/console.log"
th_log "wrote $out, ${out%.json}.md and ${out%.json}-*.svg (console log: $log)"
