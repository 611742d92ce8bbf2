#!/usr/bin/env bash
# Boots the nested test host (L1: QEMU TCG, AMD CPU with SVM + NPT, one vCPU) with a scenario script,
# streams its console to stdout and to a log file, and exits with the scenario's exit code.
#
# Usage: run.sh --scenario FILE [--with-qemu] [--memory MB] [--timeout SEC] [--log FILE]
#               [--interactive] [build-l1.sh options: --tern PATH, --no-tern, --env NAME=VALUE, ...]
#   --memory MB     L1 RAM (default 6144: room for a 3328 MiB nested guest plus the initramfs)
#   --timeout SEC   kill L1 after SEC seconds of host time (default 900)
#   --log FILE      console log (default build/testhost/logs/<scenario>-<time>.log)
#   --interactive   connect the terminal to L1's console (default: stdin is /dev/null)
# Exit: the scenario's rc from "TESTHOST-DONE rc=N"; 124 on timeout; 1 if L1 failed before that.
# Environment: TESTHOST_CPU overrides the L1 CPU model (default EPYC,+svm,+npt).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

scenario="" memory=6144 timeout=900 log="" interactive=0 build_args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --scenario) scenario="$2"; shift 2 ;;
        --memory) memory="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --log) log="$2"; shift 2 ;;
        --interactive) interactive=1; shift ;;
        --with-qemu | --no-tern) build_args+=("$1"); shift ;;
        --tern | --guest-initramfs | --guest-modules | --modules | --extra | --env) build_args+=("$1" "$2"); shift 2 ;;
        -h | --help) sed -n '2,13p' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ -n "$scenario" ]] || th_die "usage: $0 --scenario FILE [options]; see --help"
th_need_cmd qemu-system-x86_64 qemu-system-x86
th_need_cmd timeout coreutils

ver="$(th_kernel_version)"
kernel="$(th_kernel_image "$ver")"
mkdir -p "$TH_CACHE/logs"
[[ -n "$log" ]] || log="$TH_CACHE/logs/$(basename "$scenario" .sh)-$(date +%Y%m%d-%H%M%S).log"
mkdir -p "$(dirname "$log")"
: >"$log"  # a stale TESTHOST-DONE from an earlier run must not count
l1="$(mktemp "$TH_CACHE/l1-XXXXXX.cpio")"
trap 'rm -f "$l1"' EXIT

th_log "building test host initramfs (kernel $ver)"
"$TH_DIR/build-l1.sh" "$l1" --scenario "$scenario" ${build_args[@]+"${build_args[@]}"}
th_log "booting test host: TCG, ${memory} MiB, 1 vCPU, $(du -m "$l1" | cut -f1) MiB initramfs; log: $log"

stdin=/dev/null
[[ "$interactive" == 0 ]] || stdin=/dev/stdin
set +e
timeout -k 10 "$timeout" qemu-system-x86_64 -accel tcg -cpu "${TESTHOST_CPU:-EPYC,+svm,+npt}" -smp 1 -m "$memory" \
    -kernel "$kernel" -initrd "$l1" -append "console=ttyS0 panic=-1 quiet" \
    -display none -nodefaults -serial stdio -no-reboot <"$stdin" 2>&1 |
    while IFS= read -r line; do
        line="${line//$'\r'/}"  # L2 consoles arrive as "\r\r\n" after two tty layers
        # TCG lacks a few EPYC features (rdseed, sha-ni, ...); kvm-amd does not need them.
        [[ "$line" != *"TCG doesn't support requested feature"* ]] || continue
        printf '%s\n' "$line"
        printf '%s\n' "$line" >>"$log"
        case "$line" in
            TESTHOST-BOOTED*) th_log "test host kernel up; loading kvm-amd" ;;
            TESTHOST-READY*) th_log "test host ready (/dev/kvm up); running scenario $(basename "$scenario")" ;;
            TESTHOST-DONE*) th_log "scenario finished: ${line#TESTHOST-DONE }" ;;
        esac
    done
qemu_rc="${PIPESTATUS[0]}"
set -e

if [[ "$qemu_rc" == 124 || "$qemu_rc" == 137 ]]; then
    th_log "TIMEOUT: test host still running after ${timeout}s; killed (log: $log)"
    exit 124
fi
done_line="$(grep -a '^TESTHOST-DONE rc=' "$log" | tail -n 1 || true)"
if [[ -z "$done_line" ]]; then
    err="$(grep -a '^TESTHOST-ERROR' "$log" | head -n 1 || true)"
    th_log "FAILED: test host ended (qemu status $qemu_rc) without TESTHOST-DONE${err:+: $err} (log: $log)"
    exit 1
fi
exit "${done_line#TESTHOST-DONE rc=}"
