#!/usr/bin/env bash
# End-to-end boot test: in ONE nested test host boot (testhost/run.sh), tern boots Debian's stock
# cloud kernel with the busybox guest initramfs in every configuration below, each through both boot
# paths, and this script checks each guest's TERN-GUEST-MARKER line (nproc, MemTotal, kernel
# release), tern's exit status and which boot protocol tern says it used.
#   -bz   the bzImage through the 64-bit boot protocol (--boot-protocol bzimage; the kernel
#         decompresses itself in the guest)
#   -pvh  the same bzImage, its payload decompressed by tern on the host and entered at the PVH
#         entry point (--boot-protocol pvh)
#   -elf  an uncompressed vmlinux ELF (--boot-protocol pvh), decompressed from the bzImage's payload
#         here on the host with the lz4 CLI (Debian package lz4; the case is skipped, saying so,
#         without it)
# and a guest that is not Linux: memtest86+ (Debian's /boot/memtest86+x64.bin, package memtest86+;
# the cases fail without it) on 1 and 2 vCPUs with 32 MiB, until its first pass completes. It
# draws its screen on the serial console; the scenario renders it (E2E-SCREEN lines) and this
# script wants row 8 to say "Pass: 1" or more with "Errors: 0", row 7 "Status: Pass" and the CPUs
# it used ("SMP: 2T" on 2 vCPUs, "SMP: Disabled" on 1), row 1 a measured clock ("CLK/Temp: NMHz":
# memtest times the PIT through port 0x61, "N/A" when it could not).
#
# Usage: tests/e2e/boot_test.sh        (CTest: add_test(NAME e2e_boot COMMAND .../boot_test.sh))
# Environment: E2E_VMM=tern|qemu (default tern; qemu checks the harness while tern cannot boot:
#              it runs the -bz cases and the -elf case, which QEMU enters through PVH too),
#              E2E_PROTOCOLS (default "bz pvh elf memtest"; "bz" runs only the bzImage cases,
#              "memtest" only memtest86+'s),
#              TERN_BIN (default build/tern), E2E_LOG (console log path),
#              E2E_MEMTEST_TIMEOUT (default 450: seconds of L1 time a memtest86+ case may take).
# A -pvh/-elf case FAILS (it is not skipped) when tern has no --boot-protocol option.
# Prints one PASS/FAIL/SKIP line per case and "N passed, M failed"; exits 1 on any failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

vmm="${E2E_VMM:-tern}"
# The line tern logs when it enters the kernel through PVH (every -pvh/-elf case must show it, no
# -bz case may).
pvh_log_line="boot protocol: pvh"
# name:cpus:memory_mib:action:expected_status. 3328 MiB reaches past a 3 GiB PCI hole start.
# Each runs once per protocol in $protocols, as name-bz and name-pvh; "elf" adds the one case in
# elf_cases.
# A "shell" case (stdin_256m:1:256:shell:0) pipes two lines into tern's stdin and wants PIPED-42;
# it is left out for now: it failed 2 times in ~10 (the piped bytes raced the guest shell's start).
configs=(c1_256m:1:256:poweroff:0 c2_1g:2:1024:poweroff:0 c2_3328m:2:3328:poweroff:0
    reboot_256m:1:256:reboot:3)
elf_cases=(c1_256m-elf:1:256:poweroff:0:elf)
# memtest86+: name:cpus:memory_mib:-:status(0 = first pass seen):memtest. Little RAM, a short pass.
memtest_path=/boot/memtest86+x64.bin
memtest_cases=(memtest_c1_32m:1:32:-:0:memtest memtest_c2_32m:2:32:-:0:memtest)
default_protocols="bz pvh elf memtest"
[[ "$vmm" == tern ]] || default_protocols="bz elf memtest"  # QEMU has no host-decompressed bzImage path
protocols="${E2E_PROTOCOLS:-$default_protocols}"
for p in $protocols; do
    [[ "$p" =~ ^(bz|pvh|elf|memtest)$ ]] ||
        th_die "E2E_PROTOCOLS: unknown protocol '$p' (bz, pvh, elf, memtest)"
done
wants() { [[ " $protocols " == *" $1 "* ]]; }
# cases: name:cpus:memory_mib:action:expected_status:protocol
cases=()
for c in "${configs[@]}"; do
    IFS=: read -r name rest <<<"$c"
    for p in bz pvh; do wants "$p" && cases+=("$name-$p:$rest:$p"); done
done
wants elf && cases+=("${elf_cases[@]}")
wants memtest && cases+=("${memtest_cases[@]}")

# Each boot gets 60 s of test host time (QEMU needs 3-5 s, tern ~3 s); memtest86+ gets 450 s for
# its first pass (docs/boot.md has the figures). All of it fits CTest's 1800 s.
run_args=(--scenario "$here/boot_scenario.sh" --env "E2E_VMM=$vmm" --env E2E_CASE_TIMEOUT=60
    --env "E2E_MEMTEST_TIMEOUT=${E2E_MEMTEST_TIMEOUT:-450}" --timeout 1700)
case "$vmm" in
    tern)
        tern="${TERN_BIN:-$repo/build/tern}"
        [[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
        run_args+=(--tern "$tern") ;;
    qemu) run_args+=(--with-qemu --no-tern) ;;
    *) th_die "E2E_VMM must be tern or qemu, got '$vmm'" ;;
esac

# Cases that cannot run are not booted; they fail (or, for -elf without lz4, are skipped) below.
declare -A not_run=()
# Files for L1 (run.sh --extra: one directory copied over L1's root): /guest/vmlinux for -elf,
# /guest/memtest86+x64.bin for memtest.
mkdir -p "$TH_CACHE"
extra_dir="$(mktemp -d "$TH_CACHE/e2e-boot-extra.XXXXXX")"
trap 'rm -rf "$extra_dir"' EXIT
mkdir -p "$extra_dir/guest"
if wants memtest; then
    if [[ -f "$memtest_path" ]]; then
        cp "$memtest_path" "$extra_dir/guest/"
        run_args+=(--env "E2E_MEMTEST=/guest/$(basename "$memtest_path")")
    else
        for c in "${memtest_cases[@]}"; do
            not_run[${c%%:*}]="FAIL: no $memtest_path on this host (apt-get install memtest86+; scripts/setup.sh)"
        done
    fi
fi
have_protocol_option=1
if [[ "$vmm" == tern ]] && ! "$tern" run --help 2>&1 | grep -q -- --boot-protocol; then
    have_protocol_option=0
fi
run_args+=(--env "E2E_PROTOCOL_OPTION=$have_protocol_option")
if wants elf; then
    # The bzImage's payload (setup header: setup_sects at 0x1f1, payload_offset/length at 0x248,
    # boot.rst), minus its trailing 4-byte size, through the lz4 CLI; cached per kernel version.
    ver="$(th_kernel_version)"
    elf_dir="$TH_CACHE/e2e-vmlinux-$ver"
    if [[ -s "$elf_dir/guest/vmlinux" ]]; then
        :
    elif ! command -v lz4 >/dev/null; then
        for c in "${elf_cases[@]}"; do
            not_run[${c%%:*}]="SKIP: no lz4 CLI on this host to decompress the payload (apt-get install lz4)"
        done
    else
        bz="$(th_kernel_image "$ver")"
        u8() { od -An -tu1 -j "$1" -N 1 "$bz" | tr -d ' '; }
        u32() { od -An -tu4 -j "$1" -N 4 "$bz" | tr -d ' '; }
        setup_sects="$(u8 $((0x1f1)))"
        ((setup_sects != 0)) || setup_sects=4
        start=$(((setup_sects + 1) * 512 + $(u32 $((0x248)))))
        len="$(u32 $((0x24c)))"
        want_size="$(u32 $((start + len - 4)))"
        mkdir -p "$elf_dir/guest"
        tmp="$(mktemp "$elf_dir/vmlinux.XXXXXX")"
        dd if="$bz" iflag=skip_bytes,count_bytes skip="$start" count=$((len - 4)) bs=1M status=none \
            | lz4 -dc >"$tmp" \
            || th_die "lz4 could not decompress the payload of $bz"
        got_size="$(stat -c %s "$tmp")"
        [[ "$got_size" == "$want_size" && "$(head -c 4 "$tmp" | od -An -tx1 | tr -d ' ')" == 7f454c46 ]] \
            || th_die "the payload of $bz decompressed to $got_size bytes, not a $want_size-byte ELF"
        mv "$tmp" "$elf_dir/guest/vmlinux"
    fi
    if [[ -s "$elf_dir/guest/vmlinux" ]]; then
        cp "$elf_dir/guest/vmlinux" "$extra_dir/guest/vmlinux"
        run_args+=(--env E2E_VMLINUX=/guest/vmlinux)
    fi
fi
run_args+=(--extra "$extra_dir")
list=""
for c in "${cases[@]}"; do
    IFS=: read -r name cpus mem action _ proto <<<"$c"
    if [[ "$proto" =~ ^(pvh|elf)$ && "$have_protocol_option" == 0 ]]; then
        not_run[$name]="FAIL: tern run has no --boot-protocol option (is branch pvh merged?)"
    fi
    [[ -n "${not_run[$name]:-}" ]] || list+="$name:$cpus:$mem:$action:$proto "
done
run_args+=(--env "E2E_CASES=$list")
log="${E2E_LOG:-$TH_CACHE/logs/e2e-boot-$vmm.log}"
mkdir -p "$(dirname "$log")"
: >"$log"

set +e
# A wedged test host (TCG) is booted once more, saying so: testhost/lib.sh th_run_retrying.
th_run_retrying "$log" -- "$repo/testhost/run.sh" "${run_args[@]}" --log "$log"
host_rc=$?
set -e

release="$(th_kernel_version)"
passed=0 failed=0
# verdict NAME TEXT [PROBLEM]...: "PASS case=NAME TEXT" without problems, else "FAIL case=NAME:" and
# each problem; counted in passed/failed.
verdict() {
    local name="$1" text="$2"
    shift 2
    if (($# == 0)); then
        echo "PASS case=$name $text"
        passed=$((passed + 1))
    else
        printf 'FAIL case=%s:' "$name"
        printf ' %s;' "$@"
        echo
        failed=$((failed + 1))
    fi
}
# check_memtest NAME CPUS STATUS BLOCK SECS: a memtest86+ case passes when the scenario saw the first
# pass end (status 0) and the screen it printed shows it with no error, on the CPUs given.
check_memtest() {
    local name="$1" cpus="$2" status="$3" block="$4" secs="$5" row1 row7 row8 problems=()
    row1="$(sed -n "s/^E2E-SCREEN case=$name 01|//p" <<<"$block")"
    row7="$(sed -n "s/^E2E-SCREEN case=$name 07|//p" <<<"$block")"
    row8="$(sed -n "s/^E2E-SCREEN case=$name 08|//p" <<<"$block")"
    if [[ -z "$status" ]]; then
        problems+=("no E2E-RESULT line (test host rc=$host_rc)")
    elif [[ "$status" == 124 ]]; then
        problems+=("no completed pass on the console within the scenario's time")
    elif [[ "$status" != 0 ]]; then
        problems+=("$vmm exited by itself with status $status")
    fi
    [[ "$row8" =~ Pass:\ *([0-9]+) && "${BASH_REMATCH[1]}" -ge 1 ]] ||
        problems+=("screen row 8 shows no completed pass: '$row8'")
    [[ "$row8" =~ Errors:\ *0\ *$ ]] || problems+=("screen row 8 shows errors: '$row8'")
    [[ "$row7" =~ Status:\ *Pass ]] || problems+=("screen row 7 shows no 'Status: Pass': '$row7'")
    [[ "$row1" =~ CLK/Temp:\ *[0-9]+MHz ]] || problems+=("screen row 1 shows no measured clock: '$row1'")
    if ((cpus > 1)); then
        [[ "$row7" =~ SMP:\ *${cpus}T ]] || problems+=("screen row 7 shows no 'SMP: ${cpus}T': '$row7'")
    else
        [[ "$row7" =~ SMP:\ *Disabled ]] || problems+=("screen row 7 shows no 'SMP: Disabled': '$row7'")
    fi
    verdict "$name" "l1_seconds=$secs |${row8##*|}" ${problems[@]+"${problems[@]}"}
}
skipped=0
declare -A proto_secs=()  # test host seconds spent in each protocol's cases
for c in "${cases[@]}"; do
    IFS=: read -r name cpus mem _ want proto <<<"$c"
    if [[ -n "${not_run[$name]:-}" ]]; then
        echo "${not_run[$name]%%:*} case=$name: ${not_run[$name]#*: }"
        if [[ "${not_run[$name]}" == SKIP* ]]; then skipped=$((skipped + 1)); else failed=$((failed + 1)); fi
        continue
    fi
    [[ "$vmm" == tern ]] || want=0  # QEMU -no-reboot exits 0 on a guest reboot too
    # The console lines between this case's E2E-CASE and E2E-RESULT lines.
    block="$(awk -v n="$name" '$0 ~ "^E2E-CASE case=" n " " { on = 1 } on { print }
        on && $0 ~ "^E2E-RESULT case=" n " " { exit }' "$log")"
    status="$(sed -n "s/^E2E-RESULT case=$name status=\([0-9]*\).*/\1/p" <<<"$block")"
    secs="$(sed -n "s/^E2E-RESULT case=$name .*l1_seconds=\([0-9.]*\).*/\1/p" <<<"$block")"
    [[ -z "$secs" ]] || proto_secs[$proto]="$(awk "BEGIN { print ${proto_secs[$proto]:-0} + $secs }")"
    if [[ "$proto" == memtest ]]; then
        check_memtest "$name" "$cpus" "$status" "$block" "$secs"
        continue
    fi
    marker="$(grep -ao 'TERN-GUEST-MARKER nproc=[0-9]* memtotal_kb=[0-9]* release=[^ ]*' <<<"$block" | head -n 1 || true)"
    problems=()
    if [[ -z "$status" ]]; then
        problems+=("no E2E-RESULT line (test host rc=$host_rc)")
    elif [[ "$status" != "$want" ]]; then
        problems+=("$vmm exit status $status, want $want")
    fi
    if [[ -z "$marker" ]]; then
        problems+=("no TERN-GUEST-MARKER line")
    else
        read -r _ got_nproc got_kb got_release <<<"$marker"
        got_nproc="${got_nproc#nproc=}" got_kb="${got_kb#memtotal_kb=}" got_release="${got_release#release=}"
        # MemTotal is the RAM the e820 map offers minus what the kernel keeps for itself: its image
        # and early allocations (~37 MiB at 256 MiB with this kernel), the struct page array (64 B
        # per 4 KiB page, 1.6%) and, once RAM extends above 4 GiB, the 64 MiB swiotlb buffer. QEMU
        # -M pc measured here: 256 MiB -> 87.3%, 1 GiB -> 95.0%, 3328 MiB (all below 4 GiB) -> 97.3%.
        # Accept requested - (128 MiB + 2%) <= MemTotal <= requested: a VMM that drops a whole
        # region (e.g. the 256 MiB above a 3 GiB PCI hole) falls below the bound at 3328 MiB.
        req_kb=$((mem * 1024))
        min_kb=$((req_kb - 128 * 1024 - req_kb / 50))
        [[ "$got_nproc" == "$cpus" ]] || problems+=("nproc=$got_nproc, want $cpus")
        [[ "$got_release" == "$release" ]] || problems+=("release=$got_release, want $release")
        if ((got_kb > req_kb || got_kb < min_kb)); then
            problems+=("memtotal_kb=$got_kb outside [$min_kb, $req_kb]")
        fi
    fi
    if [[ "$vmm" == tern ]]; then
        if [[ "$proto" != bz ]] && ! grep -aqiF "$pvh_log_line" <<<"$block"; then
            problems+=("tern did not log '$pvh_log_line'")
        elif [[ "$proto" == bz ]] && grep -aqiF "$pvh_log_line" <<<"$block"; then
            problems+=("tern logged '$pvh_log_line' for a bzImage-protocol case")
        fi
    fi
    if [[ "$name" == stdin_* && "$vmm" == tern ]] && ! grep -aq '^PIPED-42' <<<"$block"; then
        problems+=("guest shell did not print PIPED-42 from piped stdin")
    fi
    verdict "$name" "status=$status l1_seconds=$secs $marker" ${problems[@]+"${problems[@]}"}
done
if [[ "$host_rc" != 0 ]]; then
    echo "FAIL test host: run.sh exited $host_rc (log: $log)"
    failed=$((failed + 1))
fi
summary=""
for p in bz pvh elf; do [[ -z "${proto_secs[$p]:-}" ]] || summary+=" $p=${proto_secs[$p]}"; done
[[ -z "$summary" ]] || echo "test host seconds per protocol:$summary"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
