#!/usr/bin/env bash
# Builds the guest (L2) initramfs: static busybox plus testhost/guest-init.sh as /init, which prints
# the TERN-GUEST-MARKER line and performs tern.action= (poweroff, reboot, shell, idle).
#
# Usage: build-guest-initramfs.sh OUT.cpio.gz [--modules "virtio_ring virtio ..."] [--extra DIR]
#                                [--bin PATH]...
#   --modules LIST  kernel modules (of the stock cloud kernel) copied in and insmod'ed in this order
#   --extra DIR     files copied over the initramfs root (e.g. /actions/<name> scripts)
#   --bin PATH      a host binary (e.g. /usr/bin/fio) copied in at the same path with every library
#                   ldd lists (repeatable). These go into an uncompressed archive placed first
#                   (fio and its libraries are ~80 MB: gzip would cost more than it saves), followed
#                   by the gzip'ed busybox archive; Linux unpacks concatenated archives in turn.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out="" modules="" extra="" bins=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --modules) modules="$2"; shift 2 ;;
        --extra) extra="$2"; shift 2 ;;
        --bin) bins+=("$2"); shift 2 ;;
        -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
        -*) th_die "unknown option $1" ;;
        *) [[ -z "$out" ]] || th_die "more than one output given"; out="$1"; shift ;;
    esac
done
[[ -n "$out" ]] || th_die "usage: $0 OUT.cpio.gz [--modules LIST] [--extra DIR]"
[[ -z "$extra" || -d "$extra" ]] || th_die "--extra: not a directory: $extra"

ver="$(th_kernel_version)"
root="$(mktemp -d)" bin_root="$(mktemp -d)" parts="$(mktemp -d)"
trap 'rm -rf "$root" "$bin_root" "$parts"' EXIT

th_install_busybox "$root"
install -m 0755 "$TH_DIR/guest-init.sh" "$root/init"
mkdir -p "$root/lib/modules" "$root/etc"
: >"$root/etc/guest-modules"
for m in $modules; do
    cp "$(th_module_path "$ver" "$m")" "$root/lib/modules/$m.ko"
    echo "$m" >>"$root/etc/guest-modules"
done
if [[ -n "$extra" ]]; then cp -a "$extra/." "$root/"; fi

mkdir -p "$(dirname "$out")"
if ((${#bins[@]} == 0)); then
    th_make_cpio "$root" "$out"
    exit 0
fi
for b in "${bins[@]}"; do th_copy_with_libs "$b" "$bin_root"; done
# Parts in this run's own temporary directory, the result renamed into place: concurrent builds
# of the same OUT never read each other's half-written files.
th_make_cpio "$bin_root" "$parts/bins.cpio" none
th_make_cpio "$root" "$parts/base.cpio.gz"
# The uncompressed archive goes first: Linux wants each archive to start 4-byte aligned.
tmp="$(mktemp "$out.XXXXXX")"
cat "$parts/bins.cpio" "$parts/base.cpio.gz" >"$tmp"
chmod 0644 "$tmp"
mv "$tmp" "$out"
