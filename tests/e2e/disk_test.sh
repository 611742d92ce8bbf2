#!/usr/bin/env bash
# End-to-end virtio-blk test. On the host: tern's --disk input errors (before anything runs). Then
# one nested test host boot (testhost/run.sh) with an ext4 "carrier" disk holding one image per
# case; tern boots the stock kernel, which loads the virtio modules from its initramfs and uses
# /dev/vda (tests/e2e/disk_scenario.sh, guest actions in tests/e2e/disk_guest/actions/). Afterwards
# this script takes the images out of the carrier (debugfs) and checks them: e2fsck -fn, the bytes
# of the files the guest wrote (every cache mode), a read-only image byte-identical, and the
# flushed marker present after SIGKILL (cache=writeback and none). Case "hostile": a user-space
# driver in the guest (tests/e2e/hostile_virtio/hostile_blk.c, built here with gcc -static) sends
# requests over size_max / seg_max (IOERR expected) and 64 aliased odd-address 1 MiB writes at once
# to a cache=none disk; tern's growth (VmHWM after - VmRSS before) must stay within the bounce
# budget of docs/limits.md, and the other disk must keep working.
#
# Usage: tests/e2e/disk_test.sh   Environment: TERN_BIN (default build/tern), E2E_LOG.
# Prints one PASS/FAIL line per check and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"
export PATH="$PATH:/usr/sbin:/sbin"

tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
work="$TH_CACHE/disk-e2e"
rm -rf "$work"
mkdir -p "$work/seed" "$work/images" "$work/out"
log="${E2E_LOG:-$TH_CACHE/logs/e2e-disk.log}"
mkdir -p "$(dirname "$log")"
: >"$log"
passed=0 failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
failc() { echo "FAIL $*"; failed=$((failed + 1)); }

# ---- 1. Bad user input: a clear error naming the field, before boot (no KVM needed). ----
kernel="$(th_kernel_image "$(th_kernel_version)")"
check_error() {  # want-substring, --disk value
    local want="$1" disk="$2" out rc
    set +e
    out="$("$tern" run --kernel "$kernel" --disk "$disk" 2>&1 </dev/null)"
    rc=$?
    set -e
    if [[ $rc -ne 0 && "$out" == *"$want"* ]]; then
        pass "input --disk '$disk': $out"
    else
        failc "input --disk '$disk': rc=$rc, want an error with '$want', got: $out"
    fi
}
truncate -s 1M "$work/plain.img"
cp "$work/plain.img" "$work/readonly.img"
chmod 0444 "$work/readonly.img"
check_error "--disk path" "path=$work/missing.img"
check_error "--disk cache=fast" "path=$work/plain.img,cache=fast"
check_error "--disk size" "path=$work/plain.img,size=2G"
check_error "--disk queues=0" "path=$work/plain.img,queues=0"
check_error "--disk readonly=yes" "path=$work/plain.img,readonly=yes"
check_error "not key=value" "$work/plain.img"
# A 0444 image without readonly=on is refused even for root (tern checks the mode bits).
check_error "readonly=on" "path=$work/readonly.img"
if [[ -d /dev/shm ]]; then
    truncate -s 1M /dev/shm/tern-disk-e2e.img
    if dd if=/dev/zero of=/dev/shm/tern-disk-e2e.img bs=4096 count=1 conv=notrunc oflag=direct 2>/dev/null; then
        echo "SKIP input cache=none without O_DIRECT: this host's tmpfs supports O_DIRECT (Linux >= 6.6)"
    else
        check_error "cache=none" "path=/dev/shm/tern-disk-e2e.img,cache=none"
    fi
    rm -f /dev/shm/tern-disk-e2e.img
fi

# ---- 2. Images, carrier, guest initramfs. ----
echo "seed-from-host $(date +%s)" >"$work/seed/seed.txt"
seed="$(cat "$work/seed/seed.txt")"
rw_cases=(wb none unsafe directsync threads)
for n in "${rw_cases[@]}" ro; do
    mke2fs -q -F -t ext4 -d "$work/seed" -L "tern-$n" "$work/images/$n.img" 64M
done
truncate -s 16M "$work/images/flushwb.img" "$work/images/flushnone.img"
mke2fs -q -F -t ext4 -L tern-hostile-fs "$work/images/hostile-fs.img" 32M
truncate -s 72M "$work/images/hostile.img"
sha_ro_before="$(sha256sum <"$work/images/ro.img")"
carrier="$work/carrier.img"
modules="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
guest_initrd="$work/guest-initramfs.cpio.gz"
# The guest files plus the hostile user-space driver (a static binary, built here).
extra="$work/guest-extra"
mkdir -p "$extra/bin"
cp -a "$here/disk_guest/." "$extra/"
gcc -static -O2 -Wall -Wextra -Werror -o "$extra/bin/tern-hostile-blk" "$here/hostile_virtio/hostile_blk.c"
"$repo/testhost/build-guest-initramfs.sh" "$guest_initrd" --modules "$modules" --extra "$extra"

# ---- 3. The test host run (a fresh carrier each time: a wedged first run may have written to it). ----
disk_host_run() {
    rm -f "$carrier"
    mke2fs -q -F -t ext4 -d "$work/images" "$carrier" 1024M || return 1
    "$repo/testhost/run.sh" --scenario "$here/disk_scenario.sh" --tern "$tern" --disk "$carrier" \
        --modules "$modules" --guest-initramfs "$guest_initrd" --env E2E_CASE_TIMEOUT=180 \
        --timeout 1500 --log "$log"
}
set +e
th_run_retrying "$log" -- disk_host_run  # a wedged test host (TCG) is booted once more, saying so
host_rc=$?
set -e

block_of() {  # console lines of one case
    awk -v n="$1" '$0 ~ "^E2E-CASE case=" n " " { on = 1 } on { print }
        on && $0 ~ "E2E-RESULT case=" n " " { exit }' "$log"
}
extract() {  # image name -> path of a copy taken out of the carrier
    debugfs -R "dump /$1 $work/out/$1" "$carrier" >/dev/null 2>&1
    echo "$work/out/$1"
}
fs_cat() { debugfs -R "cat /$2" "$1" 2>/dev/null; }

set +o pipefail  # `yes | head` ends with SIGPIPE on purpose
expect_lines="$(for ((i = 0; i < 2048; i++)); do printf 'line %05d of the tern disk test\n' $i; done | sha256sum)"
expect_big="$(yes tern-disk-test | head -c 4194304 | sha256sum)"
for n in "${rw_cases[@]}"; do
    b="$(block_of "$n")"
    problems=()
    grep -q "^E2E-RESULT case=$n status=0" <<<"$b" || problems+=("tern status not 0: $(grep -a E2E-RESULT <<<"$b")")
    grep -q "TERN-DISK-INFO size=131072 serial=tern-$n ro=0" <<<"$b" ||
        problems+=("guest saw: $(grep -a TERN-DISK-INFO <<<"$b" || grep -a TERN-DISK-ERROR <<<"$b" || echo nothing)")
    grep -qF "TERN-DISK-SEED $seed" <<<"$b" || problems+=("guest did not read the seed file")
    grep -q "TERN-DISK-WRITTEN" <<<"$b" || problems+=("guest did not finish writing")
    img="$(extract "$n.img")"
    if ! fsck_out="$(e2fsck -fn "$img" 2>&1)"; then problems+=("e2fsck -fn: $(tail -n 3 <<<"$fsck_out" | tr '\n' ' ')"); fi
    [[ "$(fs_cat "$img" hello.txt)" == "written-by-guest" ]] || problems+=("hello.txt wrong")
    [[ "$(fs_cat "$img" lines.txt | sha256sum)" == "$expect_lines" ]] || problems+=("lines.txt bytes differ")
    [[ "$(fs_cat "$img" big.txt | sha256sum)" == "$expect_big" ]] || problems+=("big.txt bytes differ")
    [[ "$(fs_cat "$img" seed-copy.txt)" == "$seed" ]] || problems+=("seed-copy.txt wrong")
    if ((${#problems[@]} == 0)); then pass "case=$n $(grep -a TERN-DISK-INFO <<<"$b")"; else failc "case=$n: ${problems[*]}"; fi
done

b="$(block_of ro)"
problems=()
grep -q "TERN-DISK-INFO size=131072 serial=tern-ro ro=1" <<<"$b" || problems+=("guest saw: $(grep -a 'TERN-DISK-INFO\|TERN-DISK-ERROR' <<<"$b" || echo nothing)")
grep -qF "TERN-DISK-SEED $seed" <<<"$b" || problems+=("guest did not read the seed file")
grep -q "TERN-DISK-RO fs=refused raw=refused" <<<"$b" || problems+=("writes not refused: $(grep -a TERN-DISK-RO <<<"$b")")
[[ "$(sha256sum <"$(extract ro.img)")" == "$sha_ro_before" ]] || problems+=("image changed")
if ((${#problems[@]} == 0)); then pass "case=ro $(grep -a 'TERN-DISK-RO ' <<<"$b")"; else failc "case=ro: ${problems[*]}"; fi

for n in flushwb flushnone; do
    b="$(block_of "$n")"
    problems=()
    grep -q "TERN-DISK-FLUSHED marker=durable-$n" <<<"$b" || problems+=("no TERN-DISK-FLUSHED line")
    grep -q "E2E-RESULT case=$n status=137" <<<"$b" || problems+=("tern not SIGKILLed: $(grep -a E2E-RESULT <<<"$b")")
    got="$(head -c 64 "$(extract "$n.img")" | tr -d '\0')"
    [[ "$got" == "durable-$n" ]] || problems+=("sector 0 holds '$got'")
    if ((${#problems[@]} == 0)); then pass "case=$n marker durable-$n on the host file after SIGKILL"; else failc "case=$n: ${problems[*]}"; fi
done

# The hostile driver: IOERR over size_max / seg_max, the aliased batch served, tern's memory
# growth within the bounce budget of one queue (docs/limits.md) plus slack, vda still working.
b="$(block_of hostile)"
problems=()
limits="$(grep -a '^TERN-HOSTILE limits' <<<"$b" | tr -d '\r' || true)"
budget="$(grep -a '^TERN-HOSTILE budget' <<<"$b" | tr -d '\r' || true)"
[[ "$limits" == "TERN-HOSTILE limits sizemax=1 segmax=1 small=0" ]] || problems+=("limits: ${limits:-none} $(grep -a TERN-HOSTILE-ERROR <<<"$b" || true)")
[[ "$budget" == "TERN-HOSTILE budget requests=64 bytes=1048576 ok=64 ioerr=0 other=0" ]] || problems+=("budget: ${budget:-none}")
vda="$(grep -a '^TERN-HOSTILE-VDA' <<<"$b" | tr -d '\r' || true)"
read -r _ sum1 sum2 <<<"$vda"
[[ -n "${sum1:-}" && "$sum1" == "${sum2:-}" ]] || problems+=("vda after the hostile driver: ${vda:-none}")
grep -q "E2E-RESULT case=hostile status=0" <<<"$b" || problems+=("tern: $(grep -a E2E-RESULT <<<"$b" || true)")
mem="$(grep -a '^E2E-HOSTILE-MEM' <<<"$b" || true)"
rss0="$(sed -n 's/.*rss_before_kb=\([0-9]*\).*/\1/p' <<<"$mem")"
hwm1="$(sed -n 's/.*hwm_after_kb=\([0-9]*\).*/\1/p' <<<"$mem")"
# docs/limits.md: bounce memory <= 4 MiB per queue; metadata of a full queue ~1.6 MiB; the guest
# itself touches a little RAM meanwhile (THP: 2 MiB at a time). The old code grew by ~64 MiB.
bound_kb=$((4096 + 2048 + 4096))
if [[ -n "$rss0" && -n "$hwm1" ]]; then
    growth=$((hwm1 - rss0))
    ((growth <= bound_kb)) || problems+=("tern grew by ${growth} KiB (VmHWM after - VmRSS before) > ${bound_kb} KiB")
else
    problems+=("no memory figures: ${mem:-none}")
fi
if ((${#problems[@]} == 0)); then pass "case=hostile $limits; $budget; tern grew ${growth} KiB <= ${bound_kb} KiB"; else failc "case=hostile: ${problems[*]}"; fi

# cache=none on L1's tmpfs (no O_DIRECT on Linux 6.1): exit 1 with the field named, before boot.
nodirect="$(grep -a '^E2E-NODIRECT' "$log" | head -n 1 || true)"
if [[ "$nodirect" == "E2E-NODIRECT skipped"* ]]; then
    echo "SKIP input cache=none without O_DIRECT: ${nodirect#E2E-NODIRECT }"
elif [[ "$nodirect" == "E2E-NODIRECT status=1 "*"--disk cache=none"*"O_DIRECT"* ]]; then
    pass "input cache=none on tmpfs: ${nodirect#E2E-NODIRECT }"
else
    failc "input cache=none on tmpfs: want status 1 naming --disk cache=none, got: ${nodirect:-nothing}"
fi
if [[ "$host_rc" != 0 ]]; then failc "test host: run.sh exited $host_rc (log: $log)"; fi
echo "$passed passed, $failed failed"
((failed == 0))
