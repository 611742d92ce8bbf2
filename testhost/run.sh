#!/usr/bin/env bash
# Boots the nested test host (L1: QEMU TCG, AMD CPU with SVM + NPT, one vCPU) with a scenario script,
# streams its console to stdout and to a log file, and exits with the scenario's exit code.
#
# Usage: run.sh --scenario FILE [--memory MB] [--timeout SEC] [--log FILE] [--interactive]
#               [--disk FILE] [--disk-snapshot] [--stall SEC] [--pidfile FILE] [--tcg-thread single|multi]
#               [--with-qemu] [--with-qsd] [--with-debian-initrd] [--tern PATH | --no-tern]
#               [--guest-initramfs FILE] [--guest-modules LIST] [--modules LIST] [--extra DIR]
#               [--env NAME=VALUE]... [--bin PATH]...
#   --scenario FILE shell script L1 runs once /dev/kvm is up (its exit code is run.sh's)
#   --memory MB     L1 RAM (default 6144: room for a 3328 MiB nested guest plus the initramfs)
#   --timeout SEC   kill L1 after SEC seconds of host time (default 900)
#   --log FILE      console log (default build/testhost/logs/<scenario>-<time>.log)
#   --interactive   connect the terminal to L1's console (default: stdin is /dev/null)
#   --disk FILE     attach FILE (raw) to L1 as a virtio disk, /dev/vda; L1 needs the virtio modules
#                   (--modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev
#                   virtio_pci virtio_blk") and the scenario mounts it (O_DIRECT works there, not on tmpfs)
#   --disk-snapshot QEMU's snapshot=on for --disk: L1 writes to a temporary overlay, FILE is never
#                   changed (a cached guest image the scenario boots and modifies, e.g. images/debian)
#   --stall SEC     kill L1 when its QEMU used no CPU for SEC seconds (a wedged nested guest); exit 125
#   --with-debian-initrd  Debian's initrd of the guest kernel in L1 as $TH_DEBIAN_INITRD (build-l1.sh)
#   --pidfile FILE  write L1's QEMU pid there (e.g. to read its host CPU time while it runs)
#   --tcg-thread single|multi  L1's -accel tcg,thread= (default: TH_TCG_THREAD, else QEMU's own:
#                   multi on x86). single avoids QEMU 7.2's tcg_handle_interrupt BQL assertion (abort)
#                   seen with an L2 guest in firmware (SeaBIOS -> GRUB); docs/ci.md has its cost
#   --with-qemu, --with-qsd, --tern PATH, --no-tern, --guest-initramfs FILE, --guest-modules LIST
#   (modules the default busybox guest loads, e.g. "virtio_ring virtio ... virtio_blk" for a
#   --disk in tern), --modules LIST (modules L1 loads), --extra DIR, --env NAME=VALUE, --bin PATH:
#                   passed to build-l1.sh, whose header says what each does
# Exit: the scenario's rc from "TESTHOST-DONE rc=N"; 124 on timeout; 125 when L1 wedged (--stall) or
# its QEMU aborted (SIGABRT, e.g. a TCG assertion) before TESTHOST-DONE: the emulator failed, not the
# test (a TESTHOST-QEMU-ABORT log line says so; th_run_retrying boots it once more); 1 if L1 failed
# before TESTHOST-DONE otherwise (a panic, TESTHOST-ERROR).
# Environment: TESTHOST_CPU overrides the L1 CPU model (default EPYC,+svm,+npt); TH_TCG_THREAD is
# the default of --tcg-thread (so e2e tests and benchmarks pass it through run.sh unchanged).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

scenario="" memory=6144 timeout=900 log="" interactive=0 build_args=() disk="" disk_snapshot="" stall=0 pidfile=""
tcg_thread="${TH_TCG_THREAD:-}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --scenario) scenario="$2"; shift 2 ;;
        --memory) memory="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --log) log="$2"; shift 2 ;;
        --interactive) interactive=1; shift ;;
        --disk) disk="$2"; shift 2 ;;
        --disk-snapshot) disk_snapshot=",snapshot=on"; shift ;;
        --stall) stall="$2"; shift 2 ;;
        --pidfile) pidfile="$2"; shift 2 ;;
        --tcg-thread) tcg_thread="$2"; shift 2 ;;
        --with-qemu | --with-qsd | --with-debian-initrd | --no-tern) build_args+=("$1"); shift ;;
        --tern | --guest-initramfs | --guest-modules | --modules | --extra | --env | --bin) build_args+=("$1" "$2"); shift 2 ;;
        -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
        *) th_die "unknown argument $1; see --help" ;;
    esac
done
[[ -n "$scenario" ]] || th_die "usage: $0 --scenario FILE [options]; see --help"
[[ -z "$disk" || -f "$disk" ]] || th_die "--disk: not a file: $disk"
[[ "$stall" =~ ^[0-9]+$ ]] || th_die "--stall wants whole seconds, got '$stall'"
[[ -z "$tcg_thread" || "$tcg_thread" == single || "$tcg_thread" == multi ]] ||
    th_die "--tcg-thread (or TH_TCG_THREAD) wants single or multi, got '$tcg_thread'"
th_need_cmd qemu-system-x86_64 qemu-system-x86
th_need_cmd timeout coreutils

ver="$(th_kernel_version)"
kernel="$(th_kernel_image "$ver")"
mkdir -p "$TH_CACHE/logs"
[[ -n "$log" ]] || log="$TH_CACHE/logs/$(basename "$scenario" .sh)-$(date +%Y%m%d-%H%M%S)-$$.log"
mkdir -p "$(dirname "$log")"
: >"$log"  # a stale TESTHOST-DONE from an earlier run must not count
l1="$(mktemp "$TH_CACHE/l1-XXXXXX.cpio")"
[[ -n "$pidfile" ]] || pidfile="$l1.pid"
stalled="$l1.stalled"
rm -f "$pidfile"  # a stale pid must not be watched
# `timeout` puts QEMU in its own process group: stop it explicitly when this script is interrupted.
cleanup() {
    local pid
    pid="$(cat "$pidfile" 2>/dev/null || true)"
    if [[ -n "$pid" ]] && grep -qa qemu-system "/proc/$pid/cmdline" 2>/dev/null; then kill "$pid"; fi
    rm -f "$l1" "$pidfile" "$stalled"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

th_log "building test host initramfs (kernel $ver)"
"$TH_DIR/build-l1.sh" "$l1" --scenario "$scenario" ${build_args[@]+"${build_args[@]}"}
th_log "booting test host: TCG${tcg_thread:+ (thread=$tcg_thread)}, ${memory} MiB, 1 vCPU, $(du -m "$l1" | cut -f1) MiB initramfs; log: $log"

stdin=/dev/null
[[ "$interactive" == 0 ]] || stdin=/dev/stdin
disk_args=()
[[ -z "$disk" ]] || disk_args=(-drive "file=$disk,if=virtio,format=raw$disk_snapshot")
[[ -z "$disk_snapshot" || -n "$disk" ]] || th_die "--disk-snapshot needs --disk FILE"

# stall_watch SEC: kills L1's QEMU once its CPU time (utime+stime) and its console log both stayed
# the same for SEC seconds (an idle L1 still uses ~5 ms of host CPU per second: see TESTHOST.md).
# Before the kill it records what it saw (QEMU's state and wait channel, the host's load and free
# memory, the console's last lines) on stderr and in the log, so a CI failure says where L1 stopped.
stall_watch() {
    local pid="" last="" same=0 now
    while [[ -z "$pid" ]]; do sleep 1; pid="$(cat "$pidfile" 2>/dev/null || true)"; done
    while now="$(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null)"; do
        now="$now/$(wc -c <"$log" 2>/dev/null || echo 0)"
        if [[ "$now" == "$last" ]]; then same=$((same + 5)); else same=0 last="$now"; fi
        if ((same >= $1)); then
            local seen
            seen="qemu pid $pid $(awk '/^State:/ { print "state", $2 }' "/proc/$pid/status" 2>/dev/null) wchan $(cat "/proc/$pid/wchan" 2>/dev/null || echo '?'), cpu ticks/log bytes $now; host load $(cut -d' ' -f1-3 /proc/loadavg), $(awk '/^MemAvailable:/ { print int($2 / 1024) " MiB available" }' /proc/meminfo)"
            th_log "STALL: test host used no CPU and wrote no console line for ${same}s (wedged); $seen; last console lines:"
            tail -n 5 "$log" | sed 's/^/    | /' >&2
            echo "TESTHOST-STALL no CPU and no console output for ${same}s; $seen" >>"$log"
            : >"$stalled"
            kill "$pid"
            return
        fi
        sleep 5
    done
}
watch_pid=""
if ((stall > 0)); then stall_watch "$stall" & watch_pid=$!; fi

# no_timer_check: L1's boot-time test that the 8254 timer interrupt arrives through the IO-APIC is
# timed by the host's clock; on a busy host (two L1s and a build on 2 cores) it failed and L1
# panicked ("IO-APIC + timer doesn't work!"). Virtual machines are commonly booted without it.
# --interactive: --foreground keeps QEMU in the terminal's process group (else reading and setting up
# the terminal stop it with SIGTTIN/SIGTTOU).
fg=()
[[ "$interactive" == 0 ]] || fg=(--foreground)
qemu=(timeout ${fg[@]+"${fg[@]}"} -k 10 "$timeout" qemu-system-x86_64 -accel "tcg${tcg_thread:+,thread=$tcg_thread}" -cpu "${TESTHOST_CPU:-EPYC,+svm,+npt}" -smp 1 -m "$memory"
    -kernel "$kernel" -initrd "$l1" -append "console=ttyS0 panic=-1 quiet no_timer_check" ${disk_args[@]+"${disk_args[@]}"}
    -display none -nodefaults -serial stdio -no-reboot -pidfile "$pidfile")
# TCG lacks a few EPYC features (rdseed, sha-ni, ...); kvm-amd does not need them.
tcg_noise="TCG doesn't support requested feature"
set +e
if [[ "$interactive" == 1 ]]; then
    # Byte by byte, so a shell prompt and the characters typed show at once (a line loop holds them).
    "${qemu[@]}" <"$stdin" 2> >(grep -av "$tcg_noise" >&2) | tee -a "$log"
    qemu_rc="${PIPESTATUS[0]}"
else
    "${qemu[@]}" <"$stdin" 2>&1 | while IFS= read -r line; do
        line="${line//$'\r'/}"  # L2 consoles arrive as "\r\r\n" after two tty layers
        [[ "$line" != *"$tcg_noise"* ]] || continue
        printf '%s\n' "$line"
        printf '%s\n' "$line" >>"$log"
        case "$line" in
            TESTHOST-BOOTED*) th_log "test host kernel up; loading kvm-amd" ;;
            TESTHOST-READY*) th_log "test host ready (/dev/kvm up); running scenario $(basename "$scenario")" ;;
            TESTHOST-DONE*) th_log "scenario finished: ${line#TESTHOST-DONE }" ;;
        esac
    done
    qemu_rc="${PIPESTATUS[0]}"
fi
set -e
if [[ -n "$watch_pid" ]]; then kill "$watch_pid" 2>/dev/null || true; wait "$watch_pid" 2>/dev/null || true; fi
if [[ -e "$stalled" ]]; then
    th_log "STALLED: the test host stopped using CPU and was killed (log: $log)"
    exit 125
fi

done_line="$(grep -a '^TESTHOST-DONE rc=' "$log" | tail -n 1 | tr -d '\r' || true)"  # raw with --interactive
# QEMU (L1) aborted before the scenario's verdict: 134 is SIGABRT (timeout re-raises the signal
# its child died of), e.g. glib's "ERROR:...: assertion failed: (...)" in TCG. The emulator failed,
# not the test: exit 125 like a wedge, so th_run_retrying boots L1 once more (an abort after
# TESTHOST-DONE changes nothing: the verdict stands).
if [[ -z "$done_line" && "$qemu_rc" == 134 ]]; then
    what="$(grep -a -m 1 -E '^(Bail out! )?ERROR:.*assertion failed|^qemu-system[^:]*: .*Assertion .* failed' "$log" | tr -d '\r' || true)"
    echo "TESTHOST-QEMU-ABORT qemu status $qemu_rc (SIGABRT) before TESTHOST-DONE: ${what:-no assertion line}" >>"$log"
    th_log "ABORTED: the test host's QEMU aborted (status $qemu_rc${what:+: $what}); an emulator failure, not the test's (log: $log)"
    exit 125
fi

if [[ "$qemu_rc" == 124 || "$qemu_rc" == 137 ]]; then
    th_log "TIMEOUT: test host still running after ${timeout}s; killed (log: $log)"
    exit 124
fi
if [[ -z "$done_line" ]]; then
    err="$(grep -a '^TESTHOST-ERROR' "$log" | head -n 1 || true)"
    th_log "FAILED: test host ended (qemu status $qemu_rc) without TESTHOST-DONE${err:+: $err} (log: $log)"
    exit 1
fi
exit "${done_line#TESTHOST-DONE rc=}"
