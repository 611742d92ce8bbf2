#!/usr/bin/env bash
# End-to-end test of exit accounting and `tern stat`: in the nested test host, tern boots the stock
# kernel with --api-sock and --stats-on-exit; `tern stat --once --json` must show exits by reason
# and by device, KVM's in-kernel counters (VM and vCPU, real KVM: binary stats supported) and CPU
# time per tern thread; SIGTERM must end tern with status 143 and the statistics summary.
#
# Usage: tests/e2e/stat_test.sh    Environment: TERN_BIN (default build/tern), E2E_LOG.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
source "$repo/testhost/lib.sh"

tern="${TERN_BIN:-$repo/build/tern}"
[[ -x "$tern" ]] || th_die "tern binary not found at $tern (build it, or set TERN_BIN)"
log="${E2E_LOG:-$TH_CACHE/logs/e2e-stat.log}"
mkdir -p "$(dirname "$log")"
: >"$log"

set +e
th_run_retrying "$log" -- "$repo/testhost/run.sh" --scenario "$here/stat_scenario.sh" --tern "$tern" --timeout 600 --log "$log"
host_rc=$?
set -e

python3 - "$log" "$host_rc" <<'PY'
import json, re, sys
log = open(sys.argv[1], errors="replace").read().replace("\r", "")
host_rc = int(sys.argv[2])
problems = []
def check(cond, what):
    if not cond:
        problems.append(what)
m = re.search(r"^E2E-STAT-JSON (.*)$", log, re.M)
rc = re.search(r"^E2E-STAT-RC rc=(\d+)", log, re.M)
ex = re.search(r"^E2E-STAT-EXIT status=(\d+)", log, re.M)
check(rc and rc.group(1) == "0", "tern stat --once --json status %s" % (rc.group(1) if rc else "missing"))
check(ex and ex.group(1) == "143", "tern run status after SIGTERM %s, want 143" % (ex.group(1) if ex else "missing"))
check("tern: statistics at exit" in log, "no --stats-on-exit summary")
if m:
    try:
        j = json.loads(m.group(1))
    except ValueError as e:
        j = None
        problems.append("tern stat output is not JSON: %s" % e)
else:
    j = None
    problems.append("no E2E-STAT-JSON line")
if j:
    s, r = j.get("stats", {}), j.get("rates", {})
    check(j.get("interval_s", 0) > 0.5, "interval_s %r" % j.get("interval_s"))
    by_reason = s.get("exits", {}).get("by_reason", {})
    check(by_reason.get("KVM_EXIT_IO", 0) > 0, "no KVM_EXIT_IO exits: %r" % by_reason)
    check(sum(by_reason.values()) == s["exits"]["total"], "sum over reasons != total")
    check(s["exits"]["total"] <= s["exits"]["kvm_run_returns"], "more exits than KVM_RUN returns")
    check(len(s.get("vcpus", [])) == 2, "want 2 vCPUs")
    devs = {d["name"]: d for d in s.get("devices", [])}
    check(devs.get("serial0", {}).get("writes", 0) > 0, "no serial0 writes: %r" % sorted(devs))
    check("exits" in r and "devices" in r, "no rates for exits/devices")
    vm_kvm = s.get("kvm", {}).get("vm", {})
    check("error" not in vm_kvm and len(vm_kvm.get("counters", {})) > 0, "VM KVM stats: %r" % vm_kvm.get("error"))
    v0 = s["vcpus"][0].get("kvm", {}) if s.get("vcpus") else {}
    check("error" not in v0 and v0.get("counters", {}).get("exits", 0) > 0, "vCPU KVM stats: %r" % v0.get("error"))
    threads = s.get("threads", [])
    names = [t["name"] for t in threads]
    check("vcpu0" in names and "vcpu1" in names, "no vCPU threads: %r" % names)
    check(sum(t["user_ns"] + t["system_ns"] for t in threads) > 0, "no CPU time at all")
    check(sum(t["guest_ns"] for t in threads if t["name"].startswith("vcpu")) > 0, "no guest time on vCPU threads")
    print("stat: %d exits (%s), %d devices, %d VM KVM counters, %d threads" % (
        s["exits"]["total"], ", ".join("%s=%d" % kv for kv in sorted(by_reason.items())),
        len(devs), len(vm_kvm.get("counters", {})), len(threads)))
if host_rc != 0:
    problems.append("test host: run.sh exited %d (log: %s)" % (host_rc, sys.argv[1]))
if problems:
    print("FAIL e2e_stat: " + "; ".join(problems))
    sys.exit(1)
print("PASS e2e_stat")
PY
