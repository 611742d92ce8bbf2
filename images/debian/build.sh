#!/usr/bin/env bash
# Builds the Debian 12 guest image: a sparse 4 GiB raw ext4 filesystem, label tern-root.
#   images/debian/build.sh [--out FILE] [--boot none|bios|uefi[,...]] [--force]
# --boot (default none) lists the images to build from one root tree: none = FILE (no partitions,
# no kernel: booted with --kernel); bios = FILE's name with -bios (MBR + GRUB); uefi = with -uefi
# (GPT + ESP + GRUB EFI); e.g. build/images/debian-12-bios.img.
# Cached: rebuilt only when the hash of images/debian/** differs from FILE.key (or --force).
# Needs root, mmdebstrap and the Debian mirror (deb.debian.org): exits 3 when one is missing;
# bios/uefi also grub-pc-bin, grub-efi-amd64-bin, mtools, dosfstools, fdisk. See docs/debian-guest.md.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
out=$here/../../build/images/debian-12.img
force=0 boot=none
while (($#)); do
  case $1 in
    --out) [[ $# -ge 2 ]] || { echo "build.sh: --out needs a file" >&2; exit 2; }; out=$2; shift 2 ;;
    --boot) [[ $# -ge 2 ]] || { echo "build.sh: --boot needs none, bios, uefi or a list" >&2; exit 2; }; boot=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h | --help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || { echo "build.sh: --out needs a file" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
out=$(readlink -f "$out")
[[ ! -d $out ]] || { echo "build.sh: --out $out is a directory (give the image's file name)" >&2; exit 2; }
# files[variant] = the image it writes.
declare -A files=()
stem=${out%.img}
for v in ${boot//,/ }; do
  case $v in
    none) files[none]=$out ;;
    bios | uefi) files[$v]=$stem-$v.img ;;
    *) echo "build.sh: --boot '$v' is not none, bios or uefi" >&2; exit 2 ;;
  esac
done
((${#files[@]})) || { echo "build.sh: --boot lists no image" >&2; exit 2; }

PACKAGES=(systemd-sysv udev dbus iproute2 procps kmod e2fsprogs wget
  gcc make bc flex bison libc6-dev libelf-dev libssl-dev linux-source-6.1 xz-utils)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

key=$(cd "$here" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
# up_to_date: drops the images whose key matches from files[]; exits 0 when none is left.
up_to_date() {
  local v f
  for v in "${!files[@]}"; do
    f=${files[$v]}
    if [[ -f $f && -f $f.key && $(cat "$f.key") == "$key" ]]; then
      echo "img: up to date: $f; space used $(du -h "$f" | cut -f1) (key $key)"
      unset "files[$v]"
    fi
  done
  ((${#files[@]})) || exit 0
}
((force)) || up_to_date
if [[ $(id -u) -ne 0 ]]; then
  echo "img: building $out needs root (mmdebstrap, mkfs.ext4 -d with ownership)" >&2; exit 3
fi
command -v mmdebstrap >/dev/null || { echo "img: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 3; }
if [[ -n ${files[bios]:-}${files[uefi]:-} ]]; then
  for tool in sfdisk:fdisk mkfs.vfat:dosfstools mcopy:mtools grub-mkimage:grub-common \
    /usr/lib/grub/i386-pc/boot.img:grub-pc-bin /usr/lib/grub/x86_64-efi/linux.mod:grub-efi-amd64-bin; do
    [[ -e ${tool%%:*} ]] || command -v "${tool%%:*}" >/dev/null ||
      { echo "img: ${tool%%:*} is missing (apt-get install ${tool#*:})" >&2; exit 3; }
  done
fi
if ! curl -fsSI --max-time 20 "$MIRROR/dists/bookworm/Release" >/dev/null; then
  echo "img: the Debian mirror $MIRROR is not reachable (set DEBIAN_MIRROR to another one)" >&2; exit 3
fi

# One build of $out at a time (they share $out.tmp): a second run waits here, then finds it built.
exec {lock_fd}>"$out.lock"
if ! flock -n "$lock_fd"; then
  echo "img: another build of $out is running; waiting for it"
  flock "$lock_fd"
  ((force)) || up_to_date
fi
start=$SECONDS
remove_tmp() { local f; for f in "${files[@]}"; do rm -f "$f.tmp" "$f.key.tmp"; done; }
# publish FILE: FILE.tmp becomes FILE, then its key (a broken build never looks up to date).
publish() {
  echo "$key" >"$1.key.tmp"
  mv "$1.tmp" "$1"
  mv "$1.key.tmp" "$1.key"
  echo "img: built $1 at $((SECONDS - start)) s; space used $(du -h "$1" | cut -f1) (apparent size $(du -h --apparent-size "$1" | cut -f1))"
}
rootfs=$(mktemp -d "$out.rootfs.XXXXXX")
# The tree (~2 GB, ~80k files) goes to a tmpfs when there is RAM for it: faster, and removing it
# from a busy disk took minutes here.
if (($(awk '/^MemAvailable/ { print int($2 / 1048576) }' /proc/meminfo) >= 8)); then
  mount -t tmpfs -o size=4G,mode=0755 tern-rootfs "$rootfs"
  trap 'umount "$rootfs"; rmdir "$rootfs"; remove_tmp' EXIT
else
  trap 'rm -rf "$rootfs"; remove_tmp' EXIT
fi
echo "img: mmdebstrap bookworm into $rootfs"
mmdebstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='APT::Install-Recommends "false"' \
  --customize-hook="$here/customize.sh \"\$1\"" bookworm "$rootfs" "$MIRROR"
echo "img: root tree ready at $((SECONDS - start)) s"
if [[ -n ${files[none]:-} ]]; then
  echo "img: mkfs.ext4 -L tern-root -d (4 GiB, sparse)"
  rm -f "$out.tmp"
  mkfs.ext4 -q -L tern-root -d "$rootfs" "$out.tmp" 4G
  publish "$out"
fi
# The bootable images: the same tree plus a kernel, initrd and GRUB (after the plain image is
# written, which stays without a kernel).
wrap=()
for v in bios uefi; do [[ -z ${files[$v]:-} ]] || wrap+=("$v=${files[$v]}.tmp"); done
if ((${#wrap[@]})); then
  "$here/bootable.sh" "$rootfs" "${wrap[@]}"
  for v in bios uefi; do [[ -z ${files[$v]:-} ]] || publish "${files[$v]}"; done
fi
echo "img: done in $((SECONDS - start)) s"
