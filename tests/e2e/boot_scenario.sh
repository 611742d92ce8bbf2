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
# protocol memtest: memtest86+ ($E2E_MEMTEST, Debian's memtest86+x64.bin: a bzImage, protocol 2.12,
# 64-bit entry) with "console=ttyS0,115200 nopause nobench"; it never exits and draws its screen on
# the serial port with VT100 cursor moves, no newlines. The console is rendered to its 80x25 screen
# every 5 s until row 8 shows a completed pass or an error (or $E2E_MEMTEST_TIMEOUT s pass); then
# the VMM is stopped and the screen printed as "E2E-SCREEN case=<name> NN|<row NN>" lines before
# E2E-RESULT (status=0: the pass or error was seen; 124: not within the time; else the VMM's own
# exit status; vmm_status= what the VMM returned when stopped). tern's log follows as E2E-LOG lines.
: "${E2E_VMM:=tern}" "${E2E_CASE_TIMEOUT:=300}" "${E2E_PROTOCOL_OPTION:=1}"
: "${E2E_MEMTEST_TIMEOUT:=450}"
. /testhost/l1_lib.sh

# The 80x25 screen a VT100 byte stream leaves (ESC[r;cH moves the cursor, ESC[2J clears, other
# sequences are ignored), one "NN|text" line per row, trailing blanks dropped.
vt100_screen() {
    awk 'BEGIN { RS = "\033"; W = 80; H = 25; blank = sprintf("%" W "s", "")
            for (r = 1; r <= H; r++) s[r] = blank; row = 1; col = 1 }
        { t = $0
          if (NR > 1 && match(t, /^\[[0-9;?]*[A-Za-z]/)) {
              seq = substr(t, 2, RLENGTH - 2); cmd = substr(t, RLENGTH, 1); t = substr(t, RLENGTH + 1)
              if (cmd == "H") { n = split(seq, a, ";"); row = a[1] + 0; col = (n < 2 ? 1 : a[2] + 0)
                  if (row < 1) row = 1; if (col < 1) col = 1 }
              else if (cmd == "J" && seq == "2") for (r = 1; r <= H; r++) s[r] = blank }
          gsub(/[\r\n]/, "", t)
          if (t == "" || row > H || col > W) next
          t = substr(t, 1, W - col + 1)
          s[row] = substr(s[row], 1, col - 1) t substr(s[row], col + length(t)); col += length(t) }
        END { for (r = 1; r <= H; r++) { x = s[r]; sub(/ +$/, "", x); printf "%02d|%s\n", r - 1, x } }' "$1"
}
# Row 8 of memtest86+'s screen: "Using: ... | Pass: N   Errors: M".
memtest_pass_or_error() { vt100_screen "$1" | grep -Eq '^08\|.*(Pass: *[1-9]|Errors: *[1-9])'; }

# Runs memtest86+ for case $1 ($2 vCPUs, $3 MiB); see the header.
run_memtest() {
    local name="$1" cpus="$2" mem="$3" out="/tmp/$1.console" log="/tmp/$1.log" pid rc st
    local cmdline="console=ttyS0,115200 nopause nobench"
    if [ "$E2E_VMM" = tern ]; then
        "$TH_TERN" --log-level info run --kernel "$E2E_MEMTEST" --cmdline "$cmdline" \
            --memory "${mem}M" --cpus "$cpus" --stats-on-exit </dev/null >"$out" 2>"$log" &
    else
        "$TH_QEMU" -enable-kvm -M pc -L "$TH_QEMU_FW" -m "${mem}M" -smp "$cpus" \
            -kernel "$E2E_MEMTEST" -append "$cmdline" -display none -nodefaults -serial stdio \
            -no-reboot </dev/null >"$out" 2>"$log" &
    fi
    pid=$!
    if l1_wait_pid_every 5 "$pid" "$E2E_MEMTEST_TIMEOUT" memtest_pass_or_error "$out"; then
        st=0
    else
        st=124
    fi
    # Ended on its own before the time was up: its exit status is the result.
    if [ "$st" = 124 ] && ! kill -0 "$pid" 2>/dev/null; then st=""; fi
    kill "$pid" 2>/dev/null
    l1_wait_exit "$pid" 30
    rc=$?
    [ -n "$st" ] || st=$rc
    vt100_screen "$out" | sed "s/^/E2E-SCREEN case=$name /"
    sed "s/^/E2E-LOG case=$name /" "$log" | tail -n 60
    echo "E2E-MEMTEST case=$name console_bytes=$(wc -c <"$out") vmm_status=$rc"
    return "$st"
}

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
    start="$(cut -d' ' -f1 /proc/uptime)"
    if [ "$proto" = memtest ]; then
        if [ ! -f "$E2E_MEMTEST" ]; then
            echo "E2E-ERROR case $name: no memtest86+ at '$E2E_MEMTEST'"
            echo "E2E-RESULT case=$name status=254"
            continue
        fi
        run_memtest "$name" "$cpus" "$mem"
        rc=$?
        end="$(cut -d' ' -f1 /proc/uptime)"
        echo "E2E-RESULT case=$name status=$rc l1_seconds=$(awk "BEGIN { printf \"%.1f\", $end - $start }")"
        continue
    fi
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
