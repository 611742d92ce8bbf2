#!/usr/bin/env python3
"""Turns bench/build's test-host console log into JSON (stdout).

Usage: summarize.py LOG --kernel VER --configs "host tern-writeback ..." --rounds N --objects N
                    [--stamps FILE] [--git-rev REV] [--tern PATH] [--image PATH]
                    [--test-host DESC] [--host-load DESC]
LOG holds the scenario's lines (bench/build/scenario.sh): BUILD-INFO, BUILD-RESULT per configuration
and round, BUILD-TERNSTATS (tern's exits by reason and process CPU at the build's begin and end),
BUILD-VMMSTATS (tern's --stats-on-exit summary), BUILD-ERROR. --stamps: stamp_cpu.py's BUILD-MARK
lines (the share of a host core L1 had during each build).
Per configuration: every round's figures ("rounds") and median/min/max over the rounds ("stats");
"vs_host" and "vs_qemu": the per-round ratios of build time (make_s) to the host row and to QEMU with the same
disk; "goals": the issue's goals (tern guest/host <= 1.1, tern/QEMU <= 0.9), a difference claimed only
when the min-max ranges do not overlap.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from console_fields import fields, stats  # noqa: E402
from results import add_common_args, number, stamp  # noqa: E402
from stamps import read_marks  # noqa: E402
from compare import binary_info, verdict  # noqa: E402

CLK_TCK = 100  # USER_HZ: the unit of /proc/PID/stat and /proc/stat
EXIT_STATS = ["exits", "io_exits", "mmio_exits", "halt_exits", "irq_exits", "irq_injections"]
GUEST_S_GOAL, QEMU_GOAL = 1.1, 0.9
# The build time the ratios and goals use: make's run by the build system's own clock (not the
# test host's look at the console every few seconds, wall_s, which is the cross-check).
TIME = "make_s"


def split_cfg(cfg):
    """(vmm, cache, interface) of host, VMM-writeback, VMM-none, VMM-nvme."""
    if cfg == "host":
        return "host", None, None
    vmm, _, rest = cfg.partition("-")
    return (vmm, "none", "nvme") if rest == "nvme" else (vmm, rest, "virtio")


def describe(vmm, cache, iface):
    if vmm == "host":
        return "no VMM: the test host chrooted into the disk (same compiler, same files)"
    who = "tern" if vmm == "tern" else "QEMU 7.2 -M pc -enable-kvm"
    disk = "emulated NVMe" if iface == "nvme" else "virtio-blk"
    return f"{who}, {disk}, cache={cache}"


def ternstats(kv_line):
    """{"by_reason": {...}, "process": {...}} of a BUILD-TERNSTATS line (JSON fragments)."""
    out = {}
    for key in ("by_reason", "process"):
        i = kv_line.find(f'"{key}":')
        if i >= 0:
            try:
                out[key] = json.JSONDecoder().raw_decode(kv_line[i + len(key) + 3:])[0]
            except ValueError:
                pass
    return out


def round_figures(kv, mark, ts):
    """The figures of one run (BUILD-RESULT fields; mark: read_marks()'s entry of its build, or
    None; ts: its BUILD-TERNSTATS), flat: every value a number or None."""
    n = {k: number(v) for k, v in kv.items() if k not in ("cfg", "round")}
    wall = n.get("wall_s")
    res = {"rc": n.get("rc"), "wall_s": wall, "make_s": n.get("make_s"), "sync_s": n.get("sync_s"),
           "boot_s": n.get("boot_s"), "objects": n.get("objects"), "built": n.get("built"),
           "l1_host_share": mark and mark["l1_host_share"], "l1_host_cpu_s": mark and mark["l1_host_cpu_s"]}
    if n.get("l1_total"):
        res["l1_busy_pct"] = round(100 * n["l1_busy"] / n["l1_total"], 1)
    if n.get("vmm_utime") is not None and wall:
        cpu = (n["vmm_utime"] + n["vmm_stime"]) / CLK_TCK
        guest = n["vmm_guest"] / CLK_TCK
        res.update({"vmm_cpu_s": round(cpu, 2), "vmm_guest_s": round(guest, 2),
                    "vmm_outside_guest_s": round(max(cpu - guest, 0), 2), "vmm_user_s": n["vmm_utime"] / CLK_TCK,
                    "vmm_system_s": n["vmm_stime"] / CLK_TCK, "vmm_cores": round(cpu / wall, 3)})
    for s in EXIT_STATS:
        if n.get(s) is not None and wall:
            res[f"{s}_per_s"] = round(n[s] / wall, 1)
    if res.get("io_exits_per_s") is not None and res.get("mmio_exits_per_s") is not None:
        res["vmm_exits_per_s"] = round(res["io_exits_per_s"] + res["mmio_exits_per_s"], 1)
    b, e = ts.get("begin"), ts.get("end")
    if b and e and wall:
        reasons = sorted(set(b.get("by_reason", {})) | set(e.get("by_reason", {})))
        for r in reasons:
            res[f"tern_{r}_per_s"] = round((e["by_reason"].get(r, 0) - b["by_reason"].get(r, 0)) / wall, 1)
        if b.get("process") and e.get("process"):
            for k in ("user_ns", "system_ns", "guest_ns"):
                res[f"tern_process_{k[:-3]}_s"] = round((e["process"][k] - b["process"][k]) / 1e9, 2)
    return res


def ratio_stats(per_round, a, b, key=TIME):
    """stats() of the per-round ratio a / b of `key` (the same round: the least noisy comparison)."""
    vals = [ra[key] / rb[key] for ra, rb in zip(per_round.get(a, []), per_round.get(b, []))
            if ra and rb and ra.get(key) and rb.get(key)]
    return stats([round(v, 3) for v in vals], digits=3)


def guest_host_goal(rs):
    """tern guest/host <= 1.1 from the per-round ratios: met when every round is at or below it."""
    if not rs:
        return None
    if rs["max"] <= GUEST_S_GOAL:
        return "met"
    return "not met" if rs["min"] > GUEST_S_GOAL else f"not shown (the rounds span {GUEST_S_GOAL}x)"


def qemu_goal(v):
    """tern/QEMU <= 0.9 from a verdict on the wall times (lower is better)."""
    if not v:
        return None
    if v["better"] is None:
        return "not met: " + v["ranges"]
    if not v["better"]:
        return "not met (tern slower)"
    return "met" if v["ratio_of_medians"] <= QEMU_GOAL else "not met (tern faster, by less than 10%)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--configs", required=True)
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--objects", type=int, required=True)
    ap.add_argument("--stamps")
    ap.add_argument("--git-rev", default="unknown")
    ap.add_argument("--tern")
    ap.add_argument("--image", default="")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--memory-mib", type=int, default=2048)
    add_common_args(ap)
    args = ap.parse_args()
    configs = args.configs.split()
    shares = read_marks(args.stamps, "BUILD-MARK", ("cfg", "round"))
    info, results, tstats, vmmstats, errors = {}, {}, {}, {}, {c: [] for c in configs}
    with open(args.log, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            kv = fields(line)
            if line.startswith("BUILD-INFO"):
                info = kv
            elif line.startswith("BUILD-RESULT"):
                results[(kv["cfg"], kv["round"])] = kv
            elif line.startswith("BUILD-TERNSTATS"):
                tstats.setdefault((kv["cfg"], kv["round"]), {})[kv["at"]] = ternstats(line)
            elif line.startswith("BUILD-VMMSTATS"):
                vmmstats.setdefault(kv["cfg"], {}).setdefault(kv["round"], []).append(line.split(" line=", 1)[-1])
            elif line.startswith("BUILD-ERROR"):
                errors.setdefault(kv.get("cfg", "setup"), []).append(line[len("BUILD-ERROR "):])

    out, per_round = {}, {}
    for c in configs:
        vmm, cache, iface = split_cfg(c)
        rounds = [round_figures(results[(c, str(i))], shares.get((c, str(i))), tstats.get((c, str(i)), {}))
                  if (c, str(i)) in results else None for i in range(1, args.rounds + 1)]
        per_round[c] = rounds
        keys = sorted({k for r in rounds if r for k in r})
        st = {k: stats([r.get(k) if r else None for r in rounds], digits=3 if "share" in k or "cores" in k else 2)
              for k in keys}
        failed = [i for i, r in enumerate(rounds, 1) if not r or r.get("rc") != 0 or r.get("built") != r.get("objects")]
        entry = {"vmm": vmm, "cache": cache, "interface": iface, "description": describe(vmm, cache, iface),
                 "status": "ok" if not failed else f"failed in round(s) {failed}", "errors": errors.get(c, [])[:12],
                 "stats": {k: v for k, v in st.items() if v}, "rounds": rounds}
        if vmm == "tern" and args.tern:
            entry["binary"] = binary_info(args.tern)
        if c in vmmstats:  # the last round's --stats-on-exit summary (the whole VM's life: boot + build)
            entry["stats_on_exit"] = vmmstats[c][max(vmmstats[c], key=int)]
        out[c] = entry

    vs_host = {c: ratio_stats(per_round, c, "host") for c in configs if c != "host" and "host" in configs}
    # The same by the test host's own host CPU per build: what this shared machine's load moves least.
    vs_host_cpu = {c: ratio_stats(per_round, c, "host", "l1_host_cpu_s") for c in vs_host}
    vs_qemu, goals = {}, []
    for c in configs:
        vmm, cache, iface = split_cfg(c)
        q = c.replace("tern-", "qemu-", 1)
        if vmm == "tern" and q in configs:
            v = verdict(out[c]["stats"].get(TIME), out[q]["stats"].get(TIME), higher_is_better=False)
            v_cpu = verdict(out[c]["stats"].get("l1_host_cpu_s"), out[q]["stats"].get("l1_host_cpu_s"), higher_is_better=False)
            vs_qemu[c] = {"reference": q, "per_round_ratio": ratio_stats(per_round, c, q), TIME: v,
                          "per_round_ratio_l1_host_cpu": ratio_stats(per_round, c, q, "l1_host_cpu_s"), "l1_host_cpu_s": v_cpu}
            goals.append({"config": c, "goal": f"tern/QEMU <= {QEMU_GOAL}x ({q})", "verdict": qemu_goal(v),
                          "ratio_of_medians": v and v["ratio_of_medians"], "per_round_ratio": vs_qemu[c]["per_round_ratio"],
                          "by_l1_host_cpu": qemu_goal(v_cpu), "per_round_ratio_l1_host_cpu": vs_qemu[c]["per_round_ratio_l1_host_cpu"]})
        if vmm == "tern" and vs_host.get(c):
            goals.append({"config": c, "goal": f"guest/host <= {GUEST_S_GOAL}x", "verdict": guest_host_goal(vs_host[c]),
                          "per_round_ratio": vs_host[c], "by_l1_host_cpu": guest_host_goal(vs_host_cpu.get(c)),
                          "per_round_ratio_l1_host_cpu": vs_host_cpu.get(c)})

    r = stamp("build", args.kernel)
    r.update({
        "git_rev": args.git_rev, "test_host": args.test_host, "host_load": args.host_load, "rounds": args.rounds,
        "order": configs, "time_key": TIME, "l1": info, "image": args.image,
        "guest": {"vcpus": args.cpus, "memory_mib": args.memory_mib, "cmdline_root": "/dev/vda or /dev/nvme0n1"},
        "slice": {"source": "Debian's linux-source-6.1 (/root/linux-6.1 in the image), x86_64 defconfig",
                  "objects": args.objects, "list": (info.get("objects") or "").split(","),
                  "jobs": number(info.get("jobs")), "gcc": info.get("gcc"), "make": info.get("make")},
        "method": {
            "wall_s": "the test host's clock (/proc/uptime in L1) from typing the command to its BUILD-END line "
                      "(host row: around the chroot's run); make_s and sync_s: the build system's own clock",
            "clean": "before each run: the slice's object files removed, sync, drop_caches (in the build system; "
                     "L1 drops its own page cache before each VM starts); the rest of the tree as prepared",
            "vmm_cpu": "utime+stime of the VMM process (all threads) in L1 over the build; vmm_guest_s: guest_time "
                       "(field 43), part of utime; vmm_cores = vmm_cpu_s / wall_s",
            "exits": "KVM's per-VM debugfs counters in L1 over the build, per second of wall_s; tern_*_per_s: tern's "
                     "own exits by reason (GET /tern/stats at the build's begin and end)",
            "l1_host_share": "the share of a host core the test host's QEMU had during the build (load of this "
                             "shared machine)",
            "l1_host_cpu_s": "the test host's QEMU's own host CPU over the build (stamp_cpu.py): the work the build "
                             "cost this machine, which its load moves much less than the clocks"},
        "configs": out, "vs_host": vs_host, "vs_host_l1_cpu": vs_host_cpu, "vs_qemu": vs_qemu, "goals": goals,
    })
    print(json.dumps(r, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
