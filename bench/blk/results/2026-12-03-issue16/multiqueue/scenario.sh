#!/bin/sh
. /testhost/l1_lib.sh
dd if=/dev/zero of=/tmp/mq.img bs=1M count=64 2>/dev/null
C="console=ttyS0 quiet loglevel=1 tern.action=mq"
"$TH_TERN" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$C" --cpus 2 --memory 256M \
  --disk path=/tmp/mq.img,queues=2 </dev/null >/tmp/t.out 2>&1
echo "MQX tern rc=$?"
grep -a 'MQ-' /tmp/t.out | sed 's/^/MQX tern /'
"$TH_QEMU" -enable-kvm -M pc -L "$TH_QEMU_FW" -m 256M -smp 2 -kernel "$TH_GUEST_KERNEL" -initrd "$TH_GUEST_INITRD" \
  -display none -nodefaults -serial stdio -no-reboot -drive file=/tmp/mq.img,if=none,id=d0,format=raw \
  -device virtio-blk-pci,drive=d0 -append "$C" </dev/null >/tmp/q.out 2>&1
echo "MQX qemu rc=$?"
grep -a 'MQ-' /tmp/q.out | sed 's/^/MQX qemu /'
exit 0
