#!/usr/bin/env bash
# Builds the test host (L1) initramfs: busybox + testhost/l1-init.sh, the kvm modules, the guest
# kernel and initramfs under /guest/, tern + its libraries (when built), optionally QEMU + libraries +
# firmware, and the scenario script that L1 runs once /dev/kvm is up.
#
# Usage: build-l1.sh OUT.cpio --scenario FILE [--with-qemu] [--with-qsd] [--tern PATH | --no-tern]
#                    [--guest-initramfs FILE] [--guest-modules LIST] [--modules LIST] [--extra DIR]
#                    [--env NAME=VALUE]... [--bin PATH]... [--with-debian-initrd]
#   --scenario FILE         shell script run by L1's init (its exit code becomes TESTHOST-DONE rc=)
#   --with-qemu             include qemu-system-x86_64 (-L $TH_QEMU_FW for its firmware)
#   --with-debian-initrd    include Debian's own initramfs-tools initrd of the guest kernel
#                           (/boot/initrd.img-<ver>: it carries the virtio modules) as $TH_DEBIAN_INITRD,
#                           for a Debian root filesystem guest (images/debian)
#   --with-qsd              include qemu-storage-daemon (a vhost-user-blk back-end; Debian package
#                           qemu-system-common) with its libraries, as $TH_QSD
#   --tern PATH             tern binary (default: $TERN_BIN, else <repo>/build/tern when it exists)
#   --guest-initramfs FILE  guest initramfs (default: build one, with --guest-modules LIST loaded)
#   --modules LIST          extra modules L1 itself loads after kvm-amd (e.g. virtio for a disk)
#   --extra DIR             files copied over L1's root
#   --env NAME=VALUE        variable exported to the scenario (repeatable)
#   --bin PATH              host binary copied into L1 at the same path, with its ldd libraries
#                           (repeatable; e.g. --bin /usr/bin/curl for API tests)
# The scenario sees TH_KERNEL_VERSION, TH_GUEST_KERNEL, TH_GUEST_INITRD, TH_TERN, TH_QEMU, TH_QEMU_FW,
# TH_QSD (TH_TERN / TH_QEMU / TH_QSD are empty when not included), and can source the L1 libraries
# /testhost/l1_lib.sh and /testhost/debian_lib.sh (testhost/README.md). The archive is several uncompressed newc cpio
# archives concatenated (Linux unpacks them in turn); each layer is cached under build/testhost/layers.
set -euo pipefail
shopt -s inherit_errexit  # a failing step inside $(cached_layer ...) fails the build (no partial layer cached)
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

out="" scenario="" with_qemu=0 with_qsd=0 with_debian_initrd=0 tern="${TERN_BIN:-$TH_REPO/build/tern}" guest_initrd="" guest_modules=""
modules="" extra="" envs=() bins=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --scenario) scenario="$2"; shift 2 ;;
        --with-qemu) with_qemu=1; shift ;;
        --with-qsd) with_qsd=1; shift ;;
        --with-debian-initrd) with_debian_initrd=1; shift ;;
        --tern) tern="$2"; shift 2 ;;
        --no-tern) tern=""; shift ;;
        --guest-initramfs) guest_initrd="$2"; shift 2 ;;
        --guest-modules) guest_modules="$2"; shift 2 ;;
        --modules) modules="$2"; shift 2 ;;
        --extra) extra="$2"; shift 2 ;;
        --bin) bins+=("$2"); shift 2 ;;
        --env) [[ "$2" == [A-Za-z_]*=* ]] || th_die "--env wants NAME=VALUE, got '$2'"; envs+=("$2"); shift 2 ;;
        -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) th_die "unknown option $1" ;;
        *) [[ -z "$out" ]] || th_die "more than one output given"; out="$1"; shift ;;
    esac
done
[[ -n "$out" && -n "$scenario" ]] || th_die "usage: $0 OUT.cpio --scenario FILE [options]; see --help"
[[ -r "$scenario" ]] || th_die "scenario not readable: $scenario"
if [[ -n "$tern" && ! -x "$tern" ]]; then
    [[ -z "${TERN_BIN:-}" ]] || th_die "TERN_BIN=$TERN_BIN is not an executable"
    tern=""  # the default path simply isn't built yet
fi

ver="$(th_kernel_version)"
kernel="$(th_kernel_image "$ver")"
layers="$TH_CACHE/layers"
mkdir -p "$layers"

# This run's own work directory (beside the cache, so layers can be hard-linked into it).
work="$(mktemp -d "$TH_CACHE/l1-build-XXXXXX")"
trap 'rm -rf "$work"' EXIT

# cached_layer NAME KEY FUNCTION: path of layer NAME for KEY, running FUNCTION ROOT to fill it if new.
# Safe with concurrent runs (ctest -j): the layer is built in this run's directory, published by an
# atomic rename, and used through a hard link in this run's directory, so another run pruning the
# older versions of NAME (it keeps only the newest) never takes away a layer this run is about to use.
cached_layer() {
    local name="$1" key="$2" fill="$3" file="$layers/$1-$2.cpio" link="$work/layer-$1.cpio" root
    if ! ln "$file" "$link" 2>/dev/null; then
        th_log "building L1 layer '$name'"
        root="$(mktemp -d "$work/root-XXXXXX")"
        "$fill" "$root"
        th_make_cpio "$root" "$link" none
        rm -rf "$root"
        ln -f "$link" "$file.$$" && mv -f "$file.$$" "$file"
        find "$layers" -name "$name-*.cpio" ! -name "$(basename "$file")" -delete
    fi
    echo "$link"
}

if [[ -z "$guest_initrd" ]]; then
    key="$(th_hash "$ver" "$guest_modules" "$TH_DIR/lib.sh" "$TH_DIR/build-guest-initramfs.sh" \
        "$TH_DIR/guest-init.sh" "$(command -v busybox)")"
    guest_initrd="$TH_CACHE/guest-initramfs-$key.cpio.gz"
    if [[ ! -f "$guest_initrd" ]]; then
        th_log "building guest initramfs"
        "$TH_DIR/build-guest-initramfs.sh" "$guest_initrd" --modules "$guest_modules"
    fi
fi
[[ -r "$guest_initrd" ]] || th_die "guest initramfs not readable: $guest_initrd"

fill_base() {
    local root="$1" m rel
    th_install_busybox "$root"
    install -m 0755 "$TH_DIR/l1-init.sh" "$root/init"
    mkdir -p "$root/guest" "$root/testhost"
    cp "$kernel" "$root/guest/vmlinuz"
    for m in irqbypass kvm kvm-amd $modules; do
        rel="$(th_module_path "$ver" "$m")"
        mkdir -p "$root$(dirname "$rel")"
        cp "$rel" "$root$rel"
        case "$m" in irqbypass | kvm | kvm-amd) ;; *)
            rel="${rel#/lib/modules/"$ver"/kernel/}"
            echo "${rel%.ko}" >>"$root/testhost/modules" ;;
        esac
    done
}
fill_qemu() {
    local root="$1" f
    th_copy_with_libs "$(command -v qemu-system-x86_64)" "$root" /usr/bin/qemu-system-x86_64
    mkdir -p "$root/opt/qemu-fw"
    for f in /usr/share/qemu/{qboot.rom,bios-microvm.bin,linuxboot_dma.bin,linuxboot.bin,pvh.bin,kvmvapic.bin} \
        /usr/share/seabios/bios-256k.bin; do
        [[ -r "$f" ]] || th_die "QEMU firmware $f missing; install 'qemu-system-x86' and 'seabios'"
        cp -L "$f" "$root/opt/qemu-fw/"
    done
}
fill_qsd() { th_copy_with_libs "$(command -v qemu-storage-daemon)" "$1" /usr/bin/qemu-storage-daemon; }
fill_debian_initrd() { mkdir -p "$1/guest" && cp "$debian_initrd" "$1/guest/initrd.img-debian"; }
# tern's debug info (most of a RelWithDebInfo binary: ~270 of 285 MB) stays out of L1: L1 would
# load and unpack it under TCG on every boot. The symbol table stays (backtraces keep their names).
fill_tern() { th_copy_with_libs "$tern" "$1" /usr/local/bin/tern && strip --strip-debug "$1/usr/local/bin/tern"; }

parts=()
key="$(th_hash "$ver" "$modules" "$TH_DIR/lib.sh" "$TH_DIR/build-l1.sh" "$TH_DIR/l1-init.sh" \
    "$(command -v busybox)" "$kernel")"
# One cached base per list of L1 modules (tests differ in it), so they don't replace each other's.
parts+=("$(cached_layer "base$(th_hash "$modules" | cut -c1-8)" "$key" fill_base)")
if [[ "$with_qemu" == 1 ]]; then
    th_need_cmd qemu-system-x86_64 qemu-system-x86
    key="$(th_hash "$TH_DIR/build-l1.sh" "$(command -v qemu-system-x86_64)" \
        "$(ldd "$(command -v qemu-system-x86_64)" | awk '{print $1, $3}')")"
    parts+=("$(cached_layer qemu "$key" fill_qemu)")
fi
if [[ "$with_qsd" == 1 ]]; then
    th_need_cmd qemu-storage-daemon qemu-system-common
    key="$(th_hash "$TH_DIR/build-l1.sh" "$(command -v qemu-storage-daemon)" \
        "$(ldd "$(command -v qemu-storage-daemon)" | awk '{print $1, $3}')")"
    parts+=("$(cached_layer qsd "$key" fill_qsd)")
fi
debian_initrd="/boot/initrd.img-$ver"
if [[ "$with_debian_initrd" == 1 ]]; then
    [[ -r "$debian_initrd" ]] || th_die "--with-debian-initrd: $debian_initrd not readable (Debian's initramfs-tools makes it when linux-image-cloud-amd64 is installed)"
    key="$(th_hash "$TH_DIR/build-l1.sh" "$debian_initrd")"
    parts+=("$(cached_layer debian-initrd "$key" fill_debian_initrd)")
fi
if [[ -n "$tern" ]]; then
    key="$(th_hash "$TH_DIR/build-l1.sh" "$tern" "$(ldd "$tern" 2>/dev/null | awk '{print $1, $3}')")"
    parts+=("$(cached_layer tern "$key" fill_tern)")
fi

# The scenario layer (with the guest initramfs: most tests build their own) is always rebuilt.
top="$work/top"
mkdir -p "$top/testhost" "$top/guest"
install -m 0755 "$scenario" "$top/testhost/scenario"
# The L1-side shell libraries scenarios may source: /testhost/l1_lib.sh, /testhost/debian_lib.sh.
install -m 0644 "$TH_DIR/l1_lib.sh" "$TH_DIR/debian_lib.sh" "$top/testhost/"
cp "$guest_initrd" "$top/guest/initramfs.cpio.gz"
{
    echo "TH_KERNEL_VERSION=$ver"
    echo "TH_GUEST_KERNEL=/guest/vmlinuz"
    echo "TH_GUEST_INITRD=/guest/initramfs.cpio.gz"
    echo "TH_TERN=$([[ -n "$tern" ]] && echo /usr/local/bin/tern)"
    echo "TH_QEMU=$([[ "$with_qemu" == 1 ]] && echo /usr/bin/qemu-system-x86_64)"
    echo "TH_QEMU_FW=/opt/qemu-fw"
    echo "TH_QSD=$([[ "$with_qsd" == 1 ]] && echo /usr/bin/qemu-storage-daemon)"
    echo "TH_DEBIAN_INITRD=$([[ "$with_debian_initrd" == 1 ]] && echo /guest/initrd.img-debian)"
    for e in ${envs[@]+"${envs[@]}"}; do printf '%s=%q\n' "${e%%=*}" "${e#*=}"; done
} >"$top/testhost/env.sh"
if [[ -n "$extra" ]]; then cp -a "$extra/." "$top/"; fi
for b in ${bins[@]+"${bins[@]}"}; do th_copy_with_libs "$b" "$top"; done
th_make_cpio "$top" "$work/top.cpio" none
parts+=("$work/top.cpio")

mkdir -p "$(dirname "$out")"
tmp="$(mktemp "$out.XXXXXX")"
cat "${parts[@]}" >"$tmp"
mv "$tmp" "$out"
