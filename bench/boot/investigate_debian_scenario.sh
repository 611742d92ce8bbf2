#!/bin/sh
# Runs inside the test host (L1), started by bench/boot/investigate.sh --debian: what does the real
# Debian guest (images/debian: Debian's kernel + initramfs-tools initrd, systemd on ext4 over
# virtio-blk, 2 vCPUs, 512 MiB, quiet) wait for under each VMM? For each boot in $INV_DEB_BOOTS
# (default "tern qemu tern": the first boot of the image is also the first after it was built, so
# a VMM is measured twice), one after the other on the same disk (L1's /dev/vda, cache=none):
#   L1 seconds from the VMM's start to the TERN-DEBIAN-MARKER line (systemd is-system-running),
#   then in the guest's root shell: systemd-analyze (time, critical-chain, blame), the kernel log
#   (phases, largest steps, lines about RTC/entropy/ACPI/PCI/serial/timers), the clocksource,
#   the slowest units' journal lines; then poweroff.
# Every section is printed between "INV-BEGIN debian-<vmm>-<n> <what>" and "INV-END ...".
# shellcheck source=testhost/debian_lib.sh disable=SC1091,SC2034,SC2154  # DEB_* and deb_out belong to debian_lib.sh
. /testhost/debian_lib.sh
: "${INV_DEB_BOOTS:=tern qemu tern}" "${TERN_BOOT_ARGS:=}"
DEB_TERN_ARGS="$TERN_BOOT_ARGS"
DEB_POLL=1
echo "INV-INFO debian boots='$INV_DEB_BOOTS' tern_boot_args='$TERN_BOOT_ARGS' cmdline='$DEB_CMDLINE'"
inv_now() { cut -d' ' -f1 /proc/uptime; }

# run NAME SEC CMD: CMD in the guest's shell, its output (without the echoed command) on stdout.
run() {
    if deb_cmd "$1" "$2" "$3"; then printf '%s\n' "$deb_out" | tail -n +2
    else echo "(no answer within $2 s to: $3)"; fi
}

i=0
for v in $INV_DEB_BOOTS; do
    i=$((i + 1))
    n="debian-$v-$i"
    echo "INV-BEGIN $n boot"
    t0=$(inv_now)
    deb_start "$n" "$v" 2 512 path=/dev/vda,cache=none
    m=$(deb_marker "$n" 400)
    t1=$(inv_now)
    echo "marker: $m"
    echo "l1_s_to_marker=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')"
    if ! deb_prompt "$n" 120; then
        echo "no shell prompt"; deb_show "$n"; deb_stop "$n"; echo "INV-END $n boot"; continue
    fi
    echo "INV-END $n boot"

    echo "INV-BEGIN $n systemd"
    run "$n" 300 "systemd-analyze time --no-pager"
    echo "-- critical-chain (multi-user.target)"
    run "$n" 300 "systemd-analyze critical-chain --no-pager"
    echo "-- blame (top 40)"
    run "$n" 300 "systemd-analyze blame --no-pager | head -n 40"
    echo "-- units that are not active/inactive-dead, and jobs"
    run "$n" 300 "systemctl list-units --all --no-pager --plain --no-legend | awk '\$3 != \"active\" && \$4 != \"dead\"' | head -n 20; systemctl list-jobs --no-pager"
    echo "-- journal: waits, timeouts, failures, entropy (monotonic s)"
    run "$n" 300 "journalctl -b -o short-monotonic --no-pager | grep -iE 'timed? ?out|timeout|wait|fail|crng|random|rtc|hwclock|time (has been )?(set|changed)|clock' | grep -v 'TERN-DEB-RC' | head -n 40"
    echo "INV-END $n systemd"

    echo "INV-BEGIN $n kernel"
    run "$n" 300 "cat /sys/devices/system/clocksource/clocksource0/current_clocksource /sys/devices/system/clocksource/clocksource0/available_clocksource /proc/sys/kernel/random/entropy_avail; ls /dev/rtc* /dev/hwrng 2>&1; cat /sys/class/rtc/rtc0/name 2>&1"
    echo "-- milestones and device lines (guest clock s)"
    run "$n" 300 "dmesg | grep -m1 'Freeing SMP alternatives'; dmesg | grep -m1 'Freeing unused kernel image'; dmesg | grep -m1 'Run /init'; dmesg | grep -m1 -i 'EXT4-fs (vda)'; dmesg | grep -m1 'systemd\\[1\\]'; dmesg | grep -iE 'rtc|crng|random:|clocksource|tsc|hpet|pm timer|acpi pm|apic timer|xsave|8250|ttyS|i8042|serio|pci 0000|PCI:|virtio|vda|error|fail|warn|timed out|timeout' | head -n 90"
    echo "-- the 20 largest steps of the guest kernel clock"
    run "$n" 300 "dmesg | awk '{ t = \$0; sub(/^\\[ */, \"\", t); sub(/\\].*/, \"\", t); t += 0; if (s) printf \"%9.3f %s\\n\", t - p, \$0; p = t; s = 1 }' | sort -rn | head -n 20"
    echo "INV-END $n kernel"

    deb_type "$n" "poweroff"
    deb_wait_exit "$n" 180
    echo "INV-DEB-EXIT $n rc=$?"
done
exit 0
