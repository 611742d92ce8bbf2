#!/bin/bash
# mmdebstrap --customize-hook for images/debian/build.sh: runs on the host, $1 = the new root.
# Copies overlay/ in, unpacks the kernel source, and sets up the services (docs/debian-guest.md).
set -euo pipefail
root=$1
here=$(dirname "$(readlink -f "$0")")
ch() { chroot "$root" "$@"; }

cp -a "$here/overlay/." "$root/"

echo "img: unpacking linux-source-6.1 to /root/linux-6.1 and running make defconfig"
ch tar -C /root -xf /usr/src/linux-source-6.1.tar.xz
ch mv /root/linux-source-6.1 /root/linux-6.1
ch rm -f /usr/src/linux-source-6.1.tar.xz
ch make -C /root/linux-6.1 -s defconfig

ch passwd -d root >/dev/null
ch systemctl enable -q systemd-networkd.service tern-marker.service
# No failed unit without a network, no prompts on first boot, and no periodic jobs
# (quiet benchmarks). Masking a unit that is not installed is harmless.
ch systemctl mask -q systemd-networkd-wait-online.service systemd-firstboot.service \
  apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
  e2scrub_reap.service fstrim.timer man-db.timer systemd-tmpfiles-clean.timer
# Each boot of a fresh copy generates its own machine-id (DHCP client ids differ per VM).
: >"$root/etc/machine-id"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
