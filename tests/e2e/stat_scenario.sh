#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/stat_test.sh through testhost/run.sh.
# Boots the stock kernel under tern with --api-sock and --stats-on-exit, waits for the guest's
# marker, runs `tern stat --once --json`, then stops tern with SIGTERM. Prints:
#   E2E-STAT-JSON <one line of JSON>        the `tern stat --once --json` output
#   E2E-STAT-RC rc=<tern stat status>
#   E2E-STAT-EXIT status=<tern run status>  (the --stats-on-exit summary precedes it on stderr)
: "${E2E_STAT_TIMEOUT:=120}"
[ -n "$TH_TERN" ] || { echo "E2E-ERROR tern binary not in the test host"; exit 2; }
sock=/tmp/tern-stat.sock
console=/tmp/guest-console.log
rm -f "$sock" "$console"
"$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" \
    --cmdline "console=ttyS0 quiet tern.action=idle" --memory 256M --cpus 2 \
    --console "file:$console" --api-sock "$sock" --stats-on-exit </dev/null &
pid=$!
# Wait (bounded) for the guest to reach its marker: then it has done real work (PIO, MMIO, HLT).
i=0
while ! grep -q TERN-GUEST-MARKER "$console" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt $((E2E_STAT_TIMEOUT * 10)) ] || ! kill -0 "$pid" 2>/dev/null; then
        echo "E2E-ERROR guest marker not seen"; cat "$console" 2>/dev/null; kill -KILL "$pid"; exit 1
    fi
    sleep 0.1
done
grep -a TERN-GUEST-MARKER "$console"
out="$("$TH_TERN" stat --api-sock "$sock" --once --json --interval 1)"
rc=$?
echo "E2E-STAT-JSON $out"
echo "E2E-STAT-RC rc=$rc"
# The live table, once, for the log (and the README).
"$TH_TERN" stat --api-sock "$sock" --once --interval 1 --rows 8
kill -TERM "$pid"
wait "$pid"
echo "E2E-STAT-EXIT status=$?"
exit 0
