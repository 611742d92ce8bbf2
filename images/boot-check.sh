#!/usr/bin/env bash
# Boots the bootable Debian images with QEMU and Debian's unmodified firmware, each to its marker line:
#   images/boot-check.sh [--dir DIR] [--accel tcg|kvm] [--timeout SEC] [CASE...]
# CASE is FIRMWARE:BUS, FIRMWARE bios (SeaBIOS bios-256k.bin, DIR/debian-12-bios.img) or uefi
# (OVMF_CODE_4M.fd + a copy of OVMF_VARS_4M.fd, DIR/debian-12-uefi.img), BUS virtio or nvme;
# default: bios:virtio bios:nvme uefi:virtio uefi:nvme. DIR defaults to build/images.
# Per case one line: BOOT-CHECK case=FW:BUS PASS|FAIL grub=<s> marker=<s> <why or the marker line>
# (seconds from QEMU's start to GRUB's menu entry and to TERN-DEBIAN-MARKER on the serial console).
# PASS: the marker says state=running failed=0 and root=<the root partition on that bus>, and QEMU
# wrote nothing to stderr. The disk is attached snapshot=on (the image is not changed).
# Exits with the number of failed cases; 3 when QEMU, the firmware or an image is missing.
# Needs no root; with --accel tcg (the default) no /dev/kvm. See docs/debian-guest.md.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
dir=$here/../build/images accel=tcg timeout=900 cases=()
while (($#)); do
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --accel) accel=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h | --help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "boot-check.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
    *) cases+=("$1"); shift ;;
  esac
done
((${#cases[@]})) || cases=(bios:virtio bios:nvme uefi:virtio uefi:nvme)
SEABIOS=/usr/share/seabios/bios-256k.bin
OVMF_CODE=/usr/share/OVMF/OVMF_CODE_4M.fd OVMF_VARS=/usr/share/OVMF/OVMF_VARS_4M.fd
command -v qemu-system-x86_64 >/dev/null || { echo "boot-check: no qemu-system-x86_64 (apt-get install qemu-system-x86)" >&2; exit 3; }
work=$(mktemp -d)
qemu_pid=""
trap '[[ -z $qemu_pid ]] || kill "$qemu_pid" 2>/dev/null; rm -rf "$work"' EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# run_case FW BUS: one boot; prints the BOOT-CHECK line, returns 0 on PASS.
run_case() {
  local fw=$1 bus=$2 img fwfile fwargs dev part root log=$work/$1-$2.log err=$work/$1-$2.err
  case $fw in
    bios) img=$dir/debian-12-bios.img part=1 fwfile=$SEABIOS fwargs=(-bios "$SEABIOS") ;;
    uefi)
      img=$dir/debian-12-uefi.img part=2 fwfile=$OVMF_CODE
      fwargs=(-drive "if=pflash,format=raw,readonly=on,file=$OVMF_CODE" -drive "if=pflash,format=raw,file=$work/vars.fd") ;;
    *) echo "BOOT-CHECK case=$fw:$bus FAIL firmware must be bios or uefi"; return 1 ;;
  esac
  case $bus in
    virtio) dev=(-device "virtio-blk-pci,drive=d0") root=/dev/vda$part ;;
    nvme) dev=(-device "nvme,drive=d0,serial=tern0") root=/dev/nvme0n1p$part ;;
    *) echo "BOOT-CHECK case=$fw:$bus FAIL bus must be virtio or nvme"; return 1 ;;
  esac
  local f need=("$img" "$fwfile")
  [[ $fw != uefi ]] || need+=("$OVMF_VARS")
  for f in "${need[@]}"; do
    [[ -r $f ]] || { echo "BOOT-CHECK case=$fw:$bus FAIL missing $f (images/debian/build.sh --boot $fw; apt-get install seabios ovmf)"; return 3; }
  done
  [[ $fw != uefi ]] || cp "$OVMF_VARS" "$work/vars.fd"
  local t0 grub="" marker="" line="" end
  : >"$log"  # exists before the poll below reads it
  t0=$(now)
  qemu-system-x86_64 -accel "$accel" -M pc -m 1024 -smp 1 "${fwargs[@]}" \
    -drive "file=$img,if=none,id=d0,format=raw,snapshot=on" "${dev[@]}" \
    -nographic -no-reboot </dev/null >"$log" 2>"$err" &
  qemu_pid=$!
  end=$((SECONDS + timeout))
  # Polls the console log (QEMU writes it as the guest prints); ends at the marker, QEMU's exit or the timeout.
  while ((SECONDS < end)) && kill -0 "$qemu_pid" 2>/dev/null; do
    [[ -n $grub ]] || ! grep -aq "Debian GNU/Linux 12 (tern image)" "$log" || grub=$(since "$t0")
    line=$(grep -a '^TERN-DEBIAN-MARKER' "$log" | head -n 1 | tr -d '\r') || true
    [[ -z $line ]] || { marker=$(since "$t0"); break; }
    sleep 0.5
  done
  kill "$qemu_pid" 2>/dev/null || true
  wait "$qemu_pid" 2>/dev/null || true
  qemu_pid=""
  local why=""
  if [[ -z $line ]]; then
    why="no TERN-DEBIAN-MARKER in ${timeout} s; console tail: $(tail -c 300 "$log" | tr -d '\r' | tr '\n' ' ')"
  elif [[ $line != *" state=running failed=0 "* ]]; then
    why="not running with 0 failed units"
  elif [[ $line != *" root=$root "* ]]; then
    why="root is not $root"
  fi
  # QEMU's own messages (stderr) must be empty, except its exit on our SIGTERM.
  local noise
  noise=$(grep -v 'terminating on signal 15' "$err" | head -n 3 | tr '\n' ' ') || true
  [[ -n $why || -z $noise ]] || why="QEMU said: $noise"
  if [[ -z $why ]]; then
    echo "BOOT-CHECK case=$fw:$bus PASS grub=${grub:-?} marker=$marker $line"
  else
    echo "BOOT-CHECK case=$fw:$bus FAIL grub=${grub:-none} marker=${marker:-none} $why ${line}"
    return 1
  fi
}

fails=0
for c in "${cases[@]}"; do
  rc=0
  run_case "${c%%:*}" "${c#*:}" || rc=$?
  ((rc != 3)) || exit 3
  ((rc == 0)) || fails=$((fails + 1))
done
exit "$fails"
