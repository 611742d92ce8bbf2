#!/bin/bash
# Wraps the root tree of images/debian/build.sh into disk images that boot through firmware:
#   bootable.sh ROOT [bios=FILE] [uefi=FILE]
# Writes each FILE (the caller writes FILE.tmp and renames it). No loop device, no mount of an image:
# partition tables by sfdisk on the file, ext4 by mkfs.ext4 -d -E offset=, FAT by mkfs.vfat --offset
# and mtools, GRUB by grub-mkimage (boot.img + core.img written with dd for BIOS).
#   bios: MBR; partition 1 (from 1 MiB, bootable) = the ext4 root; GRUB i386-pc: boot.img in the
#         MBR, core.img in the gap behind it (sectors 1..).
#   uefi: GPT; partition 1 = EFI system partition (FAT32, 64 MiB) holding GRUB x86_64-efi as
#         \EFI\BOOT\BOOTX64.EFI (the removable-media path: no NVRAM entry needed); partition 2 = root.
# First installs Debian's linux-image-cloud-amd64, its initramfs-tools initrd and efibootmgr into ROOT
# (apt in a chroot). Each image's ext4 has its own UUID, which GRUB searches for and the kernel mounts
# (root=UUID=), so the same image boots from virtio-blk or NVMe. See docs/debian-guest.md.
set -euo pipefail
root=$1
shift
ROOT_SIZE=$((4 << 30))  # the ext4 root filesystem, as in the plain image
ESP_SIZE=$((64 << 20))
MiB=$((1 << 20))
# Modules built into GRUB's image (the rest load from /boot/grub/<platform>/ of the root).
GRUB_COMMON=(ext2 search search_fs_uuid normal linux serial terminal echo test configfile)

mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount "${mounted[i]}" || true; done
  [[ -z ${work:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
work=$(mktemp -d)

# The kernel and its initrd into ROOT: Debian's cloud kernel (virtio and NVMe drivers; MODULES=most
# puts virtio_blk, virtio_pci, nvme and ext4 into the initrd).
install_kernel() {
  local m
  for m in proc sys dev; do
    case $m in
      proc) mount -t proc tern-proc "$root/proc" ;;
      sys) mount -t sysfs tern-sys "$root/sys" ;;
      dev) mount --bind /dev "$root/dev" ;;
    esac
    mounted+=("$root/$m")
  done
  echo "img: installing linux-image-cloud-amd64, initramfs-tools and efibootmgr into the root tree"
  chroot "$root" apt-get update -q
  # efibootmgr: tests set UEFI variables (BootNext, BootOrder) from the guest.
  DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y -q --no-install-recommends \
    linux-image-cloud-amd64 initramfs-tools efibootmgr
  chroot "$root" apt-get clean
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  for ((m = ${#mounted[@]} - 1; m >= 0; m--)); do umount "${mounted[m]}"; done
  mounted=()
  echo "img: kernel and initrd installed in $SECONDS s"
  mkdir -p "$root/boot/grub"
  # GRUB's modules beside its config, as grub-install puts them (for commands not built in).
  local p
  for p in i386-pc x86_64-efi; do
    mkdir -p "$root/boot/grub/$p"
    cp /usr/lib/grub/$p/*.mod /usr/lib/grub/$p/*.lst "$root/boot/grub/$p/"
  done
}

# grub_cfg UUID: /boot/grub/grub.cfg of ROOT for the filesystem UUID (serial console COM1 115200).
grub_cfg() {
  local kernels kernel initrd
  kernels=("$root"/boot/vmlinuz-*)
  kernel=${kernels[-1]##*/}  # one kernel is installed (the glob sorts; the newest is last)
  initrd=initrd.img-${kernel#vmlinuz-}
  [[ -f $root/boot/$initrd ]] || { echo "img: no $initrd in the root tree" >&2; exit 1; }
  cat >"$root/boot/grub/grub.cfg" <<EOF
# Written by images/debian/bootable.sh: the serial console (COM1, 115200) and the screen.
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=1
set timeout_style=menu
menuentry 'Debian GNU/Linux 12 (tern image)' {
  linux /boot/$kernel root=UUID=$1 rw console=ttyS0
  initrd /boot/$initrd
}
EOF
}

# early_cfg UUID: the config built into GRUB's image: find the root filesystem, read its grub.cfg.
early_cfg() {
  cat >"$work/early.cfg" <<EOF
search --no-floppy --fs-uuid --set=root $1
set prefix=(\$root)/boot/grub
EOF
}

# mkfs_root FILE OFFSET UUID: the ext4 root (label tern-root, as /etc/fstab wants) at OFFSET bytes of FILE.
mkfs_root() {
  grub_cfg "$3"
  mkfs.ext4 -q -L tern-root -U "$3" -E offset="$2" -d "$root" "$1" "$((ROOT_SIZE >> 10))k"
}

build_bios() {
  local f=$1 uuid start=$((MiB / 512))
  uuid=$(cat /proc/sys/kernel/random/uuid)
  echo "img: $f: MBR, ext4 root at 1 MiB (UUID $uuid), GRUB i386-pc"
  rm -f "$f"
  truncate -s $((MiB + ROOT_SIZE)) "$f"
  printf 'label: dos\nstart=%d, size=%d, type=83, bootable\n' "$start" $((ROOT_SIZE / 512)) | sfdisk -q "$f"
  mkfs_root "$f" "$MiB" "$uuid"
  early_cfg "$uuid"
  grub-mkimage -O i386-pc -o "$work/core.img" -p /boot/grub -c "$work/early.cfg" \
    biosdisk part_msdos "${GRUB_COMMON[@]}"
  local sectors=$((($(stat -c %s "$work/core.img") + 511) / 512))
  ((sectors < start)) || { echo "img: core.img ($sectors sectors) does not fit before the partition" >&2; exit 1; }
  # boot.img's code (not the partition table) into the MBR; it loads sector 1 (its default
  # kernel_sector), the first sector of core.img (diskboot.img), whose block list grub-mkimage
  # filled in for the sectors right behind it.
  dd if=/usr/lib/grub/i386-pc/boot.img of="$f" bs=440 count=1 conv=notrunc status=none
  dd if="$work/core.img" of="$f" bs=512 seek=1 conv=notrunc status=none
}

build_uefi() {
  local f=$1 uuid esp=$MiB rootoff=$((MiB + ESP_SIZE))
  uuid=$(cat /proc/sys/kernel/random/uuid)
  echo "img: $f: GPT, ESP (FAT32, 64 MiB) at 1 MiB, ext4 root at 65 MiB (UUID $uuid), GRUB x86_64-efi"
  rm -f "$f"
  truncate -s $((rootoff + ROOT_SIZE + MiB)) "$f"  # + the backup GPT at the end
  printf 'label: gpt\nstart=%d, size=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI system partition"\nstart=%d, size=%d, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="tern-root"\n' \
    $((esp / 512)) $((ESP_SIZE / 512)) $((rootoff / 512)) $((ROOT_SIZE / 512)) | sfdisk -q "$f"
  # -s 1: 512-byte clusters (FAT32 wants >= 65525 of them; the default for this file size is larger)
  mkfs.vfat -F 32 -s 1 -n TERN-ESP --offset $((esp / 512)) "$f" $((ESP_SIZE >> 10)) 2>&1 | grep -v 'block count mismatch' || true
  mkfs_root "$f" "$rootoff" "$uuid"
  early_cfg "$uuid"
  grub-mkimage -O x86_64-efi -o "$work/BOOTX64.EFI" -p /boot/grub -c "$work/early.cfg" \
    part_gpt fat "${GRUB_COMMON[@]}"
  mmd -i "$f@@$esp" ::/EFI ::/EFI/BOOT
  mcopy -i "$f@@$esp" "$work/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
}

install_kernel
for arg; do
  case $arg in
    bios=*) build_bios "${arg#bios=}" ;;
    uefi=*) build_uefi "${arg#uefi=}" ;;
    *) echo "bootable.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
