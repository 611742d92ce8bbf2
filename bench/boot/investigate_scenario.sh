#!/bin/sh
# Runs inside the test host (L1), started by bench/boot/investigate.sh: where does a boot's time go?
# For each VMM in $INV_VMMS (tern, qemu-pc, qemu-microvm), boots the stock kernel (256 MiB, 1 vCPU):
#   1. quiet, with the test host's KVM tracepoints on (kvm_exit, kvm_pio, kvm_mmio,
#      kvm_userspace_exit, kvm_msr): exit reasons, PIO ports, MMIO pages, exits to userspace;
#      busybox `time -v` of the VMM (user/sys CPU). (The debugfs kvm/ totals only sum the VMs that
#      still exist, so they cannot be diffed around a VMM's whole life; the tracepoints can.)
#   2. without `quiet` (printk timestamps): the largest gaps of the guest kernel's own clock.
#   3. tern only: --log-level debug (its own messages).
#   4. idle guest: the VMM's /proc/PID/smaps by mapping, status, threads.
# Every section is printed between "INV-BEGIN <vmm> <what>" and "INV-END <vmm> <what>".
: "${INV_VMMS:=tern qemu-pc qemu-microvm}" "${INV_TIMEOUT:=180}"
MEM_MIB=256
T=/sys/kernel/tracing
mount -t tracefs tracefs $T 2>/dev/null

vmm_cmd() {  # as in bench/boot/scenario.sh
    common="-kernel $TH_GUEST_KERNEL -initrd $TH_GUEST_INITRD -display none -nodefaults -serial stdio -no-reboot"
    case "$1" in
        tern) echo "$TH_TERN $2 run --kernel $TH_GUEST_KERNEL --initrd $TH_GUEST_INITRD --memory ${MEM_MIB}M --cpus 1 --cmdline" ;;
        qemu-microvm) echo "$TH_QEMU -enable-kvm -M microvm -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
        qemu-pc) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
    esac
}

for v in $INV_VMMS; do
    echo "INV-BEGIN $v exits"
    echo 0 >$T/tracing_on
    echo 65536 >$T/buffer_size_kb
    echo >$T/trace
    for e in kvm_exit kvm_pio kvm_mmio kvm_userspace_exit kvm_msr; do echo 1 >$T/events/kvm/$e/enable; done
    echo 1 >$T/tracing_on
    # shellcheck disable=SC2046
    time -v timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v") "console=ttyS0 quiet tern.action=poweroff" </dev/null >/tmp/out 2>/tmp/time
    rc=$?
    echo 0 >$T/tracing_on
    for e in kvm_exit kvm_pio kvm_mmio kvm_userspace_exit kvm_msr; do echo 0 >$T/events/kvm/$e/enable; done
    echo "rc=$rc marker=$(grep -c TERN-GUEST-MARKER /tmp/out)"
    grep -E 'Elapsed|User time|System time|context switches' /tmp/time
    echo "-- trace: lost events: $(grep -c 'LOST' $T/trace)"
    cp $T/trace /tmp/trace
    echo "-- kvm_exit reasons (count)"
    awk '/kvm_exit:/ { for (i = 1; i <= NF; i++) if ($i == "reason") { print $(i + 1); break } }' /tmp/trace |
        sort | uniq -c | sort -rn | head -n 15
    echo "-- kvm_userspace_exit reasons (count)"
    awk '/kvm_userspace_exit:/ { sub(/.*reason /, ""); print }' /tmp/trace | sort | uniq -c | sort -rn | head
    echo "-- kvm_pio by port and direction (count): all PIO, whether KVM or userspace handled it"
    awk '/kvm_pio:/ { for (i = 1; i <= NF; i++) if ($i == "at") { print $(i - 1), $(i + 1); break } }' /tmp/trace |
        sort | uniq -c | sort -rn | head -n 20
    echo "-- kvm_mmio by 4 KiB page and kind (count)"
    awk '/kvm_mmio:/ { for (i = 1; i <= NF; i++) if ($i == "gpa") { g = $(i + 1); break }
        print ($0 ~ /write/ ? "write" : "read"), substr(g, 1, length(g) - 3) "000" }' /tmp/trace |
        sort | uniq -c | sort -rn | head -n 10
    echo "-- kvm_msr (count)"
    awk '/kvm_msr:/ { sub(/.*kvm_msr: /, ""); sub(/ = .*/, ""); print }' /tmp/trace | sort | uniq -c | sort -rn | head
    echo "INV-END $v exits"

    echo "INV-BEGIN $v timeline"
    # shellcheck disable=SC2046
    { echo INV-T0; timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v") "console=ttyS0 tern.action=poweroff" </dev/null 2>&1; echo INV-T1; } |
        ts '%.s' >/tmp/timeline
    echo "-- console with L1 time (s since the VMM started) in front; largest gaps of the guest clock after"
    awk '$2 == "INV-T0" { t0 = $1 } { printf "%8.3f %s\n", $1 - t0, substr($0, index($0, " ") + 1) }' /tmp/timeline
    echo "-- the 12 largest steps of the guest kernel clock (guest s, the line after the gap)"
    awk '{ line = substr($0, index($0, " ") + 1) } line ~ /^\[ *[0-9]+\.[0-9]+\]/ {
            t = line; sub(/^\[ */, "", t); sub(/\].*/, "", t); t += 0
            if (seen) printf "%9.3f %s\n", t - prev, line; prev = t; seen = 1 }' /tmp/timeline | sort -rn | head -n 12
    echo "INV-END $v timeline"

    if [ "$v" = tern ]; then
        echo "INV-BEGIN $v debuglog"
        # shellcheck disable=SC2046
        timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd tern "--log-level debug") "console=ttyS0 quiet tern.action=poweroff" </dev/null >/tmp/out 2>/tmp/err
        echo "rc=$? stderr lines=$(wc -l </tmp/err)"
        head -n 60 /tmp/err
        echo "INV-END $v debuglog"
    fi

    echo "INV-BEGIN $v memory"
    fifo=/tmp/console-$v
    mkfifo "$fifo"
    # shellcheck disable=SC2046
    timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v") "console=ttyS0 quiet tern.action=idle" </dev/null >"$fifo" 2>&1 &
    pid=$!
    exec 3<"$fifo"
    while IFS= read -r line <&3; do case "$line" in *TERN-GUEST-MARKER*) break ;; esac; done
    grep -E '^(VmPeak|VmSize|VmRSS|RssAnon|RssFile|RssShmem|VmData|VmStk|VmExe|VmLib|VmPTE|Threads):' /proc/$pid/status
    echo "-- threads (comm)"
    for t in /proc/$pid/task/*; do cat "$t/comm"; done | sort | uniq -c
    echo "-- smaps by mapping name: Rss Pss Private_Dirty Size (kB), largest Rss first"
    awk '/^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "" ? "[anon]" : $6) }
         /^Size:/ { size[name] += $2 } /^Rss:/ { rss[name] += $2 } /^Pss:/ { pss[name] += $2 }
         /^Private_Dirty:/ { pd[name] += $2 }
         END { for (n in rss) printf "%8d %8d %8d %9d %s\n", rss[n], pss[n], pd[n], size[n], n }' /proc/$pid/smaps | sort -rn | head -n 25
    echo "-- anonymous mappings by size class: count, Size, Rss (kB)"
    awk '/^[0-9a-f]+-[0-9a-f]+ / { anon = ($6 == ""); next } anon && /^Size:/ { s = $2 } anon && /^Rss:/ {
            c = (s >= 65536 ? ">=64M" : s >= 8192 ? "8M-64M" : s >= 1024 ? "1M-8M" : "<1M"); n[c]++; sz[c] += s; r[c] += $2 }
         END { for (c in n) printf "%-7s %4d %9d %8d\n", c, n[c], sz[c], r[c] }' /proc/$pid/smaps
    echo "-- the 12 largest anonymous mappings: start Size Rss (kB)"
    awk '/^[0-9a-f]+-[0-9a-f]+ / { anon = ($6 == ""); start = $1; next } anon && /^Size:/ { s = $2 } anon && /^Rss:/ { printf "%s %9d %8d\n", start, s, $2 }' /proc/$pid/smaps |
        sort -k3 -rn | head -n 12
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    cat <&3 >/dev/null
    exec 3<&-
    rm -f "$fifo"
    echo "INV-END $v memory"
done
exit 0
