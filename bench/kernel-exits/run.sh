#!/usr/bin/env bash
# In-kernel exit accounting cost benchmark (not a test; issue 15, docs/stats.md "Cost"): ONE nested
# test-host run. A tiny PVH guest (guest.S: LOOPS exits of one in-kernel kind, then a serial marker
# and ACPI poweroff) runs under tern with the accounting off (nothing attached: tern without
# --kernel-exits) and on (--kernel-exits: the eBPF programs on kvm_exit/kvm_entry/...), for two
# kinds: cpuid (SVM "cpuid", KVM emulates it) and pio (out to the PIT's 0x43, KVM's in-kernel PIT),
# with LOOPS = 0 and LOOPS = N, in R interleaved rounds (mode order alternating per round).
# ns per exit = (wall(N) - wall(0)) / N per round, mode and kind (the 0-loop run of the same round
# and mode takes out tern's start, the programs' load and attach, the summary); overhead =
# on - off. Medians with min-max over the rounds.
# Writes DIR/kernel-exits.json, DIR/kernel-exits.md, DIR/console.log
# (DIR: bench/kernel-exits/results/<UTC date-time>-<rev>).
#
# Usage: bench/kernel-exits/run.sh [--rounds R] [--loops N] [--tern PATH] [--out DIR]
#   --rounds R   interleaved rounds (default 3)
#   --loops N    exits per timed run (default 100000; ~25 us each off in the nested test host)
#   --tern PATH  the tern binary (default $TERN_BIN, else build/tern)
# Hold /tmp/testhost.lock around it (flock): one test host at a time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

rounds=3 loops=100000 tern="${TERN_BIN:-$repo/build/tern}" out=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --loops) loops="$2"; shift 2 ;;
        --tern) tern="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h | --help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || th_die "--rounds wants a positive whole number, got '$rounds'"
[[ "$loops" =~ ^[1-9][0-9]*$ ]] || th_die "--loops wants a positive whole number, got '$loops'"
[[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN / --tern)"
th_need_cmd as binutils
th_need_cmd ld binutils
[[ -n "$out" ]] || out="$here/results/$(date -u +%Y%m%d-%H%M%S)-$(git -C "$repo" rev-parse --short HEAD)"
mkdir -p "$out"
mkdir -p "$TH_CACHE"
work="$(mktemp -d "$TH_CACHE/kernel-exits-XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/extra/kex"
for kind in cpuid pio; do
    k=0
    [[ "$kind" == pio ]] && k=1
    for n in 0 "$loops"; do
        as --64 --defsym LOOPS="$n" --defsym KIND="$k" "$here/guest.S" -o "$work/g.o"
        ld -m elf_x86_64 -T "$here/guest.ld" -nostdlib -z noexecstack "$work/g.o" -o "$work/extra/kex/$kind-$n.elf"
    done
done
log="$out/console.log"
set +e
th_run_retrying "$log" -- "$repo/testhost/run.sh" --scenario "$here/scenario.sh" --tern "$tern" \
    --extra "$work/extra" --bin /usr/bin/date --env "KEX_ROUNDS=$rounds" --env "KEX_LOOPS=$loops" \
    --timeout 1800 --stall 120 --log "$log"
rc=$?
set -e
[[ "$rc" == 0 ]] || th_die "test host run failed (rc $rc); log: $log"
python3 "$here/summarize.py" "$log" "$out" "$(git -C "$repo" rev-parse --short HEAD)"
