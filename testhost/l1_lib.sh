# shellcheck shell=dash  # busybox ash: dash-like, with local
# testhost/l1_lib.sh — general helpers for scenarios running inside the test host (L1, busybox sh).
# testhost/build-l1.sh puts it at /testhost/l1_lib.sh in every L1; a scenario sources it:
#     . /testhost/l1_lib.sh
# (testhost/debian_lib.sh sources it itself). Every wait is bounded in seconds of L1's clock (not
# in polls: a poll that forks is slow under TCG); nothing here sleeps to synchronize.
#
#   l1_now                          L1's uptime in whole seconds
#   l1_wait_for SEC CMD...          run CMD every 0.1 s until it succeeds (0) or SEC passed (1)
#   l1_wait_every INTERVAL SEC CMD...  the same, polling every INTERVAL s
#   l1_wait_while_pid PID SEC CMD...   l1_wait_for, but gives up once process PID is gone (CMD is
#                                   tried once more then: its status is returned)
#   l1_wait_pid_every INTERVAL PID SEC CMD...  the same, polling every INTERVAL s
#   l1_wait_exit PID SEC            the exit status of the child PID once it ended; SIGKILLed after
#                                   SEC s (a line on stderr says so; status 137 then)
#   l1_complete FILE                FILE's complete lines (a console being written: the line
#                                   without its newline yet is left out)
#   l1_has FILE ERE                 a complete line of FILE matches ERE (\r removed)
#   l1_lines FILE ERE               the complete lines of FILE matching ERE (\r removed)
#   l1_field LINE KEY               the value of KEY=VALUE in a line of space-separated fields
#   l1_sha FILE                     FILE's sha256 (hex)
#   l1_api SOCK METHOD PATH [BODY]  curl on tern's API socket; prints "<body> <http status>"
#   l1_qemu_net SPEC                QEMU's -netdev/-device words for tern's --net SPEC
#                                   (tap=,mac=,queues=,vhost=); no spaces inside any word
#   l1_qemu_disk SPEC [ID]          QEMU's -drive/-device words for tern's --disk SPEC
#                                   (path=,cache=,readonly=on,serial=,queues=,io=,interface=nvme,
#                                   format=: default raw)
l1_now() { cut -d. -f1 /proc/uptime; }

l1_wait_every() {
    local every="$1" end=$(($(l1_now) + $2))
    shift 2
    while :; do
        "$@" && return 0
        [ "$(l1_now)" -lt "$end" ] || return 1
        sleep "$every"
    done
}
l1_wait_for() { l1_wait_every 0.1 "$@"; }

l1_wait_pid_every() {
    local every="$1" pid="$2" end=$(($(l1_now) + $3))
    shift 3
    while :; do
        "$@" && return 0
        kill -0 "$pid" 2>/dev/null || { "$@"; return; }
        [ "$(l1_now)" -lt "$end" ] || return 1
        sleep "$every"
    done
}
l1_wait_while_pid() { l1_wait_pid_every 0.1 "$@"; }

l1_wait_exit() {
    l1_wait_for "$2" sh -c "! kill -0 $1 2>/dev/null" ||
        { echo "l1_lib: pid $1 still running after $2 s: killed" >&2; kill -9 "$1" 2>/dev/null; }
    wait "$1"
}

l1_complete() {
    local d
    d="$(cat "$1" 2>/dev/null; echo .)"
    d="${d%.}"
    case "$d" in
    *"
") printf '%s' "$d" ;;
    *"
"*) printf '%s\n' "${d%"
"*}" ;;
    esac
}
l1_has() { l1_complete "$1" | tr -d '\r' | grep -aEq "$2"; }
l1_lines() { l1_complete "$1" | tr -d '\r' | grep -aE "$2"; }
l1_field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
l1_sha() { sha256sum "$1" | cut -d' ' -f1; }
l1_api() {
    curl -s -m 60 --unix-socket "$1" -X "$2" -w ' %{http_code}' -H 'Content-Type: application/json' \
        ${4:+-d "$4"} "http://localhost$3"
}

l1_qemu_net() {
    local tap="" mac="" q=1 vh=off kv nd dev
    for kv in $(echo "$1" | tr ',' ' '); do
        case "$kv" in
        tap=*) tap=${kv#tap=} ;; mac=*) mac=${kv#mac=} ;;
        queues=*) q=${kv#queues=} ;; vhost=*) vh=${kv#vhost=} ;;
        esac
    done
    nd="tap,id=n0,ifname=$tap,script=no,downscript=no,vhost=$vh"
    # romfile=: the option ROM (efi-virtio.rom) is not in the test host.
    dev="virtio-net-pci,netdev=n0,romfile=,disable-legacy=on${mac:+,mac=$mac}"
    if [ "$q" -gt 1 ]; then nd="$nd,queues=$q" dev="$dev,mq=on,vectors=$((2 * q + 2))"; fi
    echo "-netdev $nd -device $dev"
}

l1_qemu_disk() {
    local id drive iface serial q kv dev fmt
    id=${2:-d0} drive="" iface=virtio serial="" q="" fmt=raw
    for kv in $(echo "$1" | tr ',' ' '); do
        case "$kv" in
        path=*) drive="$drive,file=${kv#path=}" ;;
        cache=* | readonly=*) drive="$drive,$kv" ;;
        io=*) drive="$drive,aio=${kv#io=}" ;;
        serial=*) serial=${kv#serial=} ;; queues=*) q=${kv#queues=} ;;
        interface=*) iface=${kv#interface=} ;; format=*) fmt=${kv#format=} ;;
        esac
    done
    if [ "$iface" = nvme ]; then
        dev="nvme,drive=$id,serial=${serial:-tern-$id}"
    else
        dev="virtio-blk-pci,drive=$id${serial:+,serial=$serial}${q:+,num-queues=$q}"
    fi
    echo "-drive if=none,id=$id,format=$fmt$drive -device $dev"
}
