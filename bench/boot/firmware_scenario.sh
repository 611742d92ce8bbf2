#!/bin/sh
# shellcheck disable=SC2154  # deb_* results are set by testhost/debian_lib.sh
# Runs inside the test host (L1), started by bench/boot/firmware.sh. Firmware boots of one bootable
# Debian image (L1's /dev/vda: the BIOS/MBR or the UEFI/GPT image of images/debian/build.sh) from
# virtio-blk, under each row of $BENCH_FW_ROWS, in interleaved rounds (round r boots every row once):
#   tern-seabios  tern run --firmware $TH_QEMU_FW/bios-256k.bin (Debian's SeaBIOS, the file QEMU uses)
#   qemu-seabios  QEMU -M pc (i440FX, what tern models) -bios the same file, -nographic (so SeaBIOS
#                 gets NOGRAPHIC and its serial console as under tern, which serves etc/sercon-port)
#   tern-ovmf     tern run --firmware /fw/OVMF_CODE_4M.fd --firmware-vars (a fresh copy per boot)
#   qemu-ovmf     QEMU -M pc with the same OVMF code and a fresh vars copy as its two pflash drives
# Both VMMs: $BENCH_FW_CPUS vCPUs, $BENCH_FW_MEM MiB, the disk as virtio-blk with cache=writeback.
# First one untimed warm-up boot (the image's first boot commits its machine id; L1's page cache).
# Each timed boot runs to the image's TERN-DEBIAN-MARKER line, then to the autologin prompt, where
# `systemctl poweroff` ends it (the next boot finds a clean filesystem).
# Then $BENCH_FW_EXITS_ROUNDS untimed boots per row under the test host's own readers (tracefs hist
# triggers, the same for every VMM): kvm_userspace_exit by reason (KVM_RUN returns to the VMM),
# kvm_pio by port and direction, kvm_mmio by type and address, kvm_exit by SVM exit reason; the
# histograms are read when GRUB's menu appears and at the marker, then the VMM gets SIGTERM (tern
# with --stats-on-exit: its own exit accounting up to the marker).
# Lines for the host (times in ms since just before the VMM's exec; busybox `ts` stamps each console
# line as it reads it; the console goes through `tr '\033' '\n'` first, so GRUB's cursor-addressed
# menu is stamped when it is drawn, not at its next newline):
#   BENCH-FW-CMD vmm=V cmd=...
#   BENCH-FW-MARK vmm=V run=N                 (right after the marker was seen: the CPU stamp's end)
#   BENCH-FW-SAMPLE vmm=V run=N rc=R fw_ms=F grub_ms=G kernel_ms=K marker_ms=M login_ms=L exit_ms=E
#       guest_uptime_s=U state=S failed=X
#       fw: the firmware's first line (SeaBIOS's banner; null for OVMF), grub: GRUB's menu ("GNU GRUB
#       version"), kernel: "Linux version", marker: TERN-DEBIAN-MARKER, login: the autologin line,
#       exit: the VMM's exit after `systemctl poweroff`
#   BENCH-FW-HIST vmm=V run=N phase=grub|marker event=E count=C KEY=VALUE...   (one histogram row)
#   BENCH-FW-HIST-AT vmm=V run=N phase=grub|marker ms=T   (when the histograms were read)
#   BENCH-FW-VMMSTATS vmm=V run=N line=...    (tern's --stats-on-exit, its stderr; timed boots: after
#       the poweroff; traced boots: run=tN, SIGTERM at the marker)
#   BENCH-ERROR vmm=V what=...                (a row that failed is not booted again)
#   BENCH-PROGRESS fw|warmup|exits ...
: "${BENCH_FW_ROUNDS:=3}" "${BENCH_FW_ROWS:=tern-seabios qemu-seabios}" "${BENCH_FW_CPUS:=1}" "${BENCH_FW_MEM:=512}"
: "${BENCH_FW_TIMEOUT:=900}" "${BENCH_FW_WARMUP:=1}" "${BENCH_FW_EXITS_ROUNDS:=1}"
# shellcheck source=testhost/debian_lib.sh
. /testhost/debian_lib.sh
# shellcheck disable=SC2034  # read by debian_lib.sh
DEB_POLL=1  # the times come from ts's stamps, not from the polls: each poll forks (L1 is TCG)
DISK="path=/dev/vda,cache=writeback"
SEABIOS="$TH_QEMU_FW/bios-256k.bin"
OVMF_CODE=/fw/OVMF_CODE_4M.fd OVMF_VARS=/fw/OVMF_VARS_4M.fd
ESC=$(printf '\033')
up() { cut -d' ' -f1 /proc/uptime; }

# fw_cmd VMM: the command line that boots the image under VMM (no spaces inside a word).
fw_cmd() {
    case "$1" in
    tern-seabios) echo "$TH_TERN run --firmware $SEABIOS --cpus $BENCH_FW_CPUS --memory $BENCH_FW_MEM --disk $DISK --api-sock /tmp/fw.sock" ;;
    tern-ovmf) echo "$TH_TERN run --firmware $OVMF_CODE --firmware-vars /tmp/fw-vars.fd --cpus $BENCH_FW_CPUS --memory $BENCH_FW_MEM --disk $DISK --api-sock /tmp/fw.sock" ;;
    qemu-*)
        q="$TH_QEMU -L $TH_QEMU_FW -M pc -enable-kvm -cpu host -smp $BENCH_FW_CPUS -m $BENCH_FW_MEM"
        case "$1" in
        qemu-seabios) q="$q -bios $SEABIOS" ;;
        qemu-ovmf) q="$q -drive if=pflash,format=raw,readonly=on,file=$OVMF_CODE -drive if=pflash,format=raw,file=/tmp/fw-vars.fd" ;;
        esac
        echo "$q $(l1_qemu_disk "$DISK") -serial stdio -nographic -nodefaults -no-reboot" ;;
    esac
}
available() {
    case "$1" in
    tern-seabios) [ -n "$TH_TERN" ] && [ -r "$SEABIOS" ] ;; qemu-seabios) [ -n "$TH_QEMU" ] && [ -r "$SEABIOS" ] ;;
    tern-ovmf) [ -n "$TH_TERN" ] && [ -r "$OVMF_CODE" ] ;; qemu-ovmf) [ -n "$TH_QEMU" ] && [ -r "$OVMF_CODE" ] ;;
    *) false ;;
    esac
}

# fw_launch NAME VMM [EXTRA...]: starts VMM in the background (pid in $deb_pid) with debian_lib.sh's
# files for NAME (NAME.out raw console, NAME.in input FIFO, NAME.pid) plus NAME.ts: the console with
# every ESC turned into a newline, each line stamped by ts as it arrives; NAME.t0 stamped just before
# the exec by the same clock.
fw_launch() {
    n="$1" v="$2"
    shift 2
    rm -f "/tmp/$n.out" "/tmp/$n.err" "/tmp/$n.in" "/tmp/$n.ts" "/tmp/$n.pipe" /tmp/fw.sock
    case "$v" in *-ovmf) cp "$OVMF_VARS" /tmp/fw-vars.fd ;; esac
    mkfifo "/tmp/$n.in" "/tmp/$n.pipe"
    echo 0 >"/tmp/$n.mark"
    : >"/tmp/$n.out"
    tee "/tmp/$n.out" <"/tmp/$n.pipe" | tr "$ESC" '\n' | ts '%.s' >"/tmp/$n.ts" &
    fw_reader=$!
    echo BENCH-T0 | ts '%.s' >"/tmp/$n.t0"
    # shellcheck disable=SC2046  # fw_cmd's words are split on purpose
    case "$v" in
    tern-*) set -- $(fw_cmd "$v") "$@" ;;
    *) set -- $(fw_cmd "$v") ;;
    esac
    "$@" >"/tmp/$n.pipe" 2>"/tmp/$n.err" <>"/tmp/$n.in" &
    deb_pid=$!
    echo "$deb_pid" >"/tmp/$n.pid"
}

stamp_of() { grep -aE "$2" "$1" | head -n 1 | cut -d' ' -f1; }
ms_between() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "") print "null"; else printf "%.1f", (b - a) * 1000 }'; }
MARKER='TERN-DEBIAN-MARKER .*uptime='
GRUB_MENU='GNU GRUB +version'

# fw_boot VMM RUN (RUN 0: the warm-up, nothing reported but errors): one timed boot to poweroff.
fw_boot() {
    v="$1" r="$2" n=fw
    case "$v" in tern-*) fw_launch "$n" "$v" --stats-on-exit ;; *) fw_launch "$n" "$v" ;; esac
    ok=0
    if l1_wait_pid_every 1 "$deb_pid" "$BENCH_FW_TIMEOUT" l1_has "/tmp/$n.out" "$MARKER"; then
        ok=1
        [ "$r" = 0 ] || echo "BENCH-FW-MARK vmm=$v run=$r"
        if deb_prompt "$n" 180; then
            deb_type "$n" "systemctl poweroff"
        else
            echo "BENCH-ERROR vmm=$v what=run $r: no shell prompt within 180 s of the marker"
            deb_stop "$n" >/dev/null
        fi
    else
        echo "BENCH-ERROR vmm=$v what=run $r: no TERN-DEBIAN-MARKER within ${BENCH_FW_TIMEOUT}s: $(deb_show "$n" | tail -n 5 | tr '\n' ' ')"
        kill "$deb_pid" 2>/dev/null
    fi
    deb_wait_exit "$n" 180
    rc=$?
    echo BENCH-T1 | ts '%.s' >"/tmp/$n.t1"
    wait "$fw_reader" 2>/dev/null
    [ "$r" != 0 ] || { [ "$ok" = 1 ] && return 0; return 1; }
    tr -d '\r' <"/tmp/$n.ts" | grep -aE "SeaBIOS \(version|$GRUB_MENU|Booting .Debian|Linux version|$MARKER|login:" |
        cut -c1-160 | sed "s/^/  fw-$v-$r: /"
    t0=$(cut -d' ' -f1 "/tmp/$n.t0") t1=$(cut -d' ' -f1 "/tmp/$n.t1")
    tf=$(stamp_of "/tmp/$n.ts" 'SeaBIOS \(version') tg=$(stamp_of "/tmp/$n.ts" "$GRUB_MENU")
    tk=$(stamp_of "/tmp/$n.ts" 'Linux version') tm=$(stamp_of "/tmp/$n.ts" "$MARKER")
    tl=$(stamp_of "/tmp/$n.ts" 'login: root \(automatic login\)|login: *$')
    mline=$(tr -d '\r' <"/tmp/$n.ts" | grep -a "$MARKER" | head -n 1 | sed 's/.*TERN-DEBIAN-MARKER /TERN-DEBIAN-MARKER /')
    echo "BENCH-FW-SAMPLE vmm=$v run=$r rc=$rc fw_ms=$(ms_between "$t0" "$tf") grub_ms=$(ms_between "$t0" "$tg") kernel_ms=$(ms_between "$t0" "$tk") marker_ms=$(ms_between "$t0" "$tm") login_ms=$(ms_between "$t0" "$tl") exit_ms=$(ms_between "$t0" "$t1") guest_uptime_s=$(l1_field "$mline" uptime) state=$(l1_field "$mline" state) failed=$(l1_field "$mline" failed)"
    case "$v" in tern-*) grep -v '^ *$' "/tmp/$n.err" | sed "s/^/BENCH-FW-VMMSTATS vmm=$v run=$r line=/" ;; esac
    [ "$ok" = 1 ] && [ "$rc" = 0 ]
}

failed=""
for v in $BENCH_FW_ROWS; do
    if ! available "$v"; then
        echo "BENCH-ERROR vmm=$v what=not a firmware row this scenario knows, or its VMM/firmware is not in the test host"
        failed="$failed $v"
        continue
    fi
    echo "BENCH-FW-CMD vmm=$v cmd=$(fw_cmd "$v")"
done
if ! l1_wait_for 20 test -b /dev/vda; then
    echo "BENCH-ERROR vmm=all what=no /dev/vda in the test host (firmware.sh passes the image as --disk)"
    exit 1
fi

if [ "$BENCH_FW_WARMUP" = 1 ]; then
    # QEMU boots the warm-up when it is a row (the reference VMM), else the first row.
    warm=""
    for v in $BENCH_FW_ROWS; do case " $failed " in *" $v "*) ;; *) [ -n "$warm" ] || warm=$v ;; esac; done
    for v in $BENCH_FW_ROWS; do case "$v" in qemu-*) case " $failed " in *" $v "*) ;; *) warm=$v ;; esac ;; esac; done
    if [ -n "$warm" ]; then
        echo "BENCH-PROGRESS warmup vmm=$warm (untimed first boot of the image) uptime=$(up)"
        fw_boot "$warm" 0 || echo "BENCH-ERROR vmm=all what=the warm-up boot ($warm) failed"
    fi
fi

run=1
while [ "$run" -le "$BENCH_FW_ROUNDS" ]; do
    for v in $BENCH_FW_ROWS; do
        case " $failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS fw vmm=$v run=$run/$BENCH_FW_ROUNDS uptime=$(up)"
        fw_boot "$v" "$run" || { echo "BENCH-ERROR vmm=$v what=run $run failed"; failed="$failed $v"; }
    done
    run=$((run + 1))
done

# ---- exits by reason: untimed boots under the test host's hist triggers (after the timed rounds:
# each ends with SIGTERM at the marker, no clean shutdown).
tfs=/sys/kernel/tracing
[ -d "$tfs/events" ] || mount -t tracefs nodev "$tfs" 2>/dev/null
HISTS="kvm_userspace_exit:reason kvm_pio:port,rw kvm_mmio:type,gpa kvm_exit:exit_reason"
hist_on() { for h in $HISTS; do echo "hist:keys=${h#*:}:size=4096" >"$tfs/events/kvm/${h%%:*}/trigger"; done; }
hist_off() { for h in $HISTS; do echo "!hist:keys=${h#*:}:size=4096" >"$tfs/events/kvm/${h%%:*}/trigger"; done; }
# hist_dump VMM RUN PHASE: every row of the histograms, as BENCH-FW-HIST lines.
hist_dump() {
    t=$(echo BENCH | ts '%.s' | cut -d' ' -f1)
    echo "BENCH-FW-HIST-AT vmm=$1 run=$2 phase=$3 ms=$(ms_between "$(cut -d' ' -f1 /tmp/fwx.t0)" "$t")"
    for h in $HISTS; do
        e=${h%%:*}
        # "{ port:       1016, rw:          1 } hitcount:       4729" -> "port=1016 rw=1 count=4729"
        grep -a '^{' "$tfs/events/kvm/$e/hist" | tr -d '{},' | sed 's/hitcount:/count:/; s/: */=/g' |
            sed "s/^ */BENCH-FW-HIST vmm=$1 run=$2 phase=$3 event=$e /"
    done
}
if [ "$BENCH_FW_EXITS_ROUNDS" -gt 0 ] && ! [ -w "$tfs/events/kvm/kvm_exit/trigger" ]; then
    echo "BENCH-ERROR vmm=all what=no kvm trace events in the test host (tracefs): no exits by reason"
    BENCH_FW_EXITS_ROUNDS=0
fi
run=1
while [ "$run" -le "$BENCH_FW_EXITS_ROUNDS" ]; do
    for v in $BENCH_FW_ROWS; do
        case " $failed " in *" $v "*) continue ;; esac
        echo "BENCH-PROGRESS exits vmm=$v run=$run/$BENCH_FW_EXITS_ROUNDS uptime=$(up)"
        hist_on
        case "$v" in tern-*) fw_launch fwx "$v" --stats-on-exit ;; *) fw_launch fwx "$v" ;; esac
        if l1_wait_pid_every 0.2 "$deb_pid" "$BENCH_FW_TIMEOUT" l1_has /tmp/fwx.out "$GRUB_MENU"; then
            hist_dump "$v" "$run" grub
        else
            echo "BENCH-ERROR vmm=$v what=exits run $run: no GRUB menu"
        fi
        if l1_wait_pid_every 0.5 "$deb_pid" "$BENCH_FW_TIMEOUT" l1_has /tmp/fwx.out "$MARKER"; then
            hist_dump "$v" "$run" marker
        else
            echo "BENCH-ERROR vmm=$v what=exits run $run: no marker"
        fi
        hist_off
        deb_stop fwx >/dev/null
        wait "$fw_reader" 2>/dev/null
        case "$v" in tern-*) grep -v '^ *$' /tmp/fwx.err | sed "s/^/BENCH-FW-VMMSTATS vmm=$v run=t$run line=/" ;; esac
    done
    run=$((run + 1))
done
exit 0
