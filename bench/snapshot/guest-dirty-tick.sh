#!/bin/sh
# /actions/dirty-tick in the guest (L2) of bench/snapshot: runs /bin/dirty-tick (bench/snapshot/
# dirty_tick.c) with snap.dirty_mib= of the kernel command line: it fills that many MiB of its own
# memory with pseudo-random bytes, prints SNAP-DIRTY-DONE, then "TICK n" every 10 ms, forever.
mib=0
for arg in $(cat /proc/cmdline); do
    case "$arg" in snap.dirty_mib=*) mib="${arg#*=}" ;; esac
done
exec /bin/dirty-tick "$mib"
