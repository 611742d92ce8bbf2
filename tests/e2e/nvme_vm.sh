# Sourced by tests/e2e/nvme_scenario.sh in the test host (L1) as /testhost/nvme_vm.sh: starting,
# talking to, saving and restoring (tern only) a VM with one NVMe disk and one virtio disk, under
# tern (NVME_VMM=tern: --disk ...,interface=nvme) or QEMU (NVME_VMM=qemu: -device nvme, the
# reference that shows the checks test something real). A VM NAME has its console in /tmp/NAME.out; lines
# are sent to its console with vm_send. Uses the scenario's wait_for/check helpers.

# start_vm NAME CPUS CMDLINE-EXTRA NVME-IMG VIRTIO-IMG VIRTIO-SERIAL [ro]: pid in $vm_pid.
start_vm() {
    vname="$1" vcpus="$2" vcmd="$3" vnvme="$4" vvirt="$5" vser="$6" vro="$7"
    rm -f "/tmp/$vname.out" "/tmp/$vname.sock" "/tmp/$vname.in"
    if [ "$NVME_VMM" = qemu ]; then
        qemu_vm "$vname"
        return
    fi
    mkfifo "/tmp/$vname.in"
    "$T" run --kernel "$TH_GUEST_KERNEL" --initrd "$TH_GUEST_INITRD" --cmdline "$CMD $vcmd" --cpus "$vcpus" \
        --memory 256M --api-sock "/tmp/$vname.sock" \
        --disk "path=$vnvme,interface=nvme,serial=tern-nvme" --disk "path=$vvirt,serial=$vser${vro:+,readonly=on}" \
        >"/tmp/$vname.out" 2>"/tmp/$vname.err" <>"/tmp/$vname.in" &
    vm_pid=$!
}

# qemu_vm NAME: QEMU with the disks, CPUs and command line of the last start_vm.
qemu_vm() {
    qemu_start "$1" -smp "$vcpus" -kernel "$TH_GUEST_KERNEL" -initrd "$TH_GUEST_INITRD" \
        -append "$CMD $vcmd" \
        -drive "file=$vnvme,if=none,id=n0,format=raw,discard=unmap" -device nvme,drive=n0,serial=tern-nvme \
        -drive "file=$vvirt,if=none,id=v0,format=raw${vro:+,readonly=on}" -device "virtio-blk-pci,drive=v0,serial=$vser"
}

# qemu_start NAME QEMU-ARGS...: QEMU with its serial console on pipes (/tmp/NAME.p.{in,out}),
# copied to /tmp/NAME.out.
qemu_start() {
    qn="$1"
    shift
    rm -f /tmp/"$qn".p.in /tmp/"$qn".p.out
    mkfifo /tmp/"$qn".p.in /tmp/"$qn".p.out
    cat /tmp/"$qn".p.out >"/tmp/$qn.out" &
    "$TH_QEMU" -enable-kvm -M pc -L "$TH_QEMU_FW" -m 256M -display none -nodefaults -no-reboot \
        -serial "pipe:/tmp/$qn.p" "$@" >"/tmp/$qn.err" 2>&1 </dev/null &
    vm_pid=$!
}

# vm_send NAME LINE: a line on the guest's console.
vm_send() {
    f="/tmp/$1.in"
    [ "$NVME_VMM" != qemu ] || f="/tmp/$1.p.in"
    timeout 30 sh -c 'echo "$1" >"$2"' vm_send "$2" "$f"
}

# vm_stats NAME: the NVMe controller's entry of GET /tern/stats (compact JSON; tern only).
vm_stats() {
    api "/tmp/$1.sock" GET /tern/stats | sed 's/ [0-9]*$//' | jq -c '[.device_counters[] | select(.kind == "nvme")][0]' 2>&1
}
# stat_of JSON KEY: a device-wide counter of vm_stats's output.
stat_of() { echo "$1" | jq -r ".counters.$2 // empty" 2>/dev/null; }
# io_queues_used JSON: how many I/O queues (index >= 1) served commands.
io_queues_used() { echo "$1" | jq -r '[.queues[] | select(.index >= 1 and .requests > 0)] | length' 2>/dev/null; }

# vm_save NAME: pauses the VM, saves it to /tmp/NAME.{state,mem} and SIGKILLs it (tern only:
# QEMU 7.2 refuses to migrate a VM with an nvme device, "non-migratable device"). Sets $saved (0
# when the save succeeded) and $save_detail.
vm_save() {
    r=$(api "/tmp/$1.sock" PATCH /vm '{"state": "Paused"}')
    out=$("$T" snapshot --api-sock "/tmp/$1.sock" --state "/tmp/$1.state" --mem "/tmp/$1.mem" --keep-paused 2>&1)
    saved=$?
    save_detail="pause: $r; tern snapshot: $(echo "$out" | tail -n 2 | tr '\n' ' ')"
    kill -9 "$vm_pid" 2>/dev/null
    wait "$vm_pid" 2>/dev/null
}

# vm_restore NAME NEW: the VM saved by vm_save NAME, running again as NEW (console /tmp/NEW.out).
# Sets $restored (0 when it runs) and $restore_detail.
vm_restore() {
    rm -f "/tmp/$2.out" "/tmp/$2.sock" "/tmp/$2.in"
    mkfifo "/tmp/$2.in"
    "$T" restore --state "/tmp/$1.state" --mem "/tmp/$1.mem" --resume --api-sock "/tmp/$2.sock" \
        >"/tmp/$2.out" 2>"/tmp/$2.err" <>"/tmp/$2.in" &
    vm_pid=$!
    is_running() { r=$(api "/tmp/$1.sock" GET /); case "$r" in *Running*" 200") return 0 ;; esac; return 1; }
    wait_vm 60 is_running "$2"
    restored=$?
    restore_detail="GET /: $r; stderr: $(tail -n 3 "/tmp/$2.err" | tr '\n' ' ')"
}
