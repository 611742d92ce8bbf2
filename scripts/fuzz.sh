#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) in build-fuzz/ and runs each for a
# bounded time, starting from the saved corpus in tests/fuzz/corpus/<name>/ (copied, so the run
# never edits the repository). A crash fails the script; its input is left in build-fuzz/crashes/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 20 s for each of CMakeLists.txt's TERN_FUZZ_TARGETS, 14 now: under 5 minutes; FUZZ_SECONDS also works)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-${FUZZ_SECONDS:-20}}"
# The targets are CMakeLists.txt's TERN_FUZZ_TARGETS list (one list: "name=source" entries).
mapfile -t targets < <(sed -n '/^set(TERN_FUZZ_TARGETS/,/)/p' CMakeLists.txt | grep -o '"[a-z0-9_]*=' | tr -d '"=')
[[ ${#targets[@]} -gt 0 ]] || { echo "fuzz: no TERN_FUZZ_TARGETS found in CMakeLists.txt" >&2; exit 1; }
command -v clang++-14 >/dev/null || { echo "fuzz: clang++-14 missing (scripts/setup.sh installs it)" >&2; exit 1; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
[[ -f build-fuzz/build.ninja ]] ||
    CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DTERN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
echo "fuzz: building ${targets[*]/#/fuzz_} with clang-14 (libFuzzer, ASan, UBSan)"
cmake --build build-fuzz --target "${targets[@]/#/fuzz_}"
mkdir -p build-fuzz/crashes
failed=0
for t in "${targets[@]}"; do
    corpus="build-fuzz/corpus/$t"
    rm -rf "$corpus" && mkdir -p "$corpus" && cp -r "tests/fuzz/corpus/$t/." "$corpus/"
    echo "fuzz: $t for ${seconds}s"
    if ! "build-fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build-fuzz/crashes/$t-" "$corpus" >"build-fuzz/$t.log" 2>&1; then
        echo "fuzz: $t FAILED; see build-fuzz/$t.log and build-fuzz/crashes/" >&2
        tail -20 "build-fuzz/$t.log" >&2
        failed=$((failed + 1))
    else
        grep -E '^stat::number_of_executed_units|^Done' "build-fuzz/$t.log" | sed "s/^/fuzz: $t: /" || true
    fi
done
echo "fuzz: $(( ${#targets[@]} - failed )) passed, $failed failed"
((failed == 0))
