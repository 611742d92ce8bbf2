#!/usr/bin/env bash
# Builds tern and runs the whole test suite: unit, kvm (tiny guests on /dev/kvm) and e2e (stock
# Linux guests in the nested test host). Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -f build/build.ninja ]] || cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build
exec ctest --test-dir build --output-on-failure "$@"
