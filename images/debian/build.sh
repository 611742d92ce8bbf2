#!/usr/bin/env bash
# Builds the Debian 12 guest image: a sparse 4 GiB raw ext4 filesystem, label tern-root.
#   images/debian/build.sh [--out FILE] [--force]
# Cached: rebuilt only when the hash of images/debian/** differs from FILE.key (or --force).
# Needs root, mmdebstrap and the Debian mirror (deb.debian.org): exits 3 when one is missing.
# See docs/debian-guest.md.
set -euo pipefail
here=$(dirname "$(readlink -f "$0")")
out=$here/../../build/images/debian-12.img
force=0
while (($#)); do
  case $1 in
    --out) [[ $# -ge 2 ]] || { echo "build.sh: --out needs a file" >&2; exit 2; }; out=$2; shift 2 ;;
    --force) force=1; shift ;;
    -h | --help) sed -n '2,6s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done
[[ -n $out ]] || { echo "build.sh: --out needs a file" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
out=$(readlink -f "$out")
[[ ! -d $out ]] || { echo "build.sh: --out $out is a directory (give the image's file name)" >&2; exit 2; }

PACKAGES=(systemd-sysv udev dbus iproute2 procps kmod e2fsprogs wget
  gcc make bc flex bison libc6-dev libelf-dev libssl-dev linux-source-6.1 xz-utils)
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

key=$(cd "$here" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
up_to_date() {
  if [[ -f $out && -f $out.key && $(cat "$out.key") == "$key" ]]; then
    echo "img: up to date: $out; space used $(du -h "$out" | cut -f1) (key $key)"
    exit 0
  fi
}
((force)) || up_to_date
if [[ $(id -u) -ne 0 ]]; then
  echo "img: building $out needs root (mmdebstrap, mkfs.ext4 -d with ownership)" >&2; exit 3
fi
command -v mmdebstrap >/dev/null || { echo "img: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 3; }
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
rootfs=$(mktemp -d "$out.rootfs.XXXXXX")
# The tree (~2 GB, ~80k files) goes to a tmpfs when there is RAM for it: faster, and removing it
# from a busy disk took minutes here.
if (($(awk '/^MemAvailable/ { print int($2 / 1048576) }' /proc/meminfo) >= 8)); then
  mount -t tmpfs -o size=4G,mode=0755 tern-rootfs "$rootfs"
  trap 'umount "$rootfs"; rmdir "$rootfs"; rm -f "$out.tmp" "$out.key.tmp"' EXIT
else
  trap 'rm -rf "$rootfs" "$out.tmp" "$out.key.tmp"' EXIT
fi
echo "img: mmdebstrap bookworm into $rootfs"
mmdebstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}")" \
  --aptopt='APT::Install-Recommends "false"' \
  --customize-hook="$here/customize.sh \"\$1\"" bookworm "$rootfs" "$MIRROR"
echo "img: mkfs.ext4 -L tern-root -d (4 GiB, sparse)"
rm -f "$out.tmp"
mkfs.ext4 -q -L tern-root -d "$rootfs" "$out.tmp" 4G
echo "$key" >"$out.key.tmp"
mv "$out.tmp" "$out"
mv "$out.key.tmp" "$out.key"
used=$(du -h "$out" | cut -f1)
echo "img: built $out in $((SECONDS - start)) s; space used $used (apparent size 4 GiB)"
