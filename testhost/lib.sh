# shellcheck shell=bash disable=SC2034  # TH_* variables are used by the scripts that source this
# testhost/lib.sh — helpers shared by the nested test host scripts (source it, don't run it).
#
# The test host ("L1") is a QEMU TCG machine with an AMD CPU that has SVM + nested paging; it boots
# Debian's stock cloud kernel, loads kvm-amd, and runs a VMM (tern or QEMU) on its real /dev/kvm.
# See shared/TESTHOST.md. Environment overrides:
#   TESTHOST_KERNEL_VERSION  kernel release to use (default: newest /boot/vmlinuz-*-cloud-amd64)
#   TESTHOST_CACHE           cache directory (default: <repo>/build/testhost)

TH_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TH_REPO="$(cd "$TH_DIR/.." && pwd)"
TH_CACHE="${TESTHOST_CACHE:-$TH_REPO/build/testhost}"
TH_T0="${TH_T0:-$(date +%s.%N)}"
export TH_T0

# Progress line on stderr with the time elapsed since the first script of this run started.
th_log() {
    local now
    now="$(date +%s.%N)"
    awk -v a="$TH_T0" -v b="$now" -v m="$*" 'BEGIN { printf "[testhost %6.1fs] %s\n", b - a, m }' >&2
}

th_die() {
    printf 'testhost: error: %s\n' "$*" >&2
    exit 1
}

# th_need_cmd CMD DEBIAN_PACKAGE: fail clearly if a host tool is missing.
th_need_cmd() {
    command -v "$1" >/dev/null 2>&1 || th_die "'$1' not found; install the Debian package '$2'"
}

# Release of the stock cloud kernel used both as the test host (L1) and as the guest (L2).
th_kernel_version() {
    if [[ -n "${TESTHOST_KERNEL_VERSION:-}" ]]; then
        echo "$TESTHOST_KERNEL_VERSION"
        return
    fi
    local k
    k="$(ls /boot/vmlinuz-*-cloud-amd64 2>/dev/null | sort -V | tail -n 1)"
    [[ -n "$k" ]] || th_die "no /boot/vmlinuz-*-cloud-amd64; install the Debian package 'linux-image-cloud-amd64'"
    k="${k#/boot/vmlinuz-}"
    echo "$k"
}

th_kernel_image() {
    local img="/boot/vmlinuz-$1"
    [[ -r "$img" ]] || th_die "cannot read $img (missing, or not root: Debian installs it mode 0600)"
    echo "$img"
}

th_modules_dir() {
    local dir="/lib/modules/$1"
    [[ -d "$dir/kernel" ]] || th_die "no $dir/kernel; install the Debian package 'linux-image-$1'"
    echo "$dir"
}

# th_module_path VERSION NAME: path of NAME.ko under the kernel's modules ('-' and '_' are equivalent).
th_module_path() {
    local dir alt found
    dir="$(th_modules_dir "$1")"
    alt="$(echo "$2" | tr '_-' '-_')"
    found="$(find "$dir/kernel" \( -name "$2.ko" -o -name "$alt.ko" \) | head -n 1)"
    [[ -n "$found" ]] || th_die "kernel module '$2' not found under $dir/kernel (compressed modules are not supported)"
    echo "$found"
}

# th_copy_with_libs BIN ROOT [DEST]: copy BIN into ROOT at DEST (default: the same path), plus every
# library that ldd lists and the dynamic loader, each at the path ldd prints (symlinks resolved).
th_copy_with_libs() {
    local bin="$1" root="$2" dest="${3:-$1}" lib
    [[ -x "$bin" ]] || th_die "not an executable: $bin"
    mkdir -p "$root$(dirname "$dest")"
    cp -L "$bin" "$root$dest"
    # Lines look like "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux... (0x...)".
    for lib in $(ldd "$bin" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
        mkdir -p "$root$(dirname "$lib")"
        cp -L "$lib" "$root$lib"
    done
}

# th_install_busybox ROOT: busybox at ROOT/bin/busybox plus a symlink for each applet in ROOT/bin.
th_install_busybox() {
    local root="$1" bb applet
    bb="$(command -v busybox || true)"
    [[ -n "$bb" ]] || th_die "busybox not found; install the Debian package 'busybox-static'"
    ldd "$bb" >/dev/null 2>&1 && th_die "$bb is dynamically linked; install the Debian package 'busybox-static'"
    mkdir -p "$root/bin" "$root/sbin" "$root/usr/bin" "$root/usr/sbin"
    cp -L "$bb" "$root/bin/busybox"
    for applet in $("$bb" --list); do
        [[ -e "$root/bin/$applet" ]] || ln -s busybox "$root/bin/$applet"
    done
}

# th_make_cpio DIR OUT [gzip|none]: newc archive of DIR (owned by root), gzip'ed unless 'none'.
# Linux accepts several such archives concatenated into one initramfs.
th_make_cpio() {
    local dir="$1" out="$2" comp="${3:-gzip}" tmp
    th_need_cmd cpio cpio
    tmp="$(mktemp "$out.XXXXXX")"  # unique, so concurrent builds never share a half-written file
    if [[ "$comp" == none ]]; then
        (cd "$dir" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$tmp"
    else
        (cd "$dir" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -6 -n >"$tmp"
    fi
    chmod 0644 "$tmp"
    mv "$tmp" "$out"
}

# th_hash ARGS...: short content hash of the given strings and, for those that are files, their bytes.
th_hash() {
    local a
    for a in "$@"; do
        printf '%s\n' "$a"
        if [[ -f "$a" ]]; then sha256sum <"$a"; fi
    done | sha256sum | cut -c1-16
}

# th_wedged RC LOG [VERDICT_ERE]: true when a test-host run ended by its last-resort guard before
# L1's console reached a verdict: testhost/run.sh exited 124 (--timeout) or 125 (--stall: L1 used no
# CPU; or L1's QEMU aborted, a TESTHOST-QEMU-ABORT line) and no line of LOG matches VERDICT_ERE
# (default ^TESTHOST-(DONE|ERROR)). That is the emulator wedging or crashing, not a verdict on the
# VMM: TCG soft lockups keep L1 at 100% CPU until the timeout, a nested guest's start once left it
# at 0% CPU (shared/TESTHOST.md), QEMU 7.2's TCG aborted on a BQL assertion with an L2 in SeaBIOS. Any other status is real: the
# scenario's own (even 124, when TESTHOST-DONE says so), L1 ending early (a panic, TESTHOST-ERROR),
# a failed build, or an interrupt (130/143).
#
# A scenario that finds its nested guest (L2) wedged in L1's KVM says so with a TESTHOST-L2-WEDGED
# line and exits 125 (tests/e2e/api_scenario.sh l2_timer_wedged): that is the platform too, verdict
# line or not.
th_wedged() {
    local rc="$1" log="$2" verdict="${3:-^TESTHOST-(DONE|ERROR)}"
    [[ "$rc" == 124 || "$rc" == 125 ]] || return 1
    [[ "$rc" != 125 ]] || ! grep -aq '^TESTHOST-L2-WEDGED' "$log" 2>/dev/null || return 0
    ! grep -aEq "$verdict" "$log" 2>/dev/null
}

# th_run_retrying LOG [--verdict ERE] -- CMD [ARG...]: the one way tests and benchmarks run the test
# host. Runs CMD (testhost/run.sh ... --log LOG, or a function around it that returns run.sh's
# status and redoes whatever a run consumes) and, only when th_wedged RC LOG ERE, once more: it says
# so on stderr, keeps the first console log as LOG.wedged and appends a TESTHOST-RETRIED line to the
# second log. Returns the status of the last run. Never retries more than once.
th_run_retrying() {
    local log="$1" verdict="^TESTHOST-(DONE|ERROR)" rc=0
    shift
    if [[ "${1:-}" == --verdict ]]; then verdict="$2"; shift 2; fi
    [[ "${1:-}" == -- ]] && shift
    rm -f "$log.wedged"
    "$@" || rc=$?
    th_wedged "$rc" "$log" "$verdict" || return "$rc"
    local abort
    abort="$(grep -a -m 1 -e '^TESTHOST-QEMU-ABORT' -e '^TESTHOST-L2-WEDGED' "$log" 2>/dev/null || true)"
    th_log "RETRY: the test host wedged (run.sh exited $rc before its console matched '$verdict')${abort:+; ${abort#TESTHOST-}}; booting it once more (first log: $log.wedged)"
    cp "$log" "$log.wedged" 2>/dev/null || true
    local first="$rc"
    rc=0
    "$@" || rc=$?
    echo "TESTHOST-RETRIED once: the first run wedged (run.sh exited $first; its log: $log.wedged)" >>"$log"
    return "$rc"
}

# th_test_host_desc MEMORY_MIB: how the test host ran, for a benchmark's results ("test_host").
th_test_host_desc() {
    printf 'qemu-system-x86_64 -accel tcg%s -cpu %s -smp 1 -m %s on %sx %s\n' "${TH_TCG_THREAD:+,thread=$TH_TCG_THREAD}" "${TESTHOST_CPU:-EPYC,+svm,+npt}" "$1" \
        "$(nproc)" "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
}

# th_loadavg: the host's 1/5/15-min load averages now; th_host_load BEFORE AFTER: both, described
# for a benchmark's results ("host_load": this machine is shared, its load moves the figures).
th_loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
th_host_load() { echo "before: $1; after: $2 (1/5/15-min load average, $(nproc) CPUs)"; }
