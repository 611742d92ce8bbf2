#!/usr/bin/env bash
# testhost self-test of build-l1.sh's layer cache (no nested guest: only the L1 cpio is built, ~30 s):
# a step failing inside a layer's fill function fails the build and caches no layer (bash runs
# $(...) without errexit unless inherit_errexit: a half-filled layer was published and reused);
# three concurrent builds (two with the same --modules, one with others) all succeed with complete
# archives (cpio -t lists init, the kernel, tern). Usage: tests/testhost/layer_cache_test.sh
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
export TESTHOST_CACHE="$dir/cache"
echo 'exit 0' >"$dir/scenario.sh"
fails=0
expect() {  # expect NAME CONDITION...: one PASS/FAIL line per property
    local name="$1"; shift
    if "$@"; then echo "PASS $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
build() { "$repo/testhost/build-l1.sh" "$dir/$1.cpio" --scenario "$dir/scenario.sh" "${@:2}" >"$dir/$1.log" 2>&1; }

# A "tern" that strip cannot read: fill_tern fails half-way.
printf '#!/bin/sh\n' >"$dir/not-elf"
chmod +x "$dir/not-elf"
rc=0
build bad --tern "$dir/not-elf" || rc=$?
expect "failing fill fails the build (rc=$rc)" test "$rc" -ne 0
expect "failing fill caches no tern layer" test -z "$(find "$dir/cache/layers" -name 'tern-*' 2>/dev/null)"

cp /bin/true "$dir/tern"
pids=()
build a --tern "$dir/tern" & pids+=($!)
build b --tern "$dir/tern" & pids+=($!)
build c --tern "$dir/tern" --modules "tun tap" & pids+=($!)
for i in 0 1 2; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    expect "concurrent build $i exits 0 (rc=$rc)" test "$rc" -eq 0
done
for n in a b c; do
    # The archive is layers concatenated: one cpio -t per layer (each stops at its trailer).
    list="$(for _ in 1 2 3 4 5 6 7 8; do cpio -t --quiet 2>/dev/null || true; done <"$dir/$n.cpio" | sort -u)"
    for f in init guest/vmlinuz usr/local/bin/tern testhost/scenario; do
        expect "archive $n has $f" grep -qx "$f" <<<"$list"
    done
done
expect "no temporary layer left in the cache" test -z "$(find "$dir/cache/layers" -name '*.cpio.*')"
((fails == 0)) || { tail -n 5 "$dir"/*.log; exit 1; }
