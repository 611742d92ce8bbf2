#!/usr/bin/env bash
# Derives the benchmark's disk from the Debian image (images/debian, never changed here): a sparse
# copy in which Debian's linux-source-6.1 tree has had `make prepare` and one build of the slice
# (bench/build/slice.sh prepare), done natively on this machine in a chroot of the copy. In the
# test host that work would take most of a run (TCG); every configuration then starts from the same
# prepared tree and builds only the slice. Cached by the base image's key (IMAGE.key, written by
# images/debian/build.sh; else its size and mtime) and the hash of the slice files; the path is
# printed on stdout (progress on stderr).
#
# Usage: bench/build/prepare-image.sh BASE_IMAGE CACHE_DIR    (needs root: loop mount + chroot)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/../../testhost/lib.sh"
base="${1:?usage: prepare-image.sh BASE_IMAGE CACHE_DIR}" dir="${2:?usage: prepare-image.sh BASE_IMAGE CACHE_DIR}"
[[ -f "$base" ]] || th_die "the Debian image $base does not exist (images/debian/build.sh builds it)"
[[ "$(id -u)" == 0 ]] || th_die "prepare-image.sh needs root (a loop mount and a chroot of $base's copy)"
th_need_cmd unshare util-linux
mkdir -p "$dir"
key="$(th_hash "$(cat "$base.key" 2>/dev/null || stat -c "%s %Y" "$base")" "$here/slice.sh" "$here/slice.txt" "$here/prepare-image.sh")"
img="$dir/debian-12-build-$key.img"
if [[ ! -f "$img" ]]; then
    th_log "deriving $img from $base: make prepare + the slice once, natively in a chroot (a few minutes)"
    rm -f "$img.tmp"
    cp --sparse=always "$base" "$img.tmp"
    # A private mount namespace: the loop mount and the chroot's /proc, /sys, /dev end with it.
    unshare -m --propagation private bash -euc '
        img="$1" here="$2" mnt="$(mktemp -d)"
        mount -o loop "$img" "$mnt"
        mkdir -p "$mnt/root/tern-bench"
        install -m 0755 "$here/slice.sh" "$mnt/root/tern-bench/slice.sh"
        cp "$here/slice.txt" "$mnt/root/tern-bench/slice.txt"
        mount -t proc proc "$mnt/proc"
        mount -t sysfs sysfs "$mnt/sys"
        mount --bind /dev "$mnt/dev"
        [ -d "$mnt/root/linux-6.1" ] || { echo "no /root/linux-6.1 in the image" >&2; exit 1; }
        nice -n 10 chroot "$mnt" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
            /bin/sh /root/tern-bench/slice.sh prepare
        umount "$mnt/dev" "$mnt/sys" "$mnt/proc"
        umount "$mnt"
        rmdir "$mnt"' sh "$img.tmp" "$here"
    e2fsck -fn "$img.tmp" >/dev/null 2>&1 || th_die "e2fsck -fn of the prepared copy $img.tmp failed"
    mv "$img.tmp" "$img"
    find "$dir" -maxdepth 1 -name 'debian-12-build-*.img' ! -name "$(basename "$img")" -delete
fi
th_log "prepared disk: $img ($(du -m "$img" | cut -f1) MiB used)"
echo "$img"
