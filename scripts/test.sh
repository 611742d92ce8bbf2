#!/usr/bin/env bash
# Builds tern and runs the whole test suite: the libFuzzer targets for a bounded time
# (scripts/fuzz.sh, FUZZ_SECONDS per target, default 20; FUZZ_SECONDS=0 skips them), then every
# CTest test: unit, kvm (tiny guests on /dev/kvm) and e2e (stock Linux guests in the nested test
# host). Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/build.ninja ]] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build
if [[ "${FUZZ_SECONDS:-20}" != 0 ]]; then
    scripts/fuzz.sh "${FUZZ_SECONDS:-20}"
fi
exec ctest --test-dir build --output-on-failure "$@"
