#!/usr/bin/env bash
# Installs everything tern needs on Debian 12 (as root), then configures and builds it in build/.
#   scripts/setup.sh            install packages + build
#   SKIP_APT=1 scripts/setup.sh build only
#   SKIP_IMAGE=1 scripts/setup.sh   no Debian guest image (images/debian/build.sh, docs/debian-guest.md)
#   IMAGE_BOOT=none,bios,uefi scripts/setup.sh   also the UEFI variant (default: none,bios — the
#                                                firmware e2e boots the BIOS image)
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # build
  g++ cmake ninja-build pkg-config git ccache
  libexpected-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev liburing-dev
  libgtest-dev libgmock-dev libboost-dev zlib1g-dev libseccomp-dev
  liblzma-dev libzstd-dev liblz4-dev  # host-side kernel decompression (src/arch/x86/kernel_payload)
  libbpf-dev libelf-dev clang-14 llvm-14  # in-kernel exit accounting (src/trace: eBPF, static libbpf)
  # fuzzers (tests/fuzz, -DTERN_FUZZ=ON with clang++-14 + libFuzzer)
  clang-14 libclang-rt-14-dev
  # nested test host and guests (testhost/, tests/e2e, bench/)
  qemu-system-x86 linux-image-cloud-amd64 busybox-static cpio kmod seabios e2fsprogs
  qemu-system-common  # qemu-storage-daemon: the vhost-user-blk back-end of tests/e2e/vhost_user_test.sh
  qemu-utils  # qemu-img: the qcow2 peer of src/block/qcow2 tests (create, convert, check, compare)
  python3 curl fio iperf3 iproute2 jq
  lz4  # tests/e2e/boot_scenario.sh extracts an uncompressed vmlinux for the ELF boot case
  memtest86+  # /boot/memtest86+x64.bin: the non-Linux guest of tests/e2e/boot_test.sh
  mmdebstrap  # the Debian 12 guest image (images/debian/build.sh)
  # its bootable variants (build.sh --boot bios,uefi; ~6 MB to download, ~41 MB installed) and the
  # firmware that boots them (ovmf: 7.5 MB, 15 MB installed; SeaBIOS is above)
  grub-pc-bin grub-efi-amd64-bin mtools dosfstools fdisk ovmf
  grub-rescue-pc  # a BIOS-bootable GRUB disk: tests/e2e/firmware_test.sh boots it through SeaBIOS
)

if [[ "${SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
      echo "setup: installing packages needs root: ${missing[*]}" >&2
      exit 1
    fi
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  else
    echo "setup: all Debian packages present"
  fi
fi

echo "setup: building tern in build/"
# ccache (when installed) makes rebuilds in a fresh clone on the same machine cheap.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build
echo "setup: built build/tern"

# The Debian guest image (~1–2 min with its tree on a tmpfs, more on disk, and ~2 GB the first time, then cached by the hash of images/debian/).
# Without root or the Debian mirror (build.sh exits 3) it is skipped with a message, except in CI.
# Each variant not built yet needs ~2.1 GiB of disk (sparse 4 GiB files) plus ~1 GiB while it is
# made: a full disk is said before minutes of work, not as mkfs.ext4's "No space left on device".
check_image_space() {
  local want=0 v f avail
  for v in $(tr ',' ' ' <<<"${IMAGE_BOOT:-none,bios}"); do
    f=build/images/debian-12-$v.img
    [[ "$v" != none ]] || f=build/images/debian-12.img
    [[ -f "$f" ]] || want=$((want + 3))
  done
  ((want > 0)) || return 0
  mkdir -p build/images
  avail=$(df -P -BG build/images | awk 'NR == 2 { sub(/G$/, "", $4); print $4 }')
  if ((avail < want)); then
    echo "setup: build/images has ${avail} GiB free; the Debian guest images (IMAGE_BOOT=${IMAGE_BOOT:-none,bios}) need ~${want} GiB: free some disk space" >&2
    exit 1
  fi
}
if [[ "${SKIP_IMAGE:-0}" != 1 ]]; then
  check_image_space
  rc=0
  images/debian/build.sh --boot "${IMAGE_BOOT:-none,bios}" || rc=$?
  if ((rc == 3)) && [[ -z "${CI:-}" ]]; then
    echo "setup: skipped the Debian guest image (see above); the tests that boot it will say so" >&2
  elif ((rc != 0)); then
    echo "setup: images/debian/build.sh failed (rc=$rc)" >&2
    exit "$rc"
  fi
fi
echo "setup: done"
