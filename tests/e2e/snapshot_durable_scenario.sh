#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/snapshot_durable_test.sh. L1's /dev/vda (a
# raw image on the machine outside) is the guest's disk, cache=writeback, so what the guest writes
# sits in L1's page cache until someone flushes it; L1's periodic writeback is switched off so
# nothing else does. The guest writes its pattern (actions/snap-durable), tern snapshot saves the
# VM, and "DURABLE-SNAPSHOT-RETURNED rc=N" is printed; then L1 waits to be SIGKILLed from outside.
[ -n "$TH_TERN" ] || { echo "DURABLE-ERROR tern binary not in the test host"; exit 2; }
echo 0 >/proc/sys/vm/dirty_writeback_centisecs
echo 360000 >/proc/sys/vm/dirty_expire_centisecs
n=300
while [ ! -b /dev/vda ] && [ "$n" -gt 0 ]; do sleep 0.1; n=$((n - 1)); done
[ -b /dev/vda ] || { echo "DURABLE-ERROR no /dev/vda in the test host"; exit 2; }
"$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --memory 256M \
    --cmdline "console=ttyS0 quiet tern.action=snap-durable" --disk path=/dev/vda,cache=writeback \
    --api-sock /tmp/d.sock >/tmp/d.out 2>/tmp/d.err </dev/null &
n=1800
while ! grep -q '^TERN-DURABLE-WRITTEN\|TERN-SNAP-ERROR' /tmp/d.out && [ "$n" -gt 0 ]; do
    sleep 0.1
    n=$((n - 1))
done
grep '^TERN-DURABLE-WRITTEN\|TERN-SNAP-ERROR' /tmp/d.out | sed 's/^/DURABLE-GUEST /'
grep -q '^TERN-DURABLE-WRITTEN' /tmp/d.out || { echo "DURABLE-ERROR guest: $(tail -n 5 /tmp/d.out /tmp/d.err)"; exit 2; }
echo "DURABLE-DIRTY $(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
"$TH_TERN" snapshot --api-sock /tmp/d.sock --state /tmp/d.state --mem /tmp/d.mem --keep-paused >/tmp/s.out 2>&1
rc=$?
echo "DURABLE-SNAPSHOT-OUT $(tail -n 1 /tmp/s.out)"
echo "DURABLE-DIRTY $(grep -E '^(Dirty|Writeback):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
echo "DURABLE-SNAPSHOT-RETURNED rc=$rc"
while :; do sleep 3600; done
