#!/usr/bin/env bash
# End-to-end test of exit accounting, device counters and `tern stat`: in the nested test host,
# tern boots the stock kernel with --api-sock, --stats-on-exit and a disk (one queue); the guest
# runs fio twice (tests/e2e/stat_guest/actions/stat-fio) and tests/e2e/stat_scenario.sh takes
# `tern stat --once --json` before and after each job. Checked:
# - after the jobs: exits by reason and by device, KVM's in-kernel counters (VM and vCPU, real KVM:
#   binary stats supported), CPU time per tern thread; SIGTERM ends tern with status 143 and the
#   statistics summary;
# - per fio job, on the deltas of the disk's one queue against fio's JSON total_ios N (the
#   relations of docs/stats.md "Device counters"): N <= requests <= N + 16; 1 <= kicks <= requests;
#   interrupts >= 1 and interrupts + interrupts_suppressed <= requests, and >= N at queue depth 1
#   (every I/O completes in its own used-ring publish); bytes >= N * 4096; errors 0; the transport's
#   protocol_errors present and unchanged, interrupts_sent present.
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

# The guest initramfs: busybox + the virtio-blk modules, fio with its libraries (--bin), the
# guest action, and bench/blk's fio mark helper as /actions/fio-bench.
th_need_cmd fio fio
modules="virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci virtio_blk"
work="$TH_CACHE/stat-e2e"
rm -rf "$work"
mkdir -p "$work/extra/actions"
cp -a "$here/stat_guest/." "$work/extra/"
install -m 0755 "$repo/bench/blk/guest-fio-bench.sh" "$work/extra/actions/fio-bench"
"$repo/testhost/build-guest-initramfs.sh" "$work/guest-initramfs.cpio" --modules "$modules" \
    --extra "$work/extra" --bin "$(command -v fio)"

set +e
th_run_retrying "$log" -- "$repo/testhost/run.sh" --scenario "$here/stat_scenario.sh" --tern "$tern" \
    --guest-initramfs "$work/guest-initramfs.cpio" --timeout 900 --log "$log"
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

# Device counters around each fio job (docs/stats.md "Device counters": the relations).
SLACK = 16  # requests the guest kernel may add on its own between the marks (none expected)
FIELDS = ("kicks", "requests", "interrupts", "interrupts_suppressed", "bytes", "errors")
marks = {}
for mm in re.finditer(r"^E2E-STAT-FIO name=(\S+) phase=(\S+) rc=(\d+) (.*)$", log, re.M):
    name, phase, src, body = mm.groups()
    check(src == "0", "tern stat at %s %s: status %s" % (name, phase, src))
    try:
        marks[(name, phase)] = json.loads(body).get("stats", {})
    except ValueError as e:
        problems.append("tern stat at %s %s is not JSON: %s" % (name, phase, e))
def fio_ios(name):
    m = re.search(r"^STAT-FIO-JSON name=%s (.*)$" % name, log, re.M)
    if not m:
        return None
    try:
        rep = json.loads(m.group(1)[m.group(1).index("{"):])
    except ValueError:
        return None
    return sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in rep.get("jobs", []))
def blk(stats):
    devs = [d for d in stats.get("device_counters", []) if d.get("kind") == "virtio-blk"]
    return devs[0] if len(devs) == 1 else None
for name, qd in (("qd1", 1), ("qd16", 16)):
    frc = re.search(r"^STAT-FIO-RC name=%s rc=(\d+)" % name, log, re.M)
    check(frc and frc.group(1) == "0", "fio %s status %s" % (name, frc.group(1) if frc else "missing"))
    n = fio_ios(name)
    b, e = marks.get((name, "begin")), marks.get((name, "end"))
    if not n or b is None or e is None:
        problems.append("fio %s: total_ios %r, stat before %s, after %s" % (
            name, n, b is not None, e is not None))
        continue
    db, de = blk(b), blk(e)
    if not db or not de:
        problems.append("%s: want one virtio-blk device in device_counters: %r" % (
            name, [d.get("name") for d in e.get("device_counters", [])]))
        continue
    if len(de["queues"]) != 1 or len(db["queues"]) != 1:
        problems.append("%s: want 1 queue in %s, got %d" % (name, de["name"], len(de["queues"])))
        continue
    d = {f: de["queues"][0][f] - db["queues"][0][f] for f in FIELDS}
    what = "%s (N=%d): %s" % (name, n, " ".join("%s=%d" % (f, d[f]) for f in FIELDS))
    check(n <= d["requests"] <= n + SLACK, "requests not within N..N+%d: %s" % (SLACK, what))
    check(1 <= d["kicks"] <= d["requests"], "kicks not within 1..requests: %s" % what)
    check(d["interrupts"] >= 1, "no interrupts: %s" % what)
    published = d["interrupts"] + d["interrupts_suppressed"]
    check(published <= d["requests"], "interrupts + interrupts_suppressed > requests: %s" % what)
    if qd == 1:
        check(published >= n, "queue depth 1: interrupts + interrupts_suppressed < N: %s" % what)
    check(d["bytes"] >= 4096 * n, "bytes < N * 4096: %s" % what)
    check(d["errors"] == 0, "errors: %s" % what)
    cb, ce = db.get("counters", {}), de.get("counters", {})
    check("protocol_errors" in ce and "interrupts_sent" in ce, "%s: transport counters missing: %r" % (name, sorted(ce)))
    check(ce.get("protocol_errors", 0) == cb.get("protocol_errors", 0), "%s: protocol errors during fio" % name)
    print("stat: %s, interrupts_sent=%d" % (what, ce.get("interrupts_sent", 0) - cb.get("interrupts_sent", 0)))
if host_rc != 0:
    problems.append("test host: run.sh exited %d (log: %s)" % (host_rc, sys.argv[1]))
if problems:
    print("FAIL e2e_stat: " + "; ".join(problems))
    sys.exit(1)
print("PASS e2e_stat")
PY
