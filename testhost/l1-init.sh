#!/bin/sh
# /init of the test host (L1) initramfs built by testhost/build-l1.sh (runs under busybox sh).
# Loads irqbypass, kvm, kvm-amd (then any modules listed in /testhost/modules), checks /dev/kvm,
# runs /testhost/scenario with the variables of /testhost/env.sh exported, prints
#   TESTHOST-DONE rc=<scenario exit code>
# and powers off. Failures before the scenario print a TESTHOST-ERROR line instead.
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/usr/local/bin
mkdir -p /proc /sys /dev /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null

fail() {
    echo "TESTHOST-ERROR $*"
    poweroff -f
}

echo "TESTHOST-BOOTED uptime=$(cut -d' ' -f1 /proc/uptime)"
mods=/lib/modules/$(uname -r)/kernel
for m in virt/lib/irqbypass arch/x86/kvm/kvm arch/x86/kvm/kvm-amd $(cat /testhost/modules 2>/dev/null); do
    insmod "$mods/$m.ko" || fail "insmod $m failed: $(dmesg | tail -n 3 | tr '\n' ' ')"
done
[ -c /dev/kvm ] || fail "no /dev/kvm after loading kvm-amd (L1 CPU needs svm+npt): $(dmesg | grep -i -e kvm -e svm | tail -n 3 | tr '\n' ' ')"

set -a
. /testhost/env.sh
set +a
echo "TESTHOST-READY uptime=$(cut -d' ' -f1 /proc/uptime) tern=${TH_TERN:-none} qemu=${TH_QEMU:-none}"
cd /tmp || fail "no /tmp"
sh /testhost/scenario </dev/console
echo "TESTHOST-DONE rc=$?"
poweroff -f
