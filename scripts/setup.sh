#!/usr/bin/env bash
# Installs everything tern needs on Debian 12 (as root), then configures and builds it in build/.
#   scripts/setup.sh            install packages + build
#   SKIP_APT=1 scripts/setup.sh build only
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # build
  g++ cmake ninja-build pkg-config git ccache
  libexpected-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev liburing-dev
  libgtest-dev libgmock-dev libboost-dev zlib1g-dev libseccomp-dev
  # fuzzers (tests/fuzz, -DTERN_FUZZ=ON with clang++-14 + libFuzzer)
  clang-14 libclang-rt-14-dev
  # nested test host and guests (testhost/, tests/e2e, bench/)
  qemu-system-x86 linux-image-cloud-amd64 busybox-static cpio kmod seabios e2fsprogs
  python3 curl fio iperf3 iproute2 jq
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
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build build
echo "setup: done: build/tern"
