#!/bin/sh
# Runs inside the test host (L1), started by tests/e2e/firmware_test.sh through testhost/run.sh,
# with Debian's firmware files in /fw. Prints one line per check:  FW-CHECK name=<check> PASS|FAIL
# <detail>; each VM's console tail as FW-CONSOLE lines and tern's stderr as FW-ERR lines.
: "${FW_WAIT:=240}" "${FW_CASES:=seabios grub ovmf}"
T="$TH_TERN"
[ -n "$T" ] || { echo "FW-CHECK name=setup FAIL tern binary not in the test host"; exit 2; }
fails=0
check() {  # check NAME RESULT DETAIL
    if [ "$2" = 0 ]; then echo "FW-CHECK name=$1 PASS $3"; else echo "FW-CHECK name=$1 FAIL $3"; fails=$((fails + 1)); fi
}
has() { tr -d '\r' <"$1" 2>/dev/null | grep -aq "$2"; }
# wait_vm SECONDS FILE PATTERN: polls every 0.2 s until FILE has PATTERN; gives up early once the
# VM ($vm_pid) is gone.
wait_vm() {
    n=$(($1 * 5))
    while [ "$n" -gt 0 ]; do
        has "$2" "$3" && return 0
        kill -0 "$vm_pid" 2>/dev/null || { has "$2" "$3"; return; }
        sleep 0.2
        n=$((n - 1))
    done
    return 1
}
# finish NAME SECONDS: tern's exit status once it ended by itself within SECONDS, else it is sent
# SIGTERM and the status is what that gives (143 expected).
finish() {
    n=$(($2 * 5))
    while [ "$n" -gt 0 ] && kill -0 "$vm_pid" 2>/dev/null; do sleep 0.2; n=$((n - 1)); done
    kill -0 "$vm_pid" 2>/dev/null && { echo "FW-INFO $1: still running after $2 s: SIGTERM"; kill -TERM "$vm_pid"; }
    wait "$vm_pid"
}
show() {  # show NAME: the console's last lines and tern's stderr, for the log
    tr -d '\r' <"/tmp/$1.out" 2>/dev/null | sed 's/[^ -~]/ /g' | tail -n 25 | sed "s/^/FW-CONSOLE $1: /"
    sed "s/^/FW-ERR $1: /" "/tmp/$1.err" 2>/dev/null | tail -n 20
}
start() {  # start NAME ARGS...: tern run in the background, console /tmp/NAME.out
    name=$1; shift
    [ "$name" = ovmf ] || rm -f "/tmp/$name.out"
    echo "FW-INFO $name: tern run $*"
    "$T" run --console "file:/tmp/$name.out" "$@" >"/tmp/$name.stdout" 2>"/tmp/$name.err" </dev/null &
    vm_pid=$!
}
# A status that ends a firmware VM cleanly here: 3 (the guest asked for a reboot and tern was told
# to exit on it), 143 (still running at the deadline: SIGTERM), 0 (powered off).
status_ok() { case "$1" in 0 | 3 | 143) return 0 ;; esac; return 1; }

for c in $FW_CASES; do
case "$c" in
seabios)
    start seabios --firmware /fw/bios-256k.bin --memory 128M
    wait_vm "$FW_WAIT" /tmp/seabios.out 'SeaBIOS (version'
    check seabios-banner $? "$(tr -d '\r' </tmp/seabios.out | grep -a -m1 'SeaBIOS (version')"
    wait_vm "$FW_WAIT" /tmp/seabios.out 'No bootable device'
    check seabios-no-boot-device $? "no disk: SeaBIOS says so on the serial console"
    kill -0 "$vm_pid" 2>/dev/null
    check seabios-alive $? "tern still runs at SeaBIOS's boot-failure line"
    # After etc/boot-fail-wait SeaBIOS resets the machine (0xCF9); a firmware boot restarts in
    # place by default: the same tern runs SeaBIOS again on the same console.
    i=$((FW_WAIT * 5)); n=0
    while [ "$i" -gt 0 ] && kill -0 "$vm_pid" 2>/dev/null; do
        n=$(tr -d '\r' </tmp/seabios.out | grep -ac 'SeaBIOS (version')
        [ "$n" -ge 2 ] && break
        sleep 0.2; i=$((i - 1))
    done
    [ "$n" -ge 2 ] && kill -0 "$vm_pid" 2>/dev/null
    check seabios-reboot-in-place $? "SeaBIOS banners on the console: $n (want >= 2, tern running)"
    kill -TERM "$vm_pid"; wait "$vm_pid"; rc=$?
    [ "$rc" = 143 ]; check seabios-exit $? "tern exit status $rc (143: SIGTERM)"
    show seabios
    # --on-reboot exit (QEMU's -no-reboot): the same reset ends tern with status 3.
    start seabios-noreboot --firmware /fw/bios-256k.bin --memory 128M --on-reboot exit
    finish seabios-noreboot "$FW_WAIT"; rc=$?
    [ "$rc" = 3 ]; check seabios-on-reboot-exit $? "tern exit status $rc (3: guest reboot)"
    show seabios-noreboot ;;
grub)
    start grub --firmware /fw/bios-256k.bin --memory 256M --disk path=/fw/grub-rescue.img,readonly=on
    wait_vm "$FW_WAIT" /tmp/grub.out 'SeaBIOS (version'
    check grub-seabios-banner $? "SeaBIOS started"
    wait_vm "$FW_WAIT" /tmp/grub.out 'GRUB'
    check grub-line $? "$(tr -d '\r' </tmp/grub.out | sed 's/[^ -~]/ /g' | grep -ao '.\{0,20\}GRUB.\{0,40\}' | head -n 1)"
    finish grub 5; rc=$?
    status_ok "$rc"; check grub-exit $? "tern exit status $rc"
    show grub ;;
ovmf)
    rm -f /tmp/vars.fd
    # Streamed as it comes (FW-LIVE): the test host's TCG has aborted while OVMF ran under tern.
    : >/tmp/ovmf.out
    tail -f /tmp/ovmf.out 2>/dev/null | sed 's/[^ -~]/ /g' | sed -u 's/^/FW-LIVE ovmf: /' &
    live=$!
    start ovmf --firmware /fw/OVMF_CODE_4M.fd --firmware-vars /tmp/vars.fd --memory 256M
    wait_vm "$FW_WAIT" /tmp/ovmf.out 'BdsDxe\|Shell>\|UEFI Interactive Shell'
    check ovmf-console $? "$(tr -d '\r' </tmp/ovmf.out | sed 's/[^ -~]/ /g' | grep -a -m1 'BdsDxe\|Shell' | cut -c1-100)"
    [ -f /tmp/vars.fd ] && [ "$(wc -c </tmp/vars.fd)" = "$(wc -c </fw/OVMF_VARS_4M.fd)" ]
    check ovmf-vars-created $? "tern created the store from the template"
    finish ovmf 20; rc=$?
    status_ok "$rc"; check ovmf-exit $? "tern exit status $rc"
    ! cmp -s /tmp/vars.fd /fw/OVMF_VARS_4M.fd
    check ovmf-vars-written $? "OVMF's variables reached the file ($(cmp -l /tmp/vars.fd /fw/OVMF_VARS_4M.fd 2>/dev/null | wc -l) bytes differ from the template)"
    kill "$live" 2>/dev/null
    show ovmf
    cp /tmp/vars.fd /tmp/vars.first
    start ovmf2 --firmware /fw/OVMF_CODE_4M.fd --firmware-vars /tmp/vars.fd --memory 256M
    wait_vm "$FW_WAIT" /tmp/ovmf2.out 'BdsDxe\|Shell>\|UEFI Interactive Shell'
    check ovmf-second-run $? "the second run reached the boot manager with the stored variables"
    finish ovmf2 20
    # Boot#### variables OVMF wrote in the first run are still there (UTF-16 "Boot0000").
    LC_ALL=C grep -aq 'B.o.o.t.0.0.0.0' /tmp/vars.fd
    check ovmf-vars-kept $? "Boot0000 in the store after two runs"
    show ovmf2 ;;
debian-bios | debian-bios-nvme-2cpu)
    # The bootable Debian image (L1's /dev/vda, a throw-away overlay) through SeaBIOS and its GRUB:
    # from virtio-blk on 1 vCPU, or from NVMe on 2 vCPUs (the marker then says root=/dev/nvme0n1p1
    # and vcpus=2).
    if [ "$c" = debian-bios ]; then disk=path=/dev/vda cpus=1 root=/dev/vda1
    else disk=path=/dev/vda,interface=nvme cpus=2 root=/dev/nvme0n1p1; fi
    start "$c" --firmware /fw/bios-256k.bin --memory 1G --cpus "$cpus" --disk "$disk"
    wait_vm "$FW_WAIT" "/tmp/$c.out" 'GRUB\|Booting .*Debian\|Linux version'
    check "$c-grub" $? "the image's bootloader ran"
    wait_vm 900 "/tmp/$c.out" '^TERN-DEBIAN-MARKER'
    line=$(tr -d '\r' <"/tmp/$c.out" | grep -a -m1 '^TERN-DEBIAN-MARKER' | cut -c1-160)
    case "$line" in *state=running*failed=0*root=$root*vcpus=$cpus*) ok=0 ;; *) ok=1 ;; esac
    check "$c-marker" $ok "${line:-no marker}"
    finish "$c" 5; rc=$?
    status_ok "$rc"; check "$c-exit" $? "tern exit status $rc"
    show "$c" ;;
hostile)
    # The hostile firmware (tests/kvm/hostile_fw/hostile_fw.c; also the kvm test
    # HostileFirmware.*): attacks fw_cfg, the pflash and the chipset, checks the answers
    # (TERN-HOSTILE-FW phase=... result=ok), resets through the FADT's RESET_REG, and its second
    # boot checks tern still serves fw_cfg and the flash, then powers off.
    cp /fw/hostile-vars.fd /tmp/hostile-vars.fd
    dd if=/dev/zero of=/tmp/hostile-disk.img bs=64k count=1 2>/dev/null  # its BARs are attacked
    name=hostile
    echo "FW-INFO hostile: tern --log-level info run --firmware /fw/hostile_fw.bin ..."
    "$T" --log-level info run --console file:/tmp/hostile.out --firmware /fw/hostile_fw.bin \
        --firmware-vars /tmp/hostile-vars.fd --memory 64M --disk path=/tmp/hostile-disk.img \
        >/dev/null 2>/tmp/hostile.err </dev/null &
    vm_pid=$!
    finish hostile "$FW_WAIT"; rc=$?
    ok=$(tr -d '\r' </tmp/hostile.out | grep -ac '^TERN-HOSTILE-FW phase=[^ ]* result=ok$')
    bad=$(tr -d '\r' </tmp/hostile.out | grep -a 'result=' | grep -av 'result=ok$' | head -n 1)
    [ "$ok" = 11 ] && [ -z "$bad" ]; check hostile-phases $? "$ok phases ok (want 11) $bad"
    grep -aq 'guest reset #1 (reboot: KVM_EXIT_IO: PIIX3 reset control 0xCF9)' /tmp/hostile.err
    check hostile-acpi-reset $? "the FADT's RESET_REG restarted the guest in place"
    [ "$rc" = 0 ]; check hostile-exit $? "tern exit status $rc (0: the guest powered off)"
    marks=$(dd if=/tmp/hostile-vars.fd bs=1 skip=61440 count=2 2>/dev/null | od -An -tx1 | tr -d ' \n')
    [ "$marks" = 0102 ]; check hostile-vars $? "bytes each boot programmed in the vars file: $marks (want 0102)"
    show hostile
    # --on-reboot exit: the reset ends tern with status 3; --stats-on-exit shows the attacks counted.
    cp /fw/hostile-vars.fd /tmp/hostile-vars.fd
    name=hostile-exit
    "$T" run --console file:/tmp/hostile-exit.out --firmware /fw/hostile_fw.bin --firmware-vars /tmp/hostile-vars.fd \
        --memory 64M --disk path=/tmp/hostile-disk.img --on-reboot exit --stats-on-exit \
        >/dev/null 2>/tmp/hostile-exit.err </dev/null &
    vm_pid=$!
    finish hostile-exit "$FW_WAIT"; rc=$?
    errs=$(grep -a 'fw_cfg' /tmp/hostile-exit.err | grep -a 'dma_errors' | head -n 1)
    [ "$rc" = 3 ] && echo "$errs" | grep -q '[1-9]'
    check hostile-counted $? "exit status $rc (want 3); stats: $errs"
    show hostile-exit ;;
snapshot)
    # Snapshot/restore of a firmware-booted VM (issue 26 item 4). At the firmware stage: SeaBIOS
    # with no disk at "No bootable device" is saved (tern snapshot --exit) and restored; the
    # restored VM goes on in SeaBIOS (its boot-fail-wait reset restarts in place by default, the
    # on_reboot the snapshot recorded: a new banner on the restored console), and a restore with
    # --on-reboot exit ends with status 3 at that reset.
    start fwsnap --firmware /fw/bios-256k.bin --memory 128M --api-sock /tmp/fwsnap.sock
    wait_vm "$FW_WAIT" /tmp/fwsnap.out 'No bootable device'
    check snapshot-fw-stage $? "SeaBIOS at its boot-failure line before the save"
    rm -f /tmp/fwsnap.state /tmp/fwsnap.mem
    out=$("$T" snapshot --api-sock /tmp/fwsnap.sock --state /tmp/fwsnap.state --mem /tmp/fwsnap.mem --exit 2>&1)
    check snapshot-fw-save $? "tern snapshot --exit: $(echo "$out" | tail -n 1)"
    finish fwsnap 30; rc=$?
    [ "$rc" = 0 ]; check snapshot-fw-save-exit $? "the saved VM's tern exited $rc (want 0)"
    name=fwsnapr
    rm -f /tmp/fwsnapr.out
    "$T" restore --state /tmp/fwsnap.state --mem /tmp/fwsnap.mem --resume --console file:/tmp/fwsnapr.out \
        >/tmp/fwsnapr.stdout 2>/tmp/fwsnapr.err </dev/null &
    vm_pid=$!
    wait_vm "$FW_WAIT" /tmp/fwsnapr.out 'SeaBIOS (version'
    ok=$?; kill -0 "$vm_pid" 2>/dev/null || ok=1
    check snapshot-fw-restore-seabios $ok "after the restore: $(tr -d '\r' </tmp/fwsnapr.out | sed 's/[^ -~]/ /g' | grep -a -m1 'SeaBIOS (version\|No bootable')"
    kill -TERM "$vm_pid"; wait "$vm_pid"
    show fwsnapr
    rm -f /tmp/fwsnapx.out
    "$T" restore --state /tmp/fwsnap.state --mem /tmp/fwsnap.mem --resume --on-reboot exit \
        --console file:/tmp/fwsnapx.out >/dev/null 2>/tmp/fwsnapx.err </dev/null &
    vm_pid=$!
    finish fwsnapx "$FW_WAIT"; rc=$?
    [ "$rc" = 3 ]; check snapshot-fw-restore-on-reboot-exit $? "tern restore --on-reboot exit: status $rc (3: the guest's reset)"
    rm -f /tmp/fwsnap.state /tmp/fwsnap.mem
    # At the prompt of the bootable Debian image (SeaBIOS -> GRUB -> Debian, L1's /dev/vda, a
    # throw-away overlay): saved, restored, a command typed on the serial console runs; then
    # `systemctl reboot` in the restored guest goes back through SeaBIOS in the same tern.
    . /testhost/debian_lib.sh
    _deb_launch fwdeb "$T" run --firmware /fw/bios-256k.bin --memory 1G --disk path=/dev/vda --api-sock /tmp/fwdeb.sock
    m=$(deb_marker fwdeb 900)
    case "$m" in *state=running*failed=0*) ok=0 ;; *) ok=1 ;; esac
    check snapshot-deb-marker $ok "${m:-no marker}"
    deb_prompt fwdeb 300
    check snapshot-deb-prompt $? "shell prompt: '$deb_got'"
    deb_snapshot fwdeb
    check snapshot-deb-save $? "tern snapshot --exit: $(echo "$deb_out" | tail -n 1)"
    [ "$deb_exit" = 0 ]; check snapshot-deb-save-exit $? "the saved VM's tern exited $deb_exit (want 0)"
    deb_restore fwdeb fwdebr
    deb_type fwdebr 'echo TERN-AFTER-RESTORE $((6*7))'
    deb_wait fwdebr 300 '^TERN-AFTER-RESTORE 42'
    check snapshot-deb-command $? "typed after the restore: ${deb_got:-no TERN-AFTER-RESTORE 42 line}"
    deb_type fwdebr 'systemctl reboot'
    deb_wait fwdebr 300 'SeaBIOS .version'
    ok=$?; kill -0 "$(cat /tmp/fwdebr.pid)" 2>/dev/null || ok=1
    check snapshot-deb-reboot-seabios $ok "systemctl reboot after the restore: ${deb_got:-no SeaBIOS banner}, tern running"
    deb_wait fwdebr 300 'GRUB|Booting .*Debian|Linux version'
    check snapshot-deb-reboot-grub $? "and the image's bootloader again: ${deb_got:-none}"
    deb_stop fwdebr
    for n in fwdeb fwdebr; do deb_show "$n" | sed 's/^/FW-CONSOLE /'; done
    rm -f /tmp/fwdeb.state /tmp/fwdeb.mem ;;
ovmf-novars)
    # OVMF without a variable store (no pflash: OVMF keeps its variables in RAM), console and
    # tern's stderr streamed: narrows down where the test host's TCG aborts.
    : >/tmp/ovmfnv.out; : >/tmp/ovmfnv.err
    tail -f /tmp/ovmfnv.out /tmp/ovmfnv.err 2>/dev/null | sed 's/[^ -~]/ /g' | sed -u 's/^/FW-LIVE ovmf-novars: /' &
    name=ovmfnv
    echo "FW-INFO ovmfnv: tern run --firmware /fw/OVMF_CODE_4M.fd"
    "$T" run --stats-on-exit --console file:/tmp/ovmfnv.out --firmware /fw/OVMF_CODE_4M.fd --memory 256M >/dev/null 2>/tmp/ovmfnv.err </dev/null &
    vm_pid=$!
    wait_vm "$FW_WAIT" /tmp/ovmfnv.out 'BdsDxe\|Shell>\|UEFI Interactive Shell'
    check ovmf-novars-console $? "without --firmware-vars"
    finish ovmfnv 10
    sed "s/^/FW-ERR ovmfnv: /" /tmp/ovmfnv.err | tail -n 80 ;;
esac
done
[ "$fails" = 0 ]
