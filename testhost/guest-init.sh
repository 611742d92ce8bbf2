#!/bin/sh
# /init of the guest (L2) initramfs built by testhost/build-guest-initramfs.sh (runs under busybox sh).
# Mounts the pseudo filesystems, loads the modules listed in /etc/guest-modules (in order), prints one
#   TERN-GUEST-MARKER nproc=<n> memtotal_kb=<kB> release=<uname -r>
# and then does what the kernel command line asks with tern.action=:
#   poweroff (default)  poweroff -f
#   reboot              reboot -f
#   shell               interactive shell on the console, then poweroff
#   idle                sleep forever (for memory measurements)
#   <other>             run /actions/<other> (added with --extra), then poweroff
# Ctrl+Alt+Del (e.g. tern's SendCtrlAltDel) is handled as busybox init does: ctrl-alt-del is set to 0
# so the kernel sends SIGINT to init instead of rebooting at once, and init prints
#   TERN-GUEST-CTRL-ALT-DEL action=<a>
# and does tern.ctrlaltdel= (reboot, the default as in busybox's inittab, or poweroff). Actions run in
# the background while init waits, so the signal is handled while they run.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mkdir -p /proc /sys /dev /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

if [ -f /etc/guest-modules ]; then
    for m in $(cat /etc/guest-modules); do
        insmod "/lib/modules/$m.ko" || echo "TERN-GUEST-ERROR insmod $m failed"
    done
fi

action=poweroff
cad=reboot
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        tern.action=*) action="${arg#tern.action=}" ;;
        tern.ctrlaltdel=*) cad="${arg#tern.ctrlaltdel=}" ;;
    esac
done
echo 0 >/proc/sys/kernel/ctrl-alt-del
on_ctrl_alt_del() {
    echo "TERN-GUEST-CTRL-ALT-DEL action=$cad"
    if [ "$cad" = poweroff ]; then poweroff -f; else reboot -f; fi
}
trap on_ctrl_alt_del INT

memtotal_kb=$(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo)
echo "TERN-GUEST-MARKER nproc=$(nproc) memtotal_kb=$memtotal_kb release=$(uname -r)"

case "$action" in
    poweroff) poweroff -f ;;
    reboot) reboot -f ;;
    idle) while :; do sleep 3600; done ;;
    shell)
        echo "guest shell; 'exit' powers the guest off"
        setsid cttyhack sh -l
        poweroff -f
        ;;
    *)
        if [ -x "/actions/$action" ]; then
            "/actions/$action" &
            wait $!
            echo "TERN-GUEST-ACTION action=$action rc=$?"
        else
            echo "TERN-GUEST-ERROR unknown tern.action=$action"
        fi
        poweroff -f
        ;;
esac
# poweroff/reboot -f do not return; if they fail, do not let init exit (that panics the kernel).
echo "TERN-GUEST-ERROR $action did not take effect"
while :; do sleep 3600; done
