#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/boot_test.sh through testhost/run.sh.
# For each case in $E2E_CASES ("name:cpus:memory_mib:action:protocol ...") boots the stock kernel
# with the guest initramfs under $E2E_VMM (tern or qemu) and prints, around the guest's console output,
#   E2E-CASE case=<name> ...            before
#   E2E-RESULT case=<name> status=<VMM exit status> l1_seconds=<its duration, test host clock>   after
# protocol: bz = the bzImage, tern --boot-protocol bzimage (the option only when
# $E2E_PROTOCOL_OPTION=1: a tern without it has only that path); pvh = the bzImage, tern
# --boot-protocol pvh; elf = the uncompressed vmlinux at $E2E_VMLINUX, tern --boot-protocol pvh
# (QEMU: -kernel vmlinux, which it enters through PVH). tern logs at info level: its
# "boot protocol: ..." line says which path it took (boot_test.sh checks it).
# Each boot is bounded by $E2E_CASE_TIMEOUT seconds (busybox timeout: a killed VMM shows 137).
: "${E2E_VMM:=tern}" "${E2E_CASE_TIMEOUT:=300}" "${E2E_PROTOCOL_OPTION:=1}"

case "$E2E_VMM" in
    tern) [ -n "$TH_TERN" ] || { echo "E2E-ERROR tern binary not in the test host"; exit 2; } ;;
    qemu) [ -n "$TH_QEMU" ] || { echo "E2E-ERROR qemu not in the test host"; exit 2; } ;;
    *) echo "E2E-ERROR unknown E2E_VMM=$E2E_VMM"; exit 2 ;;
esac

for c in $E2E_CASES; do
    IFS=: read -r name cpus mem action proto <<EOC
$c
EOC
    cmdline="console=ttyS0 quiet tern.action=$action"
    echo "E2E-CASE case=$name vmm=$E2E_VMM cpus=$cpus memory_mib=$mem action=$action protocol=$proto"
    kernel="$TH_GUEST_KERNEL" protocol=""
    case "$proto" in
        bz) [ "$E2E_PROTOCOL_OPTION" != 1 ] || protocol="--boot-protocol bzimage" ;;
        pvh) protocol="--boot-protocol pvh" ;;
        elf) protocol="--boot-protocol pvh" kernel="$E2E_VMLINUX" ;;
        *) kernel="" ;;
    esac
    if [ -z "$kernel" ] || [ ! -f "$kernel" ]; then
        echo "E2E-ERROR case $name: protocol '$proto', no kernel file '$kernel'"
        echo "E2E-RESULT case=$name status=254"
        continue
    fi
    start="$(cut -d' ' -f1 /proc/uptime)"
    if [ "$E2E_VMM" = tern ]; then
        if [ "$action" = shell ]; then
            # Host stdin piped to the guest's console: the guest shell runs the line and exits.
            printf 'echo PIPED-$((6*7))\nexit\n' | timeout -s KILL "$E2E_CASE_TIMEOUT" "$TH_TERN" --log-level info run \
                $protocol --kernel "$kernel" --initrd "$TH_GUEST_INITRD" --cmdline "$cmdline" \
                --memory "${mem}M" --cpus "$cpus"
        else
            timeout -s KILL "$E2E_CASE_TIMEOUT" "$TH_TERN" --log-level info run $protocol --kernel "$kernel" \
                --initrd "$TH_GUEST_INITRD" --cmdline "$cmdline" --memory "${mem}M" --cpus "$cpus" </dev/null
        fi
    else
        timeout -s KILL "$E2E_CASE_TIMEOUT" "$TH_QEMU" -enable-kvm -M pc -L "$TH_QEMU_FW" \
            -m "${mem}M" -smp "$cpus" -kernel "$kernel" -initrd "$TH_GUEST_INITRD" \
            -append "$cmdline" -display none -nodefaults -serial stdio -no-reboot </dev/null
    fi
    rc=$?
    end="$(cut -d' ' -f1 /proc/uptime)"
    echo "E2E-RESULT case=$name status=$rc l1_seconds=$(awk "BEGIN { printf \"%.1f\", $end - $start }")"
done
exit 0
