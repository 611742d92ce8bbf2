# shellcheck shell=dash disable=SC2034  # busybox ash (dash-like, with local); deb_* results are read by the caller
# testhost/debian_lib.sh — boot and drive the Debian guest (images/debian, docs/debian-guest.md)
# inside the test host (L1, busybox sh), under tern or QEMU. testhost/build-l1.sh puts it at
# /testhost/debian_lib.sh in every L1; a scenario sources it (it sources /testhost/l1_lib.sh):
#     . /testhost/debian_lib.sh
# What L1 needs (testhost/run.sh options): the image as its /dev/vda (--disk IMG --disk-snapshot,
# --modules "virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk");
# Debian's initrd (--with-debian-initrd); for a network also "tun tap" in --modules and
# --bin /usr/sbin/ip (busybox's ip has no tuntap); for QEMU --with-qemu. Example user:
# tests/e2e/debian_scenario.sh.
#
# A guest NAME keeps its files in L1's /tmp:
#   NAME.out  its console (ttyS0)          NAME.err  the VMM's stderr
#   NAME.in   FIFO: the console's input    NAME.pid  the VMM's pid
#   NAME.sock tern's API socket            NAME.state, NAME.mem  its snapshot (deb_snapshot)
#   NAME.mark the console offset from which deb_wait looks (deb_type / deb_mark set it)
#
# deb_start NAME VMM CPUS MEM DISKSPEC [NETSPEC] [ROOTDEV]
#     boots the guest in the background and returns at once (pid in $deb_pid). VMM: tern | qemu.
#     MEM: MiB (or 512M, 2G). DISKSPEC: tern's --disk spec, e.g. path=/dev/vda,cache=none or
#     path=/dev/vda,interface=nvme (QEMU gets the same disk: l1_qemu_disk). NETSPEC: tern's --net
#     spec, e.g. tap=tap0,mac=52:54:00:12:34:56 (QEMU: l1_qemu_net); "" or - for none. ROOTDEV:
#     default /dev/nvme0n1 when DISKSPEC says interface=nvme, else /dev/vda. Command line:
#     "console=ttyS0 root=ROOTDEV rw $DEB_CMDLINE". Call it in the scenario's own shell (not in
#     $(...)): deb_wait_exit waits for its child. QEMU runs -M pc -cpu host -no-reboot.
# deb_wait NAME SEC ERE
#     0 once the console output since the mark matches ERE (grep -E; \r and terminal escapes
#     removed; the last line counts before its newline: prompts have none), the first matching
#     line in $deb_got; 1 after SEC s, or at once when the VMM is gone and it did not match.
# deb_prompt NAME SEC       deb_wait for the shell prompt ($DEB_PROMPT).
# deb_type NAME TEXT        moves the mark to the console's end, types TEXT and Enter (\r).
# deb_mark NAME             moves the mark to the console's end.
# deb_cmd NAME SEC CMD      types CMD and a line that prints its status; 0 once that status came
#     within SEC s: the status in $deb_rc, the console lines from the mark up to it in $deb_out
#     (the echoed command line too). 1 if none came ($deb_rc empty). Wait for the prompt first.
# deb_marker NAME [SEC]     waits (default $DEB_BOOT_WAIT s) for the complete TERN-DEBIAN-MARKER
#     line (anywhere in the console, not just since the mark) and prints it from
#     "TERN-DEBIAN-MARKER" on; 1 when none came.
# deb_marker_ok LINE [VCPUS] [ROOT]   0 when the marker says state=running failed=0 (and vcpus=VCPUS,
#     root=ROOT when given); else 1 and the reason on stdout.
# deb_wait_exit NAME SEC    the VMM's exit status once it ended (SIGKILLed after SEC s: 137).
#     tern: 0 poweroff, 3 reboot (README); QEMU (-no-reboot): 0 for both.
# deb_stop NAME             SIGTERM if still running, then its status (SIGKILL after 20 s).
# deb_snapshot NAME         tern only: `tern snapshot --exit` to /tmp/NAME.state + /tmp/NAME.mem;
#     returns the snapshot's status (its output in $deb_out); the VM's exit status in $deb_exit.
# deb_restore NAME NEW [paused]  tern only: `tern restore --resume` of NAME's snapshot as guest NEW
#     (its own console, FIFO, pid, API socket as deb_start's; tern at --log-level debug); returns at
#     once. "paused": without --resume (the VM waits for `tern ctl --api-sock ... resume`).
# deb_show NAME             NAME's last console lines and the VMM's stderr, indented, for the log.
# Network, all on L1's side (link-local addresses, 169.254.0.0/16: nothing leaves L1):
# deb_tap TAP ADDR/PREFIX [multi_queue]   a persistent tap with L1's address, up (iproute2 ip).
# deb_udhcpd TAP FIRST LAST [MASK]  busybox udhcpd on TAP handing out FIRST..LAST (mask default
#     255.255.255.0; the server is TAP's address); pid $deb_udhcpd_pid, leases
#     /tmp/udhcpd-TAP.leases, log /tmp/udhcpd-TAP.log.
# deb_httpd DIR ADDR PORT   busybox httpd serving DIR on ADDR:PORT, returns once it listens (10 s
#     bound); pid $deb_httpd_pid.
# deb_net_stop              stops the udhcpd and httpd started here.
# Settings (environment; defaults in brackets): DEB_TERN [$TH_TERN], DEB_QEMU [$TH_QEMU],
# DEB_KERNEL [$TH_GUEST_KERNEL], DEB_INITRD [$TH_DEBIAN_INITRD], DEB_CMDLINE [quiet],
# DEB_TERN_ARGS / DEB_QEMU_ARGS [none: more words for the VMM], DEB_IP [/usr/sbin/ip],
# DEB_PROMPT [root@tern-debian:[^#]*# ], DEB_BOOT_WAIT [600], DEB_POLL [0.5: seconds between looks
# at a console; each look forks, which costs the nested guest CPU under TCG].
# shellcheck source=testhost/l1_lib.sh
. "${TH_L1_LIB:-/testhost/l1_lib.sh}"
: "${DEB_TERN:=$TH_TERN}" "${DEB_QEMU:=$TH_QEMU}" "${DEB_KERNEL:=$TH_GUEST_KERNEL}" "${DEB_INITRD:=$TH_DEBIAN_INITRD}"
: "${DEB_CMDLINE=quiet}" "${DEB_TERN_ARGS:=}" "${DEB_QEMU_ARGS:=}" "${DEB_IP:=/usr/sbin/ip}"
: "${DEB_PROMPT:=root@tern-debian:[^#]*# }" "${DEB_BOOT_WAIT:=600}" "${DEB_POLL:=0.5}"
deb_udhcpd_pid="" deb_httpd_pid="" deb_cmd_n=0

# _deb_launch NAME CMD...: runs a VMM with NAME's console, stderr and input FIFO (opened read-write:
# the VMM itself keeps a writer, so its input never ends; deb_type writes to it).
_deb_launch() {
    local n="$1"
    shift
    rm -f "/tmp/$n.out" "/tmp/$n.err" "/tmp/$n.in" "/tmp/$n.sock"
    mkfifo "/tmp/$n.in"
    echo 0 >"/tmp/$n.mark"
    : >"/tmp/$n.out"  # exists before this returns (a `tail -f` of it may start at once)
    "$@" >"/tmp/$n.out" 2>"/tmp/$n.err" <>"/tmp/$n.in" &
    deb_pid=$!
    echo "$deb_pid" >"/tmp/$n.pid"
}

deb_start() {
    local n="$1" vmm="$2" cpus="$3" mem="$4" disk="$5" net="${6:-}" root="${7:-}" cmd
    [ "$net" != - ] || net=""
    if [ -z "$root" ]; then
        case ",$disk," in *,interface=nvme,*) root=/dev/nvme0n1 ;; *) root=/dev/vda ;; esac
    fi
    cmd="console=ttyS0 root=$root rw${DEB_CMDLINE:+ $DEB_CMDLINE}"
    case "$vmm" in
    tern)
        # shellcheck disable=SC2086  # DEB_TERN_ARGS: words
        _deb_launch "$n" "$DEB_TERN" run --kernel "$DEB_KERNEL" --initrd "$DEB_INITRD" --cmdline "$cmd" \
            --cpus "$cpus" --memory "$mem" --disk "$disk" ${net:+--net "$net"} --api-sock "/tmp/$n.sock" $DEB_TERN_ARGS ;;
    qemu)
        # shellcheck disable=SC2046,SC2086  # l1_qemu_* print words without spaces; DEB_QEMU_ARGS: words
        _deb_launch "$n" "$DEB_QEMU" -L "$TH_QEMU_FW" -M pc -enable-kvm -cpu host -smp "$cpus" -m "$mem" \
            -kernel "$DEB_KERNEL" -initrd "$DEB_INITRD" -append "$cmd" $(l1_qemu_disk "$disk") \
            $([ -z "$net" ] || l1_qemu_net "$net") -serial stdio -display none -nodefaults -no-reboot $DEB_QEMU_ARGS ;;
    *) echo "deb_start: VMM must be tern or qemu, not '$vmm'" >&2; return 2 ;;
    esac
}

# _deb_since NAME: the console since the mark, without \r and terminal escapes (bash's
# bracketed-paste switches, systemd's colours: ESC [ ... letter).
_deb_esc=$(printf '\033')
_deb_since() {
    tail -c +$(($(cat "/tmp/$1.mark" 2>/dev/null || echo 0) + 1)) "/tmp/$1.out" 2>/dev/null | tr -d '\r' |
        sed "s/$_deb_esc\\[[0-9;?]*[A-Za-z]//g"
}
_deb_match() { deb_got=$(_deb_since "$1" | grep -aE "$2" | head -n 1); [ -n "$deb_got" ]; }
deb_wait() { deb_got=""; l1_wait_pid_every "$DEB_POLL" "$(cat "/tmp/$1.pid")" "$2" _deb_match "$1" "$3"; }
deb_prompt() { deb_wait "$1" "$2" "$DEB_PROMPT"; }
deb_mark() { wc -c <"/tmp/$1.out" | tr -d ' ' >"/tmp/$1.mark"; }

deb_type() {
    deb_mark "$1"
    # Bounded: opening the FIFO would block if the VMM (its reader) were gone.
    # shellcheck disable=SC2016  # $1 and $2 belong to the inner sh
    timeout 10 sh -c 'printf "%s\r" "$1" >"$2"' _ "$2" "/tmp/$1.in"
}

deb_cmd() {
    local n="$1" sec="$2" k
    deb_cmd_n=$((deb_cmd_n + 1))
    k=$deb_cmd_n deb_rc="" deb_out=""
    # The echoed command line reads "n=%s rc=%s": only the printed status matches the wait below.
    deb_type "$n" "$3; printf '\\nTERN-DEB-RC n=%s rc=%s\\n' $k \$?"
    deb_wait "$n" "$sec" "TERN-DEB-RC n=$k rc=[0-9]+" || return 1
    deb_rc=$(l1_field "$deb_got" rc)
    deb_out=$(_deb_since "$n" | sed "/TERN-DEB-RC n=$k rc=[0-9]/q" | grep -av "TERN-DEB-RC n=$k rc=[0-9]")
}

deb_marker() {
    local n="$1"
    l1_wait_pid_every "$DEB_POLL" "$(cat "/tmp/$n.pid")" "${2:-$DEB_BOOT_WAIT}" l1_has "/tmp/$n.out" 'TERN-DEBIAN-MARKER .*uptime=' || return 1
    l1_lines "/tmp/$n.out" 'TERN-DEBIAN-MARKER .*uptime=' | tail -n 1 | sed 's/.*TERN-DEBIAN-MARKER /TERN-DEBIAN-MARKER /'
}

deb_marker_ok() {
    local why=""
    [ "$(l1_field "$1" state)" = running ] || why="$why state=$(l1_field "$1" state) (want running)"
    [ "$(l1_field "$1" failed)" = 0 ] || why="$why failed=$(l1_field "$1" failed) (want 0)"
    [ -z "${2:-}" ] || [ "$(l1_field "$1" vcpus)" = "$2" ] || why="$why vcpus=$(l1_field "$1" vcpus) (want $2)"
    [ -z "${3:-}" ] || [ "$(l1_field "$1" root)" = "$3" ] || why="$why root=$(l1_field "$1" root) (want $3)"
    [ -z "$why" ] && return 0
    echo "${why# }"
    return 1
}

deb_wait_exit() { l1_wait_exit "$(cat "/tmp/$1.pid")" "$2"; }
deb_stop() {
    kill "$(cat "/tmp/$1.pid")" 2>/dev/null
    deb_wait_exit "$1" 20
}

deb_snapshot() {
    local rc
    rm -f "/tmp/$1.state" "/tmp/$1.mem"
    deb_out=$("$DEB_TERN" snapshot --api-sock "/tmp/$1.sock" --state "/tmp/$1.state" --mem "/tmp/$1.mem" --exit 2>&1)
    rc=$?
    deb_wait_exit "$1" 60
    deb_exit=$?
    return $rc
}
deb_restore() {
    local resume=--resume
    [ "${3:-}" != paused ] || resume=""
    # shellcheck disable=SC2086  # $resume: one word or none
    _deb_launch "$2" "$DEB_TERN" --log-level debug restore --state "/tmp/$1.state" --mem "/tmp/$1.mem" $resume --api-sock "/tmp/$2.sock"
}

deb_show() {
    { tail -c 4000 "/tmp/$1.out" | tr -d '\r' | sed "s/$_deb_esc\\[[0-9;?]*[A-Za-z]//g" | tail -n 15
      echo "-- stderr:"; tail -n 8 "/tmp/$1.err"; } 2>/dev/null |
        sed "s/^/  $1: /"
}

deb_tap() {
    # shellcheck disable=SC2086  # $3: an optional word
    "$DEB_IP" tuntap add "$1" mode tap ${3:-} && "$DEB_IP" addr add "$2" dev "$1" && "$DEB_IP" link set "$1" up
}

deb_udhcpd() {
    cat >"/tmp/udhcpd-$1.conf" <<EOF
start $2
end $3
interface $1
lease_file /tmp/udhcpd-$1.leases
option subnet ${4:-255.255.255.0}
option lease 3600
EOF
    : >"/tmp/udhcpd-$1.leases"
    udhcpd -f "/tmp/udhcpd-$1.conf" >"/tmp/udhcpd-$1.log" 2>&1 &
    deb_udhcpd_pid="$deb_udhcpd_pid $!"
}

deb_httpd() {
    httpd -f -p "$2:$3" -h "$1" >"/tmp/httpd-$3.log" 2>&1 &
    deb_httpd_pid="$deb_httpd_pid $!"
    l1_wait_for 10 sh -c "netstat -ltn 2>/dev/null | grep -q '$2:$3 '"
}

deb_net_stop() {
    local p
    for p in $deb_udhcpd_pid $deb_httpd_pid; do kill "$p" 2>/dev/null; done
    deb_udhcpd_pid="" deb_httpd_pid=""
}
