#!/usr/bin/env bash
# Firmware boot benchmark (not a test; issue 26): ONE nested test-host run booting a bootable Debian
# image (images/debian/build.sh --boot bios|uefi) from virtio-blk through firmware, tern against
# QEMU 7.2 -M pc (i440FX + PIIX, the chipset tern models) with the same firmware file, in
# interleaved rounds (bench/boot/firmware_scenario.sh says how each boot is driven):
#   bios  rows tern-seabios, qemu-seabios: Debian's SeaBIOS (/usr/share/seabios/bios-256k.bin)
#   uefi  rows tern-ovmf, qemu-ovmf: Debian's OVMF_CODE_4M.fd + a fresh copy of OVMF_VARS_4M.fd per
#         boot (opt-in: the test host's TCG aborted under tern + OVMF when this was written)
# Per boot: time to the firmware's banner, to GRUB's menu, to "Linux version", to the image's
# TERN-DEBIAN-MARKER line and to the autologin prompt. After the timed rounds, untimed boots per row
# under the test host's tracefs hist triggers (every VMM alike): exits to userspace by KVM_EXIT
# reason, PIO by port, MMIO by address, in-kernel exits by SVM reason, each read at GRUB's menu and
# at the marker; tern's own --stats-on-exit beside them.
# Medians with min-max; a ratio is claimed only when the ranges do not overlap (bench/lib/compare.py).
# Writes DIR/firmware.json, .md, .svg and DIR/console.log (DIR: results/<UTC date-time>-<rev>-firmware-<family>).
#
#     flock /tmp/testhost-bench.lock th-slot bench/boot/firmware.sh        # SeaBIOS rows, ~25 min
#
# Usage: bench/boot/firmware.sh [--family bios|uefi] [--rounds N] [--exits-rounds N] [--cpus N]
#                               [--memory MIB] [--image IMG] [--tern PATH] [--out DIR/firmware.json]
#                               [--no-warmup]
#   --family F         bios (default: the SeaBIOS rows) or uefi (the OVMF rows)
#   --rounds N         timed rounds (default 3)
#   --exits-rounds N   untimed boots per row under the hist triggers (default 1; 0: none)
#   --cpus N, --memory MIB   the guest's (default 1 vCPU, 512 MiB)
#   --image IMG        the image (default build/images/debian-12-bios.img, or -uefi.img for uefi, of
#                      this checkout, else of the main checkout)
#   --tern PATH        the tern binary (default $TERN_BIN, else build/tern)
#   --no-warmup        no untimed first boot of the image before the rounds
# A test host whose QEMU aborts or wedges is booted once more (testhost/lib.sh th_run_retrying).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"
export TH_TCG_THREAD="${TH_TCG_THREAD:-single}"  # QEMU 7.2's TCG aborted with an L2 in SeaBIOS (issue 26)

family=bios rounds=3 exits_rounds=1 cpus=1 mem=512 image="" out="" warmup=1 tern="${TERN_BIN:-$repo/build/tern}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --family) family="$2"; shift 2 ;;
        --rounds) rounds="$2"; shift 2 ;;
        --exits-rounds) exits_rounds="$2"; shift 2 ;;
        --cpus) cpus="$2"; shift 2 ;;
        --memory) mem="$2"; shift 2 ;;
        --image) image="$2"; shift 2 ;;
        --tern) tern="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --no-warmup) warmup=0; shift ;;
        -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
case "$family" in
    bios) rows="tern-seabios qemu-seabios" ;;
    uefi) rows="tern-ovmf qemu-ovmf" ;;
    *) th_die "--family wants bios or uefi, got '$family'" ;;
esac
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || th_die "--rounds wants a positive whole number, got '$rounds'"
[[ "$exits_rounds" =~ ^[0-9]+$ ]] || th_die "--exits-rounds wants a whole number, got '$exits_rounds'"
[[ "$cpus" =~ ^[1-9][0-9]*$ ]] || th_die "--cpus wants a positive whole number, got '$cpus'"
[[ "$mem" =~ ^[1-9][0-9]*$ ]] || th_die "--memory wants MiB as a positive whole number, got '$mem'"
if [[ -z "$image" ]]; then
    image="$repo/build/images/debian-12-$family.img"
    # A worktree shares the main checkout's image (it is built once: images/debian/build.sh).
    main="$(git -C "$repo" worktree list --porcelain 2>/dev/null | sed -n '1s/^worktree //p')"
    [[ -f "$image" || -z "$main" || ! -f "$main/build/images/debian-12-$family.img" ]] || image="$main/build/images/debian-12-$family.img"
fi
[[ -f "$image" ]] || th_die "--image: no image at $image (images/debian/build.sh --boot $family builds it)"
[[ -x "$tern" ]] || th_die "--tern: no tern binary at $tern (cmake --build build --target tern)"
tern="$(readlink -f "$tern")"
th_need_cmd python3 python3
rev="$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y-%m-%d-%H%M)-$rev-firmware-$family/firmware.json"
[[ "$out" == *.json ]] || th_die "--out wants a FILE.json, got '$out'"
mkdir -p "$(dirname "$out")" "$TH_CACHE/logs"

extra="$TH_CACHE/bench-firmware-extra"
rm -rf "$extra"
mkdir -p "$extra/fw"
if [[ "$family" == uefi ]]; then
    for f in OVMF_CODE_4M.fd OVMF_VARS_4M.fd; do
        [[ -r "/usr/share/OVMF/$f" ]] || th_die "/usr/share/OVMF/$f missing: install Debian package 'ovmf'"
        cp -L "/usr/share/OVMF/$f" "$extra/fw/"
    done
fi
memory=$((mem + 2048))
log="$TH_CACHE/logs/bench-firmware.log"
stamps="$TH_CACHE/logs/bench-firmware.stamps"
pidfile="$TH_CACHE/bench-firmware.pid"
nrows="$(wc -w <<<"$rows")"
args=(--scenario "$here/firmware_scenario.sh" --with-qemu --memory "$memory" --log "$log" --stall 180 --pidfile "$pidfile"
    --timeout $((900 + (rounds + 1 + exits_rounds) * nrows * 900)) --extra "$extra"
    --disk "$image" --disk-snapshot
    --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
    --tern "$tern" --env "BENCH_FW_ROWS=$rows" --env "BENCH_FW_ROUNDS=$rounds" --env "BENCH_FW_EXITS_ROUNDS=$exits_rounds"
    --env "BENCH_FW_CPUS=$cpus" --env "BENCH_FW_MEM=$mem" --env "BENCH_FW_WARMUP=$warmup")
th_log "firmware rows: $rows ($rounds rounds + $exits_rounds traced per row$( ((warmup)) && echo ", 1 warm-up boot")); $cpus vCPU, $mem MiB; image $image; tern $tern ($rev); out $(dirname "$out")"
load_before="$(th_loadavg)"
started=$SECONDS
fw_host_run() {
    : >"$stamps"
    "$repo/testhost/run.sh" "${args[@]}" |
        python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(BENCH-(PROGRESS|FW-SAMPLE|ERROR)|TESTHOST-)' \
            '^BENCH-(PROGRESS fw|FW-MARK)' "$stamps"
    return "${PIPESTATUS[0]}"
}
set +e
th_run_retrying "$log" -- fw_host_run
rc=$?
set -e
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"
load_after="$(th_loadavg)"

python3 "$here/firmware_summarize.py" "$log" --kernel "$(th_kernel_version)" --family "$family" --rows "$rows" \
    --rounds "$rounds" --cpus "$cpus" --memory "$mem" --stamps "$stamps" --git-rev "$rev" --tern "$tern" --image "$image" \
    --duration-s "$((SECONDS - started))" --host-load "$(th_host_load "$load_before" "$load_after")" \
    --test-host "$(th_test_host_desc "$memory")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/firmware_plot.py" "$out" "${out%.json}.svg"
python3 "$here/firmware_table.py" "$out" | tee "${out%.json}.md"
cp "$log" "$(dirname "$out")/console.log"
rm -rf "$extra"
th_log "wrote $out, ${out%.json}.md, ${out%.json}.svg and $(dirname "$out")/console.log in $((SECONDS - started)) s"
