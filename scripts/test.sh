#!/usr/bin/env bash
# Builds tern and runs the whole test suite: the libFuzzer targets for a bounded time
# (scripts/fuzz.sh, FUZZ_SECONDS per target, default 20, FUZZ_JOBS at a time, default 2;
# FUZZ_SECONDS=0 skips them), then every CTest test: unit, kvm (tiny guests on /dev/kvm) and e2e
# (stock Linux guests in the nested test host). CTest runs TEST_JOBS tests at a time (default 2, one
# per core of the CI machine: each e2e test's test host is one single-threaded TCG QEMU with 6 GiB;
# the e2e tests start first, the short ones fill in). Extra arguments go to ctest (e.g. -L unit,
# or -j1 for one at a time). docs/ci.md says how long each part takes.
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[[ -f build/build.ninja ]] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build build
if [[ "${FUZZ_SECONDS:-20}" != 0 ]]; then
    scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
jobs="${TEST_JOBS:-2}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "test: TEST_JOBS must be a positive number, got '$jobs'" >&2; exit 1; }
exec ctest --test-dir build --output-on-failure -j "$jobs" "$@"
