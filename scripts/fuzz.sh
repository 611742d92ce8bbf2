#!/usr/bin/env bash
# Builds the libFuzzer targets with clang-14 (ASan + UBSan) in build-fuzz/ and runs each for a
# bounded time, starting from the saved corpus in tests/fuzz/corpus/<name>/ (copied, so the run
# never edits the repository). A crash fails the script; its input is left in build-fuzz/crashes/.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 20 s for each of CMakeLists.txt's TERN_FUZZ_TARGETS,
#                                            20 now, FUZZ_JOBS (default 2) at a time: ~3.5 minutes;
#                                            FUZZ_SECONDS also works)
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
# fuzz_one NAME: runs one target for $seconds from a copy of its corpus; its own log; status 1 on a crash.
fuzz_one() {
    local t="$1" corpus="build-fuzz/corpus/$1"
    rm -rf "$corpus" && mkdir -p "$corpus" && cp -r "tests/fuzz/corpus/$t/." "$corpus/"
    if ! "build-fuzz/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build-fuzz/crashes/$t-" "$corpus" >"build-fuzz/$t.log" 2>&1; then
        { echo "fuzz: $t FAILED; see build-fuzz/$t.log and build-fuzz/crashes/"; tail -20 "build-fuzz/$t.log"; } >&2
        return 1
    fi
    grep -E '^stat::number_of_executed_units|^Done' "build-fuzz/$t.log" | sed "s/^/fuzz: $t: /" || true
}
# FUZZ_JOBS targets at a time (default 2, one per core of the CI machine): the whole run takes
# about ceil(targets / FUZZ_JOBS) x SECONDS.
jobs="${FUZZ_JOBS:-2}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: FUZZ_JOBS must be a positive number, got '$jobs'" >&2; exit 1; }
echo "fuzz: ${#targets[@]} targets for ${seconds}s each, $jobs at a time"
failed=0 running=0
for t in "${targets[@]}"; do
    if ((running >= jobs)); then
        wait -n || failed=$((failed + 1))
        running=$((running - 1))
    fi
    fuzz_one "$t" &
    running=$((running + 1))
done
while ((running > 0)); do
    wait -n || failed=$((failed + 1))
    running=$((running - 1))
done
echo "fuzz: $(( ${#targets[@]} - failed )) passed, $failed failed"
((failed == 0))
