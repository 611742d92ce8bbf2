#!/bin/sh
# Runs inside the test host (L1), started by bench/boot/investigate.sh: where does a boot's time go?
# For each VMM in $INV_VMMS, boots the stock kernel (256 MiB, 1 vCPU). VMMs: tern, tern-P (tern with
# --boot-protocol P: pvh, bzimage, auto), qemu-pc, qemu-microvm; $TERN_BOOT_ARGS (words) is appended to every tern's
# `run` options; qemu-pc-host is QEMU -M pc -cpu host (the CPU tern shows); $INV_CMDLINE (words) is
# added to the guest's command line in the exits and dmesg parts. Parts ($INV_PARTS, default "exits dmesg debuglog"; add "timeline", "memory"):
#   exits     quiet, with the test host's KVM tracepoints on (kvm_exit, kvm_pio, kvm_mmio,
#             kvm_userspace_exit, kvm_msr, kvm_page_fault, kvm_inj_virq) from the VMM's start UP TO
#             THE GUEST'S MARKER (tracing stops when the marker line reaches L1): exit reasons, PIO
#             by port and MMIO by page split into in-kernel and userspace, MSRs by number, nested
#             page faults by guest-physical region, injected vectors; busybox `time -v` of the VMM;
#             tern's --stats-on-exit table.
#   timeline  without `quiet`: the console with L1 time in front (printk timestamps: the guest clock)
#             and the largest steps of the guest clock. Console output costs exits of its own.
#   dmesg     quiet + initcall_debug, then the guest prints its uptime and its kernel log (an
#             /actions/dmesg script appended to the guest initramfs as one more cpio): phases of
#             the guest clock without the console's cost, the time before the guest clock started
#             (L1 time of the marker - guest uptime), and every initcall that took >= 1 ms.
#   debuglog  tern only: --log-level debug (its own messages: unclaimed ports, ...).
#   memory    idle guest: the VMM's /proc/PID/smaps by mapping, status, threads.
# Every section is printed between "INV-BEGIN <vmm> <what>" and "INV-END <vmm> <what>".
: "${INV_VMMS:=tern qemu-pc}" "${INV_TIMEOUT:=400}" "${INV_PARTS:=exits dmesg debuglog}"
: "${TERN_BOOT_ARGS:=}" "${INV_RUN_ARGS:=}" "${INV_CMDLINE:=}"
MEM_MIB=256
T=/sys/kernel/tracing
EVENTS="kvm_exit kvm_pio kvm_mmio kvm_userspace_exit kvm_msr kvm_page_fault kvm_inj_virq"
mount -t tracefs tracefs $T 2>/dev/null
echo "INV-INFO tern_boot_args='$TERN_BOOT_ARGS' cmdline_extra='$INV_CMDLINE' vmms='$INV_VMMS' parts='$INV_PARTS' host_kernel=$(uname -r)" \
    "thp=$(tr </sys/kernel/mm/transparent_hugepage/enabled ' ' ,)"

# The guest initramfs plus /actions/dmesg (gzip'ed cpio; the kernel unpacks concatenated archives).
act=/tmp/inv-actions
mkdir -p $act/actions
cat >$act/actions/dmesg <<'EOF'
#!/bin/sh
echo "INV-UPTIME $(cat /proc/uptime)"
echo "INV-CRYPTO drivers=$(grep -c '^driver' /proc/crypto) selftest_passed=$(grep -c 'selftest.*passed' /proc/crypto)"
echo "INV-DMESG-BEGIN"
# Printed through the serial port (an exit per byte): only initcalls of >= 1 ms, lines after a step
# of the guest clock of >= 5 ms, and the milestones of investigate_scenario.sh.
dmesg | awk '{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t); t += 0; step = t - prev; prev = t }
    /\] calling  / { next }
    /initcall .* returned .* after [0-9]+ usecs/ { n++; us += $(NF - 1); if ($(NF - 1) >= 1000) print; next }
    step >= 0.005 || /Linux version|Kernel command line|Memory: |APIC timer|TSC deadline|clocksource|printk: console|smpboot|SMP alternatives|PCI: |pci 0000|unpack|initrd memory|rtc|i8042|serio|Serial|ttyS|Freeing unused|Run \/init|XSAVE|xsave|crng|random:|WARNING|error|fail/ { print }
    END { printf "INV-INITCALLS count=%d total_us=%d\n", n, us }'
echo "INV-DMESG-END"
echo "INV-STEPS-BEGIN"
dmesg | awk '{ t = $0; sub(/^\[ */, "", t); sub(/\].*/, "", t); t += 0; if (NR > 1) printf "%9.3f %s\n", t - prev, $0; prev = t }' |
    sort -rn | head -n 15
echo "INV-STEPS-END"
EOF
chmod +x $act/actions/dmesg
(cd $act && find . | cpio -o -H newc 2>/dev/null | gzip -c) >/tmp/inv-actions.cpio.gz
cat "$TH_GUEST_INITRD" /tmp/inv-actions.cpio.gz >/tmp/inv-initrd.img

vmm_cmd() {  # vmm_cmd VMM [tern global args] [initrd]: as in bench/boot/scenario.sh, up to -append/--cmdline
    initrd="${3:-$TH_GUEST_INITRD}"
    common="-kernel $TH_GUEST_KERNEL -initrd $initrd -display none -nodefaults -serial stdio -no-reboot"
    case "$1" in
        tern) echo "$TH_TERN $2 run --kernel $TH_GUEST_KERNEL --initrd $initrd --memory ${MEM_MIB}M --cpus 1 $TERN_BOOT_ARGS $INV_RUN_ARGS --cmdline" ;;
        tern-*) echo "$TH_TERN $2 run --kernel $TH_GUEST_KERNEL --initrd $initrd --memory ${MEM_MIB}M --cpus 1 --boot-protocol ${1#tern-} $TERN_BOOT_ARGS $INV_RUN_ARGS --cmdline" ;;
        qemu-microvm) echo "$TH_QEMU -enable-kvm -M microvm -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
        qemu-pc) echo "$TH_QEMU -enable-kvm -M pc -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
        qemu-pc-host) echo "$TH_QEMU -enable-kvm -M pc -cpu host -L $TH_QEMU_FW -m ${MEM_MIB}M -smp 1 $common -append" ;;
    esac
}
has_part() { case " $INV_PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

# The largest steps of the guest clock in FILE (lines "[   t] ..." anywhere in the line).
clock_steps() {
    awk '{ i = index($0, "[") } i && substr($0, i) ~ /^\[ *[0-9]+\.[0-9]+\]/ { line = substr($0, i)
            t = line; sub(/^\[ */, "", t); sub(/\].*/, "", t); t += 0
            if (seen) printf "%9.3f %s\n", t - prev, line; prev = t; seen = 1 }' "$1" | sort -rn | head -n "${2:-15}"
}

for v in $INV_VMMS; do
  case "$v" in tern*) is_tern=1 ;; *) is_tern=0 ;; esac
  if has_part exits; then
    echo "INV-BEGIN $v exits"
    echo 0 >$T/tracing_on
    echo 65536 >$T/buffer_size_kb
    echo >$T/trace
    for e in $EVENTS; do echo 1 >"$T/events/kvm/$e/enable"; done
    INV_RUN_ARGS=""
    [ "$is_tern" = 1 ] && INV_RUN_ARGS="--stats-on-exit"
    cmd=$(vmm_cmd "$v")
    INV_RUN_ARGS=""
    echo 1 >$T/tracing_on
    # Tracing stops when the marker line arrives: what follows (poweroff) is not counted.
    # shellcheck disable=SC2046
    # shellcheck disable=SC2086,SC2023  # $cmd: words; busybox time -v
    { time -v timeout -s KILL "$INV_TIMEOUT" $cmd \
        "console=ttyS0 quiet $INV_CMDLINE tern.action=poweroff" </dev/null 2>/tmp/time; echo $? >/tmp/rc; } |
        while IFS= read -r line; do
            case "$line" in *TERN-GUEST-MARKER*) echo 0 >$T/tracing_on ;; esac
            printf '%s\n' "$line"
        done >/tmp/out
    echo 0 >$T/tracing_on
    for e in $EVENTS; do echo 0 >"$T/events/kvm/$e/enable"; done
    echo "rc=$(cat /tmp/rc) marker=$(grep -c TERN-GUEST-MARKER /tmp/out)"
    grep -E 'Elapsed|User time|System time|context switches' /tmp/time
    echo "-- VMM stderr (tern: --stats-on-exit)"
    grep -vE 'Elapsed|User time|System time|context switches|Command being|Percent of|Average|Maximum resident|Major|Minor|Swaps|File system|Socket|Signals|Page size|Exit status|Command terminated' /tmp/time | head -n 80
    echo "-- trace: lost events: $(grep -c 'LOST' $T/trace)"
    cp $T/trace /tmp/trace
    echo "-- kvm_exit total up to the marker: $(grep -c 'kvm_exit:' /tmp/trace)"
    echo "-- kvm_exit reasons (count)"
    awk '/kvm_exit:/ { for (i = 1; i <= NF; i++) if ($i == "reason") { print $(i + 1); break } }' /tmp/trace |
        sort | uniq -c | sort -rn
    echo "-- kvm_userspace_exit reasons (count)"
    awk '/kvm_userspace_exit:/ { sub(/.*reason /, ""); print }' /tmp/trace | sort | uniq -c | sort -rn | head
    # A PIO went to the VMM: an OUT is traced before the exit (the vCPU thread's next event is
    # kvm_userspace_exit), an IN only when the VMM's answer is completed (its kvm_pio follows an
    # io exit and a kvm_userspace_exit).
    echo "-- PIO by port and direction: total, in KVM, in the VMM (userspace)"
    awk '/kvm_pio:|kvm_mmio:|kvm_exit:|kvm_userspace_exit:|kvm_msr:|kvm_page_fault:|kvm_inj_virq:/ {
            tid = $1
            if ($0 ~ /kvm_exit:/) { last[tid] = ""; pend[tid] = 0; le[tid] = ""
                for (i = 1; i <= NF; i++) if ($i == "reason") { le[tid] = $(i + 1); break } ; next }
            if ($0 ~ /kvm_userspace_exit:/) { if (last[tid] != "") u[last[tid]]++; else if (le[tid] == "io") pend[tid] = 1
                last[tid] = ""; next }
            if ($0 ~ /kvm_pio:/) { for (i = 1; i <= NF; i++) if ($i == "at") { k = $(i - 1) " " $(i + 1); break }
                n[k]++; if (pend[tid]) { u[k]++; pend[tid] = 0; last[tid] = "" } else last[tid] = k; next }
            last[tid] = "" }
         END { for (k in n) printf "%7d %7d %7d %s\n", n[k], n[k] - u[k], u[k], k }' /tmp/trace | sort -rn
    echo "-- MMIO by 4 KiB page and kind: total, in KVM, in the VMM (uread: a read sent to the VMM; its completion is counted again as a read)"
    awk '/kvm_pio:|kvm_mmio:|kvm_exit:|kvm_userspace_exit:|kvm_msr:|kvm_page_fault:|kvm_inj_virq:/ {
            tid = $1
            if ($0 ~ /kvm_userspace_exit:/) { if (last[tid] != "") u[last[tid]]++ }
            if ($0 ~ /kvm_mmio:/) { for (i = 1; i <= NF; i++) if ($i == "gpa") { g = $(i + 1); break }
                kind = ($0 ~ /unsatisfied-read/ ? "uread" : $0 ~ /write/ ? "write" : "read")
                k = kind " " substr(g, 1, length(g) - 3) "000"; n[k]++; last[tid] = k } else last[tid] = "" }
         END { for (k in n) printf "%7d %7d %7d %s\n", n[k], n[k] - u[k], u[k], k }' /tmp/trace | sort -rn | head -n 20
    echo "-- MSR by number and direction (count)"
    awk '/kvm_msr:/ { sub(/.*kvm_msr: /, ""); sub(/ = .*/, ""); print }' /tmp/trace | sort | uniq -c | sort -rn | head -n 30
    echo "-- nested page faults by guest-physical region (count)"
    awk '/kvm_page_fault:/ { for (i = 1; i <= NF; i++) if ($i == "address") { a = $(i + 1); break }
            sub(/^0x/, "", a); a = sprintf("%016s", a); gsub(/ /, "0", a)
            print substr(a, 1, 10) "000000" }' /tmp/trace | sort | uniq -c | sort -k2 | head -n 40  # 16 MiB buckets
    echo "-- injected interrupt vectors (count)"
    awk '/kvm_inj_virq:/ { sub(/.*kvm_inj_virq: /, ""); print }' /tmp/trace |
        sort | uniq -c | sort -rn | head
    echo "INV-END $v exits"
  fi

  if has_part timeline; then
    echo "INV-BEGIN $v timeline"
    # shellcheck disable=SC2046
    { echo INV-T0; timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v") "console=ttyS0 tern.action=poweroff" </dev/null 2>&1; echo INV-T1; } |
        ts '%.s' >/tmp/timeline
    echo "-- console with L1 time (s since the VMM started) in front"
    awk '$2 == "INV-T0" { t0 = $1 } { printf "%8.3f %s\n", $1 - t0, substr($0, index($0, " ") + 1) }' /tmp/timeline
    echo "-- the 15 largest steps of the guest kernel clock (guest s, the line after the gap)"
    clock_steps /tmp/timeline 15
    echo "INV-END $v timeline"
  fi

  if has_part dmesg; then
    echo "INV-BEGIN $v dmesg"
    # shellcheck disable=SC2046
    { echo INV-T0; timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v" "" /tmp/inv-initrd.img) \
        "console=ttyS0 quiet initcall_debug log_buf_len=1M $INV_CMDLINE tern.action=dmesg" </dev/null 2>&1; echo INV-T1; } |
        ts '%.s' >/tmp/dm
    awk '$2 == "INV-T0" { t0 = $1 } /TERN-GUEST-MARKER/ && m == "" { m = $1 - t0 } $2 == "INV-UPTIME" { up = $3 }
         $2 == "INV-T1" { t1 = $1 - t0 }
         END { printf "l1_marker_s=%.3f guest_uptime_at_marker_s=%s before_guest_clock_s=%.3f l1_exit_s=%.3f\n", m, up, m - up, t1 }' /tmp/dm
    sed -n '/INV-DMESG-BEGIN/,/INV-DMESG-END/p' /tmp/dm | cut -d' ' -f2- | grep -v '^INV-DMESG' >/tmp/dmesg
    grep INV-INITCALLS /tmp/dmesg
    grep -a INV-CRYPTO /tmp/dm | cut -d' ' -f2-
    echo "-- milestones (guest clock s): first line matching"
    for p in 'Linux version' 'Kernel command line' 'Memory: ' 'APIC timer\|TSC deadline\|clocksource: tsc' \
        'printk: console' 'smpboot: CPU0' 'Freeing SMP alternatives' 'PCI: \|pci 0000' 'Trying to unpack\|Unpacking initramfs' \
        'Freeing initrd memory' 'rtc_cmos\|rtc0' 'i8042\|serio' 'Serial: 8250' 'ttyS1\|ttyS2\|ttyS3' \
        'clocksource: Switched to' 'Freeing unused kernel image' 'Run /init'; do
        l=$(grep -m1 -- "$p" /tmp/dmesg)
        [ -n "$l" ] && printf '%s  <- %s\n' "$l" "$p"
    done
    echo "-- initcalls that took >= 1 ms (usecs, largest first)"
    awk '/initcall .* returned .* after/ { print $(NF - 1), $0 }' /tmp/dmesg | sort -rn | head -n 40 | cut -d' ' -f2-
    echo "-- the 15 largest steps of the guest kernel clock (quiet boot; guest s, the line after the step)"
    sed -n '/INV-STEPS-BEGIN/,/INV-STEPS-END/p' /tmp/dm | cut -d' ' -f2- | grep -v '^INV-STEPS' 
    echo "-- kernel log (as printed: steps >= 5 ms, milestones, initcalls >= 1 ms)"
    grep -v 'initcall .* returned' /tmp/dmesg
    echo "INV-END $v dmesg"
  fi

  if [ "$is_tern" = 1 ] && has_part debuglog; then
    echo "INV-BEGIN $v debuglog"
    # shellcheck disable=SC2046
    timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v" "--log-level debug") "console=ttyS0 quiet tern.action=poweroff" </dev/null >/tmp/out 2>/tmp/err
    echo "rc=$? stderr lines=$(wc -l </tmp/err)"
    head -n 60 /tmp/err
    echo "INV-END $v debuglog"
  fi

  if has_part memory; then
    echo "INV-BEGIN $v memory"
    fifo=/tmp/console-$v
    mkfifo "$fifo"
    # shellcheck disable=SC2046
    timeout -s KILL "$INV_TIMEOUT" $(vmm_cmd "$v") "console=ttyS0 quiet tern.action=idle" </dev/null >"$fifo" 2>&1 &
    pid=$!
    exec 3<"$fifo"
    while IFS= read -r line <&3; do case "$line" in *TERN-GUEST-MARKER*) break ;; esac; done
    grep -E '^(VmPeak|VmSize|VmRSS|RssAnon|RssFile|RssShmem|VmData|VmStk|VmExe|VmLib|VmPTE|Threads):' /proc/$pid/status
    echo "-- smaps by mapping name: Rss Pss Private_Dirty Size (kB), largest Rss first"
    awk '/^[0-9a-f]+-[0-9a-f]+ / { name = ($6 == "" ? "[anon]" : $6) }
         /^Size:/ { size[name] += $2 } /^Rss:/ { rss[name] += $2 } /^Pss:/ { pss[name] += $2 }
         /^Private_Dirty:/ { pd[name] += $2 }
         END { for (n in rss) printf "%8d %8d %8d %9d %s\n", rss[n], pss[n], pd[n], size[n], n }' /proc/$pid/smaps | sort -rn | head -n 25
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    cat <&3 >/dev/null
    exec 3<&-
    rm -f "$fifo"
    echo "INV-END $v memory"
  fi
done
exit 0
