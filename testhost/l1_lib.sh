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
#                                   (path=,cache=,readonly=on,serial=,queues=,io=,interface=nvme)
#   l1_stall_dump PREFIX WHY PID SOCK CONSOLE  what L1 sees of a stalled L2 guest, as PREFIX lines
#   l1_l2_wedged WHY PID SLEEP      true when that guest is wedged in L1's KVM, not in tern
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
    local id drive iface serial q kv dev
    id=${2:-d0} drive="" iface=virtio serial="" q=""
    for kv in $(echo "$1" | tr ',' ' '); do
        case "$kv" in
        path=*) drive="$drive,file=${kv#path=}" ;;
        cache=* | readonly=*) drive="$drive,$kv" ;;
        io=*) drive="$drive,aio=${kv#io=}" ;;
        serial=*) serial=${kv#serial=} ;; queues=*) q=${kv#queues=} ;;
        interface=*) iface=${kv#interface=} ;;
        esac
    done
    if [ "$iface" = nvme ]; then
        dev="nvme,drive=$id,serial=${serial:-tern-$id}"
    else
        dev="virtio-blk-pci,drive=$id${serial:+,serial=$serial}${q:+,num-queues=$q}"
    fi
    echo "-drive if=none,id=$id,format=raw$drive -device $dev"
}

# l1_stall_dump PREFIX WHY PID SOCK CONSOLE: what L1 sees when an L2 guest under tern (process PID,
# API socket SOCK, console file CONSOLE) stops making progress, as "PREFIX ..." lines, never a
# check: tern's stats (per vCPU KVM_RUN returns and KVM's exit/halt counters, per queue requests,
# kicks, throttling), each tern thread's state, wait channel and kernel stack, KVM's debugfs
# counters, the lapic timers L1's KVM holds (the L2 guest's timer is an hrtimer in L1:
# apic_timer_fn in /proc/timer_list, its expiry against L1's "now"), L1's interrupts, clocksource
# and dmesg, the console's last lines. Twice, 2 s apart, so what moves shows: a vCPU blocked in
# tern, a queue tern stopped serving, or a vCPU halted in KVM waiting for a timer L1 never fires.
l1_stall_dump() {
    local p="$1" why="$2" pid="$3" sock="$4" con="$5" round t d v
    for round in 1 2; do
        echo "$p ==== $why (round $round) L1 uptime $(cut -d' ' -f1 /proc/uptime)"
        echo "$p stats $(curl -s -m 20 --unix-socket "$sock" http://localhost/tern/stats | tr -d '\n ')"
        for t in /proc/"$pid"/task/*; do
            echo "$p task ${t##*/} $(cat "$t/comm" 2>/dev/null) state=$(awk '{ print $3 }' "$t/stat" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null) utime+stime=$(awk '{ print $14 + $15 }' "$t/stat" 2>/dev/null) stack: $(tr '\n' ' ' <"$t/stack" 2>/dev/null)"
        done
        for d in /sys/kernel/debug/kvm/"$pid"-*; do
            [ -d "$d" ] || continue
            echo "$p kvm-debugfs $d $(cd "$d" && for f in *; do [ -f "$f" ] && printf '%s=%s ' "$f" "$(cat "$f" 2>/dev/null)"; done)"
            for v in "$d"/vcpu*; do
                echo "$p kvm-debugfs ${v##*/} $(cd "$v" && for f in *; do [ -f "$f" ] && printf '%s=%s ' "$f" "$(cat "$f" 2>/dev/null)"; done)"
            done
        done
        echo "$p timer_list $(grep -e '^now at' -e 'apic_timer_fn' -A 1 /proc/timer_list 2>/dev/null | tr '\n' ' ')"
        echo "$p l1-interrupts $(grep -e LOC -e CAL -e 'timer' /proc/interrupts | tr -s ' \n' '  ')"
        [ "$round" = 2 ] || sleep 2  # the second round shows what moved in 2 s (nothing to wait for)
    done
    echo "$p l1-clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource) of $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource)"
    dmesg | tail -n 40 | sed "s/^/$p l1-dmesg /"
    echo "$p console tail"; tail -n 5 "$con" | sed "s/^/$p console /"
}

# l1_l2_wedged WHY PID SLEEP: true, printing a TESTHOST-L2-WEDGED line, when the stalled guest of
# tern process PID is wedged where tern has no part: every vCPU thread is halted inside KVM_RUN
# (wchan kvm_vcpu_block), KVM's in-kernel exits do not move over 2 s, and the soonest lapic timer
# L1's KVM holds for it is over 10 s ahead though the guest sleeps SLEEP (text, for the line)
# between its lines. Ask it only before tern's first pause (until then tern has not set the
# guest's kvmclock or TSC, so the guest's timer lives in L1's KVM and L1's TCG alone) and only for
# a guest that keeps a short timer armed (one waiting for a device interrupt tern owes it has
# none). A scenario that gets true exits 125: th_run_retrying boots the test host once more.
l1_l2_wedged() {
    local why="$1" pid="$2" sleep_desc="$3" t d e0 e1 soonest
    for t in /proc/"$pid"/task/*; do
        case "$(cat "$t/comm" 2>/dev/null)" in
            vcpu*) [ "$(cat "$t/wchan" 2>/dev/null)" = kvm_vcpu_block ] || return 1 ;;
        esac
    done
    d=$(ls -d /sys/kernel/debug/kvm/"$pid"-* 2>/dev/null | head -n 1)
    [ -n "$d" ] || return 1
    e0=$(cat "$d/exits"); sleep 2; e1=$(cat "$d/exits")  # an observation window, as in l1_stall_dump
    [ "$e0" = "$e1" ] || return 1
    soonest=$(grep -A 1 apic_timer_fn /proc/timer_list | sed -n 's/.*\[in \(-\{0,1\}[0-9]*\) to.*/\1/p' | sort -n | head -n 1)
    [ -n "$soonest" ] && [ "$soonest" -gt 10000000000 ] || return 1
    echo "TESTHOST-L2-WEDGED $why: every vCPU halted in KVM (kvm_vcpu_block), in-kernel exits $e0 -> $e1 in 2 s, soonest lapic timer in L1's KVM ${soonest} ns ahead (the guest sleeps $sleep_desc); before any pause (tern never set the guest's clock)"
}
