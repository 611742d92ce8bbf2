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
#   ovmf-*     OVMF_CODE_4M.fd + a per-VM copy of OVMF_VARS_4M.fd (--firmware-vars, created from
#              the template by tern): UEFI boot-manager lines or the shell prompt on the console;
#              the store changed (OVMF wrote its boot options) and a second run keeps them
# Usage: tests/e2e/firmware_test.sh   Environment: TERN_BIN (default build/tern), E2E_LOG,
#   FW_CASES (default "seabios grub debian-bios debian-bios-nvme-2cpu"; "ovmf" and
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
default_cases="seabios grub debian-bios debian-bios-nvme-2cpu"
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
run_extra=()
if [[ " $cases " == *" debian-bios"* ]]; then
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
    ovmf-novars) expected+=(ovmf-novars-console) ;;
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
