#!/bin/sh
# The build-server benchmark's workload (bench/build), run inside the Debian 12 system of the image
# (images/debian): by the test host chrooted into the disk ("host"), and in the guest booted from the
# same disk under tern or QEMU. One script for both, so every configuration does the same work with
# the same compiler on the same files. Copied into the image at /root/tern-bench/ with slice.txt.
#
# The slice: `make -j2 <the first N object files of slice.txt>` in Debian's linux-source-6.1 tree
# (/root/linux-6.1, `make defconfig` done by the image). Before each run the slice's objects are
# removed (nothing else: the rest of the tree, `make prepare` included, stays as built by
# `slice.sh prepare`), then the page cache is dropped, so every run compiles the same N files from
# the same cold cache. Usage:
#   slice.sh prepare            make -j$(nproc) prepare, then build and remove the slice once (run
#                               once per derived image, natively: bench/build/prepare-image.sh)
#   slice.sh run N [JOBS]       the timed run: clean, drop caches, make -jJOBS (default 2) the first
#                               N objects; prints on stdout (the console):
#     BUILD-BEGIN objects=N jobs=J
#     BUILD-END rc=R objects=N built=M make_s=S sync_s=S   (M: objects present afterwards; times
#                               by this system's clock; sync_s: a sync right after make)
#   slice.sh count              the number of object files in slice.txt
set -u
here=$(cd "$(dirname "$0")" && pwd)
SRC=${BUILD_SRC:-/root/linux-6.1}
LOG=$here/last-build.log

objects() {  # objects N: the first N entries of slice.txt
    grep -v '^#' "$here/slice.txt" | grep -v '^ *$' | head -n "$1"
}
now() { cut -d' ' -f1 /proc/uptime; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

case "${1:-}" in
    count) objects 100000 | wc -l ;;
    prepare)
        cd "$SRC" || exit 1
        make -s -j"$(nproc)" prepare || exit 1
        # shellcheck disable=SC2046
        make -s -j"$(nproc)" $(objects 100000) || exit 1
        # shellcheck disable=SC2046
        rm -f $(objects 100000)
        sync ;;
    run)
        n=${2:?slice.sh run N [JOBS]} jobs=${3:-2}
        cd "$SRC" || exit 1
        list=$(objects "$n")
        # shellcheck disable=SC2086
        rm -f $list
        sync
        echo 3 >/proc/sys/vm/drop_caches
        echo "BUILD-BEGIN objects=$(echo "$list" | wc -l) jobs=$jobs"
        t0=$(now)
        # shellcheck disable=SC2086
        make -j"$jobs" $list >"$LOG" 2>&1
        rc=$?
        t1=$(now)
        sync
        t2=$(now)
        built=0
        for o in $list; do [ -f "$o" ] && built=$((built + 1)); done
        [ "$rc" = 0 ] || tail -n 5 "$LOG" | sed 's/^/BUILD-LOG /'
        echo "BUILD-END rc=$rc objects=$(echo "$list" | wc -l) built=$built make_s=$(elapsed "$t0" "$t1") sync_s=$(elapsed "$t1" "$t2")" ;;
    *) echo "usage: slice.sh prepare | run N [JOBS] | count" >&2; exit 2 ;;
esac
