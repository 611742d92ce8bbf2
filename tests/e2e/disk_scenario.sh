#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/disk_test.sh. L1's /dev/vda is an ext4
# "carrier" holding the test images; each case boots the stock kernel under tern with one image as
# --disk and the guest initramfs's /actions/<action>, and prints
#   E2E-CASE case=<name> ...   before,   E2E-RESULT case=<name> status=<tern exit status>   after.
# Flush cases ("disk-flush") SIGKILL tern as soon as the guest prints TERN-DISK-FLUSHED.
: "${E2E_CASE_TIMEOUT:=180}"
[ -n "$TH_TERN" ] || { echo "E2E-ERROR tern binary not in the test host"; exit 2; }
mkdir -p /carrier
mount -t ext4 /dev/vda /carrier || { echo "E2E-ERROR cannot mount the carrier disk"; exit 2; }

# name:action:image:extra --disk options (after path=)
cases="wb:disk-rw:wb.img:cache=writeback,serial=tern-wb
none:disk-rw:none.img:cache=none,serial=tern-none
unsafe:disk-rw:unsafe.img:cache=unsafe,serial=tern-unsafe
directsync:disk-rw:directsync.img:cache=directsync,serial=tern-directsync
threads:disk-rw:threads.img:cache=writeback,io=threads,serial=tern-threads
ro:disk-ro:ro.img:readonly=on,serial=tern-ro
flushwb:disk-flush:flushwb.img:cache=writeback
flushnone:disk-flush:flushnone.img:cache=none"

# cache=none on a filesystem without O_DIRECT (L1's tmpfs, Linux 6.1): refused before boot, field named.
truncate -s 1M /tmp/nodirect.img
if dd if=/dev/zero of=/tmp/nodirect.img bs=4096 count=1 conv=notrunc oflag=direct 2>/dev/null; then
    echo "E2E-NODIRECT skipped: this tmpfs supports O_DIRECT"
else
    msg=$("$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --disk "path=/tmp/nodirect.img,cache=none" 2>&1 </dev/null)
    echo "E2E-NODIRECT status=$? $msg"
fi

for c in $cases; do
    IFS=: read -r name action image opts <<EOC
$c
EOC
    cmdline="console=ttyS0 quiet tern.action=$action tern.marker=durable-$name"
    echo "E2E-CASE case=$name action=$action disk=path=$image,$opts"
    if [ "$action" = disk-flush ]; then
        out=/tmp/$name.out
        "$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$cmdline" \
            --memory 256M --disk "path=/carrier/$image,$opts" </dev/null >"$out" 2>&1 &
        pid=$!
        waited=0
        # Poll tern's console output for the guest's whole line (bounded), then SIGKILL at once.
        # The 8250 writes byte by byte: wait for the full marker, not just its prefix.
        while ! grep -q "TERN-DISK-FLUSHED marker=durable-$name" "$out" 2>/dev/null; do
            kill -0 "$pid" 2>/dev/null || break
            waited=$((waited + 1))
            [ "$waited" -lt $((E2E_CASE_TIMEOUT * 20)) ] || break
            sleep 0.05
        done
        kill -9 "$pid" 2>/dev/null
        wait "$pid"
        status=$?
        cat "$out"
        echo  # a killed tern may leave the console mid-line
    else
        timeout -s KILL "$E2E_CASE_TIMEOUT" "$TH_TERN" run --kernel "$TH_GUEST_KERNEL" \
            --initrd "$TH_GUEST_INITRD" --cmdline "$cmdline" --memory 256M \
            --disk "path=/carrier/$image,$opts" </dev/null
        status=$?
    fi
    echo "E2E-RESULT case=$name status=$status"
done
# Hostile guest driver (tern-hostile-blk, tests/e2e/hostile_virtio/) on a cache=none disk, with a
# normal ext4 disk beside it: tern's memory is read from /proc/<pid>/status when the driver is set
# up (it waits for a line on the console) and when it is done, and printed as
#   E2E-HOSTILE-MEM rss_before_kb=.. hwm_before_kb=.. hwm_after_kb=.. rss_after_kb=..
# disk_test.sh checks the growth against the documented bound (docs/limits.md).
wait_line() {  # pattern file pid: poll tern's console output for a whole line (bounded)
    n=0
    while ! grep -q "$1" "$2" 2>/dev/null; do
        kill -0 "$3" 2>/dev/null || return 1
        n=$((n + 1))
        [ "$n" -lt $((E2E_CASE_TIMEOUT * 20)) ] || return 1
        sleep 0.05
    done
}
mem_kb() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$2/status"; }
echo "E2E-CASE case=hostile action=disk-hostile disk=hostile-fs.img,hostile.img cache=none"
out=/tmp/hostile.out
rm -f /tmp/hostile.in
mkfifo /tmp/hostile.in
"$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --memory 256M \
    --cmdline "console=ttyS0 quiet tern.action=disk-hostile" \
    --disk "path=/carrier/hostile-fs.img,cache=none,serial=hostile-fs" \
    --disk "path=/carrier/hostile.img,cache=none,serial=hostile" </tmp/hostile.in >"$out" 2>&1 &
pid=$!
exec 3>/tmp/hostile.in  # tern's console input: the "go" line
if wait_line "TERN-HOSTILE-READY" "$out" "$pid"; then
    rss0=$(mem_kb VmRSS "$pid") hwm0=$(mem_kb VmHWM "$pid")
    echo go >&3
    wait_line "TERN-HOSTILE-DONE" "$out" "$pid"
    hwm1=$(mem_kb VmHWM "$pid") rss1=$(mem_kb VmRSS "$pid")
    echo "E2E-HOSTILE-MEM rss_before_kb=$rss0 hwm_before_kb=$hwm0 hwm_after_kb=$hwm1 rss_after_kb=$rss1"
fi
n=0
while kill -0 "$pid" 2>/dev/null && [ "$n" -lt $((E2E_CASE_TIMEOUT * 20)) ]; do
    n=$((n + 1))
    sleep 0.05
done
kill -9 "$pid" 2>/dev/null
wait "$pid"
status=$?
exec 3>&-
cat "$out"
echo
echo "E2E-RESULT case=hostile status=$status"

sync
umount /carrier || echo "E2E-ERROR cannot unmount the carrier disk"
exit 0
