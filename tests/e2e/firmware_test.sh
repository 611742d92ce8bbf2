#!/usr/bin/env bash
# End-to-end firmware boot test (issue 26): in one nested test host boot, tern runs Debian's own,
# unmodified firmware files with --firmware (tests/e2e/firmware_scenario.sh prints FW-CHECK lines):
#   seabios-*  bios-256k.bin with no disk: its banner and "No bootable device" reach the serial
#              console (sercon through fw_cfg's etc/sercon-port); tern is still up at that line and
#              ends with a documented status (3: the guest's reboot, or still running: killed)
#   grub-*     bios-256k.bin + Debian's grub-rescue-pc image (a BIOS-bootable hybrid ISO) as a
#              read-only virtio-blk disk: a GRUB line on the console
#   debian-bios-*  bios-256k.bin + the bootable BIOS/MBR Debian image (images/debian/build.sh
#              --boot bios; FW_DEBIAN_BIOS_IMG, default build/images/debian-12-bios.img; L1 gets it as
#              /dev/vda, never changed: --disk-snapshot) as virtio-blk: GRUB, then the guest's
#              TERN-DEBIAN-MARKER line (state=running, failed=0, root on that disk); case
#              "debian-bios" (virtio-blk, 1 vCPU) and
#              "debian-bios-nvme-2cpu" (NVMe, 2 vCPUs)
#   hostile-*  the hostile firmware of tests/kvm/hostile_fw (build/tests/hostile_fw/hostile_fw.bin,
#              cmake --build build --target hostile_fw) with a 64 KiB vars file: every attack
#              phase ok, the FADT's ACPI reset restarts it in place, its second boot powers off
#              (status 0), both boots' flash bytes in the vars file; with --on-reboot exit status
#              3 and --stats-on-exit showing fw_cfg dma_errors (the same checks as the kvm test
#              HostileFirmware.*, here on the test host's KVM and the tern binary)
#   snapshot   snapshot/restore of a firmware VM: SeaBIOS with no disk saved at "No bootable
#              device", restored (SeaBIOS goes on: its reset restarts in place, a new banner;
#              --on-reboot exit ends with 3 there); the Debian BIOS image saved at its prompt,
#              restored, a command typed runs, `systemctl reboot` goes through SeaBIOS and GRUB
#              (uses the Debian BIOS image as debian-bios does)
#   ovmf-*     OVMF_CODE_4M.fd + a per-VM copy of OVMF_VARS_4M.fd (--firmware-vars, created from
#              the template by tern): UEFI boot-manager lines or the shell prompt on the console;
#              the store changed (OVMF wrote its boot options) and a second run keeps them
# Usage: tests/e2e/firmware_test.sh   Environment: TERN_BIN (default build/tern), E2E_LOG,
#   FW_CASES (default "seabios grub debian-bios debian-bios-nvme-2cpu hostile snapshot"; "ovmf" and
#   "ovmf-novars" are opt-in: the test host's QEMU 7.2 TCG aborts (tcg_handle_interrupt BQL
#   assertion) once OVMF's timer runs — OVMF's CR8 write at the end of each interrupt, with L1's
#   KVM asking for an interrupt window, reaches a QEMU 7.2 helper that calls cpu_interrupt without
#   the BQL; QEMU as the L1 VMM aborts the same way: docs/firmware.md "OVMF and the test host's
#   QEMU 7.2"), FW_WAIT (seconds per case, default 240),
#   TH_TCG_THREAD (default single here: QEMU 7.2's TCG aborted with an L2 in SeaBIOS, issue 26).
# Prints the PASS/FAIL line of each check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"
export TH_TCG_THREAD="${TH_TCG_THREAD:-single}"
tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
default_cases="seabios grub debian-bios debian-bios-nvme-2cpu hostile snapshot"
cases="${FW_CASES:-$default_cases}"
extra="$TH_CACHE/firmware-extra"
rm -rf "$extra"
mkdir -p "$extra/fw"
need() { [[ -r "$1" ]] || th_die "$1 missing: install Debian package '$2' (scripts/setup.sh does)"; }
need /usr/share/seabios/bios-256k.bin seabios
cp -L /usr/share/seabios/bios-256k.bin "$extra/fw/"
if [[ " $cases " == *" grub "* ]]; then
    need /usr/lib/grub-rescue/grub-rescue-cdrom.iso grub-rescue-pc
    cp -L /usr/lib/grub-rescue/grub-rescue-cdrom.iso "$extra/fw/grub-rescue.img"
fi
if [[ " $cases " == *" ovmf"* ]]; then
    need /usr/share/OVMF/OVMF_CODE_4M.fd ovmf
    cp -L /usr/share/OVMF/OVMF_CODE_4M.fd /usr/share/OVMF/OVMF_VARS_4M.fd "$extra/fw/"
fi
if [[ " $cases " == *" hostile "* ]]; then
    hfw="${FW_HOSTILE_BIN:-$(dirname "$tern")/tests/hostile_fw/hostile_fw.bin}"
    [[ -r "$hfw" ]] || th_die "$hfw missing: cmake --build build --target hostile_fw (or set FW_HOSTILE_BIN)"
    cp "$hfw" "$extra/fw/hostile_fw.bin"
    # The store hostile_fw.c expects: 64 KiB, "TERNVARS" first, its last 4 KiB block erased.
    python3 -c 'import sys
d = bytearray(b"\xff" * 0x10000)
d[0:8] = b"TERNVARS"
d[8:0xF000] = bytes(i & 0xFF for i in range(8, 0xF000))
open(sys.argv[1], "wb").write(d)' "$extra/fw/hostile-vars.fd"
fi
run_extra=()
if [[ " $cases " == *" debian-bios"* || " $cases " == *" snapshot "* ]]; then
    img="${FW_DEBIAN_BIOS_IMG:-$repo/build/images/debian-12-bios.img}"
    [[ -r "$img" ]] || th_die "$img missing: images/debian/build.sh --boot bios (or set FW_DEBIAN_BIOS_IMG)"
    run_extra=(--disk "$img" --disk-snapshot --memory 4096
        --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk")
fi
expected=()
for c in $cases; do
    case "$c" in
    seabios) expected+=(seabios-banner seabios-no-boot-device seabios-alive seabios-reboot-in-place seabios-exit seabios-on-reboot-exit) ;;
    grub) expected+=(grub-seabios-banner grub-line grub-exit) ;;
    debian-bios | debian-bios-nvme-2cpu) expected+=("$c-grub" "$c-marker" "$c-exit") ;;
    hostile) expected+=(hostile-phases hostile-acpi-reset hostile-exit hostile-vars hostile-counted) ;;
    ovmf-novars) expected+=(ovmf-novars-console) ;;
    snapshot) expected+=(snapshot-fw-stage snapshot-fw-save snapshot-fw-save-exit snapshot-fw-restore-seabios
        snapshot-fw-restore-on-reboot-exit snapshot-deb-marker snapshot-deb-prompt snapshot-deb-save
        snapshot-deb-save-exit snapshot-deb-command snapshot-deb-reboot-seabios snapshot-deb-reboot-grub) ;;
    ovmf) expected+=(ovmf-console ovmf-vars-created ovmf-vars-written ovmf-exit ovmf-second-run ovmf-vars-kept) ;;
    esac
done
log="${E2E_LOG:-$TH_CACHE/logs/e2e-firmware.log}"
mkdir -p "$(dirname "$log")"
: >"$log"
set +e
th_run_retrying "$log" -- "$repo/testhost/run.sh" --scenario "$here/firmware_scenario.sh" --tern "$tern" \
    --extra "$extra" ${run_extra[@]+"${run_extra[@]}"} --env "FW_CASES=$cases" --env "FW_WAIT=${FW_WAIT:-240}" --timeout 1500 \
    --log "$log" >/dev/null
host_rc=$?
set -e
prefix=FW-CHECK
passed=$(grep -ac "^$prefix name=[^ ]* PASS" "$log" || true)
failed=$(grep -ac "^$prefix name=[^ ]* FAIL" "$log" || true)
grep -a "^$prefix" "$log" | sed "s/^$prefix name=\([^ ]*\) \(PASS\|FAIL\)/\2 \1/" || true
for want in "${expected[@]}"; do
    if ! grep -aq "^$prefix name=$want \(PASS\|FAIL\)" "$log"; then
        echo "FAIL $want did not run (log: $log)"
        failed=$((failed + 1))
    fi
done
if [[ "$host_rc" != 0 && "$failed" == 0 ]]; then
    echo "FAIL test host: run.sh exited $host_rc (log: $log)"
    failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
((failed == 0))
