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
#
# Usage: tests/e2e/boot_test.sh        (CTest: add_test(NAME e2e_boot COMMAND .../boot_test.sh))
# Environment: E2E_VMM=tern|qemu (default tern; qemu checks the harness while tern cannot boot:
#              it runs the -bz cases and the -elf case, which QEMU enters through PVH too),
#              E2E_PROTOCOLS (default "bz pvh elf"; "bz" runs only the bzImage cases),
#              TERN_BIN (default build/tern), E2E_LOG (console log path).
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
default_protocols="bz pvh elf"
[[ "$vmm" == tern ]] || default_protocols="bz elf"  # QEMU has no host-decompressed bzImage path
protocols="${E2E_PROTOCOLS:-$default_protocols}"
for p in $protocols; do
    [[ "$p" =~ ^(bz|pvh|elf)$ ]] || th_die "E2E_PROTOCOLS: unknown protocol '$p' (bz, pvh, elf)"
done
wants() { [[ " $protocols " == *" $1 "* ]]; }
# cases: name:cpus:memory_mib:action:expected_status:protocol
cases=()
for c in "${configs[@]}"; do
    IFS=: read -r name rest <<<"$c"
    for p in bz pvh; do wants "$p" && cases+=("$name-$p:$rest:$p"); done
done
wants elf && cases+=("${elf_cases[@]}")

# Each boot gets 60 s of test host time (QEMU needs 3-5 s, tern ~3 s).
run_args=(--scenario "$here/boot_scenario.sh" --env "E2E_VMM=$vmm" --env E2E_CASE_TIMEOUT=60 --timeout 900)
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
        run_args+=(--extra "$elf_dir" --env E2E_VMLINUX=/guest/vmlinux)
    fi
fi
list=""
for c in "${cases[@]}"; do
    IFS=: read -r name cpus mem action _ proto <<<"$c"
    if [[ "$proto" != bz && "$have_protocol_option" == 0 ]]; then
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
    if ((${#problems[@]} == 0)); then
        echo "PASS case=$name status=$status l1_seconds=$secs $marker"
        passed=$((passed + 1))
    else
        printf 'FAIL case=%s:' "$name"
        printf ' %s;' "${problems[@]}"
        echo
        failed=$((failed + 1))
    fi
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
