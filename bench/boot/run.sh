#!/usr/bin/env bash
# Boot benchmark (not a test): ONE nested test-host run, two rows of boots, each in interleaved
# rounds (all busybox rounds first: a Debian boot just before slowed the next busybox boot by seconds):
#   busybox  Debian's stock cloud kernel + the busybox guest initramfs (256 MiB, 1 vCPU, direct
#            kernel boot) under each tern row (tern, or tern-pvh + tern-bzimage once tern has
#            --boot-protocol), QEMU -M pc and QEMU -M microvm: time to the guest's marker line and
#            to VMM exit, and each VMM's resident memory outside guest RAM for an idle guest
#   debian   the Debian image (images/debian) with Debian's own kernel and initrd, root on
#            virtio-blk (L1's /dev/vda, QEMU snapshot=on: the image never changes), 2 vCPUs,
#            512 MiB, under tern and QEMU -M pc: time to systemd's multi-user target (the image's
#            TERN-DEBIAN-MARKER line: `systemctl is-system-running --wait` returned) and to the
#            autologin prompt; once per VMM systemd-analyze / critical-chain / blame; tern's
#            --stats-on-exit per boot
#   exits    after the busybox rounds, as many untimed busybox boots per VMM, each under the test
#            host's kvm_exit hist trigger (tern rows also with --kernel-exits --stats-on-exit): the
#            in-kernel exits per boot by exit reason, so the table says where each VMM's exits go
# Medians with min-max; a ratio is claimed only when the ranges do not overlap (bench/lib/compare.py).
# Writes DIR/boot.json, DIR/boot.md, DIR/boot.svg and DIR/console.log (DIR: results/<UTC date-time>-<rev>).
#
# The final run (one command; ~30 min with the defaults at host load ~10, 2 tern rows; the
# validation with --runs 3 --debian-rounds 1 took 14 min):
#     flock /tmp/testhost-bench.lock bench/boot/run.sh
#
# Usage: bench/boot/run.sh [--runs N] [--debian-rounds N] [--tern-rows LIST] [--qemu-rows LIST]
#                          [--debian-rows LIST] [--image IMG] [--tern PATH] [--out DIR/boot.json]
#   --runs N            busybox rounds (default 5)
#   --debian-rounds N   Debian rounds (default 3; 0 leaves the Debian row out)
#   --tern-rows LIST    busybox tern rows, of: tern (its default boot path), tern-pvh, tern-bzimage
#                       (default $BENCH_TERN_ROWS, else "tern-pvh tern-bzimage" when
#                       `tern run --help` mentions --boot-protocol, else "tern")
#   --qemu-rows LIST    of qemu-pc, qemu-microvm (default "qemu-pc qemu-microvm")
#   --debian-rows LIST  of tern, tern-pvh, tern-bzimage, qemu (default $BENCH_DEBIAN_ROWS, else "tern qemu")
#   --image IMG         the Debian image (default $TERN_DEBIAN_IMAGE, else build/images/debian-12.img;
#                       images/debian/build.sh builds it)
#   --tern PATH         the tern binary (default $TERN_BIN, else build/tern)
#   --no-warmup         no untimed first boot of the Debian image before the rounds
# Hold /tmp/testhost-bench.lock around it (flock, as above): one benchmark test host at a time.
# A test host that wedges is booted once more (testhost/lib.sh th_run_retrying).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

runs=5 deb_rounds=3 out="" tern_rows="${BENCH_TERN_ROWS:-}" qemu_rows="qemu-pc qemu-microvm"
deb_rows="${BENCH_DEBIAN_ROWS:-tern qemu}" image="${TERN_DEBIAN_IMAGE:-$repo/build/images/debian-12.img}"
tern="${TERN_BIN:-$repo/build/tern}" warmup=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --debian-rounds) deb_rounds="$2"; shift 2 ;;
        --tern-rows) tern_rows="$2"; shift 2 ;;
        --qemu-rows) qemu_rows="$2"; shift 2 ;;
        --debian-rows) deb_rows="$2"; shift 2 ;;
        --image) image="$2"; shift 2 ;;
        --tern) tern="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --no-warmup) warmup=0; shift ;;
        -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || th_die "--runs wants a positive whole number, got '$runs'"
[[ "$deb_rounds" =~ ^[0-9]+$ ]] || th_die "--debian-rounds wants a whole number (0: no Debian row), got '$deb_rounds'"
th_need_cmd python3 python3
have_tern=0
if [[ -x "$tern" ]]; then have_tern=1; tern="$(readlink -f "$tern")"; else
    th_log "no tern binary at $tern: tern's rows will be null (cmake --build build --target tern)"
fi
if [[ -z "$tern_rows" ]]; then
    tern_rows=tern
    if ((have_tern)) && "$tern" run --help 2>&1 | grep -q -- '--boot-protocol'; then tern_rows="tern-pvh tern-bzimage"; fi
fi
for r in $tern_rows; do [[ "$r" =~ ^tern(-pvh|-bzimage)?$ ]] || th_die "--tern-rows: '$r' is none of tern, tern-pvh, tern-bzimage"; done
for r in $qemu_rows; do [[ "$r" =~ ^qemu-(pc|microvm)$ ]] || th_die "--qemu-rows: '$r' is none of qemu-pc, qemu-microvm"; done
for r in $deb_rows; do [[ "$r" =~ ^(tern(-pvh|-bzimage)?|qemu)$ ]] || th_die "--debian-rows: '$r' is none of tern, tern-pvh, tern-bzimage, qemu"; done
if ((have_tern)) && [[ " $tern_rows $deb_rows " == *" tern-"* ]] && ! "$tern" run --help 2>&1 | grep -q -- '--boot-protocol'; then
    th_die "--tern-rows/--debian-rows: tern-pvh/tern-bzimage need a tern with --boot-protocol ($tern has none)"
fi
rows="$tern_rows $qemu_rows"
((deb_rounds == 0)) || [[ -f "$image" ]] || th_die "--image: no Debian image at $image (images/debian/build.sh builds it; --debian-rounds 0 leaves the row out)"
rev="$(git -C "$repo" describe --always --dirty 2>/dev/null || echo unknown)"
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y-%m-%d-%H%M)-$rev/boot.json"
[[ "$out" == *.json ]] || th_die "--out wants a FILE.json, got '$out'"
mkdir -p "$(dirname "$out")" "$TH_CACHE/logs"

memory=2560
log="$TH_CACHE/logs/bench-boot.log"
stamps="$TH_CACHE/logs/bench-boot.stamps"
pidfile="$TH_CACHE/bench-boot.pid"
nrows="$(wc -w <<<"$rows")" ndeb="$(wc -w <<<"$deb_rows")"
args=(--scenario "$here/scenario.sh" --with-qemu --memory "$memory" --log "$log" --stall 120 --pidfile "$pidfile"
    --timeout $((600 + runs * nrows * 300 + (deb_rounds * ndeb + 1) * 900))
    --env "BENCH_RUNS=$runs" --env "BENCH_VMMS=$rows" --env "BENCH_DEBIAN_ROUNDS=$deb_rounds" --env "BENCH_DEBIAN_VMMS=$deb_rows"
    --env "BENCH_DEBIAN_WARMUP=$warmup")
if ((have_tern)); then args+=(--tern "$tern"); else args+=(--no-tern); fi
if ((deb_rounds > 0)); then
    args+=(--with-debian-initrd --disk "$image" --disk-snapshot
        --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk")
fi
th_log "busybox rows: $rows ($runs rounds); Debian rows: $deb_rows ($deb_rounds rounds$( ((warmup)) && echo " + 1 warm-up boot")); tern $tern ($rev); out $(dirname "$out")"
load_before="$(th_loadavg)"
started=$SECONDS
# boot_host_run: one test-host run; only the benchmark's own lines reach the terminal (the full
# console goes to $log), the boots' host-CPU stamps to $stamps.
boot_host_run() {
    : >"$stamps"
    "$repo/testhost/run.sh" "${args[@]}" |
        python3 "$repo/bench/lib/stamp_cpu.py" "$pidfile" '^(BENCH-(PROGRESS|SAMPLE|DEBIAN-SAMPLE|ERROR|MEM)|TESTHOST-)' \
            '^BENCH-(PROGRESS (boot|debian)|SAMPLE|DEBIAN-MARK)' "$stamps"
    return "${PIPESTATUS[0]}"
}
set +e
th_run_retrying "$log" -- boot_host_run
rc=$?
set -e
[[ "$rc" == 0 ]] || th_die "test host run failed (rc=$rc); console log: $log"
load_after="$(th_loadavg)"

tern_args=()
((have_tern)) && tern_args=(--tern "$tern")
python3 "$here/summarize.py" "$log" --kernel "$(th_kernel_version)" --runs "$runs" --debian-rounds "$deb_rounds" \
    --stamps "$stamps" --git-rev "$rev" "${tern_args[@]}" --image "$image" --rows "$rows" --debian-rows "$deb_rows" \
    --duration-s "$((SECONDS - started))" --host-load "$(th_host_load "$load_before" "$load_after")" \
    --test-host "$(th_test_host_desc "$memory")" >"$out.tmp"
mv "$out.tmp" "$out"
python3 "$here/plot.py" "$out" "${out%.json}.svg"
python3 "$here/table.py" "$out" | tee "${out%.json}.md"
cp "$log" "$(dirname "$out")/console.log"
th_log "wrote $out, ${out%.json}.md, ${out%.json}.svg and $(dirname "$out")/console.log in $((SECONDS - started)) s"
